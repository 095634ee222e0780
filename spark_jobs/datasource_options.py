"""The options of a ``kafka-log`` read (:class:`ReadOptions`), parsed and checked strictly before
any file is opened, in the forms Spark's Kafka source takes them: ``startingOffsets`` /
``endingOffsets`` as per-partition JSON with Kafka's ``ListOffsets`` sentinels or the words
``earliest``/``latest``, ``startingTimestamp``/``startingOffsetsByTimestamp`` (and the ending
ones) resolved through the time index as ``ListOffsets`` by timestamp, ``subscribe`` /
``subscribePattern`` / ``assign`` choosing partitions, ``includeHeaders`` and ``failOnDataLoss``
with Spark's defaults; ``partitions``/``topics`` as comma-separated lists, the log dirs as
``load()``'s ``path`` or ``paths``, and ``remoteStorage``: where tiered topics' remote tiers
are, when not ``LOGPLAT_REMOTE_STORAGE``. Spark's options that need a broker or a stream are refused by
name with what to use instead. Every refusal is a :class:`DataSourceOptionError` naming the
option and its value.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from storage_engine.config.values import INT_MAX, LONG_MAX
from storage_engine.errors import shown_value
from storage_engine.files.naming import parse_partition_number
from storage_engine.remote.errors import RemoteStorageError
from storage_engine.remote.location import parse_location
from storage_engine.tools.usage import bounded_int

from .errors import DataSourceOptionError

__all__ = [
    "DEFAULT_MAX_BYTES_PER_SPLIT",
    "EARLIEST",
    "LATEST",
    "ReadOptions",
    "TopicPartition",
    "option_error",
]

#: Kafka's ``ListOffsets`` sentinels, as Spark's Kafka source accepts them in its JSON offsets.
EARLIEST = -2
LATEST = -1

DEFAULT_MAX_BYTES_PER_SPLIT = 128 << 20

#: Option names as documented; Spark hands them over lower-cased. ``paths`` is what Spark sets
#: for ``load([dir1, dir2])`` (a JSON list); ``load("dir1,dir2")`` sets ``path``.
_KNOWN_OPTIONS = (
    "path",
    "paths",
    "topics",
    "subscribe",
    "subscribePattern",
    "assign",
    "partitions",
    "startingOffset",
    "endingOffset",
    "startingOffsets",
    "endingOffsets",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
    "includeHeaders",
    "failOnDataLoss",
    "maxBytesPerSplit",
    "remoteStorage",
)

#: Spark's Kafka source options that make no sense for files at rest, with what to use instead
#: (every ``kafka.*`` option is a consumer setting, refused as ``kafka.bootstrap.servers`` is).
_REFUSED_OPTIONS = {
    "kafka.bootstrap.servers": 'no broker is read: give the log directories, load("/data/logs")',
    "minPartitions": "the input partitions follow the segments: set maxBytesPerSplit to cut them smaller",
    "maxOffsetsPerTrigger": "kafka-log is a batch source: bound the read with endingOffsets or endingTimestamp",
    "minOffsetsPerTrigger": "kafka-log is a batch source: bound the read with endingOffsets or endingTimestamp",
    "maxTriggerDelay": "kafka-log is a batch source: bound the read with endingOffsets or endingTimestamp",
    "groupIdPrefix": "no consumer group reads the files: nothing to name",
}

#: The options choosing what is read, as Spark's Kafka source takes exactly one of its three
#: (``topics`` is this source's name for ``subscribe``).
_SUBSCRIPTIONS = ("topics", "subscribe", "subscribePattern", "assign")
#: Spark's ``startingOffsetsByTimestampStrategy``: what a start timestamp no record reaches does.
_NO_MATCH_STRATEGIES = ("error", "latest")

TopicPartition = tuple[str, int]
#: The first offset whose timestamp is at or after the one given, or None (``Log.offset_for_timestamp``).
OffsetLookup = Callable[[int], "int | None"]


def option_error(option: str, value: object, why: str) -> DataSourceOptionError:
    """The error refusing ``option=value``, saying why."""
    return DataSourceOptionError(f"kafka-log option {option}={shown_value(value)}: {why}")


def _parse_int(option: str, text: str, what: str, *, minimum: int, maximum: int = LONG_MAX,
               whole: str | None = None) -> int:
    """``text`` as ``what``, an integer in ``[minimum, maximum]`` written exactly as ``logctl``
    reads one (``bounded_int``: ASCII digits, no spaces or sign but ``-``); errors show
    ``whole`` (the full option value) when ``text`` is one item of a list."""
    try:
        return bounded_int(what, minimum, maximum)(text)
    except argparse.ArgumentTypeError as exc:
        raise option_error(option, text if whole is None else whole, str(exc)) from None


def _load_json(option: str, text: str, example: str, hook: Callable[[list], dict] | None = None) -> object:
    """``text`` parsed as JSON (``hook``: ``json.loads``'s ``object_pairs_hook``); what Python's
    parser refuses beyond malformed text (nesting past its recursion limit, an integer of more
    than 4300 digits) is refused naming the option too."""
    try:
        return json.loads(text, object_pairs_hook=hook)
    except json.JSONDecodeError as exc:
        raise option_error(option, text, f"not JSON ({exc.msg}); expected e.g. {example}") from None
    except RecursionError:
        raise option_error(option, text, "nested too deeply") from None
    except ValueError as exc:  # an integer past int()'s digit limit
        raise option_error(option, text, f"not readable as JSON ({exc.args[0].split(':')[0]})") from None


def _unique_keys(option: str, text: str):
    """A ``json.loads`` hook refusing a key given twice (the last one silently won)."""
    def build(pairs: list[tuple[str, object]]) -> dict:
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise option_error(option, text, f"{key!r} is given twice")
            out[key] = value
        return out
    return build


def _split_list(option: str, text: str) -> list[str]:
    """A comma-separated list, each item trimmed (as Spark's Kafka source reads ``subscribe``);
    an empty item ("0," or "a,,b") is refused rather than passed over, and so is an item given
    twice ("0,0"), as a JSON key given twice is."""
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise option_error(option, text, "names nothing (expected a comma-separated list)")
    if not all(items):
        raise option_error(option, text, f"item {items.index('') + 1} is empty (expected a comma-separated list)")
    if (twice := next((item for i, item in enumerate(items) if item in items[:i]), None)) is not None:
        raise option_error(option, text, f"{twice!r} is given twice")
    return items


def _partition_map(option: str, text: str, example: str, check: Callable[[str, object], int]) -> dict[TopicPartition, int]:
    """Spark's per-partition JSON, ``{"topic": {"0": value}}``, each value passed through
    ``check(where, value)`` (``where`` is ``topic-partition``, for its error)."""
    body = _load_json(option, text, example, _unique_keys(option, text))
    if not isinstance(body, dict):
        raise option_error(option, text, "expected a JSON object of topics")
    out: dict[TopicPartition, int] = {}
    for topic, parts in body.items():
        if not isinstance(parts, dict):
            raise option_error(option, text, f"topic {topic!r} must map partition numbers to values")
        for part, value in parts.items():
            number = parse_partition_number(part) if isinstance(part, str) else None
            if number is None:
                raise option_error(option, text, f"partition {part!r} of topic {topic!r} is not a partition number")
            out[(topic, number)] = check(f"{topic}-{part}", value)
    return out


def _is_long(value: object, minimum: int) -> bool:
    return not isinstance(value, bool) and isinstance(value, int) and minimum <= value <= LONG_MAX


def _parse_offsets_json(option: str, text: str, forbidden: int) -> dict[TopicPartition, int] | int:
    """Spark's Kafka-source form: ``{"topic": {"0": 12}}`` with -2 earliest and -1 latest, or
    the words ``earliest``/``latest`` for every partition. ``forbidden`` is the sentinel a batch
    query cannot use at this end (Spark refuses a ``latest`` start and an ``earliest`` end)."""
    words = {"earliest": EARLIEST, "latest": LATEST}
    word = text.strip().lower()
    if word in words:
        if words[word] == forbidden:
            raise option_error(option, text, f"{word} is not allowed here in a batch query")
        return words[word]

    def offset(where: str, value: object) -> int:
        if not _is_long(value, EARLIEST):
            raise option_error(option, text, f"offset {shown_value(value)} of {where} is not an offset, -2 or -1")
        if value == forbidden:
            raise option_error(option, text, f"offset {value} of {where} is not allowed here in a batch query")
        return value

    return _partition_map(option, text, '{"topic": {"0": 12}}', offset)


def _parse_timestamps_json(option: str, text: str) -> dict[TopicPartition, int]:
    """``startingOffsetsByTimestamp``'s form: ``{"topic": {"0": 1700000000000}}``, epoch milliseconds."""
    def timestamp(where: str, value: object) -> int:
        if not _is_long(value, 0):
            raise option_error(option, text, f"timestamp {shown_value(value)} of {where} is not epoch milliseconds")
        return value

    return _partition_map(option, text, '{"topic": {"0": 1700000000000}}', timestamp)


def _parse_assign(text: str) -> tuple[TopicPartition, ...]:
    """Spark's ``assign``: ``{"topicA": [0, 1], "topicB": [2]}``, the exact partitions to read."""
    body = _load_json("assign", text, '{"topic": [0, 1]}', _unique_keys("assign", text))
    if not isinstance(body, dict) or not body:
        raise option_error("assign", text, 'expected a JSON object of topics to partition lists, e.g. {"topic": [0, 1]}')
    out: list[TopicPartition] = []
    for topic, parts in body.items():
        if not isinstance(parts, list) or not parts:
            raise option_error("assign", text, f"topic {topic!r} must map to a non-empty list of partition numbers")
        for part in parts:
            if not _is_long(part, 0) or part > INT_MAX:
                raise option_error("assign", text, f"{shown_value(part)} of topic {topic!r} is not a partition number")
            if (topic, part) in out:
                raise option_error("assign", text, f"partition {part} of topic {topic!r} is given twice")
            out.append((topic, part))
    return tuple(out)


def _parse_pattern(text: str) -> str:
    """``subscribePattern``, checked to compile (Python's ``re``, whose syntax Java's shares for
    the usual patterns); matched against whole topic names, as Spark's ``Pattern.matches``."""
    try:
        re.compile(text)
    except re.error as exc:
        raise option_error("subscribePattern", text, f"not a regular expression ({exc})") from None
    return text


def _parse_bool(option: str, text: str) -> bool:
    """``true``/``false`` in any case, as Spark's ``String.toBoolean`` reads the Kafka source's flags."""
    if text.lower() not in ("true", "false"):
        raise option_error(option, text, "expected true or false")
    return text.lower() == "true"


def _parse_log_dirs(path: str | None, paths: str | None) -> tuple[str, ...]:
    """The log dirs of ``load("a,b")`` (``path``) and/or ``load(["a", "b"])`` (``paths``)."""
    dirs: list[str] = []
    if paths:
        listed = _load_json("paths", paths, '["/data/logs"]')
        if not (isinstance(listed, list) and all(isinstance(p, str) for p in listed)):
            raise option_error("paths", paths, "expected a JSON list of log directories")
        for item in listed:
            dirs.extend(_split_list("paths", item))
    if path:
        dirs.extend(_split_list("path", path))
    if not dirs:
        raise option_error("path", path, 'a log directory is needed: spark.read.format("kafka-log").load("/data/logs")')
    for d in dirs:
        if not Path(d).is_dir():
            raise option_error("path", path or paths, f"{d} is not a directory")
    return tuple(dirs)


def _parse_location(text: str | None) -> str | None:
    """``remoteStorage``, a location as ``LOGPLAT_REMOTE_STORAGE`` takes it, checked by the
    engine's own parser (its S3 endpoint and credentials come from the environment)."""
    if text is None:
        return None
    try:
        parse_location(text)
    except RemoteStorageError as exc:
        raise option_error("remoteStorage", text, str(exc).split(": ", 1)[-1]) from None
    return text


def _check_names(given: Mapping[str, str]) -> None:
    """Refuse an option this source does not know, naming the alternative when Spark's Kafka source has it."""
    refused = {name.lower(): (name, why) for name, why in _REFUSED_OPTIONS.items()}
    known = {name.lower() for name in _KNOWN_OPTIONS}
    for key, value in given.items():
        if key in refused:
            name, why = refused[key]
            raise option_error(name, value, why)
        if key.startswith("kafka."):
            raise option_error(key, value, f"a Kafka consumer setting: {_REFUSED_OPTIONS['kafka.bootstrap.servers']}")
        if key not in known:
            raise option_error(key, value, f"unknown option (known: {', '.join(_KNOWN_OPTIONS)})")


def _one_of(given: Mapping[str, str], names: tuple[str, ...], why: str) -> None:
    """Refuse two of ``names`` given together: each would decide the same thing."""
    present = [name for name in names if name.lower() in given]
    if len(present) > 1:
        raise option_error(present[1], given[present[1].lower()], f"{present[0]} is given too; {why}")


@dataclass(frozen=True)
class ReadOptions:
    """The options of one read, parsed and checked before any file is opened.

    ``starting``/``ending`` hold the per-partition JSON offsets; a whole-value ``earliest`` /
    ``latest`` is stored as the matching default (``None``). ``starting_timestamps`` /
    ``ending_timestamps`` (and the single ``*_timestamp``) are resolved per partition at
    planning, through the time index; an end is given by offsets or by timestamps, never both.
    What is read is ``topics`` (or ``subscribe``), ``topic_pattern`` or ``assign``, at most one.
    """

    log_dirs: tuple[str, ...]
    topics: tuple[str, ...] | None = None
    topic_pattern: str | None = None
    assign: tuple[TopicPartition, ...] | None = None
    partitions: tuple[int, ...] | None = None
    starting_offset: int | None = None
    ending_offset: int | None = None
    starting: Mapping[TopicPartition, int] = field(default_factory=dict)
    ending: Mapping[TopicPartition, int] = field(default_factory=dict)
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    starting_timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    ending_timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    unmatched_start_reads_nothing: bool = False
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_bytes_per_split: int = DEFAULT_MAX_BYTES_PER_SPLIT
    #: where tiered topics' remote tiers are (``LOGPLAT_REMOTE_STORAGE``'s form); None: that variable
    remote_storage: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Raise :class:`DataSourceOptionError` naming the option and its value for anything malformed."""
        given = {k.lower(): v for k, v in options.items()}
        _check_names(given)
        _one_of(given, _SUBSCRIPTIONS, "give one (Spark's Kafka source takes one of subscribe, subscribePattern, assign)")
        _one_of(given, ("assign", "partitions"), "assign names the partitions itself")
        for end in ("starting", "ending"):  # the offsets options layer (per partition over every partition)
            for offsets_option in (f"{end}Offsets", f"{end}Offset"):
                _one_of(given, (f"{end}Timestamp", f"{end}OffsetsByTimestamp", offsets_option),
                        "give one (Spark's Kafka source would let the first win without a word)")

        def text(name: str) -> str | None:
            return given.get(name.lower())

        def number(name: str, what: str, minimum: int) -> int | None:
            value = text(name)
            return None if value is None else _parse_int(name, value, what, minimum=minimum)

        def offsets(name: str, forbidden: int) -> dict[TopicPartition, int]:
            value = text(name)
            parsed = {} if value is None else _parse_offsets_json(name, value, forbidden)
            if isinstance(parsed, dict):  # per partition, over the single option
                return parsed
            single = name[:-1]  # earliest/latest names every partition, as the single option does
            if single.lower() in given:
                raise option_error(name, value,
                                   f"names every partition, as {single}={given[single.lower()]} does: give one")
            return {}  # earliest/latest everywhere: the default

        def timestamps(name: str) -> dict[TopicPartition, int]:
            value = text(name)
            return {} if value is None else _parse_timestamps_json(name, value)

        def flag(name: str, default: bool) -> bool:
            value = text(name)
            return default if value is None else _parse_bool(name, value)

        start, end = number("startingOffset", "an offset", 0), number("endingOffset", "an offset", 0)
        if start is not None and end is not None and start > end:
            raise option_error("startingOffset", start, f"is above endingOffset={end} (the end is exclusive)")
        start_ts, end_ts = number("startingTimestamp", "a timestamp", 0), number("endingTimestamp", "a timestamp", 0)
        if start_ts is not None and end_ts is not None and start_ts > end_ts:
            raise option_error("startingTimestamp", start_ts, f"is above endingTimestamp={end_ts}")
        strategy = text("startingOffsetsByTimestampStrategy")
        if strategy is not None and strategy.lower() not in _NO_MATCH_STRATEGIES:
            raise option_error("startingOffsetsByTimestampStrategy", strategy,
                               f"expected one of {', '.join(_NO_MATCH_STRATEGIES)}")
        partitions = None
        if "partitions" in given:
            items = _split_list("partitions", given["partitions"])
            partitions = tuple(_parse_int("partitions", p, "a partition number", minimum=0, maximum=INT_MAX,
                                          whole=given["partitions"]) for p in items)
        named = next((name for name in ("topics", "subscribe") if name.lower() in given), None)
        return cls(
            log_dirs=_parse_log_dirs(text("path"), text("paths")),
            topics=None if named is None else tuple(_split_list(named, given[named.lower()])),
            topic_pattern=None if text("subscribePattern") is None else _parse_pattern(given["subscribepattern"]),
            assign=None if text("assign") is None else _parse_assign(given["assign"]),
            partitions=partitions,
            starting_offset=start,
            ending_offset=end,
            starting=offsets("startingOffsets", LATEST),
            ending=offsets("endingOffsets", EARLIEST),
            starting_timestamp=start_ts,
            ending_timestamp=end_ts,
            starting_timestamps=timestamps("startingOffsetsByTimestamp"),
            ending_timestamps=timestamps("endingOffsetsByTimestamp"),
            unmatched_start_reads_nothing=strategy is not None and strategy.lower() == "latest",
            include_headers=flag("includeHeaders", False),
            fail_on_data_loss=flag("failOnDataLoss", True),
            max_bytes_per_split=number("maxBytesPerSplit", "a byte count", 1) or DEFAULT_MAX_BYTES_PER_SPLIT,
            remote_storage=_parse_location(text("remoteStorage")),
        )

    def per_partition_options(self) -> tuple[tuple[str, Mapping[TopicPartition, int]], ...]:
        """The per-partition options with what they map, so planning can refuse a partition
        they name that is not read."""
        return (("startingOffsets", self.starting), ("endingOffsets", self.ending),
                ("startingOffsetsByTimestamp", self.starting_timestamps),
                ("endingOffsetsByTimestamp", self.ending_timestamps))

    def _start(self, tp: TopicPartition, log_end: int, offset_for_timestamp: OffsetLookup) -> tuple[int | None, str]:
        """The requested start of ``tp`` (None: earliest) and the option that gave it."""
        timestamp = self.starting_timestamps.get(tp, self.starting_timestamp)
        if timestamp is None:
            return self.starting.get(tp, self.starting_offset), (
                "startingOffsets" if tp in self.starting else "startingOffset")
        option = "startingOffsetsByTimestamp" if tp in self.starting_timestamps else "startingTimestamp"
        found = offset_for_timestamp(timestamp)
        if found is not None:
            return found, option
        if self.unmatched_start_reads_nothing:
            return log_end, option
        raise option_error(option, timestamp,
                           f"no record of {tp[0]}-{tp[1]} has a timestamp at or after it (Kafka's ListOffsets by "
                           "timestamp finds none); startingOffsetsByTimestampStrategy=latest reads nothing from it")

    def _end(self, tp: TopicPartition, offset_for_timestamp: OffsetLookup) -> int | None:
        """The requested end of ``tp`` (None or -1: latest); a timestamp no record reaches is the
        latest offset, as in Spark's Kafka source."""
        timestamp = self.ending_timestamps.get(tp, self.ending_timestamp)
        if timestamp is None:
            return self.ending.get(tp, self.ending_offset)
        return offset_for_timestamp(timestamp)

    def offset_range(self, tp: TopicPartition, log_start: int, log_end: int,
                     offset_for_timestamp: OffsetLookup) -> tuple[int, int]:
        """``[first, end)`` to read from ``tp``: the options clamped to the partition's
        ``[log start, log end)``, timestamps resolved by ``offset_for_timestamp`` (the first
        offset whose timestamp is at or after it, or None). Records below the log start offset
        are deleted: a start below it is data loss, which fails the query unless
        ``failOnDataLoss=false``, which reads from the log start, as Spark's Kafka source does.
        A start beyond the log end fails the query, as Spark's Kafka source fails a batch whose
        beginning offset is after its ending offset."""
        start, option = self._start(tp, log_end, offset_for_timestamp)
        end = self._end(tp, offset_for_timestamp)
        if start is not None and end is not None and end != LATEST and start > end:
            raise option_error(option, start,
                               f"is above the ending offset {end} of {tp[0]}-{tp[1]} (the end is exclusive)")
        if start is not None and start > log_end:
            raise option_error(option, start,
                               f"beginning offset {start} is after the log end offset {log_end} for topic "
                               f"{tp[0]} partition {tp[1]} (the next offset to be written): nothing is there")
        if start is not None and start != EARLIEST and start < log_start and self.fail_on_data_loss:
            raise option_error(option, start,
                               f"offsets {start} to {log_start - 1} of {tp[0]}-{tp[1]} are gone (its log start offset "
                               f"is {log_start}: data loss, as Spark's Kafka source reports it); "
                               "failOnDataLoss=false reads from the log start offset")
        first = log_start if start is None or start == EARLIEST else max(start, log_start)
        last = log_end if end is None or end == LATEST else min(end, log_end)
        return first, max(first, last)
