"""``logctl``'s one run: parse, choose the command, open the log dirs as it declares, run it,
print, exit. Every error (bad usage included) is one line on stderr with exit status 1, and
leaves the disk as it was."""

from __future__ import annotations

import argparse
import os
import signal
import stat
import sys
from collections.abc import Sequence
from typing import Any

from ... import native
from ...errors import CleanShutdownMarkerError, LogError
from ...logdir.environment import engine_environment
from ...logdir.log_dir import missing_log_dir
from ...logdir.manager import LogManager
from ..usage import OneLineParser
from .command import Command, LogDirs
from .engines import Engines, installed_engines
from .output import completed, print_error, print_report, start
from .registry import COMMANDS

_LOG_DIRS_HELP = "comma-separated log directories (default: $LOGPLAT_LOG_DIRS, else ./data/logs)"


class _CommandParser(OneLineParser):
    """A subcommand's parser: it takes the global options too, after the subcommand, as Kafka's
    tools take options anywhere (``logctl topic list --log-dirs d``); given there, they win."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.add_argument("--log-dirs", default=argparse.SUPPRESS, help=_LOG_DIRS_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="logctl", description="Kafka-format log dirs: topics, data, maintenance.")
    parser.add_argument("--log-dirs", default=None, help=_LOG_DIRS_HELP)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_CommandParser)
    for command in COMMANDS.values():
        command.arguments(sub.add_parser(command.name, help=command.help))
    return parser


def main(argv: Sequence[str] | None = None, engines: Engines | None = None) -> int:
    """``engines``: the ``--engine`` choices besides ``local`` (none: the engine alone)."""
    engines = engines or Engines()
    try:
        return _main(argv, engines)
    finally:
        engines.stop()


def console() -> None:
    """The ``logctl`` console script: with the engines installed packages plug in."""
    sys.exit(main(engines=installed_engines()))


def _main(argv: Sequence[str] | None, engines: Engines) -> int:
    args: argparse.Namespace | None = None
    if sys.stdout is None:  # started with stdout closed (``>&-``): no report could be written, so do nothing
        if sys.stderr is not None:
            print_error("standard output is closed: logctl writes its report there")
        return 1
    try:
        args = build_parser().parse_args(argv)
        args.engines = engines
        start(args)
        command = COMMANDS[args.command]
        if command.needs_core:
            native.compiled()  # raises the CoreUnavailableError of a LOGPLAT_CORE that cannot be honoured
        if command.opens(args) is LogDirs.NONE:
            status = command.run(args, None)
        else:
            status = _run_over_log_dirs(command, args)
        return 1 if print_report(args) else status
    except (LogError, OSError, ValueError) as exc:  # ValueError: a NUL byte in a path, undecodable text
        if _reader_went_away(exc):  # ``logctl consume | head``: no error of the command's
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor of the flush at exit
            return 128 + signal.SIGPIPE  # what a shell reports for a tool SIGPIPE stopped
        message = str(exc)
        if (filename := getattr(exc, "filename", None)) and str(filename) not in message:
            message += f": {filename}"
        if (done := completed(args)) is not None:  # the command finished; closing the log dirs failed
            message += f" (after the command had completed: {done})"
        message = "; ".join([message, *getattr(exc, "__notes__", ())])  # what failed after it: a close, an undo
        print_error(message)
        return 1


def _run_over_log_dirs(command: Command, args: argparse.Namespace) -> int:
    """Check what can be checked before the log dirs are opened, ask a writable command's
    precheck of a read-only view, then run the command over them as it declares."""
    read_only = command.opens(args) is LogDirs.READ_ONLY
    environment = engine_environment(args.log_dirs)
    log_dirs, broker_props = list(environment.log_dirs), environment.broker_props
    if command.check_usage is not None:
        command.check_usage(args, broker_props)
    creating = command.creates(args)
    for d in log_dirs:
        if (why := missing_log_dir(d)) is not None and (os.path.lexists(d) or not creating):
            raise LogError(f"log dir {d} {why}")
    if command.before_open is not None:
        command.before_open(args, log_dirs, broker_props)
    if not read_only and command.precheck is not None:
        with LogManager(log_dirs, broker_props, read_only=True) as manager:
            command.precheck(args, manager)
    status = 0
    try:
        with LogManager(log_dirs, broker_props, read_only=read_only) as manager:
            status = command.run(args, manager)
    except CleanShutdownMarkerError as exc:  # the command committed: a retry would fail
        print_error(str(exc), "warning")
    return status


def _reader_went_away(exc: BaseException) -> bool:
    """A broken pipe on the command's output: stdout is a pipe or socket, and the error names no
    file (the engine writes no pipe of its own: it refuses FIFOs in log dirs)."""
    if not isinstance(exc, BrokenPipeError) or exc.filename is not None:
        return False
    try:
        mode = os.fstat(sys.stdout.fileno()).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)
