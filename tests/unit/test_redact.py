"""racksmith.redact: secrets out of log text and fields, by key, pattern and value."""

from __future__ import annotations

import base64

import pytest

from racksmith.redact import (
    REDACTED,
    SecretRegistry,
    is_sensitive_key,
    mask_values,
    redact_text,
    redact_value,
    truncate_text,
)

TOKEN = "f3Yq-Zx0_secret-token-value-9aa1"
PASSWORD = "pw-0123456789abcdef"


@pytest.fixture
def registry() -> SecretRegistry:
    reg = SecretRegistry()
    reg.add(TOKEN)
    reg.add(PASSWORD)
    return reg


@pytest.mark.parametrize("key", [
    "password", "bmc_password", "Password", "passwd", "token", "agent-token", "tokens",
    "bearer", "Authorization", "X-Auth-Token", "stringData", "client-key-data",
    "private_key", "privateKey", "api_key", "secret", "client_secret", "cookie",
    "credentials",
])
def test_secret_keys(key: str) -> None:
    assert is_sensitive_key(key)


@pytest.mark.parametrize("key", [
    "key", "event", "logger", "controller", "reconcile_id", "data", "secret_name",
    "credentialsName", "token_file", "tokenRef", "name", "namespace", "kind", "error",
])
def test_keys_that_only_name_secrets_are_kept(key: str) -> None:
    assert not is_sensitive_key(key)


def test_registered_values_anywhere_and_their_base64(registry: SecretRegistry) -> None:
    b64 = base64.b64encode(PASSWORD.encode()).decode()
    text = f"x{TOKEN}y and data {b64} and {PASSWORD}."
    out = redact_text(text, registry)
    assert TOKEN not in out and PASSWORD not in out and b64 not in out
    assert out == f"x{REDACTED}y and data {REDACTED} and {REDACTED}."


def test_short_values_are_not_registered() -> None:
    reg = SecretRegistry()
    reg.add("admin")
    reg.add("")
    reg.add(None)
    assert len(reg) == 0
    assert redact_text("racksmith-admin", reg) == "racksmith-admin"


@pytest.mark.parametrize("text, secret", [
    ("Authorization: Bearer abcdefgh12345678\r\nHost: x", "abcdefgh12345678"),
    ("b'Authorization: Bearer RAWSECRET2\\x01'", "RAWSECRET2"),
    ("{'Authorization': 'Basic dXNlcjpwYXNzd29yZA==', 'Host': 'h'}", "dXNlcjpwYXNzd29yZA"),
    ("sent bearer eyJhbGciOiJIUzI1NiJ9.payload.sig to the API", "eyJhbGciOiJIUzI1NiJ9"),
    ("redfish+http://admin:hunter2hunter2@10.0.0.1/redfish/v1", "hunter2hunter2"),
    ("ipmi://root:calvin@bmc-1:623", "calvin"),
    ('{"password": "s3cr3t-value", "user": "admin"}', "s3cr3t-value"),
    ('{\\"password\\": \\"s3cr3t-value\\"}', "s3cr3t-value"),
    ("password=s3cr3t-value&user=admin", "s3cr3t-value"),
    ("users:\n- name: a\n  user:\n    token: kubeconfig-token-xyz\n", "kubeconfig-token-xyz"),
    ("client-key-data: LS0tLS1CRUdJTiBFQyBQUklWQVRF\n", "LS0tLS1CRUdJTiBFQyBQUklWQVRF"),
    ("GET /x?token=query-token-value&watch=1", "query-token-value"),
    ("{'kind': 'Secret', 'stringData': {'bmc': 'opaque-value-1'}}", "opaque-value-1"),
    ('{"kind":"Secret","data":{"bmc":"b3BhcXVlLXZhbHVl"}}', "b3BhcXVlLXZhbHVl"),
    ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkeymaterial\n-----END EC PRIVATE KEY-----",
     "MHcCAQEEIBkeymaterial"),
    ("-----BEGIN PRIVATE KEY-----\\nMIGHAgEAtruncated", "MIGHAgEAtruncated"),
])
def test_patterns(text: str, secret: str) -> None:
    out = redact_text(text, SecretRegistry())
    assert secret not in out, out
    assert REDACTED in out


