"""The Volume deletion rule: deletable unless its PV is Bound."""

from __future__ import annotations

from racksmith.planners.volumes import deletion_blocker


def pv(phase: str, claim: tuple[str, str] | None = None) -> dict[str, object]:
    spec = {"claimRef": {"namespace": claim[0], "name": claim[1]}} if claim else {}
    return {"metadata": {"name": "vol-a"}, "spec": spec, "status": {"phase": phase}}


def test_no_pv_or_unbound_pv_is_deletable() -> None:
    assert deletion_blocker("vol-a", None) is None
    for phase in ("Available", "Released", "Failed", "Pending"):
        assert deletion_blocker("vol-a", pv(phase)) is None


def test_bound_pv_blocks_with_the_claim_named() -> None:
    reason = deletion_blocker("vol-a", pv("Bound", ("apps", "data-db-0")))
    assert reason is not None
    assert "bound to claim apps/data-db-0" in reason and "vol-a" in reason
