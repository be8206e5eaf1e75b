"""racksmith.app.logs: what reaches the log stream (no locals, no secrets, bounded)."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Callable, Iterator

import pytest
import structlog
from aiohttp.http_exceptions import BadHttpMessage

from racksmith import redact
from racksmith.app.logs import MAX_RECORD_LINES, configure_logging

TOKEN = "admin-token-Zk3b0aQ9x7YpLw2N"

Capture = Callable[[str], io.StringIO]


@pytest.fixture
def capture(monkeypatch: pytest.MonkeyPatch) -> Iterator[Capture]:
    """configure_logging(fmt) writing to a StringIO; everything put back after."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level, structlog.get_config(), sys.excepthook
    redact.SECRETS.add(TOKEN)

    def start(fmt: str) -> io.StringIO:
        stream = io.StringIO()
        monkeypatch.setattr(sys, "stderr", stream)
        configure_logging("debug", fmt)
        return stream

    try:
        yield start
    finally:
        root.handlers, level, config, sys.excepthook = saved[0], saved[1], saved[2], saved[3]
        root.setLevel(level)
        structlog.configure(**config)


def _fail(tokens: dict[str, str], body: dict[str, object]) -> None:
    table = dict(tokens)  # a local holding secrets, as the auth code's token table
    assert table and body
    raise RuntimeError("boom")


def _deep(n: int) -> None:
    if n == 0:
        raise ValueError("deep failure")
    _deep(n - 1)


@pytest.mark.parametrize("fmt", ["console", "json"])
def test_exceptions_without_locals_and_secrets(capture: Capture, fmt: str) -> None:
    out = capture(fmt)
    body = {"kind": "Secret", "stringData": {"password": "string-data-value-1"}}
    try:
        _fail({TOKEN: "racksmith-admin"}, body)
    except RuntimeError:
        logging.getLogger("racksmith.apiserver").exception("internal error serving %s", "/x")
        structlog.get_logger("racksmith.test").exception("reconcile failed", body=body)
    text = out.getvalue()
    assert "internal error serving /x" in text and "reconcile failed" in text
    assert "RuntimeError: boom" in text or "RuntimeError: boom" in json.dumps(text)
    assert TOKEN not in text
    assert "string-data-value-1" not in text
    assert "racksmith-admin" not in text  # the value next to the token in the local table
    assert "table" not in text.replace("Traceback", "")


def test_secrets_in_messages_fields_and_stdlib_args(capture: Capture) -> None:
    out = capture("console")
    logging.getLogger("aiohttp.client").warning("headers %s", {"Authorization": f"Bearer {TOKEN}"})
    logging.getLogger("x").info("url %s", "http://admin:bmc-pass-123@10.0.0.1/redfish/v1")
    structlog.get_logger("racksmith.test").info("called", password="pw", token=TOKEN,
                                                secret={"kind": "Secret", "data": {"a": "b"}})
    text = out.getvalue()
    for secret in (TOKEN, "bmc-pass-123", "password='pw'", "'a': 'b'"):
        assert secret not in text, text
    assert text.count(redact.REDACTED) >= 4


def test_a_huge_record_is_bounded(capture: Capture) -> None:
    out = capture("console")
    try:
        _deep(300)
    except ValueError:
        logging.getLogger("x").exception("failed: %s", "\n".join(["line"] * 5000))
    lines = out.getvalue().splitlines()
    assert len(lines) <= MAX_RECORD_LINES + 2
    assert "ValueError: deep failure" in out.getvalue()


def test_json_records_stay_json(capture: Capture) -> None:
    out = capture("json")
    logging.getLogger("x").error("big %s", "y" * 100_000)
    (line,) = out.getvalue().splitlines()
    record = json.loads(line)
    assert record["level"] == "error" and len(line) < 30_000


def test_a_malformed_request_is_one_line_without_raw_bytes(capture: Capture) -> None:
    out = capture("console")
    exc = BadHttpMessage(f"Invalid header value char:\n\n  b'Authorization: Bearer {TOKEN}'\n ^")
    exc.args = (exc.message,)
    try:
        raise exc
    except BadHttpMessage:
        logging.getLogger("aiohttp.server").exception("Error handling request from %s",
                                                      "127.0.0.1")
    text = out.getvalue()
    assert text.count("\n") == 1, text
    assert "malformed HTTP request from 127.0.0.1" in text
    assert "Authorization" not in text and TOKEN not in text


def test_a_broken_record_never_prints_its_arguments(capture: Capture) -> None:
    out = capture("console")
    logging.getLogger("x").info("two args %s %s", TOKEN)  # a wrong format string
    text = out.getvalue()
    assert TOKEN not in text and "could not be formatted" in text


def test_control_characters_are_escaped(capture: Capture) -> None:
    out = capture("console")
    logging.getLogger("x").info("path %s", "/a\x00b\rc\x1b[2J")
    assert "/a\\x00b\\x0dc\\x1b[2J" in out.getvalue()
