"""``logctl dump``: decode segment, index and checkpoint files (Kafka's ``DumpLogSegments``,
``kafka-dump-log``); it reads only the files it is given, never the log dirs. ``--remote TOPIC``
dumps a partition's remote segment objects from the bucket (``LOGPLAT_REMOTE_STORAGE``) instead."""

from __future__ import annotations

import argparse
from pathlib import Path

from ...remote.access import open_store
from ...remote.partition import RemotePartition
from ..dump import dump_file, dump_remote_segments
from ..usage import UsageError
from .arguments import OFFSET, PARTITION, add_as_of_version, add_encoding, add_json, encoder
from .command import Command, LogDirs
from .output import emit


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", help=".log, .index, .timeindex, .txnindex or checkpoint files")
    parser.add_argument("--remote", metavar="TOPIC",
                        help="dump this topic's remote segments from the bucket instead of files")
    parser.add_argument("--partition", type=PARTITION, help="the partition of --remote")
    parser.add_argument("--segment", type=OFFSET, metavar="BASE",
                        help="only the remote segment at this base offset (default: every one)")
    add_as_of_version(parser)
    add_encoding(parser, "how keys and values are shown")
    add_json(parser)


def _check_usage(args: argparse.Namespace) -> None:
    """Files, or one remote partition: never both, and no remote flag without ``--remote``."""
    remote_only = [flag for flag, value in (("--partition", args.partition), ("--segment", args.segment),
                                            ("--as-of-version", args.as_of_version)) if value is not None]
    if args.remote is None:
        if remote_only:
            raise UsageError(f"{', '.join(remote_only)} go(es) with --remote TOPIC")
        if not args.files:
            raise UsageError("dump needs files, or --remote TOPIC --partition P")
    elif args.files or args.partition is None:
        raise UsageError("dump --remote TOPIC takes --partition P and no files")


def _run(args: argparse.Namespace, manager: None) -> int:
    _check_usage(args)
    encode = encoder(args.encoding)
    if args.remote is not None:
        rp = RemotePartition(open_store(), args.remote, args.partition)
        version = rp.read_version(args.as_of_version) if args.as_of_version is not None else rp.latest()
        if version is None:
            raise UsageError(f"{rp.tp} has no remote tier in {rp.store.url} (no version committed)")
        data, text = dump_remote_segments(rp, version, encode, args.segment)
        emit(args, data, text)
        return 0
    results = [dump_file(Path(f), encode) for f in args.files]
    emit(args, [r[0] for r in results], "\n".join(r[1] for r in results))
    return 0


COMMAND = Command(name="dump", help="decode .log/.index/.timeindex/.txnindex/checkpoint files, or remote segments "
                  "(kafka-dump-log)", arguments=_arguments, run=_run, log_dirs=LogDirs.NONE)
