"""Decoding the protobuf bodies typed ``kubectl create …`` commands POST.

Two sources of bytes: hex fixtures captured from kubectl 1.33 (always run),
and live captures from the installed kubectl builds against a tiny aiohttp
stand-in server on 127.0.0.1 (skipped when the binaries are missing). Set
``RACKSMITH_REGEN_PROTOBUF_FIXTURES=1`` to rewrite the fixtures from the live
kubectl 1.33 run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from racksmith.apiserver.protobuf import (
    CONTENT_TYPE,
    SUPPORTED_KINDS,
    ProtobufError,
    decode_k8s_protobuf,
    is_k8s_protobuf,
)

FIXTURES = Path(__file__).parent / "fixtures"
KUBECTL_DIR = Path("/usr/lib/google-cloud-sdk/bin")
FIXTURE_KUBECTL = "1.33"
BLOB = b"ab\x00\xff\x01"  # not UTF-8: kubectl puts it in binaryData / data as bytes
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True)
class Case:
    name: str
    args: list[str]
    expected: dict[str, Any] | None  # None: kubectl sends a kind we do not decode
    last_applied: dict[str, Any] | None = None
    path: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case(
        "namespace",
        ["create", "namespace", "demo"],
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}},
        path="/api/v1/namespaces",
    ),
    Case(
        "secret",
        [
            "create", "secret", "generic", "creds", "--from-literal=user=admin",
            "--from-file=key=blob.bin", "--type=example.com/custom", "-n", "apps",
        ],
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "apps"},
            "data": {"user": "YWRtaW4=", "key": base64.b64encode(BLOB).decode()},
            "type": "example.com/custom",
        },
        path="/api/v1/namespaces/apps/secrets",
    ),
    Case(
        "configmap",
        [
            "create", "configmap", "settings", "--from-literal=mode=fast",
            "--from-file=blob=blob.bin", "--save-config",
        ],
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "settings"},
            "data": {"mode": "fast"},
            "binaryData": {"blob": base64.b64encode(BLOB).decode()},
        },
        last_applied={
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "settings", "creationTimestamp": None},
            "data": {"mode": "fast"},
            "binaryData": {"blob": base64.b64encode(BLOB).decode()},
        },
        path="/api/v1/namespaces/default/configmaps",
    ),
    Case(
        "serviceaccount",
        ["create", "serviceaccount", "robot", "-n", "apps"],
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "robot", "namespace": "apps"},
        },
        path="/api/v1/namespaces/apps/serviceaccounts",
    ),
    Case(
        "tokenrequest",
        ["create", "token", "robot", "-n", "apps", "--bound-object-kind", "Secret",
         "--bound-object-name", "robot-user-data", "--bound-object-uid", "u-1",
         "--duration", "1h", "--audience", "aud-1"],
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"audiences": ["aud-1"], "expirationSeconds": 3600,
                     "boundObjectRef": {"kind": "Secret", "apiVersion": "v1",
                                        "name": "robot-user-data", "uid": "u-1"}},
        },
        path="/api/v1/namespaces/apps/serviceaccounts/robot/token",
    ),
    Case(
        "resourcequota",
        ["create", "quota", "q", "--hard=pods=2"],
        None,
        path="/api/v1/namespaces/default/resourcequotas",
    ),
]


def check_decoded(case: Case, body: bytes) -> None:
    assert is_k8s_protobuf(body)
    if case.expected is None:
        with pytest.raises(ProtobufError) as info:
            decode_k8s_protobuf(body)
        message = str(info.value)
        assert "ResourceQuota" in message
        assert "kubectl create -f" in message and "kubectl apply" in message
        return
    obj = decode_k8s_protobuf(body)
    annotations = obj.get("metadata", {}).pop("annotations", {})
    if case.last_applied is not None:
        assert json.loads(annotations.pop(LAST_APPLIED)) == case.last_applied
    assert annotations == {}
    assert obj == case.expected
    json.dumps(obj)  # JSON-serialisable as the rest of the API expects


# ------------------------------------------------------------------ fixtures (no kubectl)


def load_fixture(name: str) -> bytes:
    text = (FIXTURES / f"{name}.hex").read_text()
    return bytes.fromhex("".join(ln for ln in text.splitlines() if not ln.startswith("#")))


def write_fixture(case: Case, body: bytes) -> None:
    hexed = body.hex()
    lines = [hexed[i : i + 64] for i in range(0, len(hexed), 64)]
    header = f"# kubectl.{FIXTURE_KUBECTL} {' '.join(case.args)}"
    if "blob.bin" in header:
        header += f"  (blob.bin = {BLOB!r})"
    (FIXTURES / f"{case.name}.hex").write_text("\n".join([header, *lines]) + "\n")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_decode_captured_fixture(case: Case) -> None:
    check_decoded(case, load_fixture(case.name))


def test_supported_kinds() -> None:
    assert {k for _, k in SUPPORTED_KINDS} == {
        "Namespace", "Secret", "ConfigMap", "ServiceAccount",
        # RBAC (kubectl create role/clusterrole/rolebinding/clusterrolebinding) and the
        # review APIs (kubectl auth whoami / can-i), TokenRequest (kubectl create token)
        "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "SelfSubjectAccessReview",
        "SubjectAccessReview", "LocalSubjectAccessReview", "SelfSubjectRulesReview",
        "SelfSubjectReview", "TokenRequest"}


# ------------------------------------------------------------------ hand-built messages


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        low = n & 0x7F
        n >>= 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def fld(number: int, value: bytes | str | int | bool) -> bytes:
    if isinstance(value, bool | int):
        return varint(number << 3) + varint(int(value))
    raw = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(raw)) + raw


def entry(number: int, key: str, value: bytes | str) -> bytes:
    return fld(number, fld(1, key) + fld(2, value))


def envelope(api_version: str, kind: str, raw: bytes, **extra: str) -> bytes:
    body = fld(1, fld(1, api_version) + fld(2, kind)) + fld(2, raw)
    body += fld(3, extra.get("encoding", "")) + fld(4, extra.get("content_type", ""))
    return b"k8s\x00" + body


def test_full_object_meta_and_pointer_fields() -> None:
    owner = fld(5, "v1") + fld(1, "ConfigMap") + fld(3, "owner") + fld(4, "u-1") + fld(6, True)
    owner += fld(7, False)
    managed = fld(1, "kubectl") + fld(2, "Update") + fld(3, "v1")
    managed += fld(4, fld(1, 1_700_000_000) + fld(2, 5)) + fld(6, "FieldsV1")
    managed += fld(7, fld(1, b'{"f:data":{}}'))
    meta = (
        fld(1, "")  # empty name, as Go always writes non-pointer strings
        + fld(2, "gen-")
        + fld(3, "ns1")
        + fld(7, 0)
        + fld(8, b"")  # zero creationTimestamp
        + fld(9, fld(1, 0) + fld(2, 0))  # explicit epoch: a real time
        + fld(10, -1)  # negative int64, ten-byte varint
        + entry(11, "app", "web")
        + entry(11, "tier", "")
        + entry(12, "note", "hi")
        + fld(13, owner)
        + fld(14, "example.com/f")
        + fld(17, managed)
        + fld(99, "from the future")  # unknown field: skipped
    )
    secret = fld(1, meta) + fld(5, False) + entry(4, "plain", "text") + fld(3, "")
    obj = decode_k8s_protobuf(envelope("v1", "Secret", secret))
    assert obj == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "generateName": "gen-",
            "namespace": "ns1",
            "deletionTimestamp": "1970-01-01T00:00:00Z",
            "deletionGracePeriodSeconds": -1,
            "labels": {"app": "web", "tier": ""},
            "annotations": {"note": "hi"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": "owner",
                    "uid": "u-1",
                    "controller": True,
                    "blockOwnerDeletion": False,
                }
            ],
            "finalizers": ["example.com/f"],
            "managedFields": [
                {
                    "manager": "kubectl",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2023-11-14T22:13:20Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {}},
                }
            ],
        },
        "immutable": False,
        "stringData": {"plain": "text"},
    }


def test_namespace_spec_status_and_service_account_refs() -> None:
    cond = fld(1, "NamespaceDeletionContentFailure") + fld(2, "False")
    cond += fld(4, fld(1, 86400))
    ns = fld(1, fld(1, "n")) + fld(2, fld(1, "kubernetes"))
    ns += fld(3, fld(1, "Active") + fld(2, cond))
    assert decode_k8s_protobuf(envelope("v1", "Namespace", ns)) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "n"},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {
            "phase": "Active",
            "conditions": [
                {
                    "type": "NamespaceDeletionContentFailure",
                    "status": "False",
                    "lastTransitionTime": "1970-01-02T00:00:00Z",
                }
            ],
        },
    }
    sa = fld(1, fld(1, "sa")) + fld(2, fld(1, "Secret") + fld(3, "tok")) + fld(3, fld(1, "pull"))
    sa += fld(4, False)
    assert decode_k8s_protobuf(envelope("v1", "ServiceAccount", sa)) == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "sa"},
        "secrets": [{"kind": "Secret", "name": "tok"}],
        "imagePullSecrets": [{"name": "pull"}],
        "automountServiceAccountToken": False,
    }


def test_configmap_immutable_and_binary() -> None:
    cm = fld(1, fld(1, "c")) + fld(4, True) + entry(3, "b", b"\xff")
    assert decode_k8s_protobuf(envelope("v1", "ConfigMap", cm)) == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c"},
        "immutable": True,
        "binaryData": {"b": "/w=="},
    }


def test_is_k8s_protobuf() -> None:
    assert is_k8s_protobuf(b"k8s\x00")
    assert is_k8s_protobuf(load_fixture("namespace"))
    assert not is_k8s_protobuf(b'{"kind":"Namespace"}')
    assert not is_k8s_protobuf(b"k8s")
    assert not is_k8s_protobuf(b"")


SECRET_VALUE = "hunter2-do-not-print"


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b'{"kind":"Secret"}', "not Kubernetes protobuf"),
        (b"", "not Kubernetes protobuf"),
        (b"k8s\x00\x0a", "truncated"),
        (b"k8s\x00\x0a\x05\x0a\x02v1", "truncated"),
        (b"k8s\x00\x00\x00", "field number 0"),
        (b"k8s\x00\x0b", "wire type 3"),
        (b"k8s\x00\x08\x01", "unexpected wire type"),
        (b"k8s\x00" + b"\xff" * 11, "varint"),
        (envelope("apps/v1", "Deployment", b""), "Deployment (apps/v1)"),
        (b"k8s\x00" + fld(2, b""), "without apiVersion/kind"),
        (envelope("v1", "Secret", b"", encoding="gzip"), "content encoding"),
        (envelope("v1", "Secret", b"", content_type="application/json"), "content type"),
        (envelope("v1", "Secret", fld(1, fld(1, b"\xff\xfe"))), "not valid UTF-8"),
        (envelope("v1", "Secret", fld(1, b"") + fld(2, b"\x12")), "truncated"),
        (envelope("v1", "Secret", fld(1, b"") + fld(2, fld(1, "k") + fld(2, SECRET_VALUE))[:-3]),
         "truncated"),
        (envelope("v1", "Secret", fld(3, 7)), "Secret.type: unexpected wire type"),
        (envelope("v1", "Secret", fld(2, b"\x08\x01")), "map entry field 1"),
    ],
)
def test_errors(body: bytes, needle: str) -> None:
    with pytest.raises(ProtobufError) as info:
        decode_k8s_protobuf(body)
    message = str(info.value)
    assert needle in message
    assert SECRET_VALUE not in message and SECRET_VALUE[:8] not in message
    assert isinstance(info.value, ValueError)


def test_error_tells_the_workaround() -> None:
    with pytest.raises(ProtobufError, match=r"kubectl create -f .*kubectl apply"):
        decode_k8s_protobuf(envelope("apps/v1", "Deployment", b""))


# ------------------------------------------------------------------ live capture from kubectl


@dataclass
class Captured:
    method: str
    path: str
    content_type: str
    body: bytes


@dataclass
class CaptureServer:
    url: str
    requests: list[Captured]

    def posts(self) -> list[Captured]:
        return [r for r in self.requests if r.method == "POST"]


RESOURCES = [
    ("namespaces", "Namespace", False),
    ("secrets", "Secret", True),
    ("configmaps", "ConfigMap", True),
    ("serviceaccounts", "ServiceAccount", True),
    ("resourcequotas", "ResourceQuota", True),
]


def _capture_app(requests: list[Captured]) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        requests.append(
            Captured(request.method, request.path, request.headers.get("Content-Type", ""), body)
        )
        path = request.path
        if request.method == "POST":
            kind = {n: k for n, k, _ in RESOURCES}.get(path.rsplit("/", 1)[-1], "Unknown")
            echo: dict[str, Any] = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"}}
            try:
                echo = decode_k8s_protobuf(body) if is_k8s_protobuf(body) else json.loads(body)
            except ValueError:
                pass
            if path.endswith("/token"):  # kubectl create token prints status.token
                echo["status"] = {"token": "a.b.c", "expirationTimestamp": None}
            return web.json_response(echo, status=201)
        if path == "/version":
            return web.json_response(
                {"major": "1", "minor": "30", "gitVersion": "v1.30.0", "platform": "linux/amd64"}
            )
        if path == "/api":
            return web.json_response(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}
                    ],
                }
            )
        if path == "/apis":
            return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if path == "/api/v1":
            verbs = ["create", "delete", "get", "list", "patch", "update", "watch"]
            resources = [
                {"name": n, "singularName": k.lower(), "namespaced": ns, "kind": k, "verbs": verbs}
                for n, k, ns in RESOURCES
            ]
            return web.json_response(
                {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}
            )
        if path == "/openapi/v2":
            return web.Response(body=b"", content_type="application/octet-stream")
        if path == "/openapi/v3":
            return web.json_response({"paths": {}})
        return web.json_response(
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
             "code": 404, "message": "not found"},
            status=404,
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


@pytest.fixture
async def capture_server() -> AsyncIterator[CaptureServer]:
    requests: list[Captured] = []
    runner = web.AppRunner(_capture_app(requests))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield CaptureServer(f"http://127.0.0.1:{port}", requests)
    finally:
        await runner.cleanup()


def kubectl(version: str) -> Path:
    binary = KUBECTL_DIR / f"kubectl.{version}"
    if not os.access(binary, os.X_OK):
        pytest.skip(f"{binary} not installed")
    return binary


async def run_kubectl(binary: Path, server: CaptureServer, tmp: Path, args: list[str]) -> None:
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": server.url}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [
                    {"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "default"}}
                ],
                "current-context": "x",
            }
        )
    )
    (tmp / "blob.bin").write_bytes(BLOB)
    proc = await asyncio.create_subprocess_exec(
        str(binary), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp / "cache"), *args,
        cwd=tmp,
        env={"HOME": str(tmp), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, (out + err).decode(errors="replace")


@pytest.mark.parametrize("version", ["1.32", "1.33"])
async def test_live_kubectl_capture(
    version: str, capture_server: CaptureServer, tmp_path: Path
) -> None:
    binary = kubectl(version)
    regen = version == FIXTURE_KUBECTL and os.environ.get("RACKSMITH_REGEN_PROTOBUF_FIXTURES")
    for case in CASES:
        before = len(capture_server.posts())
        await run_kubectl(binary, capture_server, tmp_path, case.args)
        posts = capture_server.posts()[before:]
        assert len(posts) == 1, case.name
        post = posts[0]
        assert post.path == case.path
        assert post.content_type == CONTENT_TYPE
        check_decoded(case, post.body)
        if regen:
            write_fixture(case, post.body)


async def test_older_kubectl_sends_json(capture_server: CaptureServer, tmp_path: Path) -> None:
    """kubectl 1.31 and older POST typed creates as JSON: nothing to decode there."""
    await run_kubectl(kubectl("1.30"), capture_server, tmp_path, ["create", "namespace", "demo"])
    (post,) = capture_server.posts()
    assert post.content_type == "application/json"
    assert not is_k8s_protobuf(post.body)
    assert json.loads(post.body)["metadata"]["name"] == "demo"
