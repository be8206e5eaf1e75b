"""Reading manifests for ``--apply``: files or directories of YAML/JSON.

Owns: turning paths into a list of objects in a stable order (directories
walked in name order, multi-document YAML split, ``List`` kinds flattened).
YAML is read as kubectl reads it (go-yaml): no YAML 1.1 base-60 numbers, so
an unquoted MAC address such as Metal3's generator writes
(``bootMACAddress: 52:54:00:12:34:56``) stays a string.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

Obj = dict[str, Any]

_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"


class _Loader(yaml.SafeLoader):
    """SafeLoader without the base-60 (``1:20``) int and float forms."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_INT, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_INT, re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"))
_Loader.add_implicit_resolver(_FLOAT, re.compile(
    r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+0123456789."))


def load_yaml_all(text: str) -> list[Any]:
    """Every document of ``text``, as kubectl reads YAML (module docstring)."""
    return list(yaml.load_all(text, Loader=_Loader))  # _Loader is a SafeLoader


class ManifestError(ValueError):
    """A manifest could not be read; the message names the file."""


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*")
                      if p.is_file() and p.suffix in (".yaml", ".yml", ".json"))
    if path.is_file():
        return [path]
    raise ManifestError(f"{path}: no such file or directory")


def load_manifests(paths: list[Path]) -> list[Obj]:
    out: list[Obj] = []
    for root in paths:
        for path in _files(root):
            try:
                docs = load_yaml_all(path.read_text())
            except yaml.YAMLError as exc:
                raise ManifestError(f"{path}: {' '.join(str(exc).split())}") from None
            for doc in docs:
                if doc is None:
                    continue
                if not isinstance(doc, dict) or "kind" not in doc:
                    raise ManifestError(f"{path}: every document must be an object with a kind")
                if doc["kind"].endswith("List") and isinstance(doc.get("items"), list):
                    out.extend(i for i in doc["items"] if isinstance(i, dict))
                else:
                    out.append(doc)
    return out