@pytest.mark.parametrize("text", [
    "created the racksmith-admin token in /data/tokens.csv",
    "ConfigMap data: {'a': 'b'}",
    "reconcile key=default/host-1",
    "http://127.0.0.1:6385/v1/nodes",
    "BareMetalHost default/h1 credentialsName=bmc-secret",
])
def test_ordinary_text_is_kept(text: str) -> None:
    assert redact_text(text, SecretRegistry()) == text


def test_fields_by_key_and_secret_objects(registry: SecretRegistry) -> None:
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "bmc"},
              "data": {"password": "cHc="}, "stringData": {"other": "plain-value"}}
    out = redact_value({"body": secret, "headers": {"Authorization": "Bearer x"},
                        "password": 1234, "note": f"token is {TOKEN}",
                        "items": [{"token": "t"}, "ok"]}, registry)
    assert out["body"]["data"] == REDACTED
    assert out["body"]["stringData"] == REDACTED
    assert out["body"]["metadata"] == {"name": "bmc"}
    assert out["headers"]["Authorization"] == REDACTED
    assert out["password"] == REDACTED
    assert out["note"] == f"token is {REDACTED}"
    assert out["items"] == [{"token": REDACTED}, "ok"]
    # A ConfigMap's data is not a secret.
    assert redact_value({"kind": "ConfigMap", "data": {"a": "b"}}, registry) == \
        {"kind": "ConfigMap", "data": {"a": "b"}}


def test_values_are_bounded() -> None:
    out = redact_value({"big": "x" * 100_000, "many": list(range(1000)),
                        "deep": [[[[[[[[[["bottom"]]]]]]]]]]}, SecretRegistry())
    assert len(out["big"]) < 4200
    assert len(out["many"]) == 101
    assert "nested too deep" in repr(out["deep"])


def test_truncate_keeps_the_tail_of_tracebacks() -> None:
    text = "\n".join(f"line {i}" for i in range(500))
    cut = truncate_text(text, 10_000, 50, keep="tail")
    lines = cut.split("\n")
    assert len(lines) == 51 and lines[-1] == "line 499" and "left out" in lines[0]
    assert truncate_text("abc" * 10, 9).startswith("abcabcabc[")


def test_a_fleet_of_known_values_is_scrubbed_in_one_pass() -> None:
    """Above a few dozen values the registry scans by prefix; same result."""
    import secrets as _secrets

    from racksmith.redact import REDACTED, SecretRegistry

    many = SecretRegistry()
    values = [_secrets.token_urlsafe(12) for _ in range(300)]
    for value in values:
        many.add(value)
    text = f"a {values[7]} b {values[299]}{values[0]} c {values[7][:-1]} d"
    out = many.scrub(text)
    assert out == f"a {REDACTED} b {REDACTED}{REDACTED} c {values[7][:-1]} d"
    assert many.scrub("nothing here") == "nothing here"


def test_mask_values_masks_a_long_secret_wherever_it_occurs() -> None:
    assert mask_values(f"x{PASSWORD}y and '{PASSWORD}'", [PASSWORD]) == "x******y and '******'"


def test_mask_values_masks_a_short_secret_only_where_it_stands_alone() -> None:
    """A BMC password ``b`` or ``root`` must not garble the words of a
    message (found with ``racksmith up``: "***oot MAC address ... ***elongs
    to another Ironic node"), yet is masked wherever a backend echoes it."""
    message = "boot MAC address 02:00:00:00:00:00 belongs to another Ironic node"
    assert mask_values(message, ["b"]) == message
    assert mask_values("rootDeviceHints: no root disk", ["root"]) == \
        "rootDeviceHints: no ****** disk"
    for echoed, masked in (("login admin:b@bmc refused", "login admin:******@bmc refused"),
                           ("password=b", "password=******"),
                           ("rejected 'b'", "rejected '******'"),
                           ("b", "******")):
        assert mask_values(echoed, ["b"]) == masked


def test_mask_values_takes_the_longest_value_first_and_skips_empty_ones() -> None:
    assert mask_values("pass=abcd1234efgh", ["abcd1234", "abcd1234efgh", ""], "***") == \
        "pass=***"
