"""The agent's storage tasks: preparing and releasing the node's Volumes.

Runs inside ``racksmith agent`` next to the LCM loop (docs/design/
volume-contracts.md, "The agent's storage tasks"). Parts, one owner each:
``protocol`` (job ids, the result annotation, failure reasons), ``devices``
(mkfs, blkid, wipefs, sizes), ``loops`` (loop devices, real or emulated),
``context`` (the host, the request, the on-host layout and task records),
``sparse``, ``raw`` and ``lvm`` (one backend each), ``tasks`` (dispatch and
error mapping) and ``loop`` (the watch and the results). API calls go
through ``racksmith.agent.kube``.
"""

from racksmith.agent.storage.context import StorageContext
from racksmith.agent.storage.loop import StorageLoop

__all__ = ["StorageContext", "StorageLoop"]
