"""``racksmith kubeconfig --merge``: the site's context in your own kubeconfig
(kind's habit: ``kind create cluster`` adds ``kind-NAME`` and makes it current).

Owns merging the clusters, users and contexts of the data dir's kubeconfig
into another kubeconfig file (``~/.kube/config`` by default, else the first
file of ``$KUBECONFIG``): entries of the same name are replaced, every other
entry and setting of the file is kept; the file is written atomically with
mode 0600 (it holds a token) and its folder made if missing. A pure
:func:`merged` does the dict work; :func:`merge_file` the file work.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml

from racksmith import filemodes

Config = dict[str, Any]


class KubeconfigError(ValueError):
    """A kubeconfig that is not one (the message names the file)."""


def default_target() -> Path:
    """Where kubectl looks first: the first file of $KUBECONFIG, else ~/.kube/config."""
    env = os.environ.get("KUBECONFIG", "")
    first = next((p for p in env.split(os.pathsep) if p), "")
    return Path(first) if first else Path.home() / ".kube" / "config"


def merged(into: Config, source: Config, *, set_current: bool = True) -> Config:
    """``into`` with every cluster, user and context of ``source`` (same names
    replaced); ``current-context`` becomes ``source``'s when ``set_current``."""
    out = copy.deepcopy(into) if into else {}
    out.setdefault("apiVersion", "v1")
    out.setdefault("kind", "Config")
    for section in ("clusters", "users", "contexts"):
        theirs = [e for e in (source.get(section) or []) if isinstance(e, dict)]
        names = {e.get("name") for e in theirs}
        mine = [e for e in (out.get(section) or []) if isinstance(e, dict)
                and e.get("name") not in names]
        out[section] = mine + copy.deepcopy(theirs)
    if set_current and source.get("current-context"):
        out["current-context"] = source["current-context"]
    return out


def _load(path: Path, *, missing_ok: bool) -> Config:
    try:
        text = path.read_text()
    except FileNotFoundError:
        if missing_ok:
            return {}
        raise KubeconfigError(f"{path} does not exist") from None
    return parse_text(text, str(path))


def load_file(path: Path) -> Config:
    """A kubeconfig file as a dict; raises :class:`KubeconfigError`."""
    return _load(path, missing_ok=False)


def parse_text(text: str, origin: str) -> Config:
    """A kubeconfig's text as a dict (``origin`` names it in errors, which
    never quote it: it holds keys)."""
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        raise KubeconfigError(f"{origin} is not YAML") from None
    if not isinstance(data, dict):
        raise KubeconfigError(f"{origin} is not a kubeconfig (not a mapping)")
    return data


def merge_file(source: Path, target: Path, *, set_current: bool = True) -> list[str]:
    """Merge ``source`` into ``target``; returns the context names merged."""
    return merge_config(_load(source, missing_ok=False), target, set_current=set_current)


def merge_config(theirs: Config, target: Path, *, set_current: bool = True) -> list[str]:
    """Merge the kubeconfig ``theirs`` into the file ``target``; returns the
    context names merged."""
    mine = _load(target, missing_ok=True)
    out = merged(mine, theirs, set_current=set_current)
    if not target.parent.exists():
        target.parent.mkdir(parents=True, mode=0o700)
    tmp = target.with_name(f".{target.name}.racksmith-tmp")
    filemodes.write_private(tmp, yaml.safe_dump(out, sort_keys=False).encode())
    os.replace(tmp, target)
    return [str(c.get("name")) for c in theirs.get("contexts") or [] if isinstance(c, dict)]
