"""The kubectl tests of test_kubectl.py (kubectl 1.27, 1.30, 1.33), against
``racksmith apiserver --etcd-endpoints``: a server process on a real etcd."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.etcd import etcd_cluster
from tests.harness.process import ServerProc, start_server
from tests.integration import test_kubectl as _sqlite
from tests.integration.test_kubectl import Kubectl, kubectl  # noqa: F401 - the fixture

globals().update({name: test for name, test in vars(_sqlite).items()
                  if name.startswith("test_")})


@pytest.fixture(scope="module")
def server_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProc]:
    """``racksmith apiserver`` on a one-member etcd, stopped by PID."""
    with etcd_cluster(tmp_path_factory.mktemp("etcd"), members=1) as cluster:
        tls = cluster.tls
        assert tls is not None
        proc = start_server(tmp_path_factory.mktemp("server"), command="apiserver", extra=[
            "--etcd-endpoints", ",".join(cluster.endpoints), "--etcd-cafile", str(tls.ca_file),
            "--etcd-certfile", str(tls.cert_file), "--etcd-keyfile", str(tls.key_file)])
        try:
            yield proc
        finally:
            proc.kill()


def test_the_lifecycle_lease_names_the_serving_replica(
        kubectl: Kubectl, server_process: ServerProc) -> None:  # noqa: F811 - the fixture
    """docs/ha.md's command: the one replica on this etcd holds the Lease of
    the server-side lifecycles (its identity ends with its data dir)."""
    out = kubectl.run("-n", "kube-system", "get", "lease", "racksmith-apiserver-lifecycle",
                      "-o", "jsonpath={.spec.holderIdentity}").stdout
    assert out.endswith(str(server_process.data_dir.resolve())), out
