"""The agent's own token, renewed before it runs out.

Owns :class:`TokenRenewer`. The token in the agent config is a token of
the host's own ServiceAccount, bound to its machine's user-data Secret (the
Machine controller requested it when it wrote the user data;
:mod:`racksmith.hostcreds`). Every ``AgentTiming.token_check`` seconds the
renewer reads the token's claims (:mod:`racksmith.runtime.tokens`: the
bound object's name and uid are kube's ``kubernetes.io`` claim, so the
agent needs no other configuration); once less than a fifth of its life is
left, it asks the TokenRequest API for a new token of the same
ServiceAccount, bound to the same Secret, lasting as long as the first
(the host's Role lets it ask only for its own ServiceAccount), writes it
into the config file (atomically, mode 0600) and makes the API client send
it. So a host that keeps running never loses its access; a host that was
off past its token's expiry is re-provisioned, like a node whose kubelet
certificate expired. A token that is not bound to a Secret (an
administrator's, a test's) is left alone. A failed renewal is logged and
tried again at the next check; the old token stays in use meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path
from typing import Any

import structlog
import yaml

from racksmith.clock import Clock, wait_event
from racksmith.redact import register_secret
from racksmith.runtime.client import as_client
from racksmith.runtime.errors import ApiError
from racksmith.runtime.tokens import token_claims

__all__ = ["TokenRenewer"]

log = structlog.get_logger("racksmith.agent")


class TokenRenewer:
    """See the module docstring."""

    def __init__(self, api_client: Any, config_path: Path, token: str, clock: Clock,
                 check_every: float) -> None:
        self.api_client = api_client
        self.config_path = config_path
        self.token = token
        self.clock = clock
        self.check_every = check_every

    async def renew_if_due(self) -> bool:
        """Renew the token if it is due; True when a new one is in use."""
        claims = token_claims(self.token)
        if claims is None or claims.bound_kind != "secret":
            return False
        if not claims.due(self.clock.wall().timestamp()):
            return False
        try:
            token = await as_client(self.api_client).request_token(
                claims.namespace, claims.service_account, seconds=max(600, claims.seconds),
                bound={"kind": "Secret", "apiVersion": "v1",
                       "name": claims.bound_name, "uid": claims.bound_uid})
        except ApiError as exc:
            log.warning("token renewal failed; the current token stays in use",
                        error=exc.describe())
            return False
        register_secret(token)
        await asyncio.to_thread(self._write, token)
        self.api_client.configuration.api_key["BearerToken"] = token
        self.token = token
        renewed = token_claims(token)
        log.info("token renewed", secret=f"{claims.namespace}/{claims.bound_name}",
                 expires=int(renewed.expires) if renewed else None)
        return True

    def _write(self, token: str) -> None:
        """Replace the token in the config file (atomically, 0600)."""
        data = yaml.safe_load(self.config_path.read_text())
        data["token"] = token
        fd, tmp = tempfile.mkstemp(dir=self.config_path.parent, prefix=".agent-config.")
        try:
            with os.fdopen(fd, "w") as fh:
                yaml.safe_dump(data, fh, sort_keys=False)
            os.chmod(tmp, 0o600)
            os.replace(tmp, self.config_path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    async def run(self, stop: asyncio.Event) -> None:
        """Check now and every ``check_every`` seconds until ``stop``."""
        while not stop.is_set():
            try:
                await self.renew_if_due()
            except (OSError, yaml.YAMLError) as exc:
                # the type only: a YAML error quotes the config's lines, the token among them
                log.warning("token renewal failed; the current token stays in use",
                            error=type(exc).__name__, path=str(self.config_path))
            await wait_event(self.clock, stop, self.check_every)
