"""Backup and restore of a data dir with 10,000 objects, against a plain copy.

Builds a data dir whose API store holds N objects (ConfigMaps of ~1 KiB, as
a site's hosts, addresses and machines are of that order), then measures in
the same run:

* a plain file copy of the same parts (``shutil.copyfile`` of the closed
  store, the PKI and the tokens) — the reference: what a backup cannot beat;
* ``racksmith backup create`` (plain and encrypted), ``backup verify`` and
  ``racksmith restore`` into a new data dir (the library calls the CLI
  makes);

and prints wall time, size and the ratio to the plain copy.

    .venv/bin/python bench/backup.py [--objects N] [--json PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from racksmith.apiserver.store.base import Key  # noqa: E402
from racksmith.apiserver.store.sqlite import SqliteStore  # noqa: E402
from racksmith.backup.archive import (  # noqa: E402
    create_backup,
    restore_backup,
    verify_backup,
)

KEY = b"bench-key-0123456789abcdef-0123456789"


async def fill(data: Path, objects: int) -> None:
    store = SqliteStore(data / "store.db")
    await store.open()
    payload = "x" * 900
    batch = 500
    for start in range(0, objects, batch):
        await asyncio.gather(*(
            store.create(Key("core/configmaps", "default", f"cm-{i:05d}"),
                         {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": f"cm-{i:05d}", "namespace": "default"},
                          "data": {"payload": payload}})
            for i in range(start, min(start + batch, objects))))
    await store.close()


def files(data: Path) -> None:
    (data / "pki").mkdir(mode=0o700)
    for name in ("ca.crt", "ca.key", "apiserver.crt", "apiserver.key", "sa.key"):
        (data / "pki" / name).write_bytes(os.urandom(1200))
    (data / "tokens.csv").write_text("token,racksmith-admin,uid,\"system:masters\"\n")


def timed(fn: Any) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def plain_copy(data: Path, dst: Path) -> int:
    dst.mkdir(mode=0o700)
    shutil.copyfile(data / "store.db", dst / "store.db")
    shutil.copytree(data / "pki", dst / "pki")
    shutil.copyfile(data / "tokens.csv", dst / "tokens.csv")
    return sum(p.stat().st_size for p in dst.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--objects", type=int, default=10_000)
    p.add_argument("--json", type=Path)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="racksmith-bench-backup-") as tmp:
        base = Path(tmp)
        data = base / "data"
        print(f"  filling a store with {a.objects} objects ...", flush=True)
        data.mkdir(mode=0o700)
        asyncio.run(fill(data, a.objects))
        files(data)
        copy_s, copy_size = timed(lambda: plain_copy(data, base / "copy"))
        create_s, info = timed(lambda: create_backup(data, base / "b.tar"))
        enc_s, enc = timed(lambda: create_backup(data, base / "b.tar.enc", key=KEY))
        verify_s, verified = timed(lambda: verify_backup(base / "b.tar.enc", key=KEY))
        verified.close()
        restore_s, _ = timed(lambda: restore_backup(base / "b.tar.enc", base / "restored",
                                                   key=KEY))
        load = os.getloadavg()
    rows = [
        ("plain copy of the same parts (reference)", copy_s, copy_size),
        ("backup create", create_s, info.size),
        ("backup create --key-file (encrypted)", enc_s, enc.size),
        ("backup verify (encrypted)", verify_s, None),
        ("restore (encrypted) into a new data dir", restore_s, None),
    ]
    print(f"\n{a.objects} objects; {os.cpu_count()} cores; load average {load[0]:.2f}")
    print(f"{'':44} {'wall':>9} {'ratio':>7} {'size':>12} {'ratio':>7}")
    for label, seconds, size in rows:
        print(f"  {label:42} {seconds:8.3f}s {seconds / copy_s:6.1f}x "
              f"{(f'{size:,}' if size else ''):>12} "
              f"{(f'{size / copy_size:6.2f}x' if size else ''):>7}")
    if a.json:
        a.json.write_text(json.dumps({
            "objects": a.objects, "load": load[0],
            "rows": [{"what": label, "seconds": s, "bytes": n} for label, s, n in rows]},
            indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
