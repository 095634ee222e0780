"""The log manager: topics and partitions over several ``log.dirs``.

Kafka keeps topic metadata (partition count, config overrides) in the controller's metadata log,
stored in the first log dir unless ``metadata.log.dir`` says otherwise. The engine keeps the
same facts as one small JSON file per topic under ``<log dir>/.logplat-topics/``, written
atomically, in the first log dir unless the topic's file already lives in another one, and only
under the metadata lock (``topic_store``). That file is the commit point of every topic change;
the changes themselves (create, alter, add partitions, delete) are ``topic_admin.TopicAdmin``'s,
which the manager mixes in.

Directories copied from a broker have no such file: their topics are discovered from the
partition directory names and use the broker defaults, except Kafka's internal
``__consumer_offsets`` and ``__transaction_state``, which Kafka always creates compacted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Collection, Iterator, Mapping, Sequence

from ..cleaner import Cleaner, CompactionReport, candidacy_from_stats
from ..cleaner.cleaner import reset_out_of_range_checkpoint
from ..cleaner.plan import LogToClean
from ..config.broker import build_log_config, max_partitions_per_topic, topic_log_config
from ..config.cleaner import CleanerConfig, build_cleaner_config
from ..config.topic import INTERNAL_TOPIC_DEFAULTS, LogConfig
from ..errors import (CleanShutdownMarkerError, ConfigError, LogChangedError, LogDirsNotGivenError, LogError,
                     UnknownConfigError, UnknownTopicOrPartitionError)
from ..log.loader import REFUSED_UNCHANGED
from ..log.log import Log
from .log_dir import LogDir, check_distinct_ids, check_is_a_log_dir
from ..files.naming import is_digits, is_segment_file, parse_partition_dir, partition_dir_name, validate_topic_name
from ..files.nofollow import check_dir_entries, check_not_symlink, check_under
from .placement import choose_log_dir
from ..log.retention import RetentionPlan, RetentionResult, apply_retention, plan_retention, sweep_deleted_files
from ..log.stats import PartitionStats, live_stats, log_dir_checkpoints, read_partition_stats
from .topic_admin import TopicAdmin
from .topic_store import (TopicConfigError, TopicMetadata, TopicMetadataError, metadata_names, metadata_path,
                          placed_elsewhere, placed_names, placed_path, read_metadata, write_metadata)

@dataclass(frozen=True)
class PartitionLocation:
    topic: str
    partition: int
    log_dir: LogDir
    path: Path


def missing_log_dir(path: str | Path) -> str | None:
    """Why ``path`` is not there as a log dir ("does not exist", "is not a directory"), or None:
    a mistyped or unmounted path would read as a log dir without topics, and a write would make
    it. ``logctl`` refuses it (but for ``topic create``, which makes it) and so do the
    platform's sensors and runs."""
    if os.path.isdir(path):
        return None
    return "is not a directory" if os.path.lexists(path) else "does not exist"


#: What opening a partition refuses before it changes anything: the loader's refusals and a
#: topic config, read before the loader starts.
_REFUSED_UNCHANGED = (*REFUSED_UNCHANGED, ConfigError, TopicMetadataError)


def is_stray(key: tuple[str, int], counts: Mapping[str, int]) -> bool:
    """A directory named like partition ``key`` of a topic whose metadata (``counts``: each
    topic's partition count) has fewer partitions: a stray, not a partition."""
    return key[0] in counts and key[1] >= counts[key[0]]


def duplicate_partition(first: PartitionLocation, second: Path) -> LogError:
    """A partition found in two log dirs: Kafka refuses to start (``Duplicate log directories``)."""
    return LogError(f"Duplicate log directories for {first.topic}-{first.partition}: {first.path} and {second}")


def _require_compacted(topic: str, config: LogConfig) -> None:
    if not config.compact:
        raise LogError(f"topic {topic} has cleanup.policy={','.join(config.cleanup_policy)}: "
                       "only compacted topics are cleaned")


def check_log_dirs(log_dirs: Sequence[Path | str]) -> list[Path]:
    """``log_dirs`` resolved, once each of them is one the engine opens: at least one, none
    given twice (Kafka's ``log.dirs`` check), none inside another or the same directory as
    another, none a partition directory or a topic metadata folder. The one rule for a list
    of log dirs, so the environment's check (``logdir.environment``) is the manager's."""
    if not log_dirs:
        raise LogError("at least one log directory is needed")
    paths = [Path(p).resolve() for p in log_dirs]
    if len(set(paths)) != len(paths):
        raise LogError(f"duplicate entries in log.dirs: {[str(p) for p in paths]}")
    _check_distinct_dirs(paths)
    for path in paths:
        check_is_a_log_dir(path)
    return paths


def _check_distinct_dirs(paths: Sequence[Path]) -> None:
    """Refuse a log dir inside another (``d1,d1/y-0``: the inner one read as a partition of the
    outer, a refused create wrote segments into it) and two log dirs that are one directory
    under two paths (a bind mount: a writer would wait for ever on the lock it already holds
    through the other path)."""
    for inner in paths:
        outer = next((p for p in paths if p != inner and inner.is_relative_to(p)), None)
        if outer is not None:
            raise LogError(f"log dir {inner} is inside log dir {outer}: give log dirs that do not nest")
    seen: dict[tuple[int, int], Path] = {}
    for path in paths:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue  # not made yet: two new paths are two directories
        first = seen.setdefault((st.st_dev, st.st_ino), path)
        if first != path:
            raise LogError(f"log dirs {first} and {path} are the same directory (a bind mount?): give it once")


