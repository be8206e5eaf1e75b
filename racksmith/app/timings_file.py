"""``racksmith up --timings FILE``: the waits of :class:`Timings` from YAML.

Owns reading a YAML (or JSON) mapping shaped like :class:`Timings` — e.g.
``{controllers: {machine: {retry_missing: 1}}, ironic: {action_poll: 0.5}}``
— into a Timings whose unnamed fields keep their defaults. An unknown key,
a non-number or a value the settings object refuses (each validates its own
fields) is an error naming the path (``timings.controllers.machine.x``).
The product's defaults are the defaults; this is how tests (and operators
of a lab) shorten them for a process started from the command line.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, TypeVar

import yaml

from racksmith.app.settings import Timings

T = TypeVar("T")


class TimingsError(ValueError):
    """The timings file is malformed (the message names the field)."""


def load_timings(path: Path) -> Timings:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise TimingsError(f"{path}: {exc}") from None
    return timings_from(data or {}, Timings())


def timings_from(data: Any, base: T, where: str = "timings") -> T:
    """``base`` (a frozen dataclass instance) with the values of ``data``."""
    if not isinstance(data, dict):
        raise TimingsError(f"{where}: expected a mapping")
    fields = {f.name: f for f in dataclasses.fields(base)}  # type: ignore[arg-type]
    changes: dict[str, Any] = {}
    for key, value in data.items():
        if key not in fields:
            raise TimingsError(f"{where}.{key}: unknown (known: {', '.join(sorted(fields))})")
        current = getattr(base, key)
        if dataclasses.is_dataclass(current) and not isinstance(current, type):
            changes[key] = timings_from(value, current, f"{where}.{key}")
        elif isinstance(current, bool) or not isinstance(current, int | float):
            raise TimingsError(f"{where}.{key}: cannot be set from a file")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise TimingsError(f"{where}.{key}: expected a number, got {value!r}")
        else:
            changes[key] = type(current)(value)
    try:
        return dataclasses.replace(base, **changes)  # type: ignore[type-var]
    except (ValueError, TypeError) as exc:
        raise TimingsError(f"{where}: {exc}") from None
