"""``logctl topic``: create, list, describe, alter and delete topics (Kafka's ``TopicCommand``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...config.values import INT_MAX, INT_MIN
from ...logdir.log_dir import missing_log_dir
from ...logdir.manager import LogManager
from ...logdir.topic_admin import check_creation
from ...logdir.topic_store import shown_path
from ...remote.reads import tiered_log
from ...remote.version import PartitionVersion
from ..usage import UsageError, bounded_int
from .arguments import COUNT, add_json, config_pairs
from .command import Command, LogDirs
from .output import emit, pass_over_unreadable


def _arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="topic_command", required=True)
    p = sub.add_parser("create", help="create a topic over the log dirs (a log dir not there yet is made)")
    p.add_argument("name", help="the topic's name")
    p.add_argument("--partitions", type=bounded_int("a partition count", INT_MIN, INT_MAX), required=True,
                   help="how many partitions it has")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a topic config override (repeatable)")
    add_json(p)
    p = sub.add_parser("list", help="the topics' names")
    add_json(p)
    p = sub.add_parser("describe", help="a topic's configs, placement and partitions")
    p.add_argument("name", help="the topic's name")
    add_json(p)
    p = sub.add_parser("delete", help="delete a topic and all its partitions (Kafka's asynchronous delete)")
    p.add_argument("name", help="the topic's name")
    add_json(p)
    p = sub.add_parser("alter", help="change config overrides, or raise the partition count")
    p.add_argument("name", help="the topic's name")
    p.add_argument("--partitions", type=COUNT, metavar="N", help="the new partition count (it never goes down)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE", help="a config override to set (repeatable)")
    p.add_argument("--delete-config", action="append", metavar="KEY",
                   help="a config override to remove, back to the broker's default (repeatable)")
    add_json(p)


def _describe(manager: LogManager, topic: str) -> dict[str, Any]:
    config = manager.topic_config(topic)
    parts = []
    for log in manager.logs(topic):
        log.refresh()
        view = tiered_log(log)
        parts.append(
            {
                "partition": log.partition,
                "log_dir": str(log.log_dir.path),
                "log_start_offset": view.log_start_offset,
                "log_end_offset": log.log_end_offset,
                "size_bytes": log.size_bytes,
                "segments": max(len(log.segments), 1),  # a view without any: the open makes an empty one
                **({"local_log_start_offset": log.log_start_offset, "remote": _remote_tier(view.version)}
                   if config.remote_storage_enable else {}),
            }
        )
    meta = manager.metadata.topic(topic)
    return {
        "topic": topic,
        "partitions": parts,
        # the log dirs its metadata says its partitions may be in (``TopicMetadata.placed_over``)
        "placed_over": [{"id": i, "path": p} for i, p in sorted((meta.placed_over if meta else {}).items(),
                                                                key=lambda item: item[1])],
        "configs": manager.metadata.overrides(topic),
        "cleanup_policy": ",".join(config.cleanup_policy),
        "compaction_strategy": config.compaction_strategy,
        "compaction_strategy_header": config.compaction_strategy_header or None,
    }


def _remote_tier(version: PartitionVersion | None) -> dict[str, Any] | None:
    """A partition's remote tier as ``describe`` shows it (None: nothing tiered yet)."""
    if version is None:
        return None
    return {"version": version.version, "log_start_offset": version.log_start_offset,
            "end_offset": version.end_offset, "size_bytes": version.size_bytes, "segments": len(version.segments)}


def _create(args: argparse.Namespace, manager: LogManager) -> int:
    meta = manager.admin.create_topic(args.name, args.partitions, config_pairs(args.config))
    emit(args, {"topic": meta.name, "partitions": meta.partitions, "configs": meta.configs, "topic_id": meta.topic_id},
         f"Created topic {meta.name}.")
    return 0


def _list(args: argparse.Namespace, manager: LogManager) -> int:
    names = manager.topics()
    pass_over_unreadable(args, manager, None)
    emit(args, names, "\n".join(names))
    return 0


