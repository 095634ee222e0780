"""``logctl``: Kafka's command-line tools for the engine's log dirs.

Modelled on kafka-topics, kafka-console-producer/-consumer, kafka-dump-log and
kafka-delete-records. Every command validates its whole input before it changes anything;
errors (bad usage included) go to stderr as one line, with exit status 1, and leave the disk as
it was.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Protocol, Sequence, TextIO

from ..cleaner import CompactionReport
from ..config.environment import engine_environment
from ..config.values import INT_MAX, INT_MIN, LONG_MAX, MAX_TIMESTAMP_MS
from ..errors import (CleanShutdownMarkerError, LogError, NeedsRecoveryError, RecordTooLargeError,
                     UnknownTopicOrPartitionError)
from ..logdir.locations import misnamed_partition_dirs
from ..logdir.log_dir import missing_log_dir
from ..logdir.manager import LogManager
from ..logdir.topic_admin import check_creation
from ..logdir.topic_store import shown_path
from ..files.naming import MAX_PARTITION, check_not_metadata_log
from ..outcomes import CHANGED, FAILED
from .dump import dump_file
from ..cleaner.erasure import UNBOUNDED, partition_erasure_report, require_compaction_bound
from ..record import CompressionType
from ..log.segment import now_ms
from .usage import OneLineParser, UsageError, bounded_int
from ..log.append_validation import ProducerRecord, build_batch
from .verify import verify_partition

PRODUCE_BATCH_RECORDS = 1000

_CLOCK = bounded_int("a time in ms since the epoch", 0, MAX_TIMESTAMP_MS)
_PARTITION = bounded_int("a partition number", 0, MAX_PARTITION)
_OFFSET = bounded_int("an offset", 0, LONG_MAX)
_COUNT = bounded_int("a count", 1, INT_MAX)


# ---------------------------------------------------------------------- encoding of keys/values


def _decoder(encoding: str) -> Callable[[str | None, str], bytes | None]:
    def decode(text: str | None, what: str) -> bytes | None:
        if text is None:
            return None
        if not isinstance(text, str):
            raise UsageError(f"{what} must be a string or null, got {type(text).__name__}")
        if encoding == "base64":
            try:
                return base64.b64decode(text, validate=True)
            except ValueError as exc:
                raise UsageError(f"{what} is not valid base64: {exc}") from exc
        return _utf8(text, what)

    return decode


def _utf8(text: str, what: str) -> bytes:
    """UTF-8 bytes of ``text``; JSON can carry lone surrogates (``"\\ud800"``) that UTF-8 cannot."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{what} is not valid Unicode: {exc.reason} at character {exc.start}") from None


def _encoder(encoding: str) -> Callable[[bytes | None], str | None]:
    def encode(data: bytes | None) -> str | None:
        if data is None:
            return None
        if encoding == "base64":
            return base64.b64encode(data).decode("ascii")
        return data.decode("utf-8", errors="replace")

    return encode


