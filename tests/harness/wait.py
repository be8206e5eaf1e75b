"""Waiting for a condition in tests: the one ``eventually``.

Owns the polling loop every integration test uses to wait for a controller,
an agent or the server to reach a state: ``cond`` is called (it may be a plain
function or a coroutine function) until it returns something truthy, which is
returned; after ``limit`` seconds the wait fails with ``timed out waiting
for: <what>``. ``limit`` is an upper bound that only turns a hang into a
failure: no test expects anything to take a given time, so no test passes or
fails on wall-clock time as long as the bound is generous.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

WAIT = 30.0
"""The upper bound of every wait; never an expectation."""

INTERVAL = 0.02
"""Seconds between two checks."""


async def eventually(cond: Callable[[], T | Awaitable[T]], what: str, *,
                     limit: float = WAIT, interval: float = INTERVAL) -> T:
    """Poll ``cond`` until it returns a truthy value and return that value.

    Raises ``AssertionError("timed out waiting for: <what>")`` after ``limit``
    seconds.
    """
    try:
        async with asyncio.timeout(limit):
            while True:
                value: Any = cond()
                if inspect.isawaitable(value):
                    value = await value
                if value:
                    return value  # type: ignore[no-any-return]
                await asyncio.sleep(interval)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for: {what}") from None
