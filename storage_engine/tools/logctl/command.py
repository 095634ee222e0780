"""What a ``logctl`` command is: everything ``main`` needs to know of one, declared in one place.

Kafka's tools are one class per command (``TopicCommand``, ``DumpLogSegments``,
``DeleteRecordsCommand``), each owning its options and its run; here each command is one module
holding one :class:`Command`, and ``main`` does for all of them what they share: parse, open the
log dirs as the command declares, run its precheck first, print, exit.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...logdir.manager import LogManager


class LogDirs(Enum):
    """How a command opens the log dirs."""

    NONE = "none"  # it reads only the files it is given (``dump``)
    READ_ONLY = "read-only"  # it never repairs or truncates: ``verify`` reports damage as it found it
    WRITABLE = "writable"  # the open itself recovers, and consumes the clean-shutdown marker


def writable_unless_dry_run(args: argparse.Namespace) -> LogDirs:
    """A maintenance command's ``--dry-run`` changes nothing, so it opens the log dirs read-only."""
    return LogDirs.READ_ONLY if args.dry_run else LogDirs.WRITABLE


@dataclass(frozen=True)
class Command:
    """One ``logctl`` subcommand.

    ``precheck`` is what a writable command is refused for, asked of a read-only view of the log
    dirs first: the writable open is itself a change (a recovery, the clean-shutdown marker, a
    partition's stray producer snapshots), and refused input changes nothing. The view answers
    as the log will be. ``check_usage`` runs before any log dir is looked at (with the broker's
    properties), ``before_open`` once they are known to be there (with their paths), and
    ``creates_log_dirs`` says whether a log dir that does not exist yet is made rather than
    refused. ``needs_core``: the command is refused before it starts when ``LOGPLAT_CORE`` cannot
    be honoured (``storage_engine.native``); ``core`` alone reports it instead."""

    name: str
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, Any], int]  # given the open LogManager (None: ``LogDirs.NONE``)
    log_dirs: LogDirs | Callable[[argparse.Namespace], LogDirs] = LogDirs.WRITABLE
    precheck: Callable[[argparse.Namespace, LogManager], None] | None = None
    check_usage: Callable[[argparse.Namespace, Mapping[str, str]], None] | None = None
    before_open: Callable[[argparse.Namespace, list[Path], Mapping[str, str]], None] | None = None
    creates_log_dirs: Callable[[argparse.Namespace], bool] | None = None
    needs_core: bool = True

    def opens(self, args: argparse.Namespace) -> LogDirs:
        """How this run of the command opens the log dirs."""
        return self.log_dirs(args) if callable(self.log_dirs) else self.log_dirs

    def creates(self, args: argparse.Namespace) -> bool:
        """Whether this run makes a log dir that is not there yet."""
        return self.creates_log_dirs is not None and self.creates_log_dirs(args)
