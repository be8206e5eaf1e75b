"""The Store contract as a model: random operation sequences against a real
etcd (hypothesis), and the same runner against SQLite; the SQLite property
test with random sequences is tests/unit/store/test_sqlite_store.py's."""

from __future__ import annotations

import asyncio
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from racksmith.apiserver.store.base import (
    Key,
)
from racksmith.apiserver.store.etcd import EtcdStore
from racksmith.apiserver.store.sqlite import SqliteStore
from racksmith.etcdcluster import LocalEtcdCluster
from tests.harness.etcd import etcd_config
from tests.harness.storemodel import PODS, model_ops, run_model

# ---------------------------------------------------------------- property test

_ops = model_ops(["a", "b", "c"])


@settings(max_examples=25, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(_ops, max_size=30))
def test_property_random_ops_match_model_on_etcd(etcd: LocalEtcdCluster,
                                                  ops: list[tuple[Any, ...]]) -> None:
    config = etcd_config(etcd, f"/model-{uuid.uuid4().hex}")
    _in_new_loop(run_model(lambda: EtcdStore(config), ops))


def _in_new_loop(coro: Any) -> None:
    """Hypothesis examples are sync: each runs its own event loop (in a
    thread, so no other loop is disturbed)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(coro)
        except BaseException as exc:  # re-raised below
            failure.append(exc)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    if failure:
        raise failure[0]


def test_model_runner_on_sqlite_too() -> None:
    """The same model runner against SQLite, one fixed sequence (the SQLite
    property test with random ones is in tests/unit/store)."""
    ops: list[tuple[Any, ...]] = [
        ("create", Key(PODS, "n1", "a"), 1), ("update", Key(PODS, "n1", "a"), 2, False),
        ("update", Key(PODS, "n1", "a"), 3, True), ("restart",),
        ("list", PODS, None, 1), ("delete", Key(PODS, "n1", "a"), True),
        ("get", Key(PODS, "n1", "a"))]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.db"
        _in_new_loop(run_model(lambda: SqliteStore(path), ops))
