"""Fixtures of the runtime unit tests."""

from __future__ import annotations

import pytest

from racksmith.runtime import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
