"""What the audit trail says of Racksmith's own components (tests of least privilege)."""

from __future__ import annotations

import json
from pathlib import Path

COMPONENTS = "system:serviceaccount:racksmith-system:"
"""The controllers' and the process's identities (racksmith.app.identities)."""
HOST_PREFIX = "racksmith-host-"
"""A host agent's ServiceAccount (racksmith.hostcreds), with or without the
host restriction's group."""


def component_refusals(data_dir: Path) -> list[str]:
    """The audited 403s of the controllers' and host agents' identities."""
    out: list[str] = []
    for log in sorted((data_dir / "audit").glob("audit.log*")):
        for line in log.read_text().splitlines():
            ev = json.loads(line)
            user = ev.get("user") or {}
            name = str(user.get("username", ""))
            component = name.startswith(COMPONENTS) or \
                "racksmith:agents" in (user.get("groups") or []) or \
                name.split(":")[-1].startswith(HOST_PREFIX)
            if component and (ev.get("responseStatus") or {}).get("code") == 403:
                ref = ev.get("objectRef") or {}
                out.append(f"{user.get('username')} {ev.get('verb')} {ref.get('resource')}"
                           f"/{ref.get('subresource', '')} {ref.get('namespace', '')}/"
                           f"{ref.get('name', '')}")
    return out
