"""The options of a ``kafka-log`` read (:class:`ReadOptions`), parsed and checked strictly before
any file is opened, in the forms Spark's Kafka source takes them: ``startingOffsets`` /
``endingOffsets`` as per-partition JSON with Kafka's ``ListOffsets`` sentinels or the words
``earliest``/``latest``, ``partitions``/``topics`` as comma-separated lists, the log dirs as
``load()``'s ``path`` or ``paths``. Every refusal is a :class:`DataSourceOptionError` naming the
option and its value.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from storage_engine.config.values import INT_MAX, LONG_MAX
from storage_engine.errors import shown_value
from storage_engine.files.naming import parse_partition_number
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
    "partitions",
    "startingOffset",
    "endingOffset",
    "startingOffsets",
    "endingOffsets",
    "maxBytesPerSplit",
)

TopicPartition = tuple[str, int]


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
    body = _load_json(option, text, '{"topic": {"0": 12}}', _unique_keys(option, text))
    if not isinstance(body, dict):
        raise option_error(option, text, "expected a JSON object of topics")
    out: dict[TopicPartition, int] = {}
    for topic, parts in body.items():
        if not isinstance(parts, dict):
            raise option_error(option, text, f"topic {topic!r} must map partition numbers to offsets")
        for part, offset in parts.items():
            number = parse_partition_number(part) if isinstance(part, str) else None
            if number is None:
                raise option_error(option, text, f"partition {part!r} of topic {topic!r} is not a partition number")
            if isinstance(offset, bool) or not isinstance(offset, int) or not EARLIEST <= offset <= LONG_MAX:
                raise option_error(option, text,
                                   f"offset {shown_value(offset)} of {topic}-{part} is not an offset, -2 or -1")
            if offset == forbidden:
                raise option_error(option, text,
                                   f"offset {offset} of {topic}-{part} is not allowed here in a batch query")
            out[(topic, number)] = offset
    return out


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


@dataclass(frozen=True)
class ReadOptions:
    """The options of one read, parsed and checked before any file is opened.

    ``starting``/``ending`` hold the per-partition JSON offsets; a whole-value ``earliest`` /
    ``latest`` is stored as the matching default (``None``).
    """

    log_dirs: tuple[str, ...]
    topics: tuple[str, ...] | None = None
    partitions: tuple[int, ...] | None = None
    starting_offset: int | None = None
    ending_offset: int | None = None
    starting: Mapping[TopicPartition, int] = field(default_factory=dict)
    ending: Mapping[TopicPartition, int] = field(default_factory=dict)
    max_bytes_per_split: int = DEFAULT_MAX_BYTES_PER_SPLIT

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Raise :class:`DataSourceOptionError` naming the option and its value for anything malformed."""
        given = {k.lower(): v for k, v in options.items()}
        for key, value in given.items():
            if key not in {name.lower() for name in _KNOWN_OPTIONS}:
                raise option_error(key, value, f"unknown option (known: {', '.join(_KNOWN_OPTIONS)})")

        def number(name: str, what: str, minimum: int) -> int | None:
            text = given.get(name.lower())
            return None if text is None else _parse_int(name, text, what, minimum=minimum)

        def offsets(name: str, forbidden: int) -> dict[TopicPartition, int]:
            text = given.get(name.lower())
            parsed = {} if text is None else _parse_offsets_json(name, text, forbidden)
            if isinstance(parsed, dict):  # per partition, over the single option
                return parsed
            single = name[:-1]  # earliest/latest names every partition, as the single option does
            if single.lower() in given:
                raise option_error(name, text,
                                   f"names every partition, as {single}={given[single.lower()]} does: give one")
            return {}  # earliest/latest everywhere: the default

        start, end = number("startingOffset", "an offset", 0), number("endingOffset", "an offset", 0)
        if start is not None and end is not None and start > end:
            raise option_error("startingOffset", start, f"is above endingOffset={end} (the end is exclusive)")
        partitions = None
        if "partitions" in given:
            text = given["partitions"]
            items = _split_list("partitions", text)
            partitions = tuple(_parse_int("partitions", p, "a partition number", minimum=0, maximum=INT_MAX, whole=text)
                               for p in items)
        return cls(
            log_dirs=_parse_log_dirs(given.get("path"), given.get("paths")),
            topics=tuple(_split_list("topics", given["topics"])) if "topics" in given else None,
            partitions=partitions,
            starting_offset=start,
            ending_offset=end,
            starting=offsets("startingOffsets", LATEST),
            ending=offsets("endingOffsets", EARLIEST),
            max_bytes_per_split=number("maxBytesPerSplit", "a byte count", 1) or DEFAULT_MAX_BYTES_PER_SPLIT,
        )

    def offset_range(self, tp: TopicPartition, log_start: int, log_end: int) -> tuple[int, int]:
        """``[first, end)`` to read from ``tp``: the options clamped to the partition's
        ``[log start, log end)``. Records below the log start offset are deleted, so a start
        below it reads from it (Spark's Kafka source would report data loss; files at rest have
        no later data to fall back to). A start beyond the log end fails the query, as Spark's
        Kafka source fails a batch whose beginning offset is after its ending offset."""
        start = self.starting.get(tp, self.starting_offset)
        end = self.ending.get(tp, self.ending_offset)
        option = "startingOffsets" if tp in self.starting else "startingOffset"
        if start is not None and end is not None and end != LATEST and start > end:
            raise option_error(option, start,
                               f"is above the ending offset {end} of {tp[0]}-{tp[1]} (the end is exclusive)")
        if start is not None and start > log_end:
            raise option_error(option, start,
                               f"beginning offset {start} is after the log end offset {log_end} for topic "
                               f"{tp[0]} partition {tp[1]} (the next offset to be written): nothing is there")
        first = log_start if start is None or start == EARLIEST else max(start, log_start)
        last = log_end if end is None or end == LATEST else min(end, log_end)
        return first, max(first, last)
