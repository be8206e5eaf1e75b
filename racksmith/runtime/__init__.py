"""Controller runtime: list+watch sources, a de-duplicating work queue, workers
running level-based reconciles, leader election over a Lease, and a manager
that wires them with metrics and graceful shutdown.

Controllers read and write through ``client.Client`` (reads from the shared
informers of ``informer``, writes to the API, one error model in
``errors``; ``Conflict`` is requeued by the controller). It talks to the API
only through the Kubernetes protocol (kubernetes_asyncio, confined to
``client``, ``informer``, ``leader`` and ``kubeclient``; Events go through
the Client too), so the same
controllers run against the embedded API server and a real cluster. It never imports
``racksmith.apiserver``, ``racksmith.app`` or ``racksmith.controllers``.

It also owns what several controllers share (they never import one
another): ``resources`` (the ``Resource`` of every collection they read or
write), ``conditions`` (``ConditionSpec``, ``EventSpec``,
``set_condition``), ``events`` (``EventRecorder``: core v1 Events, with
repeats aggregated as client-go does) and ``statetable`` (``StateTable``:
the legal transitions of a status field, refused with ``IllegalTransition``).
"""

from racksmith.clock import Clock, FakeClock, SystemClock
from racksmith.election import (
    InMemoryLeaseStore,
    LeaderElector,
    LeaseConflict,
    LeaseRecord,
    LeaseStore,
)
from racksmith.runtime.client import Client, as_client
from racksmith.runtime.controller import Controller, Reconciler
from racksmith.runtime.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Invalid,
    NotFound,
    TooManyRequests,
)
from racksmith.runtime.events import EventRecorder
from racksmith.runtime.informer import InformerSource, SharedInformer
from racksmith.runtime.keys import ObjectKey, key_of, owner_keys
from racksmith.runtime.manager import Manager
from racksmith.runtime.metrics import RuntimeMetrics
from racksmith.runtime.queue import Backoff, QueueShutDown, WorkQueue
from racksmith.runtime.result import Done, PermanentError, RequeueAfter, Result, TemporaryError
from racksmith.runtime.source import Resource, Source

__all__ = [
    "AlreadyExists",
    "ApiError",
    "Backoff",
    "Client",
    "Clock",
    "Conflict",
    "Controller",
    "Done",
    "EventRecorder",
    "FakeClock",
    "InMemoryLeaseStore",
    "InformerSource",
    "Invalid",
    "LeaderElector",
    "LeaseConflict",
    "LeaseRecord",
    "LeaseStore",
    "Manager",
    "NotFound",
    "ObjectKey",
    "PermanentError",
    "QueueShutDown",
    "Reconciler",
    "RequeueAfter",
    "Resource",
    "Result",
    "RuntimeMetrics",
    "SharedInformer",
    "Source",
    "SystemClock",
    "TemporaryError",
    "TooManyRequests",
    "WorkQueue",
    "as_client",
    "key_of",
    "owner_keys",
]
