"""``racksmith support-dump``: everything support needs, no secret in it.

Owns :func:`support_dump`: one tarball (0600) of

* ``objects/<group>/<resource>.yaml`` — every object the API serves (found
  through discovery), Secrets with every value (and the
  ``last-applied-configuration`` annotation, which can hold them) replaced
  by ``[REDACTED]`` and only their keys kept;
* ``logs/`` — the tail (``LOG_BYTES``) of every log file of the data dir:
  the servers', Ironic's, the virtual datacenter's and every emulated host's
  agent log;
* ``audit-tail.log`` — the last ``AUDIT_LINES`` lines of the audit trail;
* ``metrics.txt`` — the API server's ``/metrics``;
* ``versions.json``, ``settings.json`` (``ports.json`` and the data dir's
  listing: names, sizes, modes — never contents);
* ``errors.txt`` — every part it could not collect, and why.

It never fails because a part is missing (the API down, a log unreadable):
it records the reason and goes on. Before anything is written, every text
passes through the log redaction (``racksmith.redact``: secret-looking
patterns) with every secret value it knows of registered — the tokens of the
token file, each host agent's token, the values of every Secret it listed —
so none can appear in the dump, whichever part would have carried it.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import os
import platform
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from racksmith import __version__
from racksmith.redact import REDACTED, SecretRegistry, redact_text
from racksmith.runtime.client import Client
from racksmith.runtime.kubeclient import api_client

LOG_BYTES = 2 << 20
AUDIT_LINES = 2000
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

Obj = dict[str, Any]


class _Dump:
    def __init__(self) -> None:
        self.files: dict[str, str] = {}
        self.errors: list[str] = []
        self.secrets = SecretRegistry()

    def attempt(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as exc:  # a part that cannot be collected is recorded
            self.errors.append(f"{what}: {type(exc).__name__}: {str(exc)[:300]}")
            return None


def _redact_secret(obj: Obj, secrets: SecretRegistry) -> Obj:
    for key in ("data", "stringData"):
        values = obj.get(key)
        if isinstance(values, dict):
            for k, v in values.items():
                if isinstance(v, str):
                    secrets.add(v)
                    if key == "data":
                        try:
                            secrets.add(base64.b64decode(v).decode("utf-8", "replace"))
                        except ValueError:
                            pass
                values[k] = REDACTED
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if LAST_APPLIED in annotations:
        annotations[LAST_APPLIED] = REDACTED
    return obj


def _known_secrets(data_dir: Path, secrets: SecretRegistry) -> None:
    """The token file's tokens and every emulated host's agent token."""
    tokens = data_dir / "tokens.csv"
    if tokens.exists():
        for line in tokens.read_text(errors="replace").splitlines():
            if line.strip() and not line.startswith("#"):
                secrets.add(line.split(",", 1)[0].strip())
    for config in (data_dir / "emulator" / "hosts").glob("*/root/etc/racksmith/agent.yaml"):
        try:
            secrets.add(str((yaml.safe_load(config.read_text()) or {}).get("token") or ""))
        except (OSError, yaml.YAMLError):
            continue
    for path in (data_dir / "users").glob("*.kubeconfig"):
        try:
            for user in (yaml.safe_load(path.read_text()) or {}).get("users") or []:
                secrets.add(str((user.get("user") or {}).get("token") or ""))
        except (OSError, yaml.YAMLError, AttributeError):
            continue


def _tail(path: Path, limit: int) -> str:
    with path.open("rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        fh.seek(max(0, size - limit))
        data = fh.read()
    head = f"[... {size - limit} earlier bytes left out]\n" if size > limit else ""
    return head + data.decode("utf-8", "replace")


async def _objects(client: Client, dump: _Dump) -> None:
    """Every listable resource of every API group, through discovery."""
    paths: list[str] = ["/api/v1"]
    groups = await client.get_path("/apis")
    for group in groups.get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("groupVersion")
        if preferred:
            paths.append(f"/apis/{preferred}")
    for base in paths:
        try:
            listing = await client.get_path(base)
        except Exception as exc:
            dump.errors.append(f"discovery {base}: {type(exc).__name__}: {str(exc)[:200]}")
            continue
        group = base.removeprefix("/apis/").removeprefix("/api/").split("/")[0] \
            if base.startswith("/apis/") else "core"
        for res in listing.get("resources") or []:
            name = str(res.get("name") or "")
            if "/" in name or "list" not in (res.get("verbs") or []):
                continue
            try:
                page = await client.get_path(f"{base}/{name}")
            except Exception as exc:
                dump.errors.append(f"list {group}/{name}: {type(exc).__name__}: "
                                   f"{str(exc)[:200]}")
                continue
            items = [i for i in page.get("items") or [] if isinstance(i, dict)]
            if name == "secrets":
                items = [_redact_secret(i, dump.secrets) for i in items]
            dump.files[f"objects/{group}/{name}.yaml"] = yaml.safe_dump_all(items, sort_keys=False)


def _data_dir_parts(data_dir: Path, dump: _Dump) -> None:
    def listing() -> None:
        rows = []
        for path in sorted(data_dir.rglob("*")):
            rel = path.relative_to(data_dir)
            if "root" in rel.parts and "hosts" in rel.parts and len(rel.parts) > 5:
                continue  # inside an emulated host's file system: its logs are taken below
            st = path.lstat()
            rows.append(f"{oct(st.st_mode & 0o7777)} {st.st_size:>12} {rel}")
        dump.files["data-dir.txt"] = "\n".join(rows) + "\n"

    dump.attempt("data dir listing", listing)
    ports = data_dir / "ports.json"
    settings: Obj = {"dataDir": str(data_dir)}
    if ports.exists():
        settings["ports"] = dump.attempt("ports.json", lambda: json.loads(ports.read_text()))
    dump.files["settings.json"] = json.dumps(settings, indent=1)
    for log in sorted(data_dir.rglob("*.log")):
        if not log.is_file() or log.name.startswith("audit"):
            continue
        rel = log.relative_to(data_dir)
        text = dump.attempt(f"log {rel}", lambda log=log: _tail(log, LOG_BYTES))  # type: ignore[misc]
        if text is not None:
            dump.files[f"logs/{rel}"] = text
    audit = data_dir / "audit" / "audit.log"
    if audit.exists():
        text = dump.attempt("audit log", lambda: "\n".join(
            audit.read_text(errors="replace").splitlines()[-AUDIT_LINES:]) + "\n")
        if text is not None:
            dump.files["audit-tail.log"] = text


async def support_dump(data_dir: Path, output: Path, kubeconfig: Path | None = None) -> Path:
    """Write the dump of ``data_dir`` (and the API its kubeconfig reaches) to
    ``output``; returns ``output``. Never raises for a missing part."""
    dump = _Dump()
    dump.attempt("known secrets", lambda: _known_secrets(data_dir, dump.secrets))
    dump.files["versions.json"] = json.dumps({
        "racksmith": __version__, "python": platform.python_version(),
        "platform": platform.platform(),
        "taken": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}, indent=1)
    config = kubeconfig or (data_dir / "kubeconfig")
    client = None
    try:
        client = await api_client(config if config.exists() else None)
        api = Client(client, field_manager="racksmith-support-dump")
        try:
            await _objects(api, dump)
        except Exception as exc:
            dump.errors.append(f"objects: {type(exc).__name__}: {str(exc)[:300]}")
        try:
            dump.files["metrics.txt"] = await api.get_text("/metrics")
        except Exception as exc:
            dump.errors.append(f"metrics: {type(exc).__name__}: {str(exc)[:300]}")
    except Exception as exc:
        dump.errors.append(f"API: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        if client is not None:
            await client.close()
    _data_dir_parts(data_dir, dump)
    dump.files["errors.txt"] = "\n".join(dump.errors) + ("\n" if dump.errors else "")
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz") as tar:
        for name, text in sorted(dump.files.items()):
            data = redact_text(text, dump.secrets).encode()
            info = tarfile.TarInfo(f"racksmith-support/{name}")
            info.size = len(data)
            info.mode = 0o600
            info.mtime = int(dt.datetime.now(dt.UTC).timestamp())
            tar.addfile(info, io.BytesIO(data))
    return output
