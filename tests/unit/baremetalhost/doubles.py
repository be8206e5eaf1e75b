"""Test doubles for the BareMetalHost handler tests: a scripted provisioner,
a context builder and a list+watch stand-in for the host informer."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

from racksmith.controllers.baremetalhost.calls import CallBudget, HostCalls
from racksmith.controllers.baremetalhost.context import (
    ConfigDrive,
    Credentials,
    HostContext,
    ProfileLookup,
)
from racksmith.controllers.baremetalhost.metrics import BareMetalHostMetrics
from racksmith.controllers.baremetalhost.settings import BareMetalHostSettings
from racksmith.kinds.common import SecretReference
from racksmith.kinds.hostprofile import BareMetalHostProfileSpec
from racksmith.kinds.metal import (
    BareMetalHost,
    BareMetalHostStatus,
    CredentialsStatus,
    Image,
    ProvisioningState,
    ProvisionStatus,
)
from racksmith.provisioner.base import (
    BMCAccess,
    HostIdentity,
    InspectResult,
    ProvisionRequest,
    RegisterResult,
    Result,
)
from racksmith.runtime import FakeClock, ObjectKey
from tests.harness.fixture_provisioner import default_hardware

SETTINGS = BareMetalHostSettings(poll_floor=2.0, poll_default=10.0, steady_poll=300.0)
IMAGE = Image(url="http://images.example/os.qcow2")
PASSWORD = "hunter2-very-secret"


class ScriptedProvisioner:
    """Answers each operation with the scripted result (default: done) and
    records every call with its arguments."""

    def __init__(self, answers: dict[str, Any] | None = None) -> None:
        self.answers = answers or {}
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def _answer(self, op: str, default: Any, **kw: Any) -> Any:
        self.calls.append((op, kw))
        answer = self.answers.get(op, default)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def ops(self) -> list[str]:
        return [op for op, _ in self.calls]

    async def is_ready(self) -> bool:
        return True

    async def register(self, host: HostIdentity, bmc: BMCAccess, *,
                       credentials_changed: bool) -> RegisterResult:
        result = self._answer("register", Result.ok(), credentials_changed=credentials_changed)
        return RegisterResult(result, "node-1")

    async def inspect(self, host: HostIdentity, *, force: bool = False) -> InspectResult:
        result = self._answer("inspect", Result.ok(), force=force)
        hardware = default_hardware(host) if result.done else None
        return InspectResult(result, hardware)

    async def prepare(self, host: HostIdentity) -> Result:
        return self._answer("prepare", Result.ok())  # type: ignore[no-any-return]

    async def provision(self, host: HostIdentity, request: ProvisionRequest) -> Result:
        return self._answer("provision", Result.ok(), request=request)  # type: ignore[no-any-return]

    async def deprovision(self, host: HostIdentity, *, clean: bool) -> Result:
        return self._answer("deprovision", Result.ok(), clean=clean)  # type: ignore[no-any-return]

    async def adopt(self, host: HostIdentity, request: ProvisionRequest) -> Result:
        return self._answer("adopt", Result.ok(), request=request)  # type: ignore[no-any-return]

    async def power(self, host: HostIdentity, on: bool, *, soft: bool = False) -> Result:
        return self._answer("power", Result.ok(), on=on, soft=soft)  # type: ignore[no-any-return]

    async def power_state(self, host: HostIdentity) -> bool | None:
        return self._answer("power_state", False)  # type: ignore[no-any-return]

    async def delete(self, host: HostIdentity) -> Result:
        return self._answer("delete", Result.ok())  # type: ignore[no-any-return]

    async def detach(self, host: HostIdentity) -> Result:
        return self._answer("detach", Result.ok())  # type: ignore[no-any-return]


def make_ctx(
    state: ProvisioningState | None,
    provisioner: ScriptedProvisioner,
    *,
    spec: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    deleting: bool = False,
    registered: bool = True,
    secret_version: str = "7",
    good_version: str | None = None,
    credentials_problem: str | None = None,
    hardware: bool = True,
    profile: BareMetalHostProfileSpec | None = None,
    profile_name: str | None = None,
    status: dict[str, Any] | None = None,
    clock: FakeClock | None = None,
    settings: BareMetalHostSettings = SETTINGS,
) -> HostContext:
    """A context for ``state`` with credentials at ``secret_version``; ``registered``
    means the status already records them as good."""
    host_spec: dict[str, Any] = {
        "bmc": {"address": "redfish://bmc.example/redfish/v1/Systems/1",
                "credentialsName": "bmc-secret"},
        **(spec or {}),
    }
    meta: dict[str, Any] = {"name": "h", "namespace": "ns", "uid": "uid-1",
                            "annotations": annotations or {}, "generation": 1,
                            "finalizers": ["baremetalhost.metal3.io"]}
    if deleting:
        meta["deletionTimestamp"] = datetime(2025, 1, 1, tzinfo=UTC)
    host = BareMetalHost.model_validate({"metadata": meta, "spec": host_spec})
    st = BareMetalHostStatus.model_validate(status or {})
    st.provisioning = st.provisioning or ProvisionStatus()
    st.provisioning.state = state
    if registered:
        st.provisioning.id = "node-1"
        creds = CredentialsStatus(credentials=SecretReference(name="bmc-secret"),
                                  credentials_version=good_version or secret_version)
        st.good_credentials = st.tried_credentials = creds
    if hardware:
        st.hardware = default_hardware(HostIdentity("ns", "h", "uid-1"))
    if state in (ProvisioningState.PROVISIONING, ProvisioningState.PROVISIONED) and \
            st.provisioning.image is None:
        st.provisioning.image = IMAGE
    host.status = st
    clock = clock or FakeClock()
    key = ObjectKey("ns", "h")
    calls = HostCalls(provisioner, HostIdentity("ns", "h", "uid-1"), key,
                      CallBudget(clock, settings.calls_per_minute), BareMetalHostMetrics())
    bmc = BMCAccess("redfish://bmc.example/redfish/v1/Systems/1", "admin", PASSWORD)
    credentials = (
        Credentials("bmc-secret", secret_version, problem=credentials_problem)
        if credentials_problem else Credentials("bmc-secret", secret_version, bmc)
    )
    lookup = ProfileLookup()
    if profile_name is not None:
        lookup = ProfileLookup(profile_name, profile, missing=profile is None)
    return HostContext(host=host, calls=calls, settings=settings, credentials=credentials,
                       profile=lookup, config_drive=ConfigDrive())


class ListWatchApi:
    """A stand-in ``ApiClient`` for a shared informer: a list answers
    ``items`` (resourceVersion "1"), a watch streams what ``send`` queues
    and stays open. Only ``call_api`` as the runtime's informer calls it."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self._events: asyncio.Queue[bytes] = asyncio.Queue()

    def send(self, event_type: str, obj: dict[str, Any]) -> None:
        self._events.put_nowait(json.dumps({"type": event_type, "object": obj}).encode() + b"\n")

    async def call_api(self, path: str, method: str, *, query_params: list[tuple[str, str]],
                       **_: Any) -> _Response:
        if ("watch", "true") in query_params:
            return _Response(b"", self._events)
        body = {"items": self.items, "metadata": {"resourceVersion": "1"}}
        return _Response(json.dumps(body).encode(), None)


class _Response:
    def __init__(self, body: bytes, events: asyncio.Queue[bytes] | None) -> None:
        self.status = 200
        self._body = body
        self.content = self
        self._events = events

    async def read(self) -> bytes:
        return self._body

    async def readany(self) -> bytes:
        assert self._events is not None
        return await self._events.get()

    def release(self) -> None:
        return None

    def close(self) -> None:
        return None
