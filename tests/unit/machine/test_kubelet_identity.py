"""The kubelet's identity in a Machine's user data: issued from the cluster CA
for that node, read back out of written user data, kept while sound."""

from __future__ import annotations

import datetime as dt

from racksmith.controllers.machine.userdata import AgentAccess, file_of, render_user_data
from racksmith.controlplane.pki import (
    KUBELET_CLIENT_FILE,
    ClusterPki,
    issue_kubelet_client,
    kubelet_client_fresh,
)

NOW = dt.datetime.now(dt.UTC)
PKI = ClusterPki.generate()


def test_a_kubelet_certificate_is_fresh_for_its_node_and_ca_only() -> None:
    pem = issue_kubelet_client(PKI.ca, "demo-worker-1")
    assert kubelet_client_fresh(pem, PKI.ca, "demo-worker-1", NOW)
    assert not kubelet_client_fresh(pem, PKI.ca, "demo-worker-2", NOW)
    assert not kubelet_client_fresh(pem, ClusterPki.generate().ca, "demo-worker-1", NOW)
    assert not kubelet_client_fresh(pem, PKI.ca, "demo-worker-1",
                                    NOW + dt.timedelta(days=340))
    assert not kubelet_client_fresh(None, PKI.ca, "demo-worker-1", NOW)
    assert not kubelet_client_fresh(b"not a certificate", PKI.ca, "demo-worker-1", NOW)
    cert_only = pem[:pem.index(b"-----BEGIN", 1)]
    assert not kubelet_client_fresh(cert_only, PKI.ca, "demo-worker-1", NOW)


def test_a_file_of_written_user_data_reads_back() -> None:
    pem = issue_kubelet_client(PKI.ca, "demo-worker-1")
    text = render_user_data(AgentAccess("https://127.0.0.1:6443", b"ca"), "token", "default",
                            "demo-worker-1", {KUBELET_CLIENT_FILE: pem})
    assert file_of(text, KUBELET_CLIENT_FILE) == pem
    assert file_of(text, "/etc/kubernetes/pki/ca.crt") is None
    assert file_of(None, KUBELET_CLIENT_FILE) is None
    assert file_of("#cloud-config\n: [", KUBELET_CLIENT_FILE) is None
