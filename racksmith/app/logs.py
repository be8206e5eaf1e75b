"""Logging setup: structured logs for every part, configured once.

Owns: routing both structlog (controllers, runtime) and stdlib logging (API
server, libraries) through one structlog formatter with fixed fields
(``timestamp``, ``level``, ``logger``, ``event`` plus whatever a reconcile
bound: ``controller``, ``key``, ``reconcile_id``). ``console`` for people,
``json`` for log shippers. Secrets are never passed to loggers anywhere.
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure_logging(level: str = "info", fmt: str = "console") -> None:
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False))
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer])
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
