"""Everything ``logctl`` prints, text or ``--json``, in one place.

A command queues its report (:func:`emit`) and what it passed over or could not do
(:func:`pass_over_unreadable`, :func:`exit_status`); ``main`` prints the report only once the log
dirs closed cleanly (checkpoints and the clean-shutdown marker written), so a caller never sees
success for a command that then fails, and the errors after it as one ``error:`` line on stderr.
``consume`` alone writes as it reads: its records are a stream, not a report.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...errors import LogError
    from ...logdir.manager import LogManager


def start(args: argparse.Namespace) -> None:
    """A run's empty report and error list; ``--json`` off for a command without it."""
    args.report = []
    args.errors = []  # what the command passed over or could not do (``exit_status``, ``pass_over_unreadable``)
    if not hasattr(args, "json"):
        args.json = False


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """Queue the command's report: ``data`` as one JSON line under ``--json``, else ``text``."""
    args.report.append(json.dumps(data, indent=None, sort_keys=False) if args.json else text)


def pass_over_unreadable(args: argparse.Namespace, manager: LogManager, topic: str | None) -> None:
    """A command over every topic (``topic`` None) goes on past each topic whose metadata file
    is refused (``MetadataView.unreadable``); ``main`` names each after the report, an
    error line for all, and exits 1. A topic named is refused where it is used instead."""
    if topic is None:
        args.errors.extend(f"topic {name} passed over: {why}"
                           for name, why in sorted(manager.metadata.unreadable().items()))


def not_given(missing: Mapping[tuple[str, int], LogError], reported: Iterable[Mapping[str, Any]],
              lines: list[str]) -> list[dict[str, Any]]:
    """The partitions a command left because their directories may be in a log dir not given
    (``Placement.partitions_not_given``), but for those it reported itself (a Spark job names
    the partitions it was given): a line each in ``lines``, and their JSON."""
    done = {(r["topic"], r["partition"]) for r in reported}
    left = [{"topic": t, "partition": p, "reason": str(why)} for (t, p), why in missing.items() if (t, p) not in done]
    lines.extend(f"{d['topic']}-{d['partition']}: not in these log dirs: {d['reason']}" for d in left)
    return left


def exit_status(args: argparse.Namespace, failures: Iterable[tuple[str, str]]) -> int:
    """1 when an engine's job reported partitions (``<topic>-<n>``, why) it could not clean (the
    rest were cleaned and are shown in the report), with an ``error:`` line naming them for
    ``main`` to print on stderr, as the local engine's error for one would be."""
    errors = [f"{tp}: {why}" for tp, why in failures]
    args.errors.extend(errors)
    return 1 if errors else 0


def print_report(args: argparse.Namespace) -> bool:
    """Print the queued report, then the errors as one line; whether there were errors."""
    for text in args.report:
        print(text)
    if args.errors:  # after the report, which shows the rest of the work
        print_error("; ".join(args.errors))
    return bool(args.errors)


def print_error(message: str, prefix: str = "error") -> None:
    """One line on stderr, whatever the message holds (its line breaks and runs of spaces)."""
    print(f"{prefix}: " + " ".join(message.split()), file=sys.stderr)


def completed(args: argparse.Namespace | None) -> str | None:
    """The first line of the report of a command that finished, for an error after it (closing
    the log dirs: checkpoints, the shutdown marker)."""
    done = getattr(args, "report", None)
    return done[0].splitlines()[0] if done else None
