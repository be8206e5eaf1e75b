"""CA, serving certificate, static tokens and kubeconfig for ``racksmith up``."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ipaddress
import json
import os
import ssl
import stat
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from racksmith.apiserver import pki as pki_mod
from racksmith.apiserver.pki import (
    ADMIN_USER,
    Pki,
    PkiError,
    TokenFileError,
    User,
    ensure_admin_token,
    ensure_pki,
    load_tokens,
    write_kubeconfig,
)
from racksmith.controlplane import pki as certs_mod

KUBECTL = Path("/usr/lib/google-cloud-sdk/bin/kubectl.1.33")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def load_cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def sans(cert: x509.Certificate) -> tuple[set[object], set[str]]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(ext.get_values_for_type(x509.IPAddress)), set(ext.get_values_for_type(x509.DNSName))


# ------------------------------------------------------------------ certificates


def test_first_start_creates_ca_and_serving_cert(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path)
    pki_dir = tmp_path / "pki"
    assert pki.ca_path == pki_dir / "ca.crt"
    assert mode(pki_dir) == 0o700
    assert mode(pki_dir / "ca.key") == 0o600
    assert mode(pki.key_path) == 0o600
    assert pki.ca_cert_pem == pki.ca_path.read_bytes()

    ca = load_cert(pki.ca_path)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    lifetime = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert lifetime >= dt.timedelta(days=3650)

    serving = load_cert(pki.cert_path)
    serving.verify_directly_issued_by(ca)
    assert not serving.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    eku = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert sans(serving) == ({ipaddress.ip_address("127.0.0.1")}, {"localhost"})
    assert not list(pki_dir.glob(".*"))  # no temp files left behind


def test_second_start_keeps_everything(tmp_path: Path) -> None:
    first = ensure_pki(tmp_path)
    cert_before = first.cert_path.read_bytes()
    key_before = (tmp_path / "pki" / "ca.key").read_bytes()
    second = ensure_pki(tmp_path)
    assert second == first
    assert second.cert_path.read_bytes() == cert_before
    assert (tmp_path / "pki" / "ca.key").read_bytes() == key_before


def test_host_change_reissues_serving_cert_only(tmp_path: Path) -> None:
    first = ensure_pki(tmp_path)
    old_serving = first.cert_path.read_bytes()
    hosts = ["127.0.0.1", "::1", "[fe80::1]", "localhost", "Rack.Example.", "10.0.0.7", "localhost"]
    second = ensure_pki(tmp_path, hosts)
    assert second.ca_cert_pem == first.ca_cert_pem
    assert second.cert_path.read_bytes() != old_serving
    ips, names = sans(load_cert(second.cert_path))
    assert ips == {ipaddress.ip_address(a) for a in ("127.0.0.1", "::1", "fe80::1", "10.0.0.7")}
    assert names == {"localhost", "rack.example"}
    # Same set in another order: nothing to do.
    cert_now = second.cert_path.read_bytes()
    ensure_pki(tmp_path, list(reversed(hosts)))
    assert second.cert_path.read_bytes() == cert_now


def test_serving_cert_renewed_before_expiry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = ensure_pki(tmp_path)
    old_serving = first.cert_path.read_bytes()
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=340)
    monkeypatch.setattr(pki_mod, "_now", lambda: later)
    monkeypatch.setattr(certs_mod, "_now", lambda: later)  # who issues the certificates
    second = ensure_pki(tmp_path)
    assert second.ca_cert_pem == first.ca_cert_pem
    assert second.cert_path.read_bytes() != old_serving
    assert load_cert(second.cert_path).not_valid_after_utc > later + dt.timedelta(days=300)


def test_unusable_serving_cert_is_replaced(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path)
    pki.cert_path.write_bytes(b"garbage")
    ensure_pki(tmp_path)
    load_cert(pki.cert_path).verify_directly_issued_by(load_cert(pki.ca_path))


def test_missing_ca_key_is_an_error_not_a_new_ca(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path)
    (tmp_path / "pki" / "ca.key").unlink()
    with pytest.raises(PkiError, match=r"ca\.key is missing"):
        ensure_pki(tmp_path)
    assert pki.ca_path.read_bytes() == pki.ca_cert_pem


def test_a_ca_key_of_another_ca_or_garbage_is_an_error_and_nothing_is_rewritten(
        tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path)
    key_path = tmp_path / "pki" / "ca.key"
    other = ensure_pki(tmp_path / "other")
    key_path.write_bytes((tmp_path / "other" / "pki" / "ca.key").read_bytes())
    with pytest.raises(PkiError, match=r"ca\.key does not belong to .*ca\.crt"):
        ensure_pki(tmp_path)
    key_path.write_bytes(b"garbage")
    with pytest.raises(PkiError, match="cannot read the CA"):
        ensure_pki(tmp_path)
    assert pki.ca_path.read_bytes() == pki.ca_cert_pem != other.ca_cert_pem
    assert key_path.read_bytes() == b"garbage"


def test_no_hosts_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one host"):
        ensure_pki(tmp_path, ["", " "])


@pytest.fixture
async def tls_server(tmp_path: Path) -> AsyncIterator[tuple[Pki, int, str]]:
    pki = ensure_pki(tmp_path)
    token = ensure_admin_token(tmp_path)
    users = load_tokens(tmp_path / "tokens.csv")

    async def handle(request: web.Request) -> web.Response:
        auth = request.headers.get("Authorization", "")
        user = users.get(auth.removeprefix("Bearer ")) if auth.startswith("Bearer ") else None
        if user is None:
            return web.json_response({"kind": "Status", "code": 401}, status=401)
        return web.json_response({"user": user.name, "groups": list(user.groups)})

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pki.ssl_context())
    await site.start()
    try:
        yield pki, runner.addresses[0][1], token
    finally:
        await runner.cleanup()


async def test_tls_handshake_trusting_only_our_ca(tls_server: tuple[Pki, int, str]) -> None:
    pki, port, token = tls_server
    trust = ssl.create_default_context(cafile=str(pki.ca_path))
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as session:
        for host in ("127.0.0.1", "localhost"):
            url = f"https://{host}:{port}/version"
            async with session.get(url, ssl=trust, headers=headers) as r:
                assert r.status == 200
                assert await r.json() == {"user": ADMIN_USER, "groups": ["system:masters"]}
        # The system trust store does not know our CA.
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            async with session.get(f"https://127.0.0.1:{port}/", ssl=ssl.create_default_context()):
                pass


async def test_kubectl_trusts_ca_and_sends_token(
    tls_server: tuple[Pki, int, str], tmp_path: Path
) -> None:
    if not os.access(KUBECTL, os.X_OK):
        pytest.skip(f"{KUBECTL} not installed")
    pki, port, token = tls_server
    kubeconfig = tmp_path / "kube" / "config"
    write_kubeconfig(
        kubeconfig, server=f"https://127.0.0.1:{port}", token=token, ca_pem=pki.ca_cert_pem
    )
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(kubeconfig), "get", "--raw", "/whoami",
        env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 0, err.decode(errors="replace")
    assert json.loads(out) == {"user": ADMIN_USER, "groups": ["system:masters"]}


# ------------------------------------------------------------------ tokens


def test_admin_token_created_once(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    token = ensure_admin_token(data_dir)
    path = data_dir / "tokens.csv"
    assert mode(path) == 0o600
    assert len(token) >= 43
    line = path.read_text()
    assert line.startswith(f"{token},{ADMIN_USER},") and line.endswith(',"system:masters"\n')
    users = load_tokens(path)
    assert list(users) == [token]
    assert users[token].name == ADMIN_USER and users[token].groups == ("system:masters",)
    assert users[token].uid
    assert ensure_admin_token(data_dir) == token
    assert path.read_text() == line


def test_admin_token_added_to_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text('# operators\nop-token,alice,1001,"ops,dev"')
    path.chmod(0o644)
    token = ensure_admin_token(tmp_path)
    users = load_tokens(path)
    assert users["op-token"] == User("alice", "1001", ("ops", "dev"))
    assert users[token].name == ADMIN_USER
    assert mode(path) == 0o600
    assert path.read_text().startswith("# operators\n")


def test_existing_loose_permissions_are_tightened(tmp_path: Path) -> None:
    token = ensure_admin_token(tmp_path)
    path = tmp_path / "tokens.csv"
    path.chmod(0o644)
    assert ensure_admin_token(tmp_path) == token
    assert mode(path) == 0o600


def test_load_tokens_format(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text(
        "\n".join(
            [
                "# comment",
                "",
                "t1,alice,u1",
                't2,bob,u2,"g1,g2"',
                "t3,carol,u3,solo",
                '  t4, dave ,u4,""  ',
                "   # indented comment",
            ]
        )
    )
    assert load_tokens(path) == {
        "t1": User("alice", "u1"),
        "t2": User("bob", "u2", ("g1", "g2")),
        "t3": User("carol", "u3", ("solo",)),
        "t4": User("dave", "u4"),
    }


SECRET = "s3cr3t-t0ken-value"


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (f"# ok\n{SECRET},alice\n", ":2: expected token,user,uid"),
        (f"{SECRET},alice,u1\n\n{SECRET}\n", ":3: expected"),
        (f',alice,u1\n{SECRET},,u2\n', ":1: the token column is empty"),
        (f'{SECRET},,u2\n', ":1: the user column is empty"),
        (f'{SECRET},alice,u1,"g1\n', ":1: not a valid CSV record"),
        (f"{SECRET},alice,u1\nx,y,z\n{SECRET},bob,u2\n", ":3: duplicates the token of line 1"),
    ],
)
def test_load_tokens_errors_never_show_the_token(
    tmp_path: Path, content: str, needle: str
) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text(content)
    with pytest.raises(TokenFileError) as info:
        load_tokens(path)
    message = str(info.value)
    assert needle in message
    assert str(path) in message
    assert SECRET not in message and SECRET[:6] not in message


# ------------------------------------------------------------------ kubeconfig


@pytest.fixture
def kubeconfig_writer(tmp_path: Path) -> Callable[..., Path]:
    def write(**kwargs: object) -> Path:
        path = tmp_path / "home" / ".kube" / "config"
        write_kubeconfig(path, **kwargs)  # type: ignore[arg-type]
        return path

    return write


def test_kubeconfig_contents(tmp_path: Path, kubeconfig_writer: Callable[..., Path]) -> None:
    pki = ensure_pki(tmp_path)
    path = kubeconfig_writer(
        server="https://127.0.0.1:6443", token="tok-123", ca_pem=pki.ca_cert_pem
    )
    assert mode(path) == 0o600
    config = yaml.safe_load(path.read_text())
    assert config["apiVersion"] == "v1" and config["kind"] == "Config"
    assert config["current-context"] == "racksmith"
    (cluster,) = config["clusters"]
    assert cluster["name"] == "racksmith"
    assert cluster["cluster"]["server"] == "https://127.0.0.1:6443"
    assert base64.b64decode(cluster["cluster"]["certificate-authority-data"]) == pki.ca_cert_pem
    (user,) = config["users"]
    assert user["user"] == {"token": "tok-123"}
    (context,) = config["contexts"]
    assert context == {
        "name": "racksmith",
        "context": {"cluster": "racksmith", "user": user["name"]},
    }
    assert not list(path.parent.glob(".*"))


def test_kubeconfig_rewrite_is_atomic_and_private(
    kubeconfig_writer: Callable[..., Path],
) -> None:
    path = kubeconfig_writer(server="http://127.0.0.1:8080", token="a", ca_pem=None)
    path.chmod(0o644)
    inode = path.stat().st_ino
    kubeconfig_writer(server="https://h:1", token="b", ca_pem=None, context_name="lab")
    assert path.stat().st_ino != inode  # replaced by rename, never truncated in place
    assert mode(path) == 0o600
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "lab"
    assert "certificate-authority-data" not in config["clusters"][0]["cluster"]


def test_kubectl_config_view(tmp_path: Path, kubeconfig_writer: Callable[..., Path]) -> None:
    if not os.access(KUBECTL, os.X_OK):
        pytest.skip(f"{KUBECTL} not installed")
    import subprocess

    pki = ensure_pki(tmp_path)
    path = kubeconfig_writer(server="https://127.0.0.1:6443", token=SECRET, ca_pem=pki.ca_cert_pem)
    result = subprocess.run(
        [str(KUBECTL), "--kubeconfig", str(path), "config", "view", "--minify", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"HOME": str(tmp_path), "PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    view = json.loads(result.stdout)
    assert view["current-context"] == "racksmith"
    assert view["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
    assert SECRET not in result.stdout  # kubectl redacts the token
