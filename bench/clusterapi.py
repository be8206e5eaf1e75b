"""A cluster's own API for the benchmarks: ``racksmith apiserver`` on a cluster CA.

Owns ``start_cluster_api`` (a second API server, as each cluster of
``racksmith up`` serves its own: a fresh cluster CA, a serving certificate
for 127.0.0.1 and ``--client-ca-file``, kubeadm's layout) and
``write_kubeconfig`` (a kubeconfig of that server for its admin token, as
``racksmith kubeconfig --cluster`` gives people). Used by
``bench/update.py`` and ``bench/volumes.py``; the process is started and
stopped by PID as ``bench/apiserver.py`` does.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from apiserver import Server, start_server

from racksmith.controlplane.pki import KeyPair, issue_serving, new_ca
from racksmith.filemodes import private_dir, write_private


def start_cluster_api(root: Path) -> tuple[Server, KeyPair]:
    """The cluster's own API: ``racksmith apiserver`` on a fresh cluster CA
    (serving certificate and ``--client-ca-file``, kubeadm's layout)."""
    private_dir(root)
    ca = new_ca("kubernetes")
    serving = issue_serving(ca, "kube-apiserver", ["127.0.0.1"])
    for name, data in (("ca.crt", ca.cert_pem), ("apiserver.crt", serving.cert_pem),
                       ("apiserver.key", serving.key_pem)):
        write_private(root / name, data)
    private_dir(root / "data")
    server = start_server(root / "data", extra=(
        "--tls-cert-file", str(root / "apiserver.crt"),
        "--tls-private-key-file", str(root / "apiserver.key"),
        "--client-ca-file", str(root / "ca.crt")), ca_file=root / "ca.crt")
    return server, ca


def write_kubeconfig(server: Server, path: Path) -> Path:
    """A kubeconfig (0600) reaching ``server`` with its admin token."""
    write_private(path, yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "cluster",
        "clusters": [{"name": "cluster", "cluster": {
            "server": server.url, "certificate-authority": str(server.ca_path)}}],
        "users": [{"name": "admin", "user": {"token": server.token}}],
        "contexts": [{"name": "cluster", "context": {"cluster": "cluster", "user": "admin"}}],
    }).encode())
    return path