def _parse_config_pairs(pairs: Sequence[str] | None, deleted: Sequence[str] = ()) -> dict[str, str]:
    """``--config KEY=VALUE`` pairs; a key given twice, or also given to ``--delete-config``, is
    a usage error rather than a silent "last one wins". The value is passed on as typed: the
    config's own parsing trims it as ``ConfigDef`` does, or refuses what trimming would change
    (a header name)."""
    out: dict[str, str] = {}
    for pair in pairs or ():
        if "=" not in pair:
            raise UsageError(f"--config expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        key = key.strip()
        if key in out:
            raise UsageError(f"--config {key} is given twice ({out[key]!r} and {value!r}): give it once")
        if key in deleted:
            raise UsageError(f"{key} is given to both --config and --delete-config: give it to one")
        out[key] = value
    return out


def _print(args: argparse.Namespace, data: Any, text: str) -> None:
    """Queue the command's report; ``main`` prints it only once the log dirs closed cleanly
    (checkpoints and the clean-shutdown marker written), so a caller never sees success for a
    command that then fails."""
    args.report.append(json.dumps(data, indent=None, sort_keys=False) if args.json else text)


def _pass_over_unreadable(args: argparse.Namespace, manager: LogManager, topic: str | None) -> None:
    """A command over every topic (``topic`` None) goes on past each topic whose metadata file
    is refused (``MetadataView.unreadable``); ``main`` names each after the report, an
    error line for all, and exits 1. A topic named is refused where it is used instead."""
    if topic is None:
        args.errors.extend(f"topic {name} passed over: {why}"
                           for name, why in sorted(manager.metadata.unreadable().items()))


# ---------------------------------------------------------------------- topic


def _describe(manager: LogManager, topic: str) -> dict[str, Any]:
    config = manager.topic_config(topic)
    parts = []
    for log in manager.logs(topic):
        log.refresh()
        parts.append(
            {
                "partition": log.partition,
                "log_dir": str(log.log_dir.path),
                "log_start_offset": log.log_start_offset,
                "log_end_offset": log.log_end_offset,
                "size_bytes": log.size_bytes,
                "segments": max(len(log.segments), 1),  # a view without any: the open makes an empty one
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


def cmd_topic(args: argparse.Namespace, manager: LogManager) -> int:
    if args.topic_command == "create":
        meta = manager.admin.create_topic(args.name, args.partitions, _parse_config_pairs(args.config))
        _print(args, {"topic": meta.name, "partitions": meta.partitions, "configs": meta.configs, "topic_id": meta.topic_id},
               f"Created topic {meta.name}.")
    elif args.topic_command == "list":
        names = manager.topics()
        _pass_over_unreadable(args, manager, None)
        _print(args, names, "\n".join(names))
    elif args.topic_command == "describe":
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
            )
        _print(args, d, "\n".join(lines))
    elif args.topic_command == "delete":
        meta = manager.admin.delete_topic(args.name)
        _print(args, {"topic": meta.name, "deleted": True}, f"Deleted topic {meta.name}.")
    elif args.topic_command == "alter":
        if args.partitions is not None:
            if args.config or args.delete_config:
                raise UsageError("topic alter takes --partitions or --config/--delete-config, not both")
            meta = manager.admin.add_partitions(args.name, args.partitions)
            _print(args, {"topic": meta.name, "partitions": meta.partitions},
                   f"Topic {meta.name} now has {meta.partitions} partitions.")
            return 0
        if not args.config and not args.delete_config:
            raise UsageError("topic alter needs --partitions N, or at least one --config KEY=VALUE or --delete-config KEY")
        deleted = args.delete_config or []
        meta = manager.admin.alter_topic(args.name, _parse_config_pairs(args.config, deleted), deleted)
        _print(args, {"topic": meta.name, "configs": meta.configs}, f"Updated config for topic {meta.name}.")
    return 0


# ---------------------------------------------------------------------- produce / consume


class _DuplicateFieldError(ValueError):
    """A JSON object on stdin names one field twice."""


def _refuse_duplicate_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose field names are all different: ``{"key": "a", "key": "c"}`` would
    otherwise keep the last one silently."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        twice = next(name for name, _ in pairs if name in seen or seen.add(name))
        raise _DuplicateFieldError(f"field {twice!r} appears more than once")
    return obj


def _read_produce_input(stream: TextIO, encoding: str) -> list[ProducerRecord]:
    decode = _decoder(encoding)
    records = []
    for lineno, line in enumerate(stream, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=_refuse_duplicate_fields)
        except json.JSONDecodeError as exc:
            raise UsageError(f"stdin line {lineno}: not JSON: {exc}") from exc
        except RecursionError:  # Python's decoder recurses once per nested array or object
            raise UsageError(f"stdin line {lineno}: its JSON is nested too deeply") from None
        except _DuplicateFieldError as exc:
            raise UsageError(f"stdin line {lineno}: {exc}") from None
        except ValueError:  # Python's decoder refuses a number of more than 4300 digits
            raise UsageError(f"stdin line {lineno}: a number of more than 4300 digits, which no field can hold") from None
        if not isinstance(obj, dict):
            raise UsageError(f"stdin line {lineno}: expected a JSON object with key/value, got {type(obj).__name__}")
        unknown = set(obj) - {"key", "value", "timestamp", "headers"}
        if unknown:
            raise UsageError(f"stdin line {lineno}: unknown field(s) {sorted(unknown)}")
        ts = obj.get("timestamp")
        if ts is not None and (not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts <= MAX_TIMESTAMP_MS):
            raise UsageError(f"stdin line {lineno}: timestamp must be an integer (ms) in 0..{MAX_TIMESTAMP_MS}, got {ts!r}")
        raw_headers = obj.get("headers")
        if raw_headers is not None and not isinstance(raw_headers, list):
            raise UsageError(f"stdin line {lineno}: headers must be a list of [key, value], got {raw_headers!r}")
        headers = []
        for h in raw_headers or []:
            if not (isinstance(h, list) and len(h) == 2 and isinstance(h[0], str)):
                raise UsageError(f"stdin line {lineno}: each header must be [key, value], got {h!r}")
            _utf8(h[0], f"stdin line {lineno}: header key")
            headers.append((h[0], decode(h[1], f"stdin line {lineno}: header {h[0]!r} value")))
        records.append(
            ProducerRecord(
                decode(obj.get("key"), f"stdin line {lineno}: key"),
                decode(obj.get("value"), f"stdin line {lineno}: value"),
                ts,
                tuple(headers),
            )
        )
    return records


def _produce_input(args: argparse.Namespace) -> list[ProducerRecord]:
    """The records on stdin, read and checked before the log dirs are opened (an open is a
    change: the clean-shutdown marker is consumed, and written again at the close)."""
    if sys.stdin is None:  # started with stdin closed (``<&-``)
        raise UsageError("standard input is closed: produce reads its records from it")
    records = _read_produce_input(sys.stdin, args.encoding)
    if not records:
        raise UsageError("no records on stdin")
    if args.batch_size < 1:
        raise UsageError(f"--batch-size must be at least 1, got {args.batch_size}")
    return records


def cmd_produce(args: argparse.Namespace, manager: LogManager) -> int:
    records = args.records
    codec = CompressionType.from_name(args.compression)
    size = args.batch_size
    chunks = [records[i : i + size] for i in range(0, len(records), size)]
    now = args.now_ms if args.now_ms is not None else now_ms()
    check_produce(args, manager)
    # every batch is validated against the topic's config before the log is opened: a writable
    # open repairs what it finds (stray producer snapshots, say), and refused input changes nothing
    config, tp = manager.topic_config(args.topic), f"{args.topic}-{args.partition}"
    for chunk in chunks:
        try:
            build_batch(chunk, base_offset=0, config=config, compression=codec, now_ms=now, tp=tp)
        except RecordTooLargeError as exc:
            if len(chunk) == 1:
                raise
            raise RecordTooLargeError(f"{exc} A smaller --batch-size (now {size}) puts fewer records in each batch.") from None
    log = manager.get_log(args.topic, args.partition)
    infos = log.append_all(chunks, compression=codec, now=now)  # all of them or none
    first, last = infos[0].first_offset, infos[-1].last_offset
    _print(args, {"topic": args.topic, "partition": args.partition, "first_offset": first, "last_offset": last,
                  "records": len(records)},
           f"Produced {len(records)} records to {log.tp} at offsets {first}..{last}")
    return 0


def cmd_consume(args: argparse.Namespace, manager: LogManager) -> int:
    log = manager.get_log(args.topic, args.partition)
    encode = _encoder(args.encoding)
    log.refresh()
    if args.from_timestamp is not None:
        found = log.offset_for_timestamp(args.from_timestamp)
        if found is None:
            return 0
        offset = found[1]
    else:
        offset = log.log_start_offset if args.from_offset is None else args.from_offset
    remaining = args.max_records
    out = sys.stdout
    while remaining is None or remaining > 0:
        if offset >= log.log_end_offset:
            if offset > log.log_end_offset:
                log.read_batches(offset)  # raises the out-of-range error
            break
        # a read stops before a corrupt batch with the records before it; the next one, starting
        # there, raises, and the error is the command's (exit status 1) after those were printed
        records = log.read(offset, max_records=remaining if remaining is not None else 10_000)
        if not records:
            break
        for r in records:
            out.write(json.dumps({"offset": r.offset, "timestamp": r.timestamp, "key": encode(r.key),
                                  "value": encode(r.value), "headers": [[k, encode(v)] for k, v in r.headers]}) + "\n")
        offset = records[-1].offset + 1
        if remaining is not None:
            remaining -= len(records)
        log.refresh()
    out.flush()
    return 0


# ---------------------------------------------------------------------- dump


def cmd_dump(args: argparse.Namespace, manager: LogManager | None) -> int:
    results = [dump_file(Path(f), _encoder(args.encoding)) for f in args.files]
    if args.json:
        print(json.dumps([r[0] for r in results]))
    else:
        print("\n".join(r[1] for r in results))
    return 0


# ---------------------------------------------------------------------- verify / delete-records


def cmd_verify(args: argparse.Namespace, manager: LogManager) -> int:
    with manager.metadata.read_lock():  # a create, alter or delete in flight is not damage
        _pass_over_unreadable(args, manager, args.topic)
        listed = {t: _listed_partitions(manager, t, named=args.topic is not None)
                  for t in ([args.topic] if args.topic is not None else manager.topics())}
        misnamed = misnamed_partition_dirs(manager.log_dirs) if args.topic is None else []
        orphans = manager.metadata.orphans() if args.topic is None else {}
        strays = [(path, count) for path, count in manager.stray_partition_dirs(args.topic)
                  if count or path.name.rpartition("-")[0] not in orphans]  # an orphan's are named with it
    reports = [r for t, partitions in listed.items() for p in partitions  # a named topic is reported whatever
               if (r := verify_partition(manager, t, p)).log_end_offset is not None or args.topic is not None
               or p in _listed_partitions(manager, t, named=False)]  # not when deleted since the listing
    ok = all(r.ok for r in reports) and not misnamed and not strays and not orphans and not args.errors
    data = [
        {"topic": r.topic, "partition": r.partition, "ok": r.ok, "batches": r.batches, "records": r.records,
         "log_start_offset": r.log_start_offset, "log_end_offset": r.log_end_offset, "segments": len(r.segments),
         "problems": r.problems}
        for r in reports
    ]
    lines = []
    for r in reports:
        status = "OK" if r.ok else f"{len(r.problems)} problem(s)"
        if r.log_end_offset is None:
            lines.append(f"{r.topic}-{r.partition}: {status}: not readable as it is")
        else:
            lines.append(f"{r.topic}-{r.partition}: {status}: {len(r.segments)} segments, {r.batches} batches, "
                         f"{r.records} records, offsets {r.log_start_offset}..{r.log_end_offset}")
        lines.extend(f"  {p}" for p in r.problems)
    lines.extend(f"{path}: holds segment files, but its name is no partition directory's (<topic>-<partition>, "
                 f"the partition without leading zeros and at most {MAX_PARTITION}): no command reads it; rename it"
                 for path in misnamed)
    lines.extend(f"{path}: named like a partition beyond its topic's {count} partition(s) (the topic's metadata): "
                 "a stray, which no command reads (a KRaft broker deletes such a log); remove it or move it out, "
                 "or adopt it with topic alter --partitions"
                 for path, count in strays)
    lines.extend(str(manager.metadata.orphan_error(topic, home)) for topic, home in sorted(orphans.items()))
    _print(args, {"ok": ok, "partitions": data, "misnamed_dirs": [str(p) for p in misnamed],
                  "stray_dirs": [str(p) for p, _ in strays], "orphans": sorted(orphans)},
           "\n".join(lines) or "no partitions")
    return 0 if ok else 1


def _listed_partitions(manager: LogManager, topic: str, *, named: bool) -> list[int]:
    """A topic's partitions for ``verify``; none for one of every topic deleted meanwhile."""
    try:
        return manager.partitions(topic)
    except UnknownTopicOrPartitionError:
        if named:
            raise
        return []


class Engine(Protocol):
    """Somewhere else to run compaction and retention (``--engine NAME``): the Spark jobs plug in
    here from ``spark_jobs.cli``, so this package never imports Spark."""

    def compact(self, manager: LogManager, partitions: list[tuple[str, int]] | None, *, force: bool,
                now_ms: int) -> list[CompactionReport]: ...

    def retention(self, manager: LogManager, topic: str | None, *, now_ms: int, dry_run: bool) -> list[dict]: ...


def compaction_choice(manager: LogManager, topic: str | None,
                      partition: int | None) -> tuple[list[tuple[str, int]] | None, bool]:
    """What ``logctl compact`` cleans, whatever the engine, and whether it is forced: a named
    partition whatever its dirty ratio (Kafka has no such command; a user naming one wants it
    cleaned), else the due partitions of the topic (none when it is not compacted), else those
    of every compacted topic (None)."""
    if partition is not None:
        return [(topic, partition)], True
    if topic is None:
        return None, False
    return ([(topic, p) for p in manager.partitions(topic)] if manager.topic_config(topic).compact else []), False


def _engine(args: argparse.Namespace) -> Engine | None:
    """The ``--engine`` asked for; None for the local engine."""
    if args.engine == "local":
        return None
    engine = args.engines.get(args.engine)
    if engine is None:
        raise UsageError(f"--engine {args.engine} is not available in this entry point (run the `logctl` command)")
    return engine


def cmd_retention(args: argparse.Namespace, manager: LogManager) -> int:
    if args.topic is not None:
        manager.partitions(args.topic)  # an unknown topic is an error, as for verify
    now = args.now_ms if args.now_ms is not None else now_ms()
    engine = _engine(args)
    not_given = manager.placement.partitions_not_given(args.topic)  # before the work, which cannot change it
    _pass_over_unreadable(args, manager, args.topic)
    if engine is not None:
        data = engine.retention(manager, args.topic, now_ms=now, dry_run=args.dry_run)
    elif args.dry_run:
        plans = manager.retention.plans(args.topic, now_ms=now)
        data = [p.to_dict() | {"applied": False} for p in plans]
    else:
        plans = manager.retention.plans(args.topic, now_ms=now)
        applied = {(r.plan.topic, r.plan.partition): r for r in manager.retention.apply(plans, now_ms=now)}
        data = [applied[(p.topic, p.partition)].to_dict() if (p.topic, p.partition) in applied
                else p.to_dict() | {"applied": False} for p in plans]
    lines = []
    for d in data:
        segs = d["segments_to_delete"]
        verb = "deleted" if d["applied"] else "would delete"
        if d.get("status") == FAILED and "bytes_to_free" not in d:  # it failed before it had a plan
            lines.append(f"{d['topic']}-{d['partition']}: failed: {d['reason']}")
            continue
        if segs:
            reasons = ", ".join(f"{s['base_offset']} ({s['reason']}, {s['size_bytes']} B)" for s in segs)
            lso = d["log_start_offset_after"] if d["applied"] else d["new_log_start_offset"]  # planned, or done
            if lso is None:  # every segment goes: the active one is rolled first, at the log end offset
                lso = "the log end offset (the active segment is rolled first)"
            lines.append(f"{d['topic']}-{d['partition']}: {verb} {len(segs)} segment(s), {d['bytes_to_free']} bytes: "
                         f"{reasons}; log start offset -> {lso}")
        else:
            lines.append(f"{d['topic']}-{d['partition']}: nothing to delete")
        if d.get("status") in (CHANGED, FAILED):
            lines.append(f"  not applied ({d['status']}): {d['reason']}")
        lines.extend(f"  warning: {w}" for w in d["warnings"])
    left = _not_given(not_given, data, lines)
    _print(args, {"now_ms": now, "engine": args.engine, "dry_run": args.dry_run, "partitions": data,
                  "not_given": left}, "\n".join(lines) or "no partitions")
    return _exit_status(args, ((f"{d['topic']}-{d['partition']}", d["reason"]) for d in data if d.get("status") == FAILED))


def _not_given(not_given: Mapping[tuple[str, int], LogError], reported: Iterable[Mapping[str, Any]],
               lines: list[str]) -> list[dict[str, Any]]:
    """The partitions a command left because their directories may be in a log dir not given
    (``Placement.partitions_not_given``), but for those it reported itself (a Spark job names
    the partitions it was given): a line each in ``lines``, and their JSON."""
    done = {(r["topic"], r["partition"]) for r in reported}
    left = [{"topic": t, "partition": p, "reason": str(why)} for (t, p), why in not_given.items() if (t, p) not in done]
    lines.extend(f"{d['topic']}-{d['partition']}: not in these log dirs: {d['reason']}" for d in left)
    return left


def _exit_status(args: argparse.Namespace, failures: Iterable[tuple[str, str]]) -> int:
    """1 when an engine's job reported partitions (``<topic>-<n>``, why) it could not clean (the
    rest were cleaned and are shown in the report), with an ``error:`` line naming them for
    ``main`` to print on stderr, as the local engine's error for one would be."""
    errors = [f"{tp}: {why}" for tp, why in failures]
    args.errors.extend(errors)
    return 1 if errors else 0


def check_compact(args: argparse.Namespace, manager: LogManager) -> None:
    """What ``compact`` is refused for before it changes anything (see ``PRECHECKS``)."""
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    if args.topic is not None:
        manager.partitions(args.topic)  # an unknown topic is an error, as for verify
    if args.max_passes is not None and args.max_passes < 1:
        raise UsageError(f"--max-passes must be at least 1, got {args.max_passes}")
    if args.partition is not None:  # a named partition must be there and compacted, dry run or not
        manager.compacted_partitions([(args.topic, args.partition)])


def cmd_compact(args: argparse.Namespace, manager: LogManager) -> int:
    engine = _engine(args)
    check_compact(args, manager)
    now = args.now_ms if args.now_ms is not None else now_ms()
    partitions, force = compaction_choice(manager, args.topic, args.partition)
    _pass_over_unreadable(args, manager, args.topic)
    if args.partition is not None:
        if (error := manager.placement.partitions_not_given(args.topic).get((args.topic, args.partition))) is not None:
            raise error
        not_given = {}
    else:  # before the work, which cannot change it
        not_given = {tp: why for tp, why in manager.placement.partitions_not_given(args.topic).items()
                     if manager.topic_config(tp[0]).compact}
    if args.dry_run:
        candidates = manager.compaction_candidates(args.topic, now_ms=now)
        if args.partition is not None:
            candidates = [c for c in candidates if c.partition == args.partition]
        # Kafka's first uncleanable offset is a segment's base, which can be below a log start
        # offset inside the active segment: the section is then empty, shown as [start, start)
        lines = [f"{c.topic}-{c.partition}: {'due' if c.due else 'not due'}: {c.why}; dirty section "
                 f"[{c.first_dirty_offset}, {max(c.first_dirty_offset, c.first_uncleanable_offset)}), "
                 f"{c.cleanable_bytes} of {c.total_bytes} bytes"
                 for c in candidates]
        left = _not_given(not_given, [], lines)
        _print(args, {"now_ms": now, "engine": args.engine, "dry_run": True,
                      "partitions": [c.to_dict() for c in candidates], "not_given": left},
               "\n".join(lines) or "no compacted partitions")
        return 0
    if engine is not None:
        if args.max_passes is not None:
            raise UsageError(f"--max-passes applies to --engine local only (--engine {args.engine} cleans in one pass)")
        reports = engine.compact(manager, partitions, force=force, now_ms=now)
    elif force:
        reports = [manager.compact(t, p, now_ms=now, force=True, max_passes=args.max_passes) for t, p in partitions]
    else:  # the due ones among ``partitions``: those of the topic, or of every compacted topic
        reports = manager.compact_due(args.topic, now_ms=now, max_passes=args.max_passes)
    lines = [r.summary() for r in reports]
    left = _not_given(not_given, [{"topic": r.topic, "partition": r.partition} for r in reports], lines)
    _print(args, {"now_ms": now, "engine": args.engine, "dry_run": False, "partitions": [r.to_dict() for r in reports],
                  "not_given": left}, "\n".join(lines) or "no partition is due for compaction")
    return _exit_status(args, ((f"{r.topic}-{r.partition}", r.failed) for r in reports if r.failed is not None))


def _erasure_partitions(args: argparse.Namespace, manager: LogManager) -> list[tuple[str, int]]:
    """The partitions ``erasure-report`` reads, refused before any is read: every compacted
    topic's, or the named topic's (which must be compacted), or the one ``--partition``."""
    if args.partition is not None and args.topic is None:
        raise UsageError("--partition needs --topic")
    if args.topic is None:
        return manager.compacted_partitions()
    partitions = manager.partitions(args.topic)  # an unknown topic is an error, as for verify
    require_compaction_bound(args.topic, manager.topic_config(args.topic))
    return manager.compacted_partitions([(args.topic, p) for p in
                                         (partitions if args.partition is None else [args.partition])])


def cmd_erasure_report(args: argparse.Namespace, manager: LogManager) -> int:
    key = _decoder(args.encoding)(args.key, "--key") if args.key is not None else None
    wanted = _erasure_partitions(args, manager)
    now = args.now_ms if args.now_ms is not None else now_ms()
    not_given = {tp: why for tp, why in manager.placement.partitions_not_given(args.topic).items()
                 if manager.topic_config(tp[0]).compact and (args.partition is None or tp[1] == args.partition)}
    _pass_over_unreadable(args, manager, args.topic)
    reports = [partition_erasure_report(manager, t, p, now, key) for t, p in wanted if (t, p) not in not_given]
    lines = []
    for r in reports:
        tp = f"{r.topic}-{r.partition}"
        if r.unproven is not None:
            lines.append(f"{tp}: UNPROVEN: {r.unproven}")
        elif r.max_compaction_lag_ms == UNBOUNDED:
            lines.append(f"{tp}: max.compaction.lag.ms is unlimited: no bound to prove ({r.records_read} records read)")
        elif r.ok:
            lines.append(f"{tp}: OK: every record superseded at least max.compaction.lag.ms "
                         f"({r.max_compaction_lag_ms} ms) ago is gone ({r.records_read} records read)")
        else:
            o = r.oldest
            lines.append(f"{tp}: NOT ERASED: {r.remnants} record(s) superseded more than max.compaction.lag.ms "
                         f"({r.max_compaction_lag_ms} ms) ago are still on disk; the oldest at offset {o.offset}, "
                         f"superseded by offset {o.superseded_by} at {o.superseded_at_ms}, overdue by {o.overdue_ms} ms")
        if r.deadline is not None:
            d = r.deadline
            state = f"{d.time_left_ms} ms left" if d.time_left_ms >= 0 else f"missed by {-d.time_left_ms} ms"
            lines.append(f"  deadline: the oldest uncleaned record, offset {d.oldest_offset} (written at "
                         f"{d.oldest_timestamp_ms}), must be cleaned by {d.deadline_ms}: {state}")
        if r.key is not None:
            k = r.key
            lines.append(f"  key {args.key!r}: values at {list(k.values) or 'no offset'}, tombstones at "
                         f"{list(k.tombstones) or 'no offset'}, in .deleted files at {list(k.in_deleted_files) or 'no offset'}")
    left = _not_given(not_given, [], lines)
    ok = all(r.ok for r in reports) and not left and not args.errors  # a partition not read is not proven
    _print(args, {"ok": ok, "now_ms": now, "partitions": [r.to_dict() for r in reports], "not_given": left},
           "\n".join(lines) or "no compacted partitions")
    return 0 if ok else 1


def check_delete_records(args: argparse.Namespace, manager: LogManager) -> None:
    """What ``delete-records`` is refused for before it changes anything (see ``PRECHECKS``).
    A partition the view cannot show before its repair (an interrupted swap) is left to the
    command, whose writable open repairs it and then checks the same."""
    check_not_metadata_log(args.topic, "delete-records")
    try:
        log = manager.get_log(args.topic, args.partition)
    except NeedsRecoveryError:
        return
    log.check_delete_records(args.before_offset)


def check_produce(args: argparse.Namespace, manager: LogManager) -> None:
    """What ``produce`` is refused for before it changes anything (see ``PRECHECKS``); the
    records themselves are checked against the topic's config in ``cmd_produce``."""
    check_not_metadata_log(args.topic, "produce")
    if args.partition not in manager.partitions(args.topic):
        manager.get_log(args.topic, args.partition)  # raises, naming the partitions there are


def cmd_delete_records(args: argparse.Namespace, manager: LogManager) -> int:
    log = manager.get_log(args.topic, args.partition)
    lso = log.delete_records(args.before_offset)
    _print(args, {"topic": args.topic, "partition": args.partition, "low_watermark": lso},
           f"partition: {log.tp}\tlow_watermark: {lso}")
    return 0


# ---------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="logctl", description="Kafka-format log dirs: topics, data, maintenance.")
    parser.add_argument("--log-dirs", default=None,
                        help="comma-separated log directories (default: $LOGPLAT_LOG_DIRS, else ./data/logs)")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_json(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="machine-readable output")

    topic = sub.add_parser("topic", help="create, list, describe, alter topics")
    tsub = topic.add_subparsers(dest="topic_command", required=True)
    p = tsub.add_parser("create")
    p.add_argument("name")
    p.add_argument("--partitions", type=bounded_int("a partition count", INT_MIN, INT_MAX), required=True)
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    add_json(p)
    p = tsub.add_parser("list")
    add_json(p)
    p = tsub.add_parser("describe")
    p.add_argument("name")
    add_json(p)
    p = tsub.add_parser("delete", help="delete a topic and all its partitions (Kafka's asynchronous delete)")
    p.add_argument("name")
    add_json(p)
    p = tsub.add_parser("alter", help="change config overrides, or raise the partition count")
    p.add_argument("name")
    p.add_argument("--partitions", type=_COUNT, metavar="N", help="the new partition count (it never goes down)")
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    p.add_argument("--delete-config", action="append", metavar="KEY")
    add_json(p)

    p = sub.add_parser("produce", help="append JSON lines from stdin")
    p.add_argument("topic")
    p.add_argument("--partition", type=_PARTITION, required=True)
    p.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    p.add_argument("--encoding", default="utf8", choices=["utf8", "base64"])
    p.add_argument("--batch-size", type=_COUNT, default=PRODUCE_BATCH_RECORDS, help="records per record batch")
    p.add_argument("--now-ms", type=_CLOCK, default=None, help="clock for default timestamps (default: wall clock)")
    add_json(p)

    p = sub.add_parser("consume", help="print records as JSON lines")
    p.add_argument("topic")
    p.add_argument("--partition", type=_PARTITION, required=True)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--from-offset", type=_OFFSET)
    g.add_argument("--from-timestamp", type=_CLOCK)
    p.add_argument("--max-records", type=_COUNT)
    p.add_argument("--encoding", default="utf8", choices=["utf8", "base64"])

    p = sub.add_parser("dump", help="decode .log/.index/.timeindex/checkpoint files (kafka-dump-log)")
    p.add_argument("files", nargs="+")
    p.add_argument("--encoding", default="utf8", choices=["utf8", "base64"])
    add_json(p)

    p = sub.add_parser("verify", help="check CRCs, offsets and indexes; exit 1 on any problem")
    p.add_argument("--topic")
    add_json(p)

    p = sub.add_parser("retention", help="delete segments past retention.ms / retention.bytes / the log start offset")
    p.add_argument("--topic")
    p.add_argument("--now-ms", type=_CLOCK, default=None, help="the clock retention judges by (default: wall clock)")
    p.add_argument("--dry-run", action="store_true", help="print the plans, change nothing")
    p.add_argument("--engine", default="local", choices=["local", "spark"],
                   help="where to run: in this process, or as a Spark job ($LOGPLAT_SPARK_MASTER, default local[*])")
    add_json(p)

    p = sub.add_parser("compact", help="compact due partitions of compacted topics (Kafka's log cleaner)")
    p.add_argument("--topic")
    p.add_argument("--partition", type=_PARTITION, help="compact this partition (needs --topic) whatever its dirty ratio")
    p.add_argument("--now-ms", type=_CLOCK, default=None, help="the cleaner's clock (default: wall clock)")
    p.add_argument("--engine", default="local", choices=["local", "spark"],
                   help="where to run: in this process, or as a Spark job ($LOGPLAT_SPARK_MASTER, default local[*])")
    p.add_argument("--max-passes", type=_COUNT, default=None, help="stop after this many passes per partition")
    p.add_argument("--dry-run", action="store_true", help="print each partition's dirty section and ratio, change nothing")
    add_json(p)

    p = sub.add_parser("erasure-report", help="prove max.compaction.lag.ms held: superseded records still on disk, "
                       "and where a key still is; exit 1 when any is overdue or a partition is unreadable")
    p.add_argument("--topic")
    p.add_argument("--partition", type=_PARTITION, help="report this partition only (needs --topic)")
    p.add_argument("--key", help="also list every offset still holding a record of this key")
    p.add_argument("--encoding", choices=["utf8", "base64"], default="utf8", help="how --key is written")
    p.add_argument("--now-ms", type=_CLOCK, default=None, help="the clock the bound is judged by (default: wall clock)")
    add_json(p)

    p = sub.add_parser("delete-records", help="advance a partition's log start offset")
    p.add_argument("topic")
    p.add_argument("--partition", type=_PARTITION, required=True)
    p.add_argument("--before-offset", type=_OFFSET, required=True)
    add_json(p)
    return parser


COMMANDS: dict[str, Callable[[argparse.Namespace, Any], int]] = {
    "topic": cmd_topic,
    "produce": cmd_produce,
    "consume": cmd_consume,
    "dump": cmd_dump,
    "verify": cmd_verify,
    "retention": cmd_retention,
    "compact": cmd_compact,
    "delete-records": cmd_delete_records,
    "erasure-report": cmd_erasure_report,
}
NEEDS_NO_LOG_DIRS = {"dump"}
# What a writable command is refused for, asked of a read-only view of the log dirs first: the
# writable open is itself a change (a recovery, the clean-shutdown marker, a partition's stray
# producer snapshots), and refused input changes nothing. The view answers as the log will be.
PRECHECKS: dict[str, Callable[[argparse.Namespace, LogManager], None]] = {
    "produce": check_produce,
    "compact": check_compact,
    "delete-records": check_delete_records,
}
# Commands that only read open the log dirs read-only: they never repair or truncate, so
# `verify` reports damage exactly as it found it.
READ_ONLY = {"consume", "verify", "erasure-report"}


def main(argv: Sequence[str] | None = None, engines: Mapping[str, Engine] | None = None) -> int:
    """``engines`` adds ``--engine`` choices besides ``local`` (see :class:`Engine`)."""
    args: argparse.Namespace | None = None
    if sys.stdout is None:  # started with stdout closed (``>&-``): no report could be written, so do nothing
        if sys.stderr is not None:
            print("error: standard output is closed: logctl writes its report there", file=sys.stderr)
        return 1
    try:
        args = build_parser().parse_args(argv)
        args.engines = dict(engines or {})
        args.report = []
        args.errors = []  # what the command passed over or could not do (``_exit_status``, ``_pass_over_unreadable``)
        if not hasattr(args, "json"):
            args.json = False
        if args.command in NEEDS_NO_LOG_DIRS:
            status = COMMANDS[args.command](args, None)
        else:
            read_only = (args.command in READ_ONLY or getattr(args, "dry_run", False)
                         or (args.command == "topic" and args.topic_command in ("list", "describe")))
            environment = engine_environment(args.log_dirs)
            log_dirs, broker_props = list(environment.log_dirs), environment.broker_props
            creating = args.command == "topic" and args.topic_command == "create"  # the one command that makes one
            if creating:
                check_creation(args.name, args.partitions, _parse_config_pairs(args.config), broker_props)
            for d in log_dirs:
                if (why := missing_log_dir(d)) is not None and (os.path.lexists(d) or not creating):
                    raise LogError(f"log dir {d} {why}")
            if creating and (present := [d for d in log_dirs if missing_log_dir(d) is None]) != log_dirs and present:
                with LogManager(present, broker_props, read_only=True) as manager:  # before a new dir is made
                    manager.admin.check_name_free(args.name)
            if args.command == "produce":
                args.records = _produce_input(args)
            if not read_only and args.command in PRECHECKS:
                with LogManager(log_dirs, broker_props, read_only=True) as manager:
                    PRECHECKS[args.command](args, manager)
            try:
                with LogManager(log_dirs, broker_props, read_only=read_only) as manager:
                    status = COMMANDS[args.command](args, manager)
            except CleanShutdownMarkerError as exc:  # the command committed: a retry would fail
                print("warning: " + " ".join(str(exc).split()), file=sys.stderr)
        for text in args.report:
            print(text)
        if args.errors:  # after the report, which shows the rest of the work
            print("error: " + " ".join("; ".join(args.errors).split()), file=sys.stderr)
            return 1
        return status
    except (LogError, OSError, ValueError) as exc:  # ValueError: a NUL byte in a path, undecodable text
        if _reader_went_away(exc):  # ``logctl consume | head``: no error of the command's
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nor of the flush at exit
            return 128 + signal.SIGPIPE  # what a shell reports for a tool SIGPIPE stopped
        message = str(exc)
        if getattr(exc, "filename", None) and str(exc.filename) not in message:
            message += f": {exc.filename}"
        done = getattr(args, "report", None)
        if done:  # the command finished; closing the log dirs (checkpoints, shutdown marker) failed
            message += f" (after the command had completed: {done[0].splitlines()[0]})"
        message = "; ".join([message, *getattr(exc, "__notes__", ())])  # what failed after it: a close, an undo
        print("error: " + " ".join(message.split()), file=sys.stderr)  # one line, whatever the message holds
        return 1


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


if __name__ == "__main__":
    sys.exit(main())
