"""Access control with the genuine kubectl 1.27 and 1.33 against ``racksmith apiserver``.

Users made by ``racksmith user add`` (a separate process writing the token
file the running server re-reads): a viewer reads hosts, machines and plans
and is refused Secrets and deletes in kube-apiserver's wording; an operator
commences a plan step and cannot bind cluster-admin; a namespace admin cannot
escalate; ``kubectl auth whoami`` and ``auth can-i [--list]`` work; a revoked
token is a 401. The server is one process for the module (the harness's
``server_process``), stopped by PID.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.process import ServerProc, kubectl_path

pytestmark = [pytest.mark.timeout(240)]

VERSIONS = [27, 33]
PLAN = """apiVersion: lcm.racksmith.io/v1alpha1
kind: ClusterUpdatePlan
metadata: {name: plan-%(v)s, namespace: default}
spec:
  cluster: demo
  source: racksmith-1.0.0
  target: racksmith-1.1.0
  steps:
  - {id: control-plane, name: Control plane}
"""


def racksmith(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "racksmith.cli.main", *args],
                          capture_output=True, text=True, timeout=60)


class As:
    """kubectl 1.``minor`` with one kubeconfig."""

    def __init__(self, minor: int, kubeconfig: Path, home: Path) -> None:
        self.bin = str(kubectl_path(minor))
        self.kubeconfig = kubeconfig
        home.mkdir(parents=True, exist_ok=True)
        self.home = home

    def run(self, *args: str, input_text: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.bin, *args], input=input_text, capture_output=True,
                              text=True, timeout=60, cwd=self.home,
                              env={"HOME": str(self.home), "KUBECONFIG": str(self.kubeconfig),
                                   "PATH": "/usr/bin:/bin"})

    def ok(self, *args: str, input_text: str | None = None) -> str:
        res = self.run(*args, input_text=input_text)
        assert res.returncode == 0, f"kubectl {' '.join(args)}: {res.stdout}{res.stderr}"
        return res.stdout

    def refused(self, *args: str, input_text: str | None = None) -> str:
        res = self.run(*args, input_text=input_text)
        assert res.returncode != 0, f"kubectl {' '.join(args)} succeeded: {res.stdout}"
        return res.stderr


def add_user(server: ServerProc, name: str, role: str, minor: int, tmp: Path) -> As:
    res = racksmith("user", "add", name, "--role", role, "--data-dir", str(server.data_dir))
    assert res.returncode == 0, res.stderr
    user = As(minor, server.data_dir / "users" / f"{name}.kubeconfig", tmp / name)
    # the server re-reads the token file when it changes (checked once a second)
    deadline = time.monotonic() + 30
    while user.run("auth", "whoami").returncode != 0:
        assert time.monotonic() < deadline, "the new user's token was never accepted"
        time.sleep(0.2)
    return user


@pytest.fixture(params=VERSIONS, ids=[f"kubectl-1.{v}" for v in VERSIONS])
def minor(request: pytest.FixtureRequest) -> int:
    return int(request.param)


def test_a_viewer_reads_but_never_secrets_and_never_writes(
        server_process: ServerProc, minor: int, tmp_path: Path) -> None:
    viewer = add_user(server_process, f"viewer-{minor}", "view", minor, tmp_path)
    out = viewer.ok("auth", "whoami")
    assert f"viewer-{minor}" in out and "racksmith:viewers" in out
    for kind in ("baremetalhosts", "machines", "clusterupdateplans", "nodes"):
        viewer.ok("get", kind, "-A")
    assert (f'Error from server (Forbidden): secrets is forbidden: User "viewer-{minor}" cannot '
            'list resource "secrets" in API group "" in the namespace "default"'
            in viewer.refused("get", "secrets"))
    err = viewer.refused("delete", "baremetalhost", "h1", "-n", "default")
    assert f'User "viewer-{minor}" cannot delete resource "baremetalhosts" in API group ' \
        '"metal.racksmith.io" in the namespace "default"' in err
    assert viewer.ok("auth", "can-i", "list", "baremetalhosts").strip() == "yes"
    assert viewer.run("auth", "can-i", "get", "secrets").stdout.strip() == "no"
    listing = viewer.ok("auth", "can-i", "--list")
    assert "*.metal.racksmith.io" in listing and "secrets" not in listing


def test_an_operator_commences_a_step_and_cannot_bind_cluster_admin(
        server_process: ServerProc, minor: int, tmp_path: Path) -> None:
    admin = As(minor, server_process.kubeconfig, tmp_path / "admin")
    admin.ok("apply", "-f", "-", input_text=PLAN % {"v": minor})
    operator = add_user(server_process, f"operator-{minor}", "operator", minor, tmp_path)
    operator.ok("patch", "clusterupdateplan", f"plan-{minor}", "--type", "json", "-p",
                '[{"op": "add", "path": "/spec/steps/0/commence", "value": true}]')
    assert admin.ok("get", "clusterupdateplan", f"plan-{minor}", "-o",
                    "jsonpath={.spec.steps[0].commence}") == "true"
    err = operator.refused("create", "clusterrolebinding", f"grab-{minor}",
                           "--clusterrole=cluster-admin", f"--user=operator-{minor}")
    assert "Forbidden" in err or "forbidden" in err
    assert operator.run("get", "secrets", "-A").returncode != 0
    assert operator.run("get", "clusterrolebinding", f"grab-{minor}").returncode != 0


def test_a_namespace_admin_cannot_escalate_to_cluster_admin(
        server_process: ServerProc, minor: int, tmp_path: Path) -> None:
    admin = As(minor, server_process.kubeconfig, tmp_path / "admin")
    ns = f"team-{minor}"
    lead_name = f"lead-{minor}"
    admin.ok("create", "namespace", ns)
    lead = add_user(server_process, lead_name, "view", minor, tmp_path)
    admin.ok("create", "rolebinding", "lead-admin", "-n", ns, "--clusterrole=admin",
             f"--user={lead_name}")
    # what the lead holds, it may grant ...
    lead.ok("create", "rolebinding", "helpers", "-n", ns, "--clusterrole=view",
            "--user=helper")
    # ... and nothing more
    err = lead.refused("create", "rolebinding", "grab", "-n", ns,
                       "--clusterrole=cluster-admin", f"--user={lead_name}")
    assert "is attempting to grant RBAC permissions not currently held" in err
    err = lead.refused("create", "role", "wide", "-n", ns, "--verb=*", "--resource=*")
    assert "is attempting to grant RBAC permissions not currently held" in err


def test_a_revoked_user_is_refused(server_process: ServerProc, minor: int,
                                   tmp_path: Path) -> None:
    name = f"leaver-{minor}"
    user = add_user(server_process, name, "view", minor, tmp_path)
    saved = tmp_path / "kept.kubeconfig"
    saved.write_text(user.kubeconfig.read_text())
    res = racksmith("user", "revoke", name, "--data-dir", str(server_process.data_dir))
    assert res.returncode == 0, res.stderr
    assert not user.kubeconfig.exists()
    gone = As(minor, saved, tmp_path / "kept")
    deadline = time.monotonic() + 30
    # 401: 1.33 says "(Unauthorized)", 1.27 "(the server has asked for the client to
    # provide credentials)"
    while "You must be logged in to the server" not in gone.run("get", "baremetalhosts").stderr:
        assert time.monotonic() < deadline, "the revoked token still works"
        time.sleep(0.2)
    listed = racksmith("user", "list", "--data-dir", str(server_process.data_dir)).stdout
    assert name not in listed


def test_user_add_refuses_bad_input(server_process: ServerProc) -> None:
    d = str(server_process.data_dir)
    res = racksmith("user", "add", "x", "--role", "root", "--data-dir", d)
    assert res.returncode == 2 and "view" in res.stderr and "operator" in res.stderr
    res = racksmith("user", "add", "racksmith-admin", "--role", "view", "--data-dir", d)
    assert res.returncode == 1 and "reserved" in res.stderr
    res = racksmith("user", "add", "Bad,Name", "--role", "view", "--data-dir", d)
    assert res.returncode == 1 and "not a valid user name" in res.stderr
    res = racksmith("user", "revoke", "racksmith-agent", "--data-dir", d)
    assert res.returncode == 1


def test_the_audit_trail_says_who_changed_what_and_who_was_refused(
        server_process: ServerProc, minor: int, tmp_path: Path) -> None:
    d = str(server_process.data_dir)
    admin = As(minor, server_process.kubeconfig, tmp_path / "admin")
    value = f"audit-secret-value-{minor}-x9"
    admin.ok("create", "secret", "generic", f"audited-{minor}", f"--from-literal=k={value}")
    admin.ok("apply", "-f", "-", input_text=PLAN % {"v": f"a{minor}"})
    operator = add_user(server_process, f"auditee-{minor}", "operator", minor, tmp_path)
    operator.ok("patch", "clusterupdateplan", f"plan-a{minor}", "--type", "json", "-p",
                '[{"op": "add", "path": "/spec/steps/0/commence", "value": true}]')
    operator.refused("get", "secret", f"audited-{minor}")

    table = racksmith("audit", "--object", f"clusterupdateplan/plan-a{minor}", "--data-dir", d)
    assert table.returncode == 0, table.stderr
    rows = [line.split() for line in table.stdout.splitlines()[1:]]
    assert ["racksmith-admin", "create"] in [r[2:4] for r in rows], table.stdout
    assert [f"auditee-{minor}", "patch", "clusterupdateplans",
            f"default/plan-a{minor}", "200"] in [r[2:] for r in rows], table.stdout
    mine = racksmith("audit", "--user", f"auditee-{minor}", "--since", "10m", "--data-dir", d)
    assert any(line.split()[2:] == [f"auditee-{minor}", "get", "secrets",
                                    f"default/audited-{minor}", "403"]
               for line in mine.stdout.splitlines()), mine.stdout
    # Metadata level: no body, so no Secret value; private files
    folder = server_process.data_dir / "audit"
    assert value not in (folder / "audit.log").read_text()
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "audit.log").stat().st_mode & 0o777 == 0o600
    bad = racksmith("audit", "--since", "yesterday", "--data-dir", d)
    assert bad.returncode == 2 and "not a duration" in bad.stderr


def test_service_account_tokens(server_process: ServerProc, minor: int,
                                tmp_path: Path) -> None:
    admin = As(minor, server_process.kubeconfig, tmp_path / "admin")
    sa = f"ci-{minor}"
    admin.ok("create", "serviceaccount", sa)
    token = admin.ok("create", "token", sa).strip()
    out = admin.ok("--token", token, "auth", "whoami")
    assert f"system:serviceaccount:default:{sa}" in out and "system:serviceaccounts" in out
    assert "cannot list resource" in admin.refused("--token", token, "get", "configmaps")
    admin.ok("create", "rolebinding", f"{sa}-view", "--clusterrole=view",
             f"--serviceaccount=default:{sa}")
    admin.ok("--token", token, "get", "configmaps")
    # a token for another audience is not for this server; an unknown account has none
    other = admin.ok("create", "token", sa, "--audience", "vault").strip()
    assert "You must be logged in" in admin.refused("--token", other, "get", "configmaps")
    assert 'serviceaccounts "missing" not found' in admin.refused("create", "token", "missing")
    assert "may not specify a duration less than 600 seconds" in admin.refused(
        "create", "token", sa, "--duration", "1m")
    # deleting the ServiceAccount revokes its tokens
    admin.ok("delete", "serviceaccount", sa)
    assert "You must be logged in" in admin.refused("--token", token, "get", "configmaps")
