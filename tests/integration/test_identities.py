"""Controllers' own identities against the real API server: a controller
runs with the ServiceAccount and ClusterRole made from its ``ACCESS``, so a
rule it lacks is refused — a write or live read by the server's RBAC, a read
from the shared cache by its SelfSubjectAccessReview — and its tokens are
renewed before they run out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from racksmith.apiserver.server import ApiServer
from racksmith.app.identities import Identities, identity_objects
from racksmith.runtime.access import Access, watches, writes
from racksmith.runtime.errors import Forbidden
from racksmith.runtime.resources import CONFIG_MAPS, SECRETS
from racksmith.runtime.tokens import token_claims

pytestmark = pytest.mark.asyncio(loop_scope="module")

ACCESS: dict[str, Access] = {
    "probe": watches(CONFIG_MAPS) + writes(CONFIG_MAPS, "create"),
    "other": watches(SECRETS),
}


@pytest_asyncio.fixture(loop_scope="module")
async def identities(api_server: ApiServer) -> AsyncIterator[Identities]:
    for obj in identity_objects(ACCESS):
        await api_server.apply(obj)
    ids = Identities(api_server.url, api_server.data_dir / "pki" / "ca.crt",
                     api_server.issue_token, list(ACCESS), token_seconds=3600,
                     check_every=3600)
    await ids.start()
    try:
        yield ids
    finally:
        await ids.close()


async def test_a_controller_may_do_what_its_access_names_and_nothing_else(
        identities: Identities, ns: str) -> None:
    probe = identities.client_for("probe")
    await probe.create(CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap",
                                     "metadata": {"name": "made", "namespace": ns}})
    # its source may start: it may list and watch ConfigMaps itself
    source = probe.source(CONFIG_MAPS)
    keys = source.keys()
    first = await asyncio.wait_for(anext(keys), 10)
    assert first.name == "made" or first.name
    await keys.aclose()
    # a write and a live read it has no rule for: the server refuses
    with pytest.raises(Forbidden) as refused:
        await probe.create(SECRETS, {"apiVersion": "v1", "kind": "Secret",
                                     "metadata": {"name": "s", "namespace": ns}})
    assert 'system:serviceaccount:racksmith-system:probe-controller" cannot create ' \
        'resource "secrets"' in refused.value.message
    with pytest.raises(Forbidden):
        await probe.list(SECRETS, ns, live=True)
    # a source over what another controller may watch: refused before it reads
    # the shared cache (the informers run as the process)
    with pytest.raises(Forbidden) as refused:
        await anext(probe.source(SECRETS).keys())
    assert 'cannot list and watch resource "secrets"' in refused.value.message
    # ... and a cached read of it too, while the other controller's informer serves
    other = identities.client_for("other")
    other_keys = other.source(SECRETS).keys()
    task = asyncio.create_task(anext(other_keys))
    for _ in range(100):
        if other.cached(SECRETS):
            break
        await asyncio.sleep(0.05)
    assert other.cached(SECRETS)
    await other.list(SECRETS, ns)  # allowed for "other"
    with pytest.raises(Forbidden):
        await probe.list(SECRETS, ns)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await other_keys.aclose()


async def test_tokens_are_renewed_once_a_fifth_of_their_life_is_left(
        identities: Identities, ns: str) -> None:
    probe = identities.client_for("probe")
    before = identities._controllers["probe"].token
    claims = token_claims(before)
    assert claims is not None and claims.seconds == 3600
    assert claims.service_account == "probe-controller"
    assert await identities.renew_due(now=claims.issued + 60) == []
    renewed = await identities.renew_due(now=claims.expires - 60)
    assert set(renewed) == {"controller-manager", "probe", "other"}
    assert identities._controllers["probe"].token != before
    await probe.list(CONFIG_MAPS, ns, live=True)  # the new token works
