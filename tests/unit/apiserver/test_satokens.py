"""ServiceAccount tokens: signed, time-bound, audience-bound, tamper-evident."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from racksmith.apiserver.errors import ApiError
from racksmith.apiserver.satokens import BOUND_KINDS, MAX_SECONDS, BoundKind, BoundRef, TokenIssuer

T0 = 1_800_000_000.0


def test_a_token_verifies_until_it_expires(tmp_path: Path) -> None:
    issuer = TokenIssuer(tmp_path)
    token, expiry, seconds = issuer.issue("ns", "ci", "uid-1", {"expirationSeconds": 600},
                                         now=T0)
    assert expiry == T0 + 600 and seconds == 600
    claims = issuer.verify(token, now=T0 + 1)
    assert claims is not None
    assert (claims.username, claims.uid) == ("system:serviceaccount:ns:ci", "uid-1")
    assert "system:serviceaccounts:ns" in claims.groups
    assert issuer.verify(token, now=T0 + 600) is None
    assert issuer.verify(token, now=T0 - 5) is None
    assert (tmp_path / "sa.key").stat().st_mode & 0o777 == 0o600


def test_the_key_survives_a_restart_and_another_key_refuses(tmp_path: Path) -> None:
    token, _, _ = TokenIssuer(tmp_path / "a").issue("ns", "ci", "u", {}, now=T0)
    assert TokenIssuer(tmp_path / "a").verify(token, now=T0 + 1) is not None
    assert TokenIssuer(tmp_path / "b").verify(token, now=T0 + 1) is None


def test_tampering_and_other_audiences_are_refused(tmp_path: Path) -> None:
    issuer = TokenIssuer(tmp_path)
    token, _, _ = issuer.issue("ns", "ci", "u", {}, now=T0)
    head, body, sig = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    claims["kubernetes.io"]["serviceaccount"]["name"] = "admin"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    assert issuer.verify(f"{head}.{forged}.{sig}", now=T0 + 1) is None
    assert issuer.verify("a.b.c", now=T0) is None
    vault, _, _ = issuer.issue("ns", "ci", "u", {"audiences": ["vault"]}, now=T0)
    assert issuer.verify(vault, now=T0 + 1) is None
    assert issuer.verify(vault, now=T0 + 1, audience="vault") is not None


def test_durations_are_bounded(tmp_path: Path) -> None:
    issuer = TokenIssuer(tmp_path)
    _, expiry, _ = issuer.issue("ns", "ci", "u", {"expirationSeconds": 10**9}, now=T0)
    assert expiry == T0 + MAX_SECONDS
    _, expiry, _ = issuer.issue("ns", "ci", "u", {"expirationSeconds": None}, now=T0)
    assert expiry == T0 + 3600
    for bad in ({"expirationSeconds": 599}, {"expirationSeconds": "1h"},
                {"audiences": "vault"}, {"audiences": [""]}):
        with pytest.raises(ApiError) as err:
            issuer.issue("ns", "ci", "u", bad, now=T0)
        assert err.value.code == 422


def test_a_token_bound_to_a_kind_no_longer_bound_to_is_refused(tmp_path: Path) -> None:
    """An earlier release bound host tokens to LCMMachines: such a token is
    refused, never taken for an unbound one that would outlive its binding."""
    issuer = TokenIssuer(tmp_path)
    gone = BoundKind("LCMMachine", "lcm.racksmith.io/v1alpha1", "lcmmachines")
    token, _, _ = issuer.issue("ns", "ci", "u", {}, now=T0, bound=BoundRef(gone, "m1", "x"))
    assert issuer.verify(token, now=T0 + 1) is None
    secret = BoundRef(BOUND_KINDS["Secret"], "m1-user-data", "s-1")
    token, _, _ = issuer.issue("ns", "ci", "u", {}, now=T0, bound=secret)
    claims = issuer.verify(token, now=T0 + 1)
    assert claims is not None and claims.bound == secret
