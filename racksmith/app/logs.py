"""Logging setup: structured logs for every part, configured once.

Owns: routing both structlog (controllers, runtime) and stdlib logging (API
server, libraries) through one structlog formatter with fixed fields
(``timestamp``, ``level``, ``logger``, ``event`` plus whatever a reconcile
bound: ``controller``, ``key``, ``reconcile_id``). ``console`` for people,
``json`` for log shippers. Every process racksmith starts (``up``,
``apiserver``, ``emulator``, ``agent``) calls :func:`configure_logging`
first (``racksmith.cli.main``).

What every record goes through, in this order (see docs/security.md, "Logs"):

1. an exception (``exc_info``) becomes plain text — ``traceback`` without
   local variables (never rich's or better-exceptions' renderers, which
   print each frame's locals: the auth code's token table, a request's
   body), at most :data:`MAX_FRAMES` innermost frames per exception and
   :data:`racksmith.redact.MAX_EXCEPTION_LINES` lines in all;
2. :mod:`racksmith.redact` on every field, the message and that exception
   text (secret keys, secret patterns, registered secret values), each
   string cut to :data:`racksmith.redact.MAX_VALUE_CHARS` and
   :data:`racksmith.redact.MAX_VALUE_LINES`;
3. the renderer, then the rendered line again through the registry and the
   patterns, control characters but newline and tab escaped (``\\x00``),
   and a last bound on its size (:data:`MAX_RECORD_CHARS`,
   :data:`MAX_RECORD_LINES`).

aiohttp's server logs a malformed request ("Error handling request") with
the parser's exception, whose message quotes the raw bytes of the request
(headers, Authorization included): :class:`BadRequestFilter` turns such a
record into one INFO line naming the client and the kind of error only.
A record that fails to format is reported as one line naming its logger and
source line, never with its arguments (:class:`SafeStreamHandler`).
"""

from __future__ import annotations

import json
import logging
import logging.handlers
import re
import sys
import traceback
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import structlog
from aiohttp.http_exceptions import HttpProcessingError

from racksmith import filemodes, redact

