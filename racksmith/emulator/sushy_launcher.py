"""Entry point of the Redfish emulator process (sushy-tools + ``sushy_ext``).

Run by ``racksmith.emulator.redfish`` as
``.ironic-venv/bin/python -m racksmith.emulator.sushy_launcher --config FILE``
with PYTHONPATH at the repository root. Imports only the standard library,
``sushy_tools``, ``sushy_ext`` and ``racksmith.redact`` (no Racksmith
dependencies exist in that virtualenv). The JSON config names the listen
address, state dir, power delay, notification URL, credentials file and the
systems with their inventories.

Its log (``redfish.log``, Flask's and werkzeug's stdlib logging) goes
through :func:`redacting_records`: every record's message and exception
text pass :func:`racksmith.redact.redact_text` (``Authorization``/Basic
credentials, passwords in URLs...), and tracebacks are plain (no locals).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import Any


def build_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The sushy-tools (Flask) config for our JSON config."""
    from racksmith.emulator import sushy_ext

    systems = [
        {
            "uuid": s["uuid"],
            "name": s["name"],
            "power_state": "Off",
            "boot_device": "Hdd",
            "boot_mode": "UEFI",
            "external_notifier": bool(cfg.get("notify_url")),
            "nics": [{"mac": n["mac"], "ip": ""} for n in s["inventory"]["nics"]],
            "racksmith_inventory": s["inventory"],
        }
        for s in cfg["systems"]
    ]
    storage, drives, volumes = sushy_ext.storage_config(systems)
    return {
        "SUSHY_EMULATOR_LISTEN_IP": cfg.get("listen_ip", "127.0.0.1"),
        "SUSHY_EMULATOR_LISTEN_PORT": int(cfg["port"]),
        "SUSHY_EMULATOR_FAKE_DRIVER": True,
        "SUSHY_EMULATOR_FAKE_SYSTEMS": systems,
        "SUSHY_EMULATOR_STATE_DIR": cfg["state_dir"],
        "SUSHY_EMULATOR_STORAGE": storage,
        "SUSHY_EMULATOR_DRIVES": drives,
        "SUSHY_EMULATOR_VOLUMES": volumes,
        "SUSHY_EMULATOR_VMEDIA_VERIFY_SSL": False,
        "EXTERNAL_NOTIFICATION_URL": cfg.get("notify_url") or "http://127.0.0.1:9/",
        "RACKSMITH_POWER_DELAY": float(cfg.get("power_delay", 0.0)),
    }


def redacting_records() -> None:
    """Make every log record of this process redacted at creation, whatever
    handler writes it (racksmith.app.logs cannot run here: no structlog)."""
    import traceback

    from racksmith.redact import redact_text, truncate_text

    make = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make(*args, **kwargs)
        try:
            record.msg, record.args = redact_text(record.getMessage()), ()
            if record.exc_info and record.exc_info[0] is not None:
                text = "".join(traceback.format_exception(*record.exc_info, limit=-20))
                record.exc_text = truncate_text(redact_text(text.rstrip("\n")), 8192, 60,
                                                keep="tail")
        except Exception:
            record.msg, record.args = f"(a record of {record.name} could not be formatted)", ()
        return record

    logging.setLogRecordFactory(factory)


def main(argv: list[str] | None = None) -> int:
    """Configure sushy-tools' Flask app with our driver and serve forever."""
    parser = argparse.ArgumentParser("racksmith-redfish-emulator")
    parser.add_argument("--config", required=True)
    args = parser.parse_args(argv)
    redacting_records()
    with open(args.config, encoding="utf-8") as f:
        cfg = json.load(f)

    import flask
    from sushy_tools.emulator import main as sushy_main

    from racksmith.emulator import sushy_ext

    app = sushy_main.app
    config = build_config(cfg)
    app.configure(extra_config=config)
    # Swap the systems backend for ours before anything touches it.
    driver = sushy_ext.InventoryFakeDriver.initialize(app.config, app.logger)()
    type(app).systems = property(lambda _self: driver)  # type: ignore[method-assign]
    by_uuid = {s["uuid"]: s for s in config["SUSHY_EMULATOR_FAKE_SYSTEMS"]}

    @app.after_request  # type: ignore[misc]
    def _enrich(response: Any) -> Any:
        if response.mimetype == "application/json" and response.status_code == 200:
            try:
                body = json.loads(response.get_data())
            except ValueError:
                return response
            if isinstance(body, dict) and sushy_ext.enrich_response(
                flask.request.path, body, by_uuid
            ):
                response.set_data(json.dumps(body))
        return response

    def _memory(identity: str, dimm: str | None = None) -> Any:
        system = by_uuid.get(identity) or next(
            (s for s in by_uuid.values() if s["name"] == identity), None
        )
        if system is None:
            return flask.jsonify({"error": {"message": "not found"}}), 404
        inv = system["racksmith_inventory"]
        if dimm is None:
            return flask.jsonify(sushy_ext.memory_collection(identity, inv))
        module = sushy_ext.memory_module(identity, inv, dimm)
        if module is None:
            return flask.jsonify({"error": {"message": "not found"}}), 404
        return flask.jsonify(module)

    app.add_url_rule("/redfish/v1/Systems/<identity>/Memory", "racksmith_memory", _memory)
    app.add_url_rule(
        "/redfish/v1/Systems/<identity>/Memory/<dimm>", "racksmith_memory_dimm", _memory
    )
    if cfg.get("credentials_file"):
        app.wsgi_app = sushy_ext.PerSystemAuth(  # type: ignore[method-assign]
            app.wsgi_app, cfg["credentials_file"]
        )
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    from werkzeug.serving import make_server

    # Serve the listening socket racksmith.emulator.redfish bound and passed
    # down (``fd``): the port stays bound from the moment it was chosen.
    server = make_server(config["SUSHY_EMULATOR_LISTEN_IP"], config["SUSHY_EMULATOR_LISTEN_PORT"],
                         app, threaded=True, fd=cfg.get("fd"))
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
