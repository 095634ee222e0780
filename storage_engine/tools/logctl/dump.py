"""``logctl dump``: decode segment, index and checkpoint files (Kafka's ``DumpLogSegments``,
``kafka-dump-log``); it reads only the files it is given, never the log dirs."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..dump import dump_file
from .arguments import add_encoding, add_json, encoder
from .command import Command, LogDirs
from .output import emit


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", help=".log, .index, .timeindex or checkpoint files")
    add_encoding(parser, "how keys and values are shown")
    add_json(parser)


def _run(args: argparse.Namespace, manager: None) -> int:
    results = [dump_file(Path(f), encoder(args.encoding)) for f in args.files]
    emit(args, [r[0] for r in results], "\n".join(r[1] for r in results))
    return 0


COMMAND = Command(name="dump", help="decode .log/.index/.timeindex/checkpoint files (kafka-dump-log)",
                  arguments=_arguments, run=_run, log_dirs=LogDirs.NONE)