MAX_FRAMES = 20
"""Frames shown per exception of a chain (the innermost ones)."""
MAX_RECORD_CHARS = 24_000
MAX_RECORD_LINES = 150

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""Control characters but newline and tab: escaped, so that a request path
(say) cannot write raw bytes or a carriage return into the log."""

_ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


def _exc_info(value: Any) -> _ExcInfo | None:
    if value is None or value is False:
        return None
    if isinstance(value, BaseException):
        return type(value), value, value.__traceback__
    if isinstance(value, tuple) and len(value) == 3 and value[0] is not None:
        return value  # type: ignore[return-value]
    info = sys.exc_info()
    return info if info[0] is not None else None  # type: ignore[return-value]


def format_exception(info: _ExcInfo) -> str:
    """Plain traceback text of ``info``: no locals, bounded frames and lines."""
    try:
        te = traceback.TracebackException(*info, limit=-MAX_FRAMES, capture_locals=False,
                                          max_group_width=5, max_group_depth=3)
        text = "".join(te.format(chain=True)).rstrip("\n")
    except Exception:  # an exception whose __str__ fails, say
        text = f"{info[0].__name__} (its traceback could not be formatted)"
    return redact.truncate_text(text, redact.MAX_EXCEPTION_CHARS,
                                redact.MAX_EXCEPTION_LINES, keep="tail")


def exception_to_text(_logger: Any, _name: str, event_dict: Any) -> Any:
    """Processor: ``exc_info`` → ``exception`` (plain text, see the module docstring)."""
    info = _exc_info(event_dict.pop("exc_info", None))
    if info is not None:
        event_dict["exception"] = format_exception(info)
    stack = event_dict.get("stack_info") or event_dict.get("stack")
    if isinstance(stack, str):
        event_dict.pop("stack_info", None)
        event_dict["stack"] = redact.truncate_text(stack, redact.MAX_EXCEPTION_CHARS,
                                                   redact.MAX_EXCEPTION_LINES, keep="tail")
    return event_dict


def redact_event(_logger: Any, _name: str, event_dict: Any) -> Any:
    """Processor: :func:`racksmith.redact.redact_value` on every field."""
    out: dict[str, Any] = {}
    for key, value in event_dict.items():
        if key in ("exception", "stack") and isinstance(value, str):
            out[key] = redact.redact_text(value)
        elif redact.is_sensitive_key(key):
            out[key] = redact.REDACTED
        else:
            out[key] = redact.redact_value(value)
    return out


class FinalScrub:
    """Last processor: the rendered line through the registry and patterns
    again (a renderer may have written a value differently), then bounded."""

    def __init__(self, fmt: str) -> None:
        self.json = fmt == "json"

    def __call__(self, _logger: Any, _name: str, rendered: Any) -> str:
        text = rendered.decode("utf-8", "replace") if isinstance(rendered, bytes) \
            else str(rendered)
        text = _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", redact.redact_text(text))
        if len(text) <= MAX_RECORD_CHARS and text.count("\n") < MAX_RECORD_LINES:
            return text
        if self.json:
            with_fields: dict[str, Any] = {}
            try:
                full = json.loads(text)
                with_fields = {k: full[k] for k in ("timestamp", "level", "logger")
                               if k in full}
                event = str(full.get("event", ""))
            except ValueError:
                event = text
            with_fields["event"] = redact.truncate_text(event, 2000, 20)
            with_fields["truncated"] = True
            return json.dumps(with_fields)
        return redact.truncate_text(text, MAX_RECORD_CHARS, MAX_RECORD_LINES)


class BadRequestFilter(logging.Filter):
    """aiohttp's "Error handling request" for a malformed HTTP request: one
    INFO line without the exception (its message quotes the raw request)."""

    def filter(self, record: logging.LogRecord) -> bool:
        info = record.exc_info
        if not info or not isinstance(info[1], HttpProcessingError):
            return True
        exc = info[1]
        reason = str(getattr(exc, "message", "") or "").split("\n", 1)[0]
        for stop in (":", "'", '"', "("):
            reason = reason.split(stop, 1)[0]
        reason = reason.strip()[:80] or type(exc).__name__
        remote = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
        record.msg = "rejected a malformed HTTP request from %s: %s %s (%s)"
        record.args = (remote, getattr(exc, "code", 400), reason, type(exc).__name__)
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.INFO, "INFO"
        return True


class SafeStreamHandler(logging.StreamHandler[TextIO]):
    """A stream handler whose formatting errors never print the record's
    arguments (the standard handler prints them, secrets and all)."""

    def handleError(self, record: logging.LogRecord) -> None:
        try:
            self.stream.write(f"racksmith: a log record of {record.name} "
                              f"({record.pathname}:{record.lineno}) could not be "
                              f"formatted: {sys.exc_info()[0]}\n")
            self.flush()
        except Exception:
            pass


def _excepthook(kind: type[BaseException], value: BaseException,
                tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    logging.getLogger("racksmith").critical("unhandled exception", exc_info=(kind, value, tb))


class SafeFileHandler(logging.handlers.RotatingFileHandler):
    """:class:`SafeStreamHandler`'s rule for a rotated log file (0600: the
    process runs with the private umask, racksmith.filemodes)."""

    def handleError(self, record: logging.LogRecord) -> None:
        try:
            if self.stream is not None:
                self.stream.write(f"racksmith: a log record of {record.name} "
                                  f"({record.pathname}:{record.lineno}) could not be "
                                  f"formatted: {sys.exc_info()[0]}\n")
                self.flush()
        except Exception:
            pass


LOG_FILE_BYTES = 10 * 1024 * 1024
LOG_FILE_BACKUPS = 5


def configure_logging(level: str = "info", fmt: str = "console", *,
                      file: Path | None = None, terminal: bool = True,
                      extra: list[logging.Handler] | None = None) -> None:
    """Every record through the formatter above, to stderr (``terminal``),
    to ``file`` (rotated: :data:`LOG_FILE_BYTES` x :data:`LOG_FILE_BACKUPS`)
    and to the ``extra`` handlers (the live display's problem line)."""
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False,
                                           exception_formatter=structlog.dev.plain_traceback))
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    exception_to_text, redact_event, renderer, FinalScrub(fmt)])
    handlers: list[logging.Handler] = []
    if terminal:
        handlers.append(SafeStreamHandler(sys.stderr))
    if file is not None:
        filemodes.private_dir(file.parent)
        filemodes.private_file(file, create=True)
        handlers.append(SafeFileHandler(file, maxBytes=LOG_FILE_BYTES,
                                        backupCount=LOG_FILE_BACKUPS, encoding="utf-8"))
    handlers += extra or []
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(BadRequestFilter())
    root = logging.getLogger()
    root.handlers = handlers
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    sys.excepthook = _excepthook
