"""A real etcd cluster for tests (racksmith.etcdcluster).

Owns :func:`etcd_cluster`, the one way a test gets etcd: members on free
loopback ports with TLS and client certificates, started before the test
and stopped by pid when it ends, failed or not; :func:`etcd_config`, the
store's configuration for it under a prefix of the test's own; and
:func:`etcdctl`, the real command line client with the cluster's client
credentials. etcd is installed by ``make install`` (Debian's etcd-server):
without it these tests fail, they are never skipped.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from racksmith.etcdcluster import LocalEtcdCluster

if TYPE_CHECKING:
    from racksmith.apiserver.store.etcd import EtcdConfig

START_TIMEOUT = 60.0
"""Upper bound of a cluster's start (two busy test workers); never an expectation."""


@contextlib.contextmanager
def etcd_cluster(base: Path, members: int) -> Iterator[LocalEtcdCluster]:
    """A started ``members``-member cluster in ``base/etcd``; stopped (every
    member, by pid) when the block ends, however it ends."""
    cluster = LocalEtcdCluster(base, members)
    try:
        cluster.start(timeout=START_TIMEOUT)
        yield cluster
    finally:
        cluster.stop()


def etcd_config(cluster: LocalEtcdCluster, prefix: str, **options: Any) -> EtcdConfig:
    """The etcd store's configuration for ``cluster`` under ``prefix``
    (``options``: other EtcdConfig fields, e.g. ``request_timeout``)."""
    from racksmith.apiserver.store.etcd import EtcdConfig

    tls = cluster.tls
    return EtcdConfig(endpoints=tuple(cluster.endpoints), prefix=prefix,
                      ca_file=tls.ca_file if tls else None,
                      cert_file=tls.cert_file if tls else None,
                      key_file=tls.key_file if tls else None, **options)


def etcdctl(cluster: LocalEtcdCluster, *args: str, endpoints: Sequence[str] | None = None,
            client_cert: bool = True, command_timeout: float = 5.0,
            check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``etcdctl args`` against ``cluster`` (or only ``endpoints``), with
    its CA and, unless ``client_cert`` is false, its client certificate.
    ``check``: raise :class:`AssertionError` with etcdctl's output when it
    fails."""
    argv = ["etcdctl", "--endpoints", ",".join(endpoints or cluster.endpoints),
            "--dial-timeout", "2s", "--command-timeout", f"{command_timeout:g}s"]
    tls = cluster.tls
    if tls is not None:
        argv += ["--cacert", str(tls.ca_file)]
        if client_cert:
            argv += ["--cert", str(tls.cert_file), "--key", str(tls.key_file)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")}
    env["ETCDCTL_API"] = "3"
    done = subprocess.run([*argv, *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=command_timeout + 10)
    if check and done.returncode != 0:
        raise AssertionError(f"etcdctl {' '.join(args)} failed ({done.returncode}): "
                             f"{done.stderr.strip() or done.stdout.strip()}")
    return done
