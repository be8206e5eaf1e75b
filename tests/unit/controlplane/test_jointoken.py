"""Bootstrap tokens, the CA pin and the certificate key (racksmith.controlplane.jointoken),
checked against kube's formats and, for the CA pin, the openssl command kubeadm's
documentation gives."""

from __future__ import annotations

import base64
import datetime as dt
import re
import subprocess

import pytest
import yaml

from racksmith.agent import kubeadm
from racksmith.controlplane.jointoken import (
    NODE_GROUP,
    TOKEN_RE,
    TOKEN_TTL,
    ca_cert_hash,
    cluster_token_secret,
    join_file,
    join_secret,
    new_join,
    parse_join,
)
from racksmith.controlplane.pki import new_ca

NOW = dt.datetime(2026, 12, 6, 12, 0, tzinfo=dt.UTC)


def test_a_new_token_has_kubes_format_and_a_random_certificate_key() -> None:
    a, b = new_join(NOW), new_join(NOW)
    assert TOKEN_RE.match(a.token) and a.token != b.token
    assert re.fullmatch(r"[0-9a-f]{64}", a.certificate_key)
    assert a.certificate_key != b.certificate_key
    assert (a.issued, a.expires) == (NOW, NOW + TOKEN_TTL)
    assert a.token not in repr(a) and a.certificate_key not in repr(a)  # never printed


def test_it_is_renewed_with_a_third_of_its_life_left() -> None:
    join = new_join(NOW)
    assert not join.due(NOW)
    assert not join.due(NOW + TOKEN_TTL * 0.6)
    assert join.due(NOW + TOKEN_TTL * 0.7)
    assert join.due(NOW + TOKEN_TTL * 2)


def test_the_management_secret_round_trips_and_damage_reads_as_none() -> None:
    join = new_join(NOW)
    secret = join_secret("default", "demo", join, {"cluster.racksmith.io/cluster": "demo"})
    assert secret["metadata"]["name"] == "demo-join" and secret["type"] == "Opaque"
    assert parse_join(secret) == join
    assert parse_join(None) is None
    for key, value in (("token", "not-a-token"), ("certificate-key", "short"),
                       ("expiration", "yesterday")):
        damaged = {**secret, "data": {**secret["data"],
                                      key: base64.b64encode(value.encode()).decode()}}
        assert parse_join(damaged) is None, key
    assert parse_join({**secret, "data": {"token": secret["data"]["token"]}}) is None


def test_the_clusters_secret_is_what_kubes_bootstrap_authenticator_reads() -> None:
    join = new_join(NOW)
    secret = cluster_token_secret(join)
    token_id, _, token_secret = join.token.partition(".")
    assert secret["type"] == "bootstrap.kubernetes.io/token"
    assert secret["metadata"] == {"name": f"bootstrap-token-{token_id}",
                                  "namespace": "kube-system"}
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data["token-id"] == token_id and data["token-secret"] == token_secret
    assert data["expiration"] == "2026-12-07T12:00:00Z"
    assert data["usage-bootstrap-authentication"] == data["usage-bootstrap-signing"] == "true"
    assert data["auth-extra-groups"] == NODE_GROUP


def test_the_ca_pin_is_what_openssl_computes() -> None:
    """kubeadm's documented pipeline: the CA's public key, DER, SHA-256."""
    ca = new_ca("kubernetes")
    pub = subprocess.run(["openssl", "x509", "-pubkey", "-noout"], input=ca.cert_pem,
                         capture_output=True, check=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=pub,
                         capture_output=True, check=True).stdout
    digest = subprocess.run(["openssl", "dgst", "-sha256", "-hex"], input=der,
                            capture_output=True, check=True).stdout.decode()
    assert ca_cert_hash(ca.cert_pem) == "sha256:" + digest.split()[-1]


@pytest.mark.parametrize("control_plane", [False, True])
def test_the_join_file_merges_into_kubeadm_v1beta4_documents(control_plane: bool) -> None:
    join = new_join(NOW)
    ca = new_ca("kubernetes")
    doc = yaml.safe_load(join_file(join, ca_cert_hash(ca.cert_pem), "10.0.0.100:6443",
                                   control_plane=control_plane))
    cluster = {"name": "demo", "apiServerVIP": "10.0.0.100", "apiServerPort": 6443}
    joined = list(yaml.safe_load_all(kubeadm.render_config("join", cluster, "n1",
                                                           doc["join"])))[1]
    discovery = joined["discovery"]["bootstrapToken"]
    assert discovery == {"token": join.token, "apiServerEndpoint": "10.0.0.100:6443",
                         "caCertHashes": [ca_cert_hash(ca.cert_pem)]}
    assert joined["discovery"]["tlsBootstrapToken"] == join.token
    if not control_plane:  # a worker never gets the certificate key
        assert "init" not in doc and "controlPlane" not in joined
        assert join.certificate_key not in yaml.safe_dump(doc)
        return
    assert joined["controlPlane"] == {"certificateKey": join.certificate_key}
    init = list(yaml.safe_load_all(kubeadm.render_config("init", cluster, "n1",
                                                         doc["init"])))[1]
    assert init["certificateKey"] == join.certificate_key
    (token,) = init["bootstrapTokens"]
    assert token["token"] == join.token and token["expires"] == "2026-12-07T12:00:00Z"
    assert token["groups"] == [NODE_GROUP]
    assert sorted(token["usages"]) == ["authentication", "signing"]
