"""Every ``logctl`` command, in the order ``logctl --help`` lists them."""

from __future__ import annotations

from . import (
               compact,
               consume,
               core,
               delete_records,
               dump,
               erasure_report,
               produce,
               restore,
               retention,
               sweep,
               tier,
               topic,
               verify,
               versions,
)
from .command import Command

COMMANDS: dict[str, Command] = {command.name: command for command in (
    topic.COMMAND,
    produce.COMMAND,
    consume.COMMAND,
    dump.COMMAND,
    verify.COMMAND,
    retention.COMMAND,
    compact.COMMAND,
    tier.COMMAND,
    erasure_report.COMMAND,
    delete_records.COMMAND,
    versions.COMMAND,
    restore.COMMAND,
    sweep.COMMAND,
    core.COMMAND,
)}