#: one topic's name, several, or None for every topic
Topics = str | Collection[str] | None


def _topic_set(topics: Topics) -> frozenset[str] | None:
    return frozenset([topics]) if isinstance(topics, str) else None if topics is None else frozenset(topics)


class LogManager(TopicAdmin):
    """Opens log dirs, recovers them after an unclean shutdown, and hands out ``Log`` objects."""

    def __init__(
        self,
        log_dirs: Sequence[Path | str],
        broker_props: Mapping[str, str] | None = None,
        *,
        read_only: bool = False,
        topic_configs: Mapping[str, LogConfig] | None = None,
    ) -> None:
        """``read_only`` opens logs as they are, repairing nothing: for verify and consumers.
        ``topic_configs``: topics' configs resolved over every log dir (``topic_configs()``), for
        a manager opened on some of them only. A topic's metadata is in one log dir and its partitions in any: a
        Spark task opens just its partition's log dir, where it read a topic without metadata
        (the broker defaults, ``cleanup.policy=delete``) for every partition outside that one."""
        paths = check_log_dirs(log_dirs)
        self.broker_props = dict(broker_props or {})
        build_log_config(self.broker_props)  # validate broker settings before touching anything
        self.max_partitions = max_partitions_per_topic(self.broker_props)
        self.log_dirs = [LogDir(p) for p in paths]
        check_distinct_ids(self.log_dirs)
        self._logs: dict[tuple[str, int], Log] = {}
        self._closed = False
        self.read_only = read_only
        self._given_configs = dict(topic_configs or {})
        try:
            # in path order, as the topic metadata locks: a first writer holds one dir's gate until
            # it has opened (and recovered) them all, so two processes must meet the gates in one order
            for d in sorted(self.log_dirs, key=lambda d: str(d.path)):
                if read_only and not d.path.is_dir():
                    continue  # nothing to read there yet: no topics, no partitions
                d.open_session(read_only)
            for d in self.log_dirs:
                if not read_only and d.first_opener and not d.had_clean_shutdown:
                    self._recover_dir(d)
                d.finish_startup()
            if not read_only:
                self._finish_pending_deletes()
                self._make_missing_partitions()
                self._mark_placements()
        except BaseException:
            self.close()  # leave the sessions (and the clean-shutdown marker) as they were
            raise

    def _recover_dir(self, log_dir: LogDir) -> None:
        """After an unclean shutdown, recover every partition of the dir, as a broker does at
        startup; a scan that fails part-way (a symlink refused) leaves the rest unrecovered, so
        it withholds the clean-shutdown marker as a failed load does."""
        try:
            counts = self.partition_counts()
            configs: dict[str, LogConfig] = {}
            for loc in self._scan_dir(log_dir):
                if not is_stray((loc.topic, loc.partition), counts):  # a stray is never opened
                    if loc.topic not in configs:
                        configs[loc.topic] = self._recovery_config(loc.topic)
                    self._load_log(loc, had_clean_shutdown=False, config=configs[loc.topic]).close()
        except BaseException:
            log_dir.record_load_failure()
            raise

    def _recovery_config(self, topic: str) -> LogConfig:
        """The config a partition of ``topic`` is recovered with: its own, or, where that is
        refused (a stored setting edited by hand, a ``segment.index.bytes`` below 12 that an
        older version took, its metadata unreadable or in a log dir not given), the settings of
        its metadata that pass, over the broker's. One topic's file so stopped every writable
        command of the log dir, the ``topic alter`` that would correct it included. Recovery's
        rules (CRCs, torn tails, producer state) do not depend on a topic's settings, only how
        it lays out the indexes it rebuilds; the topic itself stays refused where it is used,
        naming its file."""
        try:
            return self.topic_config(topic)
        except LogError:
            pass
        try:
            stored = self._find_metadata(topic)
        except LogError:
            stored = None
        kept: dict[str, str] = {}
        for key, value in (stored[1].configs.items() if stored is not None else ()):
            try:
                topic_log_config(self.broker_props, {**kept, key: value})
            except (ConfigError, UnknownConfigError):
                continue
            kept[key] = value
        return topic_log_config(self.broker_props, kept)

    def _load_log(self, loc: PartitionLocation, *, had_clean_shutdown: bool = True,
                  config: LogConfig | None = None) -> Log:
        """Open (load, and after an unclean shutdown recover) one partition, with its topic's
        config unless ``config`` is given (``_recovery_config``). When that fails, this process
        has not loaded every partition it opened, so it must not write the log dir's
        clean-shutdown marker (``LogDir.record_load_failure``): the partitions it never reached
        would count as recovered. After a clean shutdown, a load that refused before it changed
        anything (``_REFUSED_UNCHANGED``) leaves the dir as clean as it found it, and does not."""
        try:
            config = config if config is not None else self.topic_config(loc.topic)
            return Log(loc.path, config, loc.log_dir, topic=loc.topic, partition=loc.partition,
                       had_clean_shutdown=had_clean_shutdown, read_only=self.read_only)
        except BaseException as exc:
            if not had_clean_shutdown or not isinstance(exc, _REFUSED_UNCHANGED):
                loc.log_dir.record_load_failure((loc.topic, loc.partition))
            raise

    # ------------------------------------------------------------------ discovery

    @staticmethod
    def _scan_dir(log_dir: LogDir, topics: Topics = None,
                  refused: dict[str, str] | None = None) -> Iterator[PartitionLocation]:
        """Partition directories of a log dir (of ``topics`` only, when given); a symlink among
        them (or inside one) is refused, so no command, reading or writing, follows it out of the
        log dir. Given topics, the others' directories are not looked into: a bad file in one
        topic's partition fails that topic's commands, not every other topic's. With
        ``refused``, a refusal is recorded there by topic and the scan goes on."""
        if not log_dir.path.is_dir():
            return
        wanted = _topic_set(topics)
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

    def _partition_dirs(self, topics: Topics = None, refused: dict[str, str] | None = None
                        ) -> dict[tuple[str, int], PartitionLocation]:
        """Every directory named like a partition's (of ``topics`` only, when given), strays
        included; a partition in two log dirs is refused. With ``refused``, every refusal is
        recorded there by topic instead, and that topic's directories left out."""
        found: dict[tuple[str, int], PartitionLocation] = {}
        for d in self.log_dirs:
            for loc in self._scan_dir(d, topics, refused):
                key = (loc.topic, loc.partition)
                if key in found:
                    if refused is None:
                        raise duplicate_partition(found[key], loc.path)
                    refused.setdefault(loc.topic, str(duplicate_partition(found[key], loc.path)))
                found[key] = loc
        if refused:
            found = {key: loc for key, loc in found.items() if key[0] not in refused}
        return found

    def partition_locations(self, topics: Topics = None, refused: dict[str, str] | None = None
                            ) -> dict[tuple[str, int], PartitionLocation]:
        """Every partition's directory (of ``topics`` only, when given: one name or several); a
        stray one (``stray_partition_dirs``) is no partition. ``refused``: see ``_partition_dirs``.
        A topic whose metadata file is refused (``unreadable_metadata``) is refused when named,
        recorded in ``refused``, or, listing every topic, left out for the command to name."""
        found = self._partition_dirs(topics, refused)
        counts = self.partition_counts()
        wanted = _topic_set(topics)
        unreadable = {t: why for t, why in self.unreadable_metadata().items() if wanted is None or t in wanted}
        if unreadable and refused is None and wanted is not None:
            raise TopicMetadataError(next(iter(unreadable.values())))
        for topic, why in unreadable.items() if refused is not None else ():
            refused.setdefault(topic, why)
        return {key: loc for key, loc in found.items() if not is_stray(key, counts) and key[0] not in unreadable}

    def partition_counts(self) -> dict[str, int]:
        """Each topic's partition count, from its metadata (topics without metadata, or being
        deleted, have none: their partitions are the directories found). An orphan
        (``orphans``) counts none, so every directory of it is a stray: never opened."""
        return {**dict.fromkeys(self.orphans(), 0),
                **{name: meta.partitions for name, (_, meta) in self.readable_metadata().items()}}

    def _metadata_files(self) -> Iterator[tuple[LogDir, str, TopicMetadata | LogError]]:
        """Every metadata file of the log dirs, read: its log dir, its topic, and its metadata or
        why it is refused."""
        for d in self.log_dirs:
            for name in metadata_names(d.path):
                try:
                    meta = read_metadata(d.path, name)
                except LogError as exc:
                    yield d, name, exc
                    continue
                if meta is not None:
                    yield d, name, meta

    def readable_metadata(self) -> dict[str, tuple[LogDir, TopicMetadata]]:
        """Every topic's metadata and the log dir holding it, but for topics being deleted. A
        malformed metadata file is left out here (``unreadable_metadata``): it is refused where
        its own topic is used, not for every topic."""
        out: dict[str, tuple[LogDir, TopicMetadata]] = {}
        for d, name, meta in self._metadata_files():
            if isinstance(meta, TopicMetadata) and not meta.deleting:
                out.setdefault(name, (d, meta))
        return out

    def unreadable_metadata(self) -> dict[str, str]:
        """The topics whose metadata file is refused, each with why (naming the file). Commands
        over every topic pass them over and name them; a command naming one is refused, and
        ``topic delete`` removes it."""
        out: dict[str, str] = {}
        for _, name, meta in self._metadata_files():
            if isinstance(meta, LogError):
                out.setdefault(name, str(meta))
        return out

    def orphans(self) -> dict[str, str]:
        """Topics left as a placement mark (``topic_store.mark_placed``), with any partition
        directories beside it, whose metadata is in none of the log dirs given although the log
        dir the mark names as its home is given: what a delete not given every log dir the topic
        was placed over leaves. No command reads an orphan; ``verify`` names it and ``topic
        delete`` removes it. Returns each orphan's home log dir."""
        given = {str(d.path) for d in self.log_dirs}
        with_metadata = {name for d in self.log_dirs for name in metadata_names(d.path)}
        out: dict[str, str] = {}
        for d in self.log_dirs:
            for name in sorted(placed_names(d.path) - with_metadata):
                try:
                    home = placed_elsewhere(d.path, name)
                except LogError:  # a mark that is no file: refused where its topic is used
                    continue
                if home in given:
                    out.setdefault(name, home)
        return out

    def orphan_error(self, topic: str, home: str) -> UnknownTopicOrPartitionError:
        """The refusal of an orphan (``orphans``) wherever it is named, naming what is left of it."""
        left = [*(str(loc.path) for _, loc in sorted(self._partition_dirs(topic).items())),
                *(str(placed_path(d.path, topic)) for d in self.log_dirs if topic in placed_names(d.path))]
        return UnknownTopicOrPartitionError(
            f"Topic {topic} does not exist: its metadata is gone from log dir {home}, yet {', '.join(left)} "
            f"{'is' if len(left) == 1 else 'are'} left of it (an orphan, which no command reads: a topic delete not "
            f"given every log dir leaves one); remove it with `logctl topic delete {topic}`")

    def stray_partition_dirs(self, topic: str | None = None) -> list[tuple[Path, int]]:
        """Directories named like a partition of a topic whose metadata has fewer partitions
        (``t-7`` of a two-partition topic), with that count. A KRaft broker deletes such a log
        at startup as a stray; here no command reads or writes it (it is no partition), ``verify``
        names it rather than leaving it out in silence, and ``topic delete`` removes it with its
        topic."""
        counts = self.partition_counts()
        return [(loc.path, counts[key[0]]) for key, loc in sorted(self._partition_dirs(topic).items())
                if is_stray(key, counts)]

    def misnamed_partition_dirs(self) -> list[Path]:
        """Directories of the log dirs named like a partition's (digits after the last ``-``) and
        holding segment files, whose name no partition has (``t-01``, ``t-2147483648``): every
        command leaves them out, where Kafka would read ``t-01`` as partition 1. ``verify`` names
        them rather than passing them over in silence."""
        found = []
        for d in self.log_dirs:
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

    def _create_partition_dir(self, topic: str, partition: int, home: LogDir) -> tuple[PartitionLocation, list[Path]]:
        """Make a partition's directory in the least loaded log dir; the topic's metadata is in
        ``home``, and any other log dir chosen records that (``topic_store.mark_placed``).
        Returns the location and what was made, in order (a refused change removes it)."""
        counts = {str(d.path): sum(1 for name in os.listdir(d.path) if parse_partition_dir(name))
                  if d.path.is_dir() else 0 for d in self.log_dirs}
        chosen = choose_log_dir(counts)
        log_dir = next(d for d in self.log_dirs if str(d.path) == chosen)
        made: list[Path] = []
        self._mark_in(log_dir, topic, home, made)
        path = log_dir.path / partition_dir_name(topic, partition)
        path.mkdir(parents=True, exist_ok=True)
        return PartitionLocation(topic, partition, log_dir, path), [*made, path]

    def _find_metadata(self, topic: str) -> tuple[LogDir, TopicMetadata] | None:
        """The log dir holding the topic's metadata file and its (validated) content."""
        for d in self.log_dirs:
            meta = read_metadata(d.path, topic)
            if meta is not None:
                return d, meta
        return None

    def topic_metadata(self, topic: str) -> TopicMetadata | None:
        """The topic's metadata; None when it has none or is being deleted."""
        found = self._find_metadata(topic)
        return found[1] if found is not None and not found[1].deleting else None

    def topics_being_deleted(self) -> set[str]:
        """Topics past a delete's commit point that a kill left for the next writable open to
        finish: no longer topics to any reader (a malformed metadata file is left out here)."""
        return {name for _, name, meta in self._metadata_files() if isinstance(meta, TopicMetadata) and meta.deleting}

    def _listed_names(self) -> set[str]:
        """The names of the metadata files and of the partition directories, nothing read."""
        names: set[str] = set()
        for d in self.log_dirs:
            names.update(metadata_names(d.path))
            if d.path.is_dir():
                with os.scandir(d.path) as it:  # a directory (or a link, refused where used), not a file
                    names.update(parsed[0] for e in it if (parsed := parse_partition_dir(e.name)) is not None
                                 and (e.is_dir(follow_symlinks=False) or e.is_symlink()))
        return names

    def topics(self) -> list[str]:
        """Every topic whose metadata can be read, after checking every partition directory
        (``_scan_dir``): a command over all topics is refused before it changes any of them, not
        part way through. A topic whose metadata file is refused (``unreadable_metadata``) is
        left out, for the command to name, and so is an orphan (``orphans``)."""
        self._partition_dirs()
        hidden = {name for _, name, meta in self._metadata_files() if isinstance(meta, LogError) or meta.deleting}
        return sorted(self._listed_names() - hidden - set(self.orphans()))

    def topic_names(self) -> list[str]:
        """Every topic, from the names of the metadata files and partition directories alone:
        nothing inside them is checked, so one topic's bad file or metadata does not hide the
        others (the code location lists topics so). Each topic is checked where it is used. An
        orphan (``orphans``) is no topic."""
        return sorted(self._listed_names() - self.topics_being_deleted() - set(self.orphans()))

    def partitions(self, topic: str) -> list[int]:
        found = self._find_metadata(topic)
        if found is not None and found[1].deleting:
            raise UnknownTopicOrPartitionError(f"Topic {topic} is marked for deletion")
        if found is None and (home := self.orphans().get(topic)) is not None:
            raise self.orphan_error(topic, home)
        on_disk = {p for _, p in self._partition_dirs(topic)}  # refuses a symlink or FIFO there first
        if found is not None:  # its metadata's count: a directory beyond it is a stray
            return list(range(found[1].partitions))
        if not on_disk:
            raise UnknownTopicOrPartitionError(f"Topic {topic} does not exist in log dirs {self.dir_list()}")
        return sorted(on_disk)

    def dir_list(self) -> str:
        """The log dirs as an error message names them."""
        return ",".join(str(d.path) for d in self.log_dirs)

    # ------------------------------------------------------------------ configuration

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The topic's config overrides from its metadata. A topic without metadata (a broker's
        log dir copied in) has none, bar an internal topic's; one whose metadata is in a log
        dir not given here is refused: its partitions were placed from there. A topic whose
        deletion a kill interrupted keeps its config until its files are gone: recovery loads its
        partitions before the open finishes the delete."""
        found = self._find_metadata(topic)
        if found is not None:
            return dict(found[1].configs)
        for d in self.log_dirs:
            home = placed_elsewhere(d.path, topic)
            if home is not None and home in {str(given.path) for given in self.log_dirs}:
                raise self.orphan_error(topic, home)
            if home is not None:
                raise TopicMetadataError(
                    f"the metadata of topic {topic} is in log dir {home}, which is not among the log dirs given "
                    f"({self.dir_list()}): {d.path} holds partitions of it placed from there, which the broker "
                    f"defaults would misjudge; give every log dir (if the topic was deleted without {d.path}, "
                    f"remove its partition directories there and {placed_path(d.path, topic)})")
        return dict(INTERNAL_TOPIC_DEFAULTS.get(topic, {}))  # a broker's internal topic copied without its metadata

    def topic_configs(self) -> dict[str, LogConfig]:
        """Every topic's config, for managers opened on some of the log dirs only
        (``topic_configs=``): a Spark task opening an unclean log dir first recovers every
        partition there, of any topic. A topic whose config is refused is left out; opening it
        is refused there as here."""
        out = {}
        for topic in self.topic_names():
            try:
                out[topic] = self.topic_config(topic)
            except LogError:
                continue
        return out

    def topic_config(self, topic: str) -> LogConfig:
        """The topic's config: its metadata's overrides over the broker's settings. Overrides the
        engine refuses (edited by hand, or stored by a version that took them) are refused naming
        the topic's metadata file: the bare "Invalid value" named neither the topic nor the file.
        A stored ``segment.index.bytes`` below 12 is refused so too (``topic_log_config``); the
        alter that corrects it reads the metadata, not this."""
        if topic in self._given_configs:
            return self._given_configs[topic]
        try:
            return topic_log_config(self.broker_props, self.topic_overrides(topic))
        except (ConfigError, UnknownConfigError) as exc:
            found = self._find_metadata(topic)
            if found is None:  # an internal topic's defaults: nothing on disk to correct
                raise
            raise TopicConfigError(topic, metadata_path(found[0].path, topic), exc) from None

    def _require_writable(self) -> None:
        if self.read_only:
            raise LogError("this log manager was opened read-only")

    # ------------------------------------------------------------------ logs

    def get_log(self, topic: str, partition: int) -> Log:
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None:
            return log
        validate_topic_name(topic)
        meta = self.topic_metadata(topic)
        # a directory beyond the topic's partition count is a stray, never opened
        loc = None if meta is not None and partition >= meta.partitions else self._locate(topic, partition)
        if loc is None:
            if meta is None or not 0 <= partition < meta.partitions:
                known = self.partitions(topic)
                raise UnknownTopicOrPartitionError(
                    f"Partition {partition} of topic {topic} does not exist (partitions: {known})"
                )
            if self.read_only:  # the partition exists (the metadata says so); its directory does not
                raise self.missing_partition_error(meta, partition)
            with self._metadata_lock():  # a create in flight makes the directory itself: wait, then look again
                found = self._find_metadata(topic)
                if found is None or found[1].deleting:
                    raise UnknownTopicOrPartitionError(f"Topic {topic} was deleted meanwhile")
                loc = self._locate(topic, partition)
                if loc is None:
                    loc = self._make_missing_partition(*found, partition)
        return self._open_log(loc)

    def _make_missing_partition(self, holder: LogDir, meta: TopicMetadata, partition: int) -> PartitionLocation:
        """Make the directory of a partition its topic's ``meta`` (in ``holder``) counts but no
        log dir holds, refused when it may be in a log dir not given; the log dirs it may be in
        from now on are recorded first. Under the topics lock."""
        if (error := self._partition_not_given(meta, partition)) is not None:
            raise error
        widened = meta.placed_also_over(self.placement_ids())
        if widened != meta:  # placed over these from now on: recorded before the directory is made
            write_metadata(widened, holder.path)
        return self._create_partition_dir(meta.name, partition, holder)[0]

    def _missing_partitions(self) -> dict[str, list[int]]:
        """The partitions each topic's metadata counts that no log dir has an entry for, of
        topics whose metadata records the log dirs they were placed over, all of them given (a
        directory missing here may be in another), listing each log dir once."""
        present = {name for d in self.log_dirs if d.path.is_dir() for name in os.listdir(d.path)}
        out = {}
        for topic, (_, meta) in self.readable_metadata().items():
            missing = [p for p in range(meta.partitions) if partition_dir_name(topic, p) not in present]
            if missing and meta.placed_over and not self.placed_beyond_given(meta):
                out[topic] = missing
        return out

    def _make_missing_partitions(self) -> None:
        """At a writable open, make (empty) the directories of partitions a topic's metadata
        counts but no log dir holds: a ``topic create`` or ``alter --partitions`` killed after
        its commit point (the metadata) leaves them, and every whole-topic reader refused the
        topic until then. Kafka's controller likewise creates a partition its metadata log has
        and a broker's log dirs do not. A topic whose directory cannot be made is left to the
        commands that use it, which say why."""
        if not self._missing_partitions():
            return
        with self._metadata_lock():  # a create in flight makes its directories itself: wait, then look again
            for topic, missing in self._missing_partitions().items():
                try:
                    for partition in missing:
                        found = self._find_metadata(topic)
                        self._load_log(self._make_missing_partition(*found, partition)).close()
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
            f"is missing from log dirs {self.dir_list()}; a produce to it recreates it empty, and a topic delete "
            "removes the topic (a topic create killed part way leaves such gaps)")

    def partitions_not_given(self, topics: Topics = None) -> dict[tuple[str, int], LogError]:
        """The partitions of ``topics`` (default: all) that their metadata counts but these log
        dirs do not hold, of topics placed over a log dir not given, each with why
        (``missing_partition_error``): a run over all topics given some of the log dirs cleans
        what is here and says what it left, rather than passing over the rest unsaid. A topic
        whose metadata or directories cannot be read is left to the commands that use it."""
        wanted = _topic_set(topics)
        metas = self.readable_metadata()
        out = {}
        for topic, (_, meta) in sorted(metas.items()):
            if (wanted is not None and topic not in wanted) or not self.placed_beyond_given(meta):
                continue
            refused: dict[str, str] = {}
            located = self.partition_locations(topic, refused)
            for partition in range(meta.partitions) if not refused else ():
                if (topic, partition) not in located:
                    out[(topic, partition)] = self.missing_partition_error(meta, partition)
        return out

    def _locate(self, topic: str, partition: int) -> PartitionLocation | None:
        """Where one partition's directory is, looking only at its own name in each log dir (a
        scan of every partition per lookup made opening thousands of logs quadratic); checked as
        ``partition_locations`` checks every one: no symlink, no second copy in another dir."""
        name = partition_dir_name(topic, partition)
        found: PartitionLocation | None = None
        for d in self.log_dirs:
            path = d.path / name
            if not path.is_dir() and not path.is_symlink():
                continue
            check_dir_entries(path)  # raises, naming a symlink (the directory or inside it)
            if found is not None:
                raise duplicate_partition(found, path)
            found = PartitionLocation(topic, partition, d, path)
        return found

    def _open_log(self, loc: PartitionLocation) -> Log:
        check_under(loc.path, loc.log_dir.path)
        log = self._load_log(loc)
        self._logs[(loc.topic, loc.partition)] = log
        return log

    def logs(self, topic: str | None = None) -> Iterator[Log]:
        """Every partition's log (of one topic, or all), in topic and partition order."""
        topics = [topic] if topic is not None else self.topics()
        for t in topics:
            for p in self.partitions(t):
                yield self.get_log(t, p)

    # ------------------------------------------------------------------ maintenance

    def partition_stats(self, topics: Topics = None,
                        only: Collection[tuple[str, int]] | None = None) -> Iterator[PartitionStats]:
        """Every partition's stats to plan from (``planning_stats``), of ``topics`` (one name or
        several) or of all, by topic and partition, each log dir's checkpoints read once; with
        ``only``, of those partitions alone (a run reads its own: another partition that cannot
        be read is not its concern). A partition deleted after the listing (its topic deleted
        meanwhile) has none."""
        wanted = _topic_set(topics)
        for name in wanted or ():
            validate_topic_name(name)
        checkpoints: dict[Path, tuple[dict, dict]] = {}
        for key, loc in sorted(self.partition_locations(wanted).items()):  # refuses symlinked partition dirs first
            if only is not None and key not in only:
                continue
            if loc.log_dir.path not in checkpoints:
                checkpoints[loc.log_dir.path] = log_dir_checkpoints(loc.log_dir.path)
            try:
                yield self.planning_stats(loc, checkpoints[loc.log_dir.path])
            except FileNotFoundError:
                if os.path.lexists(loc.path):
                    raise

    def planning_stats(self, loc: PartitionLocation, checkpoints: tuple[dict, dict]) -> PartitionStats:
        """One partition's stats for the dry runs, the sensors and the retention plans: cheap
        file metadata (``stats.read_partition_stats``, no log opened, no record read), given its
        log dir's ``checkpoints`` (``stats.log_dir_checkpoints``). A reader of a log dir whose
        next writable open recovers it gets its read-only view's stats instead (``live_stats``),
        cut where recovery will cut: the files would plan for segments recovery deletes; so does
        a partition holding a ``.swap`` file, which a load may complete (a read-only view then
        refuses it, naming what the open would do, as ``verify`` does). That view reads the
        batches from the recovery point, and is closed at once, so planning over thousands of
        partitions holds none of them open."""
        key = (loc.topic, loc.partition)
        if not loc.log_dir.recovery_pending:
            lso, cleaner = checkpoints
            stats = read_partition_stats(loc.path, log_start_offset_checkpoint=lso.get(key),
                                         cleaner_checkpoint=cleaner.get(key), topic_partition=key)
            if not stats.swap_left:
                return stats
        if key in self._logs:
            return live_stats(self._logs[key])
        log = self._load_log(loc)
        try:
            return live_stats(log)
        finally:
            log.close()

    def delete_expired_files(self, *, unreadable: dict[str, str] | None = None
                             ) -> dict[tuple[str, int], list[tuple[str, int]]]:
        """Remove every partition's ``.deleted`` files once ``file.delete.delay.ms`` has passed
        since their rename by the wall clock (Kafka's scheduled ``deleteSegmentFiles``), whether or not anything
        else touches the partition; returns the removed files and sizes by partition. Needs no
        partition lock: readers that still hold such a file open keep reading it. A topic that
        cannot be read (a symlink in a partition dir, a refused config) is refused, or with
        ``unreadable`` recorded there by topic and passed over, so it does not stop the others'."""
        removed = {}
        delays: dict[str, int | None] = {}
        deleting = self.topics_being_deleted()  # no topic to anyone: the next writable open finishes it
        for key, loc in sorted(self.partition_locations(refused=unreadable).items()):  # one listing of the log dirs
            topic = key[0]
            if topic in deleting:
                continue
            if topic not in delays:
                try:
                    delays[topic] = self.topic_config(topic).file_delete_delay_ms
                except LogError as exc:
                    if unreadable is None:
                        raise
                    unreadable[topic], delays[topic] = str(exc), None
            delay_ms = delays[topic]
            if delay_ms is not None and (files := sweep_deleted_files(loc.path, delay_ms)):
                removed[key] = files
        return removed

    def retention_plans(self, topic: str | None = None, *, now_ms: int) -> list[RetentionPlan]:
        """Retention plans for every partition, from their stats (``planning_stats``)."""
        configs: dict[str, LogConfig] = {}
        plans = []
        for stats in self.partition_stats(topic):
            config = configs.get(stats.topic) or configs.setdefault(stats.topic, self.topic_config(stats.topic))
            plans.append(plan_retention(stats, config, now_ms))
        return plans

    def apply_retention(self, plans: Sequence[RetentionPlan], *, now_ms: int) -> list[RetentionResult]:
        """Apply plans that delete something; sweep ``.deleted`` files whose delay has passed.
        A partition that changed since its plan (a producer rolled) is left alone and reported
        so (``RetentionResult.changed``), as the Spark job reports it; the next run plans it
        afresh. Failing the whole run there left the partitions before it changed and the
        ones after it unvisited, under an error. A partition with nothing to delete is not
        opened, only swept: its writable open changed files all the same (a broker's stale
        producer snapshots removed), which the Spark job, opening only what it deletes from,
        left, and cost a load per partition."""
        results = []
        delays: dict[str, int] = {}
        for plan in plans:
            if plan.deletions:
                log = self.get_log(plan.topic, plan.partition)
                try:
                    results.append(apply_retention(log, plan, now_ms))
                except LogChangedError as exc:
                    results.append(RetentionResult(plan, changed=str(exc)))
                sweep_deleted_files(log.dir, log.config.file_delete_delay_ms)
            elif (loc := self._locate(plan.topic, plan.partition)) is not None:
                if plan.topic not in delays:
                    delays[plan.topic] = self.topic_config(plan.topic).file_delete_delay_ms
                sweep_deleted_files(loc.path, delays[plan.topic])
        return results

    # ------------------------------------------------------------------ compaction

    def cleaner_config(self) -> CleanerConfig:
        """The ``log.cleaner.*`` broker settings (offset-map memory, I/O buffer, throttle)."""
        return build_cleaner_config(self.broker_props)

    def compaction_candidates(self, topic: str | None = None, *, now_ms: int) -> list[LogToClean]:
        """Every compacted partition's cleaning candidacy from its stats (``planning_stats``),
        dirtiest first.

        Due or not: ``LogToClean.due`` says which Kafka's cleaner would pick. Open transactions
        are only seen by the cleaning pass itself.
        """
        configs: dict[str, LogConfig] = {}
        out = []
        for stats in self.partition_stats(topic):
            config = configs.get(stats.topic) or configs.setdefault(stats.topic, self.topic_config(stats.topic))
            if not config.compact:
                continue
            ltc = candidacy_from_stats(stats, config, now_ms)
            if ltc is not None:
                out.append(ltc)
        return sorted(out, key=lambda c: -c.cleanable_ratio)

    def compacted_partitions(self, partitions: Sequence[tuple[str, int]] | None = None) -> list[tuple[str, int]]:
        """``partitions`` (default: every partition of every compacted topic), validated before
        anything is touched: each must exist and belong to a compacted topic."""
        if partitions is None:
            return [(t, p) for t in self.topics() if self.topic_config(t).compact for p in self.partitions(t)]
        for topic, partition in partitions:
            if partition not in self.partitions(topic):
                raise LogError(f"partition {topic}-{partition} does not exist in {self.dir_list()}")
            _require_compacted(topic, self.topic_config(topic))
        return sorted(set(partitions))

    def compact(
        self,
        topic: str,
        partition: int,
        *,
        now_ms: int,
        force: bool = True,
        max_passes: int | None = None,
        cleaner: Cleaner | None = None,
    ) -> CompactionReport:
        """Compact one partition (regardless of its dirty ratio unless ``force=False``), then, for
        ``compact,delete`` topics, apply time/size retention as Kafka's cleaner thread does.

        Raises ``LogChangedError`` when another process changed the segments being cleaned or is
        cleaning the same partition; nothing changed on disk then.
        """
        log = self.get_log(topic, partition)
        _require_compacted(topic, log.config)
        cleaner = cleaner or Cleaner(self.cleaner_config())
        report = cleaner.clean(log, now_ms=now_ms, force=force, max_passes=max_passes)
        self.after_cleaning(log, report, now_ms, cleaner)
        return report

    @staticmethod
    def after_cleaning(log: Log, report: CompactionReport, now_ms: int, cleaner: Cleaner,
                       last_stable_offset: int | None = None) -> None:
        """What Kafka's cleaner thread does after cleaning a partition (or finding it not due): the
        after-steps (``after_steps``); the report's segment count and dirty ratio are what is
        left. The local cleaner and the Spark job both end a partition here."""
        retention = LogManager.after_steps(log, now_ms)
        if retention is not None:
            report.retention = retention.to_dict()
        report.segments_after = len(log.segments)
        report.dirty_ratio_after = cleaner.dirty_ratio_now(log, now_ms, last_stable_offset)

    @staticmethod
    def after_steps(log: Log, now_ms: int) -> RetentionResult | None:
        """The cleaner thread's steps after each partition, cleaned or not due: retention for
        ``compact,delete`` topics (``deleteOldSegments``; None for others), then the delayed
        removal of ``.deleted`` files."""
        retention = apply_retention(log, None, now_ms) if log.config.delete else None
        sweep_deleted_files(log.dir, log.config.file_delete_delay_ms)
        return retention

    def compact_due(
        self, topic: str | None = None, *, now_ms: int, max_passes: int | None = None
    ) -> list[CompactionReport]:
        """Compact every due partition, dirtiest first; a partition another process changed or is
        cleaning is skipped (its report says why), one whose files cannot be read or written is
        reported failed and the others are cleaned all the same, as Kafka's cleaner thread goes
        on past an uncleanable partition (the run stopped there, and the reports of the
        partitions it had already cleaned were never printed). A partition that is not due is opened only
        when its checkpoint was found out of range (it is reset) or its topic is
        ``compact,delete`` (the after-steps run either way, as in Kafka's cleaner thread); it is
        reported when retention deleted something."""
        cleaner = Cleaner(self.cleaner_config())
        reports = []
        for ltc in self.compaction_candidates(topic, now_ms=now_ms):
            if not ltc.due:
                if ltc.force_checkpoint_update or self.topic_config(ltc.topic).delete:
                    log = self.get_log(ltc.topic, ltc.partition)
                    reset_out_of_range_checkpoint(log, ltc)
                    retention = self.after_steps(log, now_ms)
                    if retention is not None and retention.deleted_segments:
                        skipped = CompactionReport(ltc.topic, ltc.partition, now_ms, skipped=f"not due: {ltc.why}")
                        skipped.retention = retention.to_dict()
                        reports.append(skipped)
                continue
            try:
                reports.append(self.compact(ltc.topic, ltc.partition, now_ms=now_ms, force=False,
                                            max_passes=max_passes, cleaner=cleaner))
            except LogChangedError as exc:
                reports.append(CompactionReport(ltc.topic, ltc.partition, now_ms, skipped=str(exc)))
            except (LogError, OSError) as exc:  # its own files' problem: nothing of it swapped, the others go on
                reports.append(CompactionReport(ltc.topic, ltc.partition, now_ms, failed=f"{type(exc).__name__}: {exc}"))
        return reports

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        errors = []
        for log in self._logs.values():
            try:
                log.close()
            except OSError as exc:  # keep closing the others; report at the end
                errors.append(exc)
        self._logs.clear()
        for d in self.log_dirs:  # each dir's session ends, whatever another's close met
            try:
                d.close_session()
            except (OSError, CleanShutdownMarkerError) as exc:
                errors.append(exc)
        if errors:  # a missing marker only matters when nothing worse happened
            raise min(errors, key=lambda e: isinstance(e, CleanShutdownMarkerError))

    def __enter__(self) -> "LogManager":
        return self

    def __exit__(self, exc_type: type | None, exc: BaseException | None, tb: object) -> None:
        """Close; when the block already failed, its error stays the one raised: closing after
        it (checkpoints, the clean-shutdown marker on a full disk, say) can fail for the same
        cause, and a close that writes neither leaves the next writable open to recover, which
        is safe. The close's error is noted on it (``logctl`` prints both)."""
        try:
            self.close()
        except (OSError, LogError) as close_error:
            if exc is None:
                raise
            exc.add_note(f"closing the log dirs then failed too: {close_error}")
