"""The storage tasks: one job of one Volume, run idempotently, as a result.

Owns turning a Volume (and, in Filesystem mode, its StorageClass:
``parameters.fsType``, default ext4, and ``parameters.mkfsOptions``, a JSON
list of strings) into a :class:`~racksmith.agent.storage.context.VolumeRequest`,
dispatching ``prepare``/``unprepare`` to the backend (``sparse``, ``raw``,
``lvm``) and mapping every failure to a :class:`JobResult` with a reason —
nothing raised by a task escapes :func:`run_job`. Also :func:`recover`, the
agent-start work. Called by ``loop``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from racksmith.agent.host import HostError
from racksmith.agent.storage.context import StorageContext, VolumeRequest
from racksmith.agent.storage.lvm import prepare_lvm, unprepare_lvm
from racksmith.agent.storage.protocol import TaskFailed
from racksmith.agent.storage.raw import prepare_raw, unprepare_raw
from racksmith.agent.storage.sparse import prepare_sparse, recover_sparse, unprepare_sparse
from racksmith.kinds.storage import VolumeSpec
from racksmith.kinds.volumejobs import FailureReason, Job, JobOp, JobResult, Prepared, is_forced

__all__ = ["parse_request", "prepare", "recover", "run_job", "unprepare"]

DEFAULT_FS_TYPE = "ext4"


def parse_request(
    volume: dict[str, Any], storage_class: dict[str, Any] | None, op: JobOp = JobOp.PREPARE
) -> VolumeRequest:
    """The request for ``volume``; ``storage_class`` is needed to prepare in Filesystem mode.

    Raises ``TaskFailed`` (InvalidVolume, InvalidStorageClass).
    """
    metadata = volume.get("metadata") or {}
    try:
        spec = VolumeSpec.model_validate(volume.get("spec") or {})
    except ValidationError as exc:
        raise TaskFailed(FailureReason.INVALID_VOLUME, f"spec: {exc.errors()[0]['msg']}") \
            from None
    request = VolumeRequest(name=str(metadata.get("name") or ""),
                            uid=str(metadata.get("uid") or ""), spec=spec,
                            forced=is_forced(metadata.get("annotations")))
    if not request.formats or op == JobOp.UNPREPARE:
        return request
    if storage_class is None:
        raise TaskFailed(FailureReason.INVALID_STORAGE_CLASS,
                         f"StorageClass {spec.storage_class_name} not found")
    params = storage_class.get("parameters") or {}
    fs_type = str(params.get("fsType") or DEFAULT_FS_TYPE)
    options = _mkfs_options(params.get("mkfsOptions"), spec.storage_class_name)
    return VolumeRequest(name=request.name, uid=request.uid, spec=spec, forced=request.forced,
                         fs_type=fs_type, mkfs_options=options)


def _mkfs_options(raw: Any, class_name: str) -> tuple[str, ...]:
    if raw is None or raw == "":
        return ()
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TaskFailed(FailureReason.INVALID_STORAGE_CLASS,
                         f"StorageClass {class_name}: parameters.mkfsOptions must be a JSON "
                         f"list of strings, got {raw!r}")
    return tuple(value)


async def prepare(ctx: StorageContext, req: VolumeRequest) -> Prepared:
    """Prepare the volume's device; may be repeated (a re-run finishes, never redoes)."""
    spec = req.spec
    if spec.sparse_loop_device is not None:
        return await prepare_sparse(ctx, req)
    if spec.raw_block_device is not None:
        return await prepare_raw(ctx, req)
    return await prepare_lvm(ctx, req)


async def unprepare(ctx: StorageContext, req: VolumeRequest) -> None:
    """Release the volume's device; already released is success."""
    spec = req.spec
    if spec.sparse_loop_device is not None:
        await unprepare_sparse(ctx, req)
    elif spec.raw_block_device is not None:
        await unprepare_raw(ctx, req)
    else:
        await unprepare_lvm(ctx, req)


async def recover(ctx: StorageContext) -> list[str]:
    """At agent start: clean interrupted work and re-attach sparse volumes."""
    return await recover_sparse(ctx)


async def run_job(
    ctx: StorageContext,
    job: Job,
    volume: dict[str, Any],
    storage_class: Callable[[str], Awaitable[dict[str, Any] | None]],
) -> JobResult:
    """Run ``job`` for ``volume`` and say how it ended.

    ``storage_class`` reads a StorageClass by name (None: not found); it is
    called only when the job needs one, and its errors (the API's) are the
    only ones that propagate: the caller retries the job later.
    """
    text = str(job)
    spec = volume.get("spec") or {}
    sc: dict[str, Any] | None = None
    if job.op == JobOp.PREPARE and spec.get("mode", "Filesystem") == "Filesystem":
        sc = await storage_class(str(spec.get("storageClassName") or ""))
    try:
        req = parse_request(volume, sc, job.op)
        if job.op == JobOp.PREPARE:
            return JobResult.success(text, await prepare(ctx, req))
        await unprepare(ctx, req)
        return JobResult.success(text)
    except TaskFailed as exc:
        return JobResult.failure(text, exc.reason, exc.message)
    except (HostError, OSError) as exc:
        message = str(exc) if isinstance(exc, HostError) else \
            f"{getattr(exc, 'filename', '') or ''}: {exc.strerror or exc}".lstrip(": ")
        return JobResult.failure(text, FailureReason.HOST_ERROR, message)