def _describe_command(args: argparse.Namespace, manager: LogManager) -> int:
    d = _describe(manager, args.name)
    strategy = d["compaction_strategy"] + (f" ({d['compaction_strategy_header']})"
                                           if d["compaction_strategy"] == "header" else "")
    lines = [f"Topic: {d['topic']}\tPartitionCount: {len(d['partitions'])}\tCleanupPolicy: {d['cleanup_policy']}\t"
             f"CompactionStrategy: {strategy}\tPlacedOver: "
             + (",".join(f"{shown_path(o['path'])} ({o['id']})" for o in d["placed_over"]) or "-") + "\tConfigs: "
             + ",".join(f"{k}={v}" for k, v in sorted(d["configs"].items()))]
    for p in d["partitions"]:
        lines.append(
            f"\tTopic: {d['topic']}\tPartition: {p['partition']}\tLogStartOffset: {p['log_start_offset']}\t"
            f"LogEndOffset: {p['log_end_offset']}\tSize: {p['size_bytes']}\tSegments: {p['segments']}\tLogDir: {p['log_dir']}"
            + _remote_columns(p)
        )
    emit(args, d, "\n".join(lines))
    return 0


def _remote_columns(p: dict[str, Any]) -> str:
    if "remote" not in p:
        return ""
    r = p["remote"]
    tier = (f"\tRemoteVersion: {r['version']}\tRemoteLogStartOffset: {r['log_start_offset']}\t"
            f"RemoteEndOffset: {r['end_offset']}\tRemoteSize: {r['size_bytes']}\tRemoteSegments: {r['segments']}"
            if r is not None else "\tRemoteVersion: none")
    return f"{tier}\tLocalLogStartOffset: {p['local_log_start_offset']}"


def _delete(args: argparse.Namespace, manager: LogManager) -> int:
    meta = manager.admin.delete_topic(args.name)
    emit(args, {"topic": meta.name, "deleted": True}, f"Deleted topic {meta.name}.")
    return 0


def _alter(args: argparse.Namespace, manager: LogManager) -> int:
    if args.partitions is not None:
        if args.config or args.delete_config:
            raise UsageError("topic alter takes --partitions or --config/--delete-config, not both")
        meta = manager.admin.add_partitions(args.name, args.partitions)
        emit(args, {"topic": meta.name, "partitions": meta.partitions},
             f"Topic {meta.name} now has {meta.partitions} partitions.")
        return 0
    if not args.config and not args.delete_config:
        raise UsageError("topic alter needs --partitions N, or at least one --config KEY=VALUE or --delete-config KEY")
    deleted = args.delete_config or []
    meta = manager.admin.alter_topic(args.name, config_pairs(args.config, deleted), deleted)
    emit(args, {"topic": meta.name, "configs": meta.configs}, f"Updated config for topic {meta.name}.")
    return 0


_RUNS: Mapping[str, Callable[[argparse.Namespace, LogManager], int]] = {
    "create": _create, "list": _list, "describe": _describe_command, "delete": _delete, "alter": _alter,
}


def _run(args: argparse.Namespace, manager: LogManager) -> int:
    return _RUNS[args.topic_command](args, manager)


def _log_dirs(args: argparse.Namespace) -> LogDirs:
    return LogDirs.READ_ONLY if args.topic_command in ("list", "describe") else LogDirs.WRITABLE


def _creating(args: argparse.Namespace) -> bool:
    """``topic create`` is the one command that makes a log dir."""
    return args.topic_command == "create"


def _check_usage(args: argparse.Namespace, broker_props: Mapping[str, str]) -> None:
    """A create's name, partition count and configs, refused before any log dir is looked at."""
    if _creating(args):
        check_creation(args.name, args.partitions, config_pairs(args.config), broker_props)


def _before_open(args: argparse.Namespace, log_dirs: list[Path], broker_props: Mapping[str, str]) -> None:
    """A create over log dirs of which some are still to be made: the name must be free in
    those there, asked of a read-only view before a new dir is made."""
    if _creating(args) and (present := [d for d in log_dirs if missing_log_dir(d) is None]) != log_dirs and present:
        with LogManager(present, broker_props, read_only=True) as manager:
            manager.admin.check_name_free(args.name)


COMMAND = Command(
    name="topic",
    help="create, list, describe, alter topics",
    arguments=_arguments,
    run=_run,
    log_dirs=_log_dirs,
    check_usage=_check_usage,
    before_open=_before_open,
    creates_log_dirs=_creating,
)
