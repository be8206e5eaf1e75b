"""The built-in (core subset) resources the embedded server serves.

Owns: the ``ResourceInfo`` of each built-in kind and its schema. Built-in
schemas are deliberately loose (``x-kubernetes-preserve-unknown-fields``)
except for the fields a client must send and the server relies on; the typed
clients and kubectl validate the rest themselves. The full list is in
docs/apiserver.md.
"""

from __future__ import annotations

from typing import Any

from racksmith.apiserver.registry import ResourceInfo

Obj = dict[str, Any]

_ANY: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STR: Obj = {"type": "string"}
_STRMAP: Obj = {"type": "object", "additionalProperties": {"type": "string"}}
_NULLABLE_STR: Obj = {"type": "string", "nullable": True}


def _obj(properties: Obj | None = None, required: list[str] | None = None,
         description: str = "") -> Obj:
    schema: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if properties:
        schema["properties"] = properties
    if required:
        schema["required"] = required
    if description:
        schema["description"] = description
    return schema


def _root(description: str, properties: Obj, required: list[str] | None = None) -> Obj:
    props: Obj = {
        "apiVersion": {"type": "string", "description": "APIVersion of this object."},
        "kind": {"type": "string", "description": "Kind of this object."},
        "metadata": {"type": "object", "description": "Standard object metadata."},
    }
    props.update(properties)
    # The root is closed: unknown top-level fields are pruned and reported
    # (fieldValidation), as kube's typed decoding does; nested objects stay open.
    schema: Obj = {"type": "object", "properties": props, "description": description}
    if required:
        schema["required"] = required
    return schema


_OBJECT_REF = _obj({"kind": _STR, "namespace": _STR, "name": _STR, "uid": _STR,
                    "apiVersion": _STR, "resourceVersion": _STR, "fieldPath": _STR})

_CONTAINER = _obj({"name": _STR, "image": _STR}, ["name"])

