"""The agent's configuration file (``/etc/racksmith/agent.yaml``) and timings.

Owns parsing the YAML the Machine controller writes into the user data
(contracts, "User data and the agent config"): ``server``,
``certificateAuthorityData`` (base64 PEM), ``token``, ``namespace``,
``lcmMachine``, ``nodeName``; the kubeconfig it amounts to; and
:class:`AgentTiming`, the loop's periods. Called by ``main``.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError

from racksmith.kinds.base import RacksmithModel

__all__ = ["AgentConfig", "AgentTiming", "ConfigError", "load_config"]


class ConfigError(Exception):
    """The agent config is missing or invalid; the message says which field."""


class AgentConfig(RacksmithModel):
    """Where the agent's LCMMachine lives and how to reach the API. Never log ``token``."""

    server: str = Field(description="API server URL.")
    certificate_authority_data: str | None = Field(
        default=None, description="Base64 PEM of the API server's CA; empty uses system CAs."
    )
    token: str = Field(repr=False, description="Bearer token of the agent.")
    namespace: str = Field(description="Namespace of the LCMMachine.")
    lcm_machine: str = Field(description="Name of the LCMMachine to apply.")
    node_name: str = Field(description="Name of this host's Node.")

    def kubeconfig(self) -> dict[str, Any]:
        """The equivalent kubeconfig, for kubernetes_asyncio's loader."""
        cluster: dict[str, Any] = {"server": self.server}
        if self.certificate_authority_data:
            cluster["certificate-authority-data"] = self.certificate_authority_data
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "racksmith", "cluster": cluster}],
            "users": [{"name": "racksmith-agent", "user": {"token": self.token}}],
            "contexts": [{"name": "agent",
                          "context": {"cluster": "racksmith", "user": "racksmith-agent"}}],
            "current-context": "agent",
        }


def load_config(path: Path) -> AgentConfig:
    """Parse the agent config at ``path``; raises ``ConfigError``."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping")
    try:
        config = AgentConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(f"{path}: {problems}") from None
    if config.certificate_authority_data:
        try:
            base64.b64decode(config.certificate_authority_data, validate=True)
        except binascii.Error:
            raise ConfigError(f"{path}: certificateAuthorityData is not base64") from None
    return config


@dataclass(frozen=True)
class AgentTiming:
    """Periods of the loop and the emulated kubelet, in seconds."""

    poll: float = 5.0
    """How often the LCMMachine is re-read while idle."""
    heartbeat: float = 20.0
    reverify: float = 300.0
    """When Ready and the generation is unchanged, items are re-checked this often."""
    backoff_base: float = 2.0
    backoff_cap: float = 120.0
    kubelet_status: float = 10.0
    """The emulated kubelet's tick: it renews its Lease and posts the Node's
    status if it changed."""
    kubelet_report: float = 300.0
    """An unchanged Node status is posted again this often (the kubelet's
    nodeStatusReportFrequency: the Lease is the heartbeat)."""
    static_pods: float = 2.0
    """How often the emulated kubelet looks at its static pods (a dead one is
    started again, a changed manifest restarts it)."""
    token_check: float = 3600.0
    """How often the agent looks whether its token is due for renewal."""
    lease_duration: int = 40
