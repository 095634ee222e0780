"""Where partitions are: the directories named ``<topic>-<partition>`` across the log dirs.

Kafka's ``LogManager.loadLogs`` lists each log dir and parses every directory name as a
topic-partition; here the listing is also where a symlink (out of the log dir) or a partition in
two log dirs (Kafka's ``Duplicate log directories``) is refused, before any command reads or
writes one. A directory beyond its topic's partition count is a stray (``is_stray``), never a
partition; a directory named like a partition that no partition can have is misnamed.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import LogError
from ..files.naming import is_digits, is_segment_file, parse_partition_dir, partition_dir_name
from ..files.nofollow import check_dir_entries, check_not_symlink
from .log_dir import LogDir

#: one topic's name, several, or None for every topic
Topics = str | Collection[str] | None


@dataclass(frozen=True)
class PartitionLocation:
    """One partition's directory and the log dir holding it."""

    topic: str
    partition: int
    log_dir: LogDir
    path: Path


def topic_set(topics: Topics) -> frozenset[str] | None:
    """``topics`` as a set of names, or None for every topic."""
    return frozenset([topics]) if isinstance(topics, str) else None if topics is None else frozenset(topics)


def is_stray(key: tuple[str, int], counts: Mapping[str, int]) -> bool:
    """A directory named like partition ``key`` of a topic whose metadata (``counts``: each
    topic's partition count) has fewer partitions: a stray, not a partition."""
    return key[0] in counts and key[1] >= counts[key[0]]


def duplicate_partition(first: PartitionLocation, second: Path) -> LogError:
    """A partition found in two log dirs: Kafka refuses to start (``Duplicate log directories``)."""
    return LogError(f"Duplicate log directories for {first.topic}-{first.partition}: {first.path} and {second}")


def scan_dir(log_dir: LogDir, topics: Topics = None,
             refused: dict[str, str] | None = None) -> Iterator[PartitionLocation]:
    """Partition directories of a log dir (of ``topics`` only, when given); a symlink among
    them (or inside one) is refused, so no command, reading or writing, follows it out of the
    log dir. Given topics, the others' directories are not looked into: a bad file in one
    topic's partition fails that topic's commands, not every other topic's. With
    ``refused``, a refusal is recorded there by topic and the scan goes on."""
    if not log_dir.path.is_dir():
        return
    wanted = topic_set(topics)
    for entry in sorted(os.scandir(log_dir.path), key=lambda e: e.name):
        parsed = parse_partition_dir(entry.name)
        if parsed is None or (wanted is not None and parsed[0] not in wanted):
            continue
        try:
            if entry.is_symlink():
                check_not_symlink(entry.path)  # raises, naming the link
            if not entry.is_dir(follow_symlinks=False):
                continue
            check_dir_entries(entry.path)
        except LogError as exc:
            if refused is None:
                raise
            refused.setdefault(parsed[0], str(exc))
            continue
        yield PartitionLocation(parsed[0], parsed[1], log_dir, Path(entry.path))


def partition_dirs(log_dirs: Iterable[LogDir], topics: Topics = None, refused: dict[str, str] | None = None
                   ) -> dict[tuple[str, int], PartitionLocation]:
    """Every directory named like a partition's (of ``topics`` only, when given), strays
    included; a partition in two log dirs is refused. With ``refused``, every refusal is
    recorded there by topic instead, and that topic's directories left out."""
    found: dict[tuple[str, int], PartitionLocation] = {}
    for d in log_dirs:
        for loc in scan_dir(d, topics, refused):
            key = (loc.topic, loc.partition)
            if key in found:
                if refused is None:
                    raise duplicate_partition(found[key], loc.path)
                refused.setdefault(loc.topic, str(duplicate_partition(found[key], loc.path)))
            found[key] = loc
    if refused:
        found = {key: loc for key, loc in found.items() if key[0] not in refused}
    return found


def locate(log_dirs: Iterable[LogDir], topic: str, partition: int) -> PartitionLocation | None:
    """Where one partition's directory is, looking only at its own name in each log dir (a
    scan of every partition per lookup made opening thousands of logs quadratic); checked as
    ``partition_dirs`` checks every one: no symlink, no second copy in another dir."""
    name = partition_dir_name(topic, partition)
    found: PartitionLocation | None = None
    for d in log_dirs:
        path = d.path / name
        if not path.is_dir() and not path.is_symlink():
            continue
        check_dir_entries(path)  # raises, naming a symlink (the directory or inside it)
        if found is not None:
            raise duplicate_partition(found, path)
        found = PartitionLocation(topic, partition, d, path)
    return found


def partitions_placed_in(log_dir: LogDir) -> dict[str, set[int]]:
    """The partition directories of a log dir by topic, strays included, nothing checked."""
    out: dict[str, set[int]] = {}
    if not log_dir.path.is_dir():
        return out
    with os.scandir(log_dir.path) as it:
        for entry in it:
            if (parsed := parse_partition_dir(entry.name)) is not None and entry.is_dir(follow_symlinks=False):
                out.setdefault(parsed[0], set()).add(parsed[1])
    return out


def misnamed_partition_dirs(log_dirs: Iterable[LogDir]) -> list[Path]:
    """Directories of the log dirs named like a partition's (digits after the last ``-``) and
    holding segment files, whose name no partition has (``t-01``, ``t-2147483648``): every
    command leaves them out, where Kafka would read ``t-01`` as partition 1. ``verify`` names
    them rather than passing them over in silence."""
    found = []
    for d in log_dirs:
        try:
            with os.scandir(d.path) as it:  # named like a partition's (digits after the last "-"), yet none
                dirs = [e for e in it if e.is_dir(follow_symlinks=False) and "-" in e.name
                        and is_digits(e.name.rpartition("-")[2]) and parse_partition_dir(e.name) is None]
        except FileNotFoundError:
            continue
        for entry in dirs:
            try:
                with os.scandir(entry.path) as it:
                    if any(is_segment_file(e.name) for e in it):
                        found.append(Path(entry.path))
            except OSError:  # unreadable: nothing any command would read there either
                continue
    return sorted(found)


def dir_list(log_dirs: Iterable[LogDir]) -> str:
    """The log dirs as an error message names them."""
    return ",".join(str(d.path) for d in log_dirs)
