"""The composition root: ``racksmith up`` and ``racksmith apiserver``.

Owns: building every part from :class:`Settings` and starting/stopping them
in order — the embedded API server (with Racksmith's CRDs as bootstrap
objects), a Kubernetes client for the controllers (through the kubeconfig,
exactly as on a real cluster), the controller manager, ``--apply``
manifests — plus readiness (``/readyz`` is 200 once the API and every
controller run), ``/metrics`` and clean shutdown on SIGINT/SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from racksmith.apiserver.server import ApiServer, ApiServerConfig
from racksmith.app.manifests import load_manifests
from racksmith.app.settings import Settings
from racksmith.controllers import all_controllers
from racksmith.kinds.crdgen import all_crds
from racksmith.runtime.kubeclient import api_client_from_kubeconfig
from racksmith.runtime.manager import Manager

log = logging.getLogger("racksmith")

Step = Callable[[str], None]


@dataclass
class Racksmith:
    """Everything ``racksmith up`` runs, in one process."""

    settings: Settings
    with_controllers: bool = True
    on_step: Step = lambda _msg: None
    server: ApiServer | None = None
    manager: Manager | None = None
    _client: Any = None
    _manager_task: asyncio.Task[None] | None = None
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    _server_started: bool = False

    def ready(self) -> bool:
        if self.server is None or not self._server_started:
            return False
        if not self.with_controllers:
            return True
        return self.manager is not None and self.manager.ready

    def _metrics(self) -> bytes:
        return self.manager.metrics_text() if self.manager is not None else b""

    async def start(self) -> None:
        s = self.settings
        self.on_step("starting the API server")
        self.server = ApiServer(
            ApiServerConfig(data_dir=s.data_dir, host=s.host, port=s.port,
                            insecure_http=s.insecure_http),
            ready=self.ready, metrics=self._metrics)
        await self.server.start(bootstrap=all_crds())
        self._server_started = True
        self.on_step(f"API server on {self.server.url}")
        if s.apply:
            self.on_step(f"applying {len(s.apply)} manifest path(s)")
            for obj in load_manifests(s.apply):
                await self.server.apply(obj, manager="racksmith-apply")
        if self.with_controllers:
            self.on_step("starting controllers")
            self._client = await api_client_from_kubeconfig(self.server.kubeconfig_path)
            controllers = all_controllers(self._client, workers=s.controller_workers)
            self.manager = Manager(self._client, controllers,
                                   leader_election=s.leader_election,
                                   lease_namespace="kube-system")
            self._manager_task = asyncio.create_task(self.manager.run(), name="manager")
            for _ in range(600):
                if self.manager.ready or self._manager_task.done():
                    break
                await asyncio.sleep(0.05)
            if self._manager_task.done():
                self._manager_task.result()
        self.on_step("ready")

    async def stop(self) -> None:
        if self.manager is not None:
            await self.manager.stop()
        if self._manager_task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(self._manager_task, 30)
        if self._client is not None:
            await self._client.close()
        if self.server is not None:
            await self.server.stop()

    async def run_forever(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, self._stopping.set)
        try:
            await self.start()
            await self._stopping.wait()
        finally:
            self.on_step("stopping")
            await self.stop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