_LABEL_SELECTOR = _obj({"matchLabels": _STRMAP, "matchExpressions": {
    "type": "array", "items": _obj({"key": _STR, "operator": {
        "type": "string", "enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
        "values": {"type": "array", "items": _STR}}, ["key", "operator"])}})

_INT_OR_STRING: Obj = {"x-kubernetes-int-or-string": True,
                       "anyOf": [{"type": "integer"}, {"type": "string"}]}

_EVENT_SELECTABLE = (
    "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
    "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
    "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type")


def builtin_resources() -> list[ResourceInfo]:
    """Every built-in resource, at every version served."""
    core = "v1"
    return [
        ResourceInfo(
            group="", version=core, kind="Namespace", plural="namespaces",
            singular="namespace", namespaced=False, builtin=True, storage_version=core,
            short_names=("ns",), subresources=frozenset({"status", "finalize"}),
            selectable_fields=("status.phase",), preserve_status_on_create=False,
            schema=_root("Namespace provides a scope for names.", {
                "spec": _obj({"finalizers": {"type": "array", "items": _STR}}),
                "status": _obj({"phase": _STR})})),
        ResourceInfo(
            group="", version=core, kind="Secret", plural="secrets", singular="secret",
            namespaced=True, builtin=True, storage_version=core,
            selectable_fields=("type",),
            schema=_root("Secret holds secret data of a certain type.", {
                "data": {"type": "object", "additionalProperties": {
                    "type": "string", "format": "byte"}},
                "stringData": _STRMAP, "type": _STR, "immutable": {"type": "boolean"}})),
        ResourceInfo(
            group="", version=core, kind="ConfigMap", plural="configmaps",
            singular="configmap", namespaced=True, builtin=True, storage_version=core,
            short_names=("cm",),
            schema=_root("ConfigMap holds configuration data for pods to consume.", {
                "data": _STRMAP, "binaryData": _STRMAP, "immutable": {"type": "boolean"}})),
        ResourceInfo(
            group="", version=core, kind="Event", plural="events", singular="event",
            namespaced=True, builtin=True, storage_version=core, short_names=("ev",),
            selectable_fields=_EVENT_SELECTABLE,
            schema=_root("Event is a report of an event somewhere in the cluster.", {
                "involvedObject": _OBJECT_REF, "reason": _STR, "message": _STR,
                "type": _STR, "count": {"type": "integer"},
                "firstTimestamp": _NULLABLE_STR, "lastTimestamp": _NULLABLE_STR,
                "eventTime": _NULLABLE_STR, "series": _ANY, "action": _STR,
                "related": _OBJECT_REF, "reportingComponent": _STR,
                "reportingInstance": _STR,
                "source": _obj({"component": _STR, "host": _STR})},
                ["involvedObject"])),
        ResourceInfo(
            group="events.k8s.io", version="v1", kind="Event", plural="events",
            singular="event", namespaced=True, builtin=True, storage_version="v1",
            short_names=("ev",), selectable_fields=(
                "regarding.kind", "regarding.namespace", "regarding.name",
                "regarding.uid", "reason", "reportingController", "type"),
            schema=_root("Event is a report of an event somewhere in the cluster.", {
                "regarding": _OBJECT_REF, "reason": _STR, "note": _STR, "type": _STR,
                "action": _STR, "reportingController": _STR, "reportingInstance": _STR,
                "eventTime": {"type": "string", "format": "date-time", "nullable": True},
                "series": _ANY, "related": _OBJECT_REF, "deprecatedSource": _ANY,
                "deprecatedFirstTimestamp": _NULLABLE_STR,
                "deprecatedLastTimestamp": _NULLABLE_STR,
                "deprecatedCount": {"type": "integer"}},
                ["eventTime"])),
        ResourceInfo(
            group="", version=core, kind="Node", plural="nodes", singular="node",
            namespaced=False, builtin=True, storage_version=core, short_names=("no",),
            subresources=frozenset({"status"}), preserve_status_on_create=True,
            selectable_fields=("spec.unschedulable",),
            schema=_root("Node is a worker node in Kubernetes.", {
                "spec": _obj({"unschedulable": {"type": "boolean"}, "taints": {
                    "type": "array", "items": _obj({"key": _STR, "value": _STR, "effect": {
                        "type": "string",
                        "enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]}},
                        ["key", "effect"])}}),
                "status": _ANY})),
        ResourceInfo(
            group="", version=core, kind="Pod", plural="pods", singular="pod",
            namespaced=True, builtin=True, storage_version=core, short_names=("po",),
            subresources=frozenset({"status", "eviction"}), preserve_status_on_create=True,
            selectable_fields=("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                               "spec.serviceAccountName", "status.phase", "status.podIP",
                               "status.nominatedNodeName"),
            schema=_root("Pod is a collection of containers that can run on a host.", {
                "spec": _obj({"nodeName": _STR, "containers": {
                    "type": "array", "minItems": 1, "items": _CONTAINER}}, ["containers"]),
                "status": _ANY}, ["spec"])),
        ResourceInfo(
            group="", version=core, kind="PersistentVolume", plural="persistentvolumes",
            singular="persistentvolume", namespaced=False, builtin=True,
            storage_version=core, short_names=("pv",), subresources=frozenset({"status"}),
            preserve_status_on_create=True,
            schema=_root("PersistentVolume is a storage resource provisioned by an admin.", {
                "spec": _obj({"capacity": _obj(), "storageClassName": _STR,
                              "persistentVolumeReclaimPolicy": {
                                  "type": "string", "enum": ["Retain", "Delete", "Recycle"]},
                              "claimRef": _OBJECT_REF}),
                "status": _obj({"phase": _STR})})),
        ResourceInfo(
            group="", version=core, kind="PersistentVolumeClaim",
            plural="persistentvolumeclaims", singular="persistentvolumeclaim",
            namespaced=True, builtin=True, storage_version=core, short_names=("pvc",),
            subresources=frozenset({"status"}), preserve_status_on_create=True,
            schema=_root("PersistentVolumeClaim is a user's request for storage.", {
                "spec": _obj({"storageClassName": _STR, "volumeName": _STR}),
                "status": _obj({"phase": _STR})})),
        ResourceInfo(
            group="", version=core, kind="ServiceAccount", plural="serviceaccounts",
            singular="serviceaccount", namespaced=True, builtin=True,
            storage_version=core, short_names=("sa",), subresources=frozenset({"token"}),
            schema=_root("ServiceAccount binds together a name and secrets.", {
                "secrets": {"type": "array", "items": _ANY},
                "imagePullSecrets": {"type": "array", "items": _ANY},
                "automountServiceAccountToken": {"type": "boolean"}})),
        ResourceInfo(
            group="storage.k8s.io", version="v1", kind="StorageClass",
            plural="storageclasses", singular="storageclass", namespaced=False,
            builtin=True, storage_version="v1", short_names=("sc",),
            schema=_root("StorageClass describes a class of storage.", {
                "provisioner": _STR, "parameters": _STRMAP, "reclaimPolicy": _STR,
                "volumeBindingMode": {"type": "string",
                                      "enum": ["Immediate", "WaitForFirstConsumer"]},
                "mountOptions": {"type": "array", "items": _STR},
                "allowedTopologies": {"type": "array", "items": _ANY},
                "allowVolumeExpansion": {"type": "boolean"}}, ["provisioner"])),
        ResourceInfo(
            group="policy", version="v1", kind="PodDisruptionBudget",
            plural="poddisruptionbudgets", singular="poddisruptionbudget",
            namespaced=True, builtin=True, storage_version="v1", short_names=("pdb",),
            subresources=frozenset({"status"}),
            schema=_root("PodDisruptionBudget limits voluntary disruptions of pods.", {
                "spec": _obj({"minAvailable": _INT_OR_STRING,
                              "maxUnavailable": _INT_OR_STRING,
                              "selector": _LABEL_SELECTOR}),
                "status": _ANY})),
        ResourceInfo(
            group="coordination.k8s.io", version="v1", kind="Lease", plural="leases",
            singular="lease", namespaced=True, builtin=True, storage_version="v1",
            schema=_root("Lease defines a lease concept.", {
                "spec": _obj({"holderIdentity": _STR,
                              "leaseDurationSeconds": {"type": "integer"},
                              "acquireTime": {"type": "string", "format": "date-time"},
                              "renewTime": {"type": "string", "format": "date-time"},
                              "leaseTransitions": {"type": "integer"}})})),
        *rbac_resources(),
        *review_resources(),
        ResourceInfo(
            group="apiextensions.k8s.io", version="v1", kind="CustomResourceDefinition",
            plural="customresourcedefinitions", singular="customresourcedefinition",
            namespaced=False, builtin=True, storage_version="v1", short_names=("crd", "crds"),
            categories=("api-extensions",), subresources=frozenset({"status"}),
            schema=_root("CustomResourceDefinition registers a custom kind.", {
                "spec": _obj({
                    "group": _STR,
                    "scope": {"type": "string", "enum": ["Namespaced", "Cluster"]},
                    "names": _obj({"kind": _STR, "plural": _STR, "singular": _STR,
                                   "listKind": _STR,
                                   "shortNames": {"type": "array", "items": _STR},
                                   "categories": {"type": "array", "items": _STR}},
                                  ["kind", "plural"]),
                    "versions": {"type": "array", "minItems": 1, "items": _obj(
                        {"name": _STR, "served": {"type": "boolean"},
                         "storage": {"type": "boolean"}},
                        ["name", "served", "storage"])}},
                    ["group", "names", "scope", "versions"]),
                "status": _ANY}, ["spec"])),
    ]


_STRS: Obj = {"type": "array", "items": _STR}
_POLICY_RULE = _obj({"apiGroups": _STRS, "resources": _STRS, "verbs": _STRS,
                     "resourceNames": _STRS, "nonResourceURLs": _STRS}, ["verbs"])
_RULES: Obj = {"type": "array", "items": _POLICY_RULE}
_ROLE_REF = _obj({"apiGroup": _STR, "kind": _STR, "name": _STR}, ["apiGroup", "kind", "name"])
_SUBJECTS: Obj = {"type": "array", "items": _obj(
    {"kind": _STR, "apiGroup": _STR, "name": _STR, "namespace": _STR}, ["kind", "name"])}
_AGGREGATION = _obj({"clusterRoleSelectors": {"type": "array", "items": _LABEL_SELECTOR}})
RBAC = "rbac.authorization.k8s.io"


def rbac_resources() -> list[ResourceInfo]:
    """rbac.authorization.k8s.io/v1: the objects the RBAC authorizer reads."""
    def info(kind: str, plural: str, namespaced: bool, schema: Obj) -> ResourceInfo:
        return ResourceInfo(group=RBAC, version="v1", kind=kind, plural=plural,
                            singular=kind.lower(), namespaced=namespaced, builtin=True,
                            storage_version="v1", schema=schema)
    return [
        info("Role", "roles", True, _root(
            "Role is a namespaced set of PolicyRules.", {"rules": _RULES})),
        info("ClusterRole", "clusterroles", False, _root(
            "ClusterRole is a cluster-wide set of PolicyRules.",
            {"rules": _RULES, "aggregationRule": _AGGREGATION})),
        info("RoleBinding", "rolebindings", True, _root(
            "RoleBinding grants a Role's or ClusterRole's rules in one namespace.",
            {"roleRef": _ROLE_REF, "subjects": _SUBJECTS}, ["roleRef"])),
        info("ClusterRoleBinding", "clusterrolebindings", False, _root(
            "ClusterRoleBinding grants a ClusterRole's rules cluster-wide.",
            {"roleRef": _ROLE_REF, "subjects": _SUBJECTS}, ["roleRef"])),
    ]


REVIEW_GROUPS = frozenset({"authorization.k8s.io", "authentication.k8s.io"})


def review_resources() -> list[ResourceInfo]:
    """The create-only review APIs (answered by racksmith.apiserver.rbac.reviews,
    never stored)."""
    def info(group: str, version: str, kind: str, namespaced: bool = False) -> ResourceInfo:
        return ResourceInfo(group=group, version=version, kind=kind, plural=kind.lower() + "s",
                            singular=kind.lower(), namespaced=namespaced, builtin=True,
                            storage_version="v1", verbs=("create",),
                            schema=_root(f"{kind} (answered at once, never stored).",
                                         {"spec": _ANY, "status": _ANY}))
    authz = "authorization.k8s.io"
    return [
        info(authz, "v1", "SelfSubjectAccessReview"),
        info(authz, "v1", "SelfSubjectRulesReview"),
        info(authz, "v1", "SubjectAccessReview"),
        info(authz, "v1", "LocalSubjectAccessReview", namespaced=True),
        info("authentication.k8s.io", "v1", "SelfSubjectReview"),
        info("authentication.k8s.io", "v1beta1", "SelfSubjectReview"),
    ]
