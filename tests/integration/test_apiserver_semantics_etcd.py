"""The API-semantics tests of test_apiserver_semantics.py, on the etcd store:
the same test functions, the module's server serving from a real etcd."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from racksmith.apiserver.server import ApiServer
from racksmith.etcdcluster import LocalEtcdCluster
from tests.harness.api import serving
from tests.harness.etcd import etcd_config
from tests.integration import test_apiserver_semantics as _sqlite

pytestmark = pytest.mark.asyncio(loop_scope="module")

globals().update({name: test for name, test in vars(_sqlite).items()
                  if name.startswith("test_")})


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def module_api_server(tmp_path_factory: pytest.TempPathFactory,
                            etcd: LocalEtcdCluster) -> AsyncIterator[ApiServer]:
    config = etcd_config(etcd, f"/semantics-{uuid.uuid4().hex}")
    async with serving(tmp_path_factory.mktemp("semantics-etcd") / "data",
                       etcd=config) as server:
        yield server
