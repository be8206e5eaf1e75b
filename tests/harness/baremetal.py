"""The BareMetalHost controller as the tests run it.

Owns the settings that shrink its intervals (polls, back-offs, rate limit)
so a host goes through its states in a few fixture-provisioner polls, and
the in-memory fixture provisioner they drive. Used by the BareMetalHost and
Machine controller tests; nothing here asserts on time.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio.client import ApiClient

from racksmith.controllers.baremetalhost import BareMetalHostSettings, baremetalhost_controller
from racksmith.runtime import Controller
from tests.harness.fixture_provisioner import FixtureProvisioner

BMH_SETTINGS = BareMetalHostSettings(
    poll_floor=0.01, poll_default=0.02, steady_poll=1.0, error_backoff_base=0.02,
    error_backoff_cap=0.2, backend_retry_base=0.02, backend_retry_cap=0.2, jitter=0.0,
    calls_per_minute=100_000,
)
"""Fast settings of the BareMetalHost controller for tests."""


def fixture_provisioner(**kw: Any) -> FixtureProvisioner:
    """The in-memory provisioner, polled every 10 ms (``steps``... as given)."""
    return FixtureProvisioner(poll=0.01, **kw)


def bmh_controller(client: ApiClient, backend: FixtureProvisioner,
                   settings: BareMetalHostSettings = BMH_SETTINGS, *,
                   workers: int = 2) -> Controller:
    """The BareMetalHost controller over ``backend`` with the test settings."""
    return baremetalhost_controller(client, backend, settings=settings, workers=workers)
