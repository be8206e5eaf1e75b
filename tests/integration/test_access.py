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

import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from racksmith.hostcreds import host_objects, host_service_account, user_data_secret
from tests.harness.process import ServerProc, kubectl_path, start_server

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
        '"metal3.io" in the namespace "default"' in err
    assert viewer.ok("auth", "can-i", "list", "baremetalhosts").strip() == "yes"
    assert viewer.run("auth", "can-i", "get", "secrets").stdout.strip() == "no"
    listing = viewer.ok("auth", "can-i", "--list")
    # Resources by name, never a group wildcard: a kind added later is seen
    # by viewers only once it says so (KindInfo.built_in_roles).
    assert "baremetalhosts.metal3.io" in listing, listing
    assert "clusterupdateplans.lcm.racksmith.io" in listing, listing
    assert not [line for line in listing.splitlines()
                if line.startswith("*.") and "racksmith.io" in line], listing
    assert "secrets" not in listing


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


LCM = """apiVersion: lcm.racksmith.io/v1alpha1
kind: LCMMachine
metadata: {name: %(name)s, namespace: default}
spec: {machineRef: {name: %(name)s}, clusterName: demo, release: racksmith-1.0.0}
"""
def host_access(machine: str) -> str:
    """What the Machine controller makes for a host, as YAML: its
    ServiceAccount, Role and RoleBinding, and its (empty) user-data Secret."""
    objects = [*host_objects("default", machine), {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": user_data_secret(machine), "namespace": "default"}}]
    return yaml.safe_dump_all(objects)


def bound_token(admin: As, machine: str) -> str:
    """What the Machine controller asks for a host: a token of the host's own
    ServiceAccount bound to its user-data Secret (kubectl's own flags)."""
    token = admin.ok("create", "token", host_service_account(machine),
                     "--bound-object-kind", "Secret",
                     "--bound-object-name", user_data_secret(machine)).strip()
    assert token.count(".") == 2
    return token


def raw_patch(server: ServerProc, token: str, path: str, body: object) -> tuple[int, Any]:
    """A merge PATCH with ``token``: (status code, answer)."""
    context = ssl.create_default_context(cafile=str(server.data_dir / "pki" / "ca.crt"))
    request = urllib.request.Request(
        server.url + path, data=json.dumps(body).encode(), method="PATCH",
        headers={"Authorization": f"Bearer {token}",
                 "Content-Type": "application/merge-patch+json"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_host_agent_reaches_only_its_own_machine(
        server_process: ServerProc, minor: int, tmp_path: Path) -> None:
    d = str(server_process.data_dir)
    admin = As(minor, server_process.kubeconfig, tmp_path / "admin")
    host_a, host_b = f"agent-a-{minor}", f"agent-b-{minor}"
    user = f"system:serviceaccount:default:{host_service_account(host_a)}"
    admin.ok("apply", "-f", "-", input_text=host_access(host_a) + "---\n"
             + host_access(host_b) + "---\n" + LCM % {"name": host_a}
             + "---\n" + LCM % {"name": host_b})
    token = bound_token(admin, host_a)
    agent = ["--token", token]
    who = admin.ok(*agent, "auth", "whoami")
    assert user in who and "racksmith:agents" in who
    # its own LCMMachine: read it, watch it by name, report its status
    admin.ok(*agent, "get", "lcmmachine", host_a)
    admin.ok(*agent, "get", "lcmmachines", "--field-selector", f"metadata.name={host_a}")
    admin.ok(*agent, "patch", "lcmmachine", host_a, "--subresource=status", "--type=merge",
             "-p", '{"status": {"agentVersion": "test"}}')
    # host B's: refused, in kube-apiserver's wording (kubectl reads before it
    # patches, so the PATCH itself is sent raw too)
    err = admin.refused(*agent, "patch", "lcmmachine", host_b, "--subresource=status",
                        "--type=merge", "-p", '{"status": {"agentVersion": "test"}}')
    assert f'lcmmachines.lcm.racksmith.io "{host_b}" is forbidden' in err
    code, status = raw_patch(server_process, token,
                             f"/apis/lcm.racksmith.io/v1alpha1/namespaces/default/lcmmachines/"
                             f"{host_b}/status", {"status": {"agentVersion": "test"}})
    assert (code, status["reason"]) == (403, "Forbidden")
    assert status["message"] == (
        f'lcmmachines.lcm.racksmith.io "{host_b}" is forbidden: User '
        f'"{user}" cannot patch resource '
        '"lcmmachines/status" in API group "lcm.racksmith.io" in the namespace "default": '
        f'no relationship found between the host agent of LCMMachine default/{host_a} '
        'and this object')
    assert "forbidden" in admin.refused(*agent, "get", "lcmmachine", host_b)
    assert "forbidden" in admin.refused(*agent, "get", "lcmmachines")
    assert "forbidden" in admin.refused(*agent, "get", "secrets")
    assert "forbidden" in admin.refused(*agent, "create", "token",
                                        host_service_account(host_b))
    # a Node of another name, or its own with a role label, is refused
    node = '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "%s"%s}}'
    assert "may only write its own Node" in admin.refused(
        *agent, "create", "-f", "-", input_text=node % (host_b, ""))
    assert "node-role.kubernetes.io" in admin.refused(
        *agent, "create", "-f", "-", input_text=node % (
            host_a, ', "labels": {"node-role.kubernetes.io/control-plane": ""}'))
    admin.ok(*agent, "create", "-f", "-", input_text=node % (host_a, ""))
    admin.ok(*agent, "get", "node", host_a)
    assert "forbidden" in admin.refused(*agent, "get", "nodes")
    # both requests are in the audit trail, under the agent's identity
    table = racksmith("audit", "--object", f"lcmmachine/{host_b}", "--data-dir", d).stdout
    assert any(r.split()[2:] == [user, "patch", "lcmmachines/status", f"default/{host_b}",
                                 "403"] for r in table.splitlines()), table
    table = racksmith("audit", "--object", f"lcmmachine/{host_a}", "--data-dir", d).stdout
    assert any(r.split()[2:] == [user, "patch", "lcmmachines/status", f"default/{host_a}",
                                 "200"] for r in table.splitlines()), table
    # deleting the host's user-data Secret (as deleting its Machine does)
    # revokes its token
    admin.ok("delete", "secret", user_data_secret(host_a))
    assert "You must be logged in" in admin.refused(*agent, "get", "lcmmachine", host_a)
    admin.ok("delete", "node", host_a)
    admin.ok("delete", "lcmmachine", host_a, host_b)


def test_rbac_alone_keeps_a_host_agent_to_its_own_machine(tmp_path: Path) -> None:
    """With the host restriction switched off (``--no-host-restriction``: a
    server that authorizes as kube-apiserver does, with RBAC alone), a host
    agent's token still reaches only its own LCMMachine: its Role names it."""
    server = start_server(tmp_path / "server", command="apiserver",
                          extra=["--no-host-restriction"])
    try:
        admin = As(VERSIONS[-1], server.kubeconfig, tmp_path / "admin")
        host_a, host_b = "rbac-a", "rbac-b"
        user = f"system:serviceaccount:default:{host_service_account(host_a)}"
        admin.ok("apply", "-f", "-", input_text=host_access(host_a) + "---\n"
                 + host_access(host_b) + "---\n" + LCM % {"name": host_a}
                 + "---\n" + LCM % {"name": host_b})
        agent = ["--token", bound_token(admin, host_a)]
        who = admin.ok(*agent, "auth", "whoami")
        assert user in who and "racksmith:agents" not in who  # a plain ServiceAccount
        admin.ok(*agent, "get", "lcmmachine", host_a)
        admin.ok(*agent, "get", "lcmmachines", "--field-selector", f"metadata.name={host_a}")
        admin.ok(*agent, "patch", "lcmmachine", host_a, "--subresource=status",
                 "--type=merge", "-p", '{"status": {"agentVersion": "test"}}')
        assert admin.ok(*agent, "create", "token", host_service_account(host_a),
                        "--bound-object-kind", "Secret",
                        "--bound-object-name", user_data_secret(host_a)).count(".") == 2
        # another host's: 403 from RBAC, which has no relationship to tell of
        code, status = raw_patch(server, agent[1],
                                 f"/apis/lcm.racksmith.io/v1alpha1/namespaces/default/"
                                 f"lcmmachines/{host_b}/status",
                                 {"status": {"agentVersion": "test"}})
        assert (code, status["reason"]) == (403, "Forbidden")
        assert status["message"] == (
            f'lcmmachines.lcm.racksmith.io "{host_b}" is forbidden: User "{user}" cannot '
            'patch resource "lcmmachines/status" in API group "lcm.racksmith.io" in the '
            'namespace "default"')
        for args in (("get", "lcmmachine", host_b), ("get", "lcmmachines"),
                     ("get", "lcmmachines", "--field-selector", f"metadata.name={host_b}"),
                     ("get", "secrets"), ("get", "nodes"),
                     ("create", "token", host_service_account(host_b))):
            assert "forbidden" in admin.refused(*agent, *args), args
    finally:
        server.kill()


def test_racksmith_rbac_applies_to_a_server(server_process: ServerProc, tmp_path: Path) -> None:
    """``racksmith rbac`` is what a deployment onto another cluster applies:
    valid objects that a cluster administrator can apply as they are."""
    out = racksmith("rbac")
    assert out.returncode == 0, out.stderr
    admin = As(33, server_process.kubeconfig, tmp_path / "admin")
    admin.ok("apply", "-f", "-", input_text=out.stdout)
    roles = admin.ok("get", "clusterroles", "-l", "app.kubernetes.io/part-of=racksmith",
                     "-o", "name")
    assert "clusterrole.rbac.authorization.k8s.io/racksmith:controller:machine" in roles
    assert "clusterrole.rbac.authorization.k8s.io/racksmith:controller-manager" in roles
    assert "secrets" not in admin.ok("get", "clusterrole", "racksmith:controller-manager",
                                     "-o", "yaml")


def test_bad_bound_token_requests_are_refused_with_the_reason(
        server_process: ServerProc, tmp_path: Path) -> None:
    admin = As(33, server_process.kubeconfig, tmp_path / "admin")
    admin.ok("apply", "-f", "-", input_text=host_access("bound-x")
             + "---\n" + LCM % {"name": "bound-x"})
    path = f"/api/v1/namespaces/default/serviceaccounts/{host_service_account('bound-x')}/token"

    def ask(ref: dict[str, str]) -> str:
        body = tmp_path / "request.json"
        body.write_text(json.dumps({"apiVersion": "authentication.k8s.io/v1",
                                    "kind": "TokenRequest", "spec": {"boundObjectRef": ref}}))
        return admin.refused("create", "--raw", path, "-f", str(body))

    assert "Unsupported value" in ask({"kind": "Deployment", "name": "bound-x"})
    # kube binds tokens to Pods, Secrets and Nodes only: an LCMMachine is a 422
    refused = ask({"kind": "LCMMachine", "name": "bound-x",
                   "apiVersion": "lcm.racksmith.io/v1alpha1"})
    assert "spec.boundObjectRef.kind" in refused and "Unsupported value" in refused
    assert "not found" in ask({"kind": "Secret", "name": "no-such-secret", "apiVersion": "v1"})
    assert "does not match the UID in record" in ask(
        {"kind": "Secret", "name": user_data_secret("bound-x"), "uid": "another-uid",
         "apiVersion": "v1"})
    assert "Unsupported value" in ask({"kind": "Secret", "name": user_data_secret("bound-x"),
                                       "apiVersion": "v9"})
    admin.ok("delete", "lcmmachine", "bound-x")
