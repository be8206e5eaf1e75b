"""``racksmith agent``: the host agent's command, in a module of its own.

Owns the command's options and :func:`check_logging` (the log options every
command validates). It imports nothing of the API server, the controllers
or the rest of the CLI, so a host starts its agent without loading them:
``python -m racksmith.cli.agent [options]`` runs the same command as
``racksmith agent [options]`` (the virtual datacenter starts each emulated
host's agent so: one Python process per host, whose start-up CPU counts at
scale — about a third less this way, measured in docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
LOG_FORMATS = ("console", "json")


def check_logging(level: str, fmt: str) -> None:
    """An unknown level or format is a usage error (exit 2) naming the valid
    ones, never a silent fallback."""
    if level.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"{level!r}: must be one of {', '.join(LOG_LEVELS)}",
                                 param_hint="--log-level")
    if fmt not in LOG_FORMATS:
        raise typer.BadParameter(f"{fmt!r}: must be one of {', '.join(LOG_FORMATS)}",
                                 param_hint="--log-format")


def agent(
    config: Path = typer.Option(..., "--config", help="Agent config (used as given, not "
                                "under --root)."),
    root: Path = typer.Option(Path("/"), help="Root of the host's file system; state item "
                              "paths are relative to it."),
    emulated: bool = typer.Option(False, "--emulated", help="Emulated host: state under "
                                  "--root only, no processes, an emulated kubelet."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print each item's planned "
                                 "actions; change nothing, write no status."),
    once: bool = typer.Option(False, "--once", help="Apply once, report, exit (0 if "
                              "Ready, 1 if not)."),
    log_level: str = typer.Option("info", help="Log level."),
    log_format: str = typer.Option("console", help="console or json."),
) -> None:
    """Run the host agent: apply this machine's LCMMachine state items."""
    from racksmith.agent import run_agent
    from racksmith.app.logs import configure_logging

    check_logging(log_level, log_format)
    configure_logging(log_level.lower(), log_format)
    code = asyncio.run(run_agent(config, root=root, emulated=emulated, dry_run=dry_run,
                                 once=once))
    raise typer.Exit(code)


def main() -> None:
    typer.run(agent)


if __name__ == "__main__":
    main()
