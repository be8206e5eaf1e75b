"""A cluster's PKI: kubeadm's certificate authorities as Cluster API's Secrets.

Owns :class:`ClusterPki` — the cluster CA (``kubernetes``), the front-proxy
CA, the etcd CA and the service-account signing key pair, each a
certificate (or public key) and its private key in PEM — and its three
forms:

* Secrets with Cluster API's names and keys: ``<cluster>-ca``,
  ``<cluster>-proxy``, ``<cluster>-etcd`` (``tls.crt``, ``tls.key``) and
  ``<cluster>-sa`` (``tls.crt`` the public key, ``tls.key`` the private
  key), of type ``cluster.x-k8s.io/secret`` and labelled
  ``cluster.x-k8s.io/cluster-name``;
* kubeadm's file layout under ``/etc/kubernetes/pki`` (``ca.crt``,
  ``ca.key``, ``front-proxy-ca.*``, ``etcd/ca.*``, ``sa.key``, ``sa.pub``):
  what ``kubeadm init`` takes as an external CA and what the emulated
  kubeadm serves with;
* certificates issued from the CAs: a client certificate (CN = user, O =
  groups, as kube-apiserver's x509 authenticator reads them) and a serving
  certificate with IP and DNS SANs.

Keys are ECDSA P-256 (kubeadm v1beta4's ``encryptionAlgorithm:
ECDSA-P256``): fast to make, accepted by kube-apiserver for serving, client
and service-account signing. CAs last ten years as kubeadm's do; issued
certificates one year.

Nothing here touches the API or disk; the caller stores what it gets. A
private key never reaches a log, an Event or a status: the parse errors
say which Secret and key is wrong, never its content.
"""

from __future__ import annotations

import base64
import datetime as dt
import functools
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"
"""Cluster API's label naming the cluster a Secret belongs to."""
SECRET_TYPE = "cluster.x-k8s.io/secret"
"""Cluster API's Secret type for a cluster's certificates and kubeconfig."""

CA_VALIDITY = dt.timedelta(days=3650)
CERT_VALIDITY = dt.timedelta(days=365)
_BACKDATE = dt.timedelta(minutes=5)

#: Purpose → (Secret name suffix, CA common name, kubeadm files of its cert and key).
AUTHORITIES: dict[str, tuple[str, str, str, str]] = {
    "ca": ("ca", "kubernetes", "ca.crt", "ca.key"),
    "proxy": ("proxy", "front-proxy-ca", "front-proxy-ca.crt", "front-proxy-ca.key"),
    "etcd": ("etcd", "etcd-ca", "etcd/ca.crt", "etcd/ca.key"),
}
SA_SUFFIX = "sa"
SA_FILES = ("sa.pub", "sa.key")
SUFFIXES: tuple[str, ...] = ("ca", "proxy", "etcd", "sa")
"""Every PKI Secret's suffix, in the order they are written."""


class PkiDamaged(ValueError):
    """A PKI Secret is missing a key or holds something unusable. The message
    names the Secret and the key, never what it holds."""


def secret_name(cluster: str, suffix: str) -> str:
    """Cluster API's name of one of a cluster's Secrets (``<cluster>-<suffix>``)."""
    return f"{cluster}-{suffix}"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=True, content_commitment=False,
                         key_encipherment=not cert_sign, data_encipherment=False,
                         key_agreement=False, key_cert_sign=cert_sign, crl_sign=cert_sign,
                         encipher_only=False, decipher_only=False)


