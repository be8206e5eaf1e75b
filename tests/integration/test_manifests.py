"""``racksmith manifests``: a kustomize base that genuine kubectl renders and
whose every object is valid, offline, against the Kubernetes 1.27 to 1.33
schemas (kubernetes-validate); the Deployment runs ``racksmith
controllers`` as ``controller-manager`` with probes, limits and a locked-down
container; the identities are the ones ``racksmith rbac`` declares."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.harness.process import kubectl_path

VERSIONS = [f"1.{minor}" for minor in range(27, 34)]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    out = tmp_path_factory.mktemp("manifests")
    res = subprocess.run([sys.executable, "-m", "racksmith.cli.main", "manifests", "--output",
                          str(out), "--tag", "0.1.0"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "agent-bootstrap.yaml", "controllers.yaml", "crds.yaml", "kustomization.yaml",
        "namespace.yaml", "rbac.yaml"]
    built = subprocess.run([str(kubectl_path(33)), "kustomize", str(out)],
                           capture_output=True, text=True, timeout=60)
    assert built.returncode == 0, built.stderr
    return [d for d in yaml.safe_load_all(built.stdout) if d]


SELECTABLE_FIELDS_SINCE = (1, 30)
"""CRD ``selectableFields`` (field selectors on custom kinds, which the agents'
and controllers' watches use) came in Kubernetes 1.30: older schemas do not
know the field, and such a cluster drops it (docs/ha.md says 1.30 is needed)."""


def _without_selectable_fields(crd: dict[str, Any]) -> dict[str, Any]:
    versions = [{k: v for k, v in ver.items() if k != "selectableFields"}
                for ver in crd["spec"]["versions"]]
    return {**crd, "spec": {**crd["spec"], "versions": versions}}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_is_valid_for_the_kubernetes_version(rendered: list[dict[str, Any]],
                                                          version: str) -> None:
    old = tuple(int(x) for x in version.split(".")) < SELECTABLE_FIELDS_SINCE
    for doc in rendered:
        if old and doc["kind"] == "CustomResourceDefinition":
            doc = _without_selectable_fields(doc)  # the only field those schemas lack
        kubernetes_validate.validate(doc, version, strict=True)


def test_the_deployment_runs_the_controllers_with_their_identities(
        rendered: list[dict[str, Any]]) -> None:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for doc in rendered:
        by_kind.setdefault(doc["kind"], []).append(doc)
    [deployment] = by_kind["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["serviceAccountName"] == "controller-manager"
    assert container["image"] == "ghcr.io/racksmith/racksmith:0.1.0"
    assert container["args"][0] == "controllers"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"] and container["resources"]["limits"]["memory"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    rbac = subprocess.run([sys.executable, "-m", "racksmith.cli.main", "rbac"],
                          capture_output=True, text=True, timeout=60, check=True).stdout
    declared = {(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(rbac) if d}
    shipped = {(d["kind"], d["metadata"]["name"]) for d in rendered}
    assert declared <= shipped
    # each host's Role is the Machine controller's, per Machine: none shipped
    assert ("ClusterRole", "racksmith:agent") not in shipped
    assert len(by_kind["CustomResourceDefinition"]) >= 20
    secrets = {d["metadata"]["name"] for d in by_kind["Secret"]}
    assert secrets == {"racksmith-agent", "racksmith-ironic-auth"}
    manager_role = next(d for d in by_kind["ClusterRole"]
                        if d["metadata"]["name"] == "racksmith:controller-manager")
    assert not any("secrets" in r.get("resources", []) for r in manager_role["rules"])


def test_the_containerfile_builds_the_command_the_deployment_runs() -> None:
    text = (Path(__file__).resolve().parents[2] / "deploy" / "Containerfile").read_text()
    assert 'ENTRYPOINT ["racksmith"]' in text and "USER 65532" in text
