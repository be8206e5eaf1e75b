"""Reading manifests for ``--apply``: files or directories of YAML/JSON.

Owns: turning paths into a list of objects in a stable order (directories
walked in name order, multi-document YAML split, ``List`` kinds flattened).
YAML is read as the API server reads a YAML body (``yamldecode``, as
kube-apiserver does): an unquoted MAC address such as Metal3's generator
writes (``bootMACAddress: 52:54:00:12:34:56``) stays a string.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from racksmith.apiserver.http import yamldecode
from racksmith.apiserver.http.yamldecode import YamlBodyError

Obj = dict[str, Any]


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
                docs = yamldecode.load_all(path.read_text())
            except YamlBodyError as exc:
                raise ManifestError(f"{path}: {exc}") from None
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