@dataclass(frozen=True)
class KeyPair:
    """A certificate (or, for the service-account key, a public key) and its
    private key, both PEM."""

    cert_pem: bytes
    key_pem: bytes

    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert_pem)

    def private_key(self) -> ec.EllipticCurvePrivateKey:
        key = serialization.load_pem_private_key(self.key_pem, password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise TypeError("not an EC private key")
        return key


def new_ca(common_name: str) -> KeyPair:
    """A self-signed CA (ten years, path length 0), as kubeadm makes its CAs."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = _now()
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_usage(cert_sign=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                           critical=False)
            .sign(key, hashes.SHA256()))
    return KeyPair(_cert_pem(cert), _key_pem(key))


def new_service_account_keys() -> KeyPair:
    """The service-account signing key pair (``cert_pem`` is the public key)."""
    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo)
    return KeyPair(public, _key_pem(key))


def _issue(ca: KeyPair, subject: x509.Name, usages: list[x509.ObjectIdentifier],
           sans: list[x509.GeneralName]) -> KeyPair:
    ca_cert, ca_key = ca.certificate(), ca.private_key()
    key = ec.generate_private_key(ec.SECP256R1())
    now = _now()
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - _BACKDATE)
               .not_valid_after(min(now + CERT_VALIDITY, ca_cert.not_valid_after_utc))
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(_usage(cert_sign=False), critical=True)
               .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                   ca_key.public_key()), critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return KeyPair(_cert_pem(builder.sign(ca_key, hashes.SHA256())), _key_pem(key))


def issue_client(ca: KeyPair, user: str, groups: Iterable[str] = ()) -> KeyPair:
    """A client certificate kube-apiserver's x509 authenticator reads as
    ``user`` (CN) in ``groups`` (O, one attribute each)."""
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    subject = x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, user)])
    return _issue(ca, subject, [ExtendedKeyUsageOID.CLIENT_AUTH], [])


def issue_serving(ca: KeyPair, common_name: str, hosts: Iterable[str], *,
                  client: bool = False) -> KeyPair:
    """A serving certificate for ``hosts`` (IP addresses become IP SANs, the
    rest DNS SANs); with ``client``, good as a client too (an etcd member's
    server and peer certificates, as kubeadm issues them)."""
    sans: list[x509.GeneralName] = []
    for host in dict.fromkeys(h.strip().strip("[]") for h in hosts if h.strip()):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host.lower()))
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usages = [ExtendedKeyUsageOID.SERVER_AUTH]
    if client:
        usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
    return _issue(ca, subject, usages, sans)


@dataclass(frozen=True)
class ClusterPki:
    """A cluster's three CAs and its service-account key pair."""

    ca: KeyPair
    proxy: KeyPair
    etcd: KeyPair
    sa: KeyPair

    @classmethod
    def generate(cls) -> ClusterPki:
        return cls(ca=new_ca(AUTHORITIES["ca"][1]), proxy=new_ca(AUTHORITIES["proxy"][1]),
                   etcd=new_ca(AUTHORITIES["etcd"][1]), sa=new_service_account_keys())

    def pair(self, suffix: str) -> KeyPair:
        pair: KeyPair = getattr(self, suffix)
        return pair

    def secrets(self, namespace: str, cluster: str) -> list[dict[str, Any]]:
        """The four Secrets (Cluster API's names, type and label)."""
        return [pki_secret(namespace, cluster, suffix, self.pair(suffix)) for suffix in SUFFIXES]

    def kubeadm_files(self) -> dict[str, bytes]:
        """kubeadm's layout under ``/etc/kubernetes/pki``: path → PEM."""
        files: dict[str, bytes] = {}
        for purpose, (_suffix, _cn, cert_file, key_file) in AUTHORITIES.items():
            pair = self.pair(purpose)
            files[cert_file], files[key_file] = pair.cert_pem, pair.key_pem
        files[SA_FILES[0]], files[SA_FILES[1]] = self.sa.cert_pem, self.sa.key_pem
        return files

    @classmethod
    def from_secrets(cls, cluster: str, secrets: Mapping[str, Mapping[str, Any] | None]
                     ) -> ClusterPki:
        """Parse the four Secrets (by suffix; None: missing). Raises
        :class:`PkiDamaged` naming the first missing or unusable one."""
        pairs = {suffix: parse_pair(cluster, suffix, secrets.get(suffix)) for suffix in SUFFIXES}
        return cls(**pairs)


def pki_secret(namespace: str, cluster: str, suffix: str, pair: KeyPair) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
        "metadata": {"name": secret_name(cluster, suffix), "namespace": namespace,
                     "labels": {CLUSTER_NAME_LABEL: cluster}},
        "data": {"tls.crt": _b64(pair.cert_pem), "tls.key": _b64(pair.key_pem)},
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def secret_bytes(secret: Mapping[str, Any], key: str) -> bytes | None:
    """One key of a Secret's ``data`` decoded (None: absent or not base64)."""
    raw = (secret.get("data") or {}).get(key)
    if not isinstance(raw, str):
        return None
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError:
        return None


def parse_pair(cluster: str, suffix: str, secret: Mapping[str, Any] | None) -> KeyPair:
    """One PKI Secret as a checked KeyPair: a CA certificate and the key that
    belongs to it (for ``sa``, a public key and its private key)."""
    name = secret_name(cluster, suffix)
    if secret is None:
        raise PkiDamaged(f"Secret {name} is missing")
    cert_pem, key_pem = secret_bytes(secret, "tls.crt"), secret_bytes(secret, "tls.key")
    for key, value in (("tls.crt", cert_pem), ("tls.key", key_pem)):
        if not value:
            raise PkiDamaged(f"Secret {name} has no usable {key}")
    assert cert_pem is not None and key_pem is not None
    problem = _pair_problem(suffix == SA_SUFFIX, cert_pem, key_pem)
    if problem is not None:
        raise PkiDamaged(f"Secret {name}{problem}")
    return KeyPair(cert_pem, key_pem)


@functools.lru_cache(maxsize=256)
def _pair_problem(service_account: bool, cert_pem: bytes, key_pem: bytes) -> str | None:
    """What is wrong with a PKI pair (the end of a message naming its
    Secret), None when it is sound. Pure, so kept: a controller checks the
    same pair on every reconcile."""
    pair = KeyPair(cert_pem, key_pem)
    try:
        private = pair.private_key()
        if service_account:
            public = serialization.load_pem_public_key(cert_pem)
        else:
            cert = pair.certificate()
            public = cert.public_key()
            constraints = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
            if not constraints.ca:
                return ": tls.crt is not a CA certificate"
            cert.verify_directly_issued_by(cert)
    except (ValueError, TypeError, InvalidSignature, x509.ExtensionNotFound):
        return " holds no usable certificate and key"
    if public != private.public_key():
        return ": tls.key does not belong to tls.crt"
    return None


KUBELET_CLIENT_FILE = "/var/lib/kubelet/pki/kubelet-client-current.pem"
"""Where a node keeps its kubelet's client certificate and key (one PEM
file, certificate first), as the kubelet's certificate manager does."""
NODES_GROUP = "system:nodes"
"""The group of every kubelet's identity (kube's Node authorizer)."""
KUBELET_RENEW_BEFORE = dt.timedelta(days=30)


def node_user(node: str) -> str:
    """The user of node ``node``'s kubelet."""
    return f"system:node:{node}"


def issue_kubelet_client(ca: KeyPair, node: str) -> bytes:
    """A kubelet client certificate for ``node`` from the cluster CA (user
    ``system:node:<node>``, group ``system:nodes``), certificate then key."""
    pair = issue_client(ca, node_user(node), (NODES_GROUP,))
    return pair.cert_pem + pair.key_pem


def kubelet_client_fresh(pem: bytes | None, ca: KeyPair, node: str, now: dt.datetime
                         ) -> bool:
    """Is ``pem`` (certificate then key) ``node``'s kubelet identity, issued
    by ``ca``, with its key, and more than ``KUBELET_RENEW_BEFORE`` from its end?"""
    if not pem:
        return False
    end = _kubelet_client_end(pem, ca.cert_pem, node)
    return end is not None and end - KUBELET_RENEW_BEFORE > now


@functools.lru_cache(maxsize=2048)
def _kubelet_client_end(pem: bytes, ca_pem: bytes, node: str) -> dt.datetime | None:
    """The end of ``node``'s kubelet identity ``pem`` issued by the CA of
    ``ca_pem``, None when it is not that. Pure, so kept (checked on every
    reconcile of the node's Machine)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca_pem))
        serialization.load_pem_private_key(pem[pem.index(b"-----BEGIN", 1):], password=None)
    except Exception:
        return None
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if not names or names[0].value != node_user(node):
        return None
    return cert.not_valid_after_utc
