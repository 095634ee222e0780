"""Which log dirs a topic's partitions are in: where a new partition goes, and the records that
say where a topic was placed.

A new partition goes to the log dir holding the fewest partitions, as Kafka's
``LogManager.nextLogDirs`` picks (``log.dirs``), never to one in ``cordoned.log.dirs``
(KIP-1066: the partitions already there keep working; with every log dir cordoned a new
partition is refused, in a 4.4 broker's words, before anything is written). Broker replica and rack assignment is not here:
this platform has no brokers. Kafka keeps a partition's log dir in the controller's metadata
(``directory.id``, KIP-858); here a topic's metadata records the ids of the log dirs it was
placed over (``TopicMetadata.placed_over``), and each other log dir holding its partitions a
placement mark naming the dir of its metadata (``topic_store.mark_placed``), so a command not
given every log dir refuses to make a partition directory that may already be in another.
:class:`Placement` is composed into the log manager (``manager.placement``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.broker import ALL_LOG_DIRS, CORDONED_LOG_DIRS_KEY, cordoned_log_dir_entries
from ..errors import ConfigError, LogDirsCordonedError, LogDirsNotGivenError, LogError, UnknownTopicOrPartitionError
from ..files.naming import parse_partition_dir, partition_dir_name
from .dir_id import DIR_ID_FILE
from .locations import PartitionLocation, Topics, partitions_placed_in, topic_set
from .log_dir import LogDir, check_distinct_ids
from .topic_store import TopicMetadata, mark_placed, placed_names, placed_path, shown_path, write_metadata

if TYPE_CHECKING:
    from .manager import LogManager

_NAMED_LOG_DIRS = 3  # a refusal names so many log dirs not given, then counts the rest


@dataclass(frozen=True)
class _Listing:
    """What the log dirs hold, listed once: partition directories by topic, placement marks."""

    placed: dict[LogDir, dict[str, set[int]]]
    marks: dict[LogDir, set[str]]


#: a 4.4 broker's refusal of a new partition when every log dir is cordoned (``CreateTopics``'
#: ``INVALID_REPLICATION_FACTOR``)
ALL_CORDONED = ("Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all their "
                "log directories cordoned.")


def cordoned_among(log_dirs: Sequence[Path], broker_props: Mapping[str, object]) -> set[Path]:
    """Which of ``log_dirs`` (resolved, as the manager holds them) ``cordoned.log.dirs`` names:
    all for ``*``, else those an entry resolves to. An entry naming no log dir given is checked
    where every log dir is known (``check_cordoned_log_dirs``): a Spark task opens one."""
    entries = cordoned_log_dir_entries(broker_props)
    if ALL_LOG_DIRS in entries:
        return set(log_dirs)
    named = {Path(e).resolve() for e in entries}
    return {d for d in log_dirs if d in named}


def check_cordoned_log_dirs(log_dirs: Sequence[Path], broker_props: Mapping[str, object]) -> None:
    """Refuse a ``cordoned.log.dirs`` entry that is none of the log dirs, in a 4.4 broker's words
    (``KafkaConfig.validateCordonedLogDirs``). Entries and log dirs are compared resolved, where
    the broker compares the strings (``docs/decisions.md``)."""
    entries = cordoned_log_dir_entries(broker_props)
    given = {Path(d).resolve() for d in log_dirs}
    missing = [e for e in entries if e != ALL_LOG_DIRS and Path(e).resolve() not in given]
    if missing:
        raise ConfigError(CORDONED_LOG_DIRS_KEY, broker_props[CORDONED_LOG_DIRS_KEY], "", message=(
            f"All entries in {CORDONED_LOG_DIRS_KEY} must be present in log.dirs or log.dir. "
            f"Missing entries : {', '.join(missing)}"))


def choose_log_dir(partition_counts: Mapping[str, int]) -> str:
    """The log dir holding the fewest partitions; ties go to the earliest in the given order."""
    if not partition_counts:
        raise LogError("no log directory to place a partition in")
    best = None
    for log_dir, count in partition_counts.items():
        if best is None or count < partition_counts[best]:
            best = log_dir
    return best  # type: ignore[return-value]


class Placement:
    """Placement of a manager's topics over its log dirs: the ids and marks recorded, the log
    dirs not given that a topic was placed over, and the directories of partitions a topic's
    metadata counts that no log dir holds, made or refused."""

    def __init__(self, manager: LogManager) -> None:
        self._manager = manager
        self.cordoned = cordoned_among([d.path for d in manager.log_dirs], manager.broker_props)

    def check_placeable(self) -> None:
        """Refuse a new partition when every log dir is cordoned (``cordoned.log.dirs``), in a
        4.4 broker's words, naming the log dirs."""
        if all(d.path in self.cordoned for d in self.log_dirs):
            raise LogDirsCordonedError(f"{ALL_CORDONED} ({CORDONED_LOG_DIRS_KEY} covers every log dir: "
                                       f"{self._manager.dir_list()})")

    @property
    def log_dirs(self) -> list[LogDir]:
        return self._manager.log_dirs

    def placement_ids(self, log_dirs: Iterable[LogDir] | None = None) -> dict[str, str]:
        """The given log dirs (or ``log_dirs`` among them) by id, each with its path, as
        ``TopicMetadata.placed_over`` records them; a dir without an id gets one (``dir_id``).
        Under the topics lock."""
        chosen = list(self.log_dirs if log_dirs is None else log_dirs)
        for d in chosen:
            d.assign_directory_id()
        check_distinct_ids(chosen)  # a copy made since the open checked
        return {d.assign_directory_id(): str(d.path) for d in chosen}

    def missing_log_dirs(self, meta: TopicMetadata) -> list[str]:
        """The log dirs ``meta`` was placed over (``TopicMetadata.placed_over``) that are not
        given, each as a message names it: a given log dir at a recorded path with another id is
        one replaced, or whose id file was lost, and is said to be."""
        given = {d.directory_id(): d for d in self.log_dirs}
        at_path = {str(d.path): d for d in self.log_dirs}
        out = []
        for dir_id, path in sorted(meta.placed_over.items(), key=lambda item: item[1]):
            if dir_id in given:
                continue
            there = at_path.get(path)
            out.append(f"{shown_path(path)} (id {dir_id})" if there is None else
                       f"{shown_path(path)} (id {dir_id}; the log dir given at that path has "
                       f"{f'id {there.directory_id()}' if there.directory_id() else 'no id'}: it was replaced, or its "
                       f"{DIR_ID_FILE} lost, which restored makes it that log dir again)")
        return out

    def placed_beyond_given(self, meta: TopicMetadata) -> bool:
        """Whether ``meta`` was placed over a log dir not given (``log_dirs_not_given``)."""
        return self.log_dirs_not_given(meta, "") is not None

    def log_dirs_not_given(self, meta: TopicMetadata, why: str) -> LogDirsNotGivenError | None:
        """The refusal to make partition directories of a topic placed over a log dir that is not
        given (``missing_log_dirs``; in older metadata, more log dirs than are given,
        ``TopicMetadata.log_dirs``), or None: a directory missing from these may be in another,
        and an empty copy of it here hid its records, then wedged every command given all of
        them on "Duplicate log directories"."""
        missing = self.missing_log_dirs(meta)
        if not missing and meta.log_dirs <= len(self.log_dirs):
            return None
        if missing:
            named = ", ".join(missing[:_NAMED_LOG_DIRS]) + (f" and {len(missing) - _NAMED_LOG_DIRS} more"
                                                            if len(missing) > _NAMED_LOG_DIRS else "")
            placed = f"over log dirs not among those given ({self._manager.dir_list()}): {named}"
        else:
            placed = (f"over {meta.log_dirs} log dirs and {len(self.log_dirs)} "
                      f"{'is' if len(self.log_dirs) == 1 else 'are'} given ({self._manager.dir_list()})")
        return LogDirsNotGivenError(f"topic {meta.name} was placed {placed}: {why}; give every log dir")

    def mark_placements(self) -> None:
        """At a writable open, ``mark_for`` every topic with partitions in a log dir without
        their mark, or that its metadata does not record (``placed_over``): topics made before
        the marks or the ids existed, a broker's topic given metadata, a partition an operator
        moved to another log dir (a create, an alter and an ``alter --partitions`` record what
        they place, before their commit point)."""
        if len(self.log_dirs) < 2:
            return
        metas = self._manager.metadata.readable()
        listing = self._listing()
        # metadata written before the ids (no ``placed_over``) keeps its count: recording every
        # such topic at once held the topics lock for 20 s at 2,000 topics
        unrecorded = sorted({t for t, (home, meta) in metas.items() for d in self.log_dirs
                             if any(p < meta.partitions for p in listing.placed[d].get(t, ()))
                             and ((d is not home and t not in listing.marks[d])
                                  or (meta.placed_over and d.directory_id() not in meta.placed_over))})
        if not unrecorded:
            return
        with self._manager.metadata.lock():  # a delete removes the marks under it
            listing = self._listing()
            for t in unrecorded:
                found = self._manager.metadata.find(t)
                if found is not None and not found[1].deleting:
                    home, meta = found
                    holding = self.mark_for(t, home, meta.partitions, [], listing)
                    recorded = meta.placed_also_over(holding) if meta.placed_over else meta
                    if recorded != meta:
                        write_metadata(recorded, home.path)

    def _listing(self) -> _Listing:
        """The log dirs' partition directories and placement marks, listed once."""
        return _Listing({d: partitions_placed_in(d) for d in self.log_dirs},
                        {d: placed_names(d.path) for d in self.log_dirs})

    def mark_for(self, name: str, home: LogDir, partitions: int, made: list[Path],
                  listing: _Listing | None = None) -> dict[str, str]:
        """Record in each log dir but ``home`` that holds partitions of ``name`` (below
        ``partitions``: strays are no partitions) that its metadata is in ``home``
        (``topic_store.mark_placed``); the marks written go into ``made``, which a refused
        change removes. Returns the log dirs holding its partitions (``placement_ids``), for the
        metadata to record. ``listing``: the log dirs as listed under the lock, kept up to date
        (one listing for many topics). Under the topics lock."""
        listing = self._listing() if listing is None else listing
        holding = [d for d in self.log_dirs if any(p < partitions for p in listing.placed[d].get(name, ()))]
        for d in holding:
            self.mark_in(d, name, home, made, listing.marks[d])
        return self.placement_ids(holding)

    @staticmethod
    def mark_in(log_dir: LogDir, name: str, home: LogDir, made: list[Path], marks: set[str] | None = None) -> None:
        """The one placement mark: in ``log_dir``, unless it is ``home`` or has the mark already
        (``marks``: the dir's marks as listed, kept up to date; else listed now)."""
        marked = placed_names(log_dir.path) if marks is None else marks
        if log_dir is not home and name not in marked:
            mark_placed(log_dir.path, name, home.path)
            made.append(placed_path(log_dir.path, name))
            marked.add(name)

    def create_partition_dir(self, topic: str, partition: int, home: LogDir) -> tuple[PartitionLocation, list[Path]]:
        """Make a partition's directory in the least loaded log dir not cordoned; the topic's
        metadata is in ``home``, and any other log dir chosen records that
        (``topic_store.mark_placed``). Returns the location and what was made, in order (a
        refused change removes it)."""
        self.check_placeable()
        counts = {str(d.path): sum(1 for name in os.listdir(d.path) if parse_partition_dir(name))
                  if d.path.is_dir() else 0 for d in self.log_dirs if d.path not in self.cordoned}
        chosen = choose_log_dir(counts)
        log_dir = next(d for d in self.log_dirs if str(d.path) == chosen)
        made: list[Path] = []
        self.mark_in(log_dir, topic, home, made)
        path = log_dir.path / partition_dir_name(topic, partition)
        path.mkdir(parents=True, exist_ok=True)
        return PartitionLocation(topic, partition, log_dir, path), [*made, path]

    def make_missing_partition(self, holder: LogDir, meta: TopicMetadata, partition: int) -> PartitionLocation:
        """Make the directory of a partition its topic's ``meta`` (in ``holder``) counts but no
        log dir holds, refused when it may be in a log dir not given; the log dirs it may be in
        from now on are recorded first. Under the topics lock."""
        if (error := self._partition_not_given(meta, partition)) is not None:
            raise error
        widened = meta.placed_also_over(self.placement_ids())
        if widened != meta:  # placed over these from now on: recorded before the directory is made
            write_metadata(widened, holder.path)
        return self.create_partition_dir(meta.name, partition, holder)[0]

    def _missing_partitions(self) -> dict[str, list[int]]:
        """The partitions each topic's metadata counts that no log dir has an entry for, of
        topics whose metadata records the log dirs they were placed over, all of them given (a
        directory missing here may be in another), listing each log dir once."""
        present = {name for d in self.log_dirs if d.path.is_dir() for name in os.listdir(d.path)}
        out = {}
        for topic, (_, meta) in self._manager.metadata.readable().items():
            missing = [p for p in range(meta.partitions) if partition_dir_name(topic, p) not in present]
            if missing and meta.placed_over and not self.placed_beyond_given(meta):
                out[topic] = missing
        return out

    def make_missing_partitions(self) -> None:
        """At a writable open, make (empty) the directories of partitions a topic's metadata
        counts but no log dir holds: a ``topic create`` or ``alter --partitions`` killed after
        its commit point (the metadata) leaves them, and every whole-topic reader refused the
        topic until then. Kafka's controller likewise creates a partition its metadata log has
        and a broker's log dirs do not. A topic whose directory cannot be made is left to the
        commands that use it, which say why."""
        if not self._missing_partitions():
            return
        with self._manager.metadata.lock():  # a create in flight makes its directories itself: wait, then look again
            for topic, missing in self._missing_partitions().items():
                try:
                    for partition in missing:
                        found = self._manager.metadata.find(topic)
                        assert found is not None  # listed under this lock, which every delete holds
                        self._manager.load_log(self.make_missing_partition(*found, partition)).close()
                except (LogError, OSError):
                    continue

    def _partition_not_given(self, meta: TopicMetadata, partition: int) -> LogDirsNotGivenError | None:
        """The refusal for a partition whose directory may be in a log dir not given, or None."""
        return self.log_dirs_not_given(meta, f"the directory of partition {partition}, missing from these, may be "
                                             "in a log dir not given")

    def missing_partition_error(self, meta: TopicMetadata, partition: int) -> LogError:
        """Why a partition its topic's metadata counts has no directory in these log dirs, for a
        reader: in a log dir not given, or never made (a create killed part way)."""
        return self._partition_not_given(meta, partition) or UnknownTopicOrPartitionError(
            f"The directory {partition_dir_name(meta.name, partition)} of partition {partition} of topic {meta.name} "
            f"is missing from log dirs {self._manager.dir_list()}; a produce to it recreates it empty, and a topic "
            "delete removes the topic (a topic create killed part way leaves such gaps)")

    def partitions_not_given(self, topics: Topics = None) -> dict[tuple[str, int], LogError]:
        """The partitions of ``topics`` (default: all) that their metadata counts but these log
        dirs do not hold, of topics placed over a log dir not given, each with why
        (``missing_partition_error``): a run over all topics given some of the log dirs cleans
        what is here and says what it left, rather than passing over the rest unsaid. A topic
        whose metadata or directories cannot be read is left to the commands that use it."""
        wanted = topic_set(topics)
        metas = self._manager.metadata.readable()
        out = {}
        for topic, (_, meta) in sorted(metas.items()):
            if (wanted is not None and topic not in wanted) or not self.placed_beyond_given(meta):
                continue
            refused: dict[str, str] = {}
            located = self._manager.partition_locations(topic, refused)
            for partition in range(meta.partitions) if not refused else ():
                if (topic, partition) not in located:
                    out[(topic, partition)] = self.missing_partition_error(meta, partition)
        return out
