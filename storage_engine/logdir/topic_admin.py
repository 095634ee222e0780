"""Topic administration, Kafka's ``kafka-topics`` create, alter and delete, crash-safe across
processes: the half of ``LogManager`` that changes which topics and partitions exist.

Every change runs under the metadata lock (``topic_store.metadata_lock``), validates everything
before it writes, and has one commit point, the topic's metadata file:

* ``create_topic`` writes the metadata, then makes the partition directories;
* ``add_partitions`` (``--alter --partitions``) loads any directory already there for a new
  partition, rewrites the metadata, then makes the missing ones;
* ``delete_topic`` marks the metadata ``deleting``, then renames, unlists and removes.

The next writable open rolls a change a kill interrupted forward: it finishes a delete
(``_finish_pending_deletes``) and makes the directories a create or an alter left missing
(``_make_missing_partitions``).
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ContextManager, Iterable, Mapping, Sequence

from ..files.durable import fsync_dir
from ..config.broker import MAX_PARTITIONS_KEY, max_partitions_per_topic, topic_log_config
from ..config.topic import LogConfig, check_config_key, creation_overrides
from .dir_id import DIR_ID_FILE
from ..errors import InvalidPartitionsError, InvalidTopicError, LogDirsNotGivenError, LogError, TopicExistsError
from ..faults import crash_point
from .log_dir import LogDir, check_distinct_ids
from ..files.naming import (check_not_metadata_log, collides, delete_dir_name, is_delete_dir_name, parse_partition_dir,
                     partition_dir_name, validate_topic_name)
from ..log.partition_lock import LOCK_FILE_NAME
from .topic_store import (TopicMetadata, TopicMetadataError, mark_placed, metadata_lock, metadata_names,
                          metadata_path, metadata_read_lock, placed_elsewhere, placed_names, placed_path, read_metadata,
                          remove_metadata, remove_placed, shown_path, write_metadata)

_NAMED_LOG_DIRS = 3  # a refusal names so many log dirs not given, then counts the rest


@dataclass(frozen=True)
class _Listing:
    """What the log dirs hold, listed once: partition directories by topic, placement marks."""

    placed: dict[LogDir, dict[str, set[int]]]
    marks: dict[LogDir, set[str]]


def _stand_in(name: str) -> TopicMetadata:
    """Metadata for a delete's commit point where the topic has none that can be read."""
    return TopicMetadata(name, 1, {}, uuid.uuid4().hex)


def check_creation(name: str, partitions: int, configs: Mapping[str, str], broker_props: Mapping[str, str]
                   ) -> dict[str, str]:
    """Everything a topic create refuses without looking at a log dir (the name, the partition
    count within the broker's limit, the configs), checked before anything is written: by
    ``create_topic``, and by ``logctl`` before it opens, and so makes, a log dir. Returns the
    overrides the topic is created with."""
    validate_topic_name(name)
    check_not_metadata_log(name, "topic create")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        raise InvalidTopicError(f"Number of partitions must be larger than 0, got {partitions} for topic {name}")
    limit = max_partitions_per_topic(broker_props)
    if partitions > limit:
        raise InvalidTopicError(f"Number of partitions {partitions} for topic {name} is above the limit of {limit} "
                                f"({MAX_PARTITIONS_KEY})")
    return _creation_config(name, configs, broker_props)[0]


def _creation_config(name: str, configs: Mapping[str, str], broker_props: Mapping[str, str]
                     ) -> tuple[dict[str, str], LogConfig]:
    overrides = creation_overrides(name, {k: str(v) for k, v in configs.items()})
    return overrides, topic_log_config(broker_props, overrides)


class TopicAdmin:
    """Topic create, alter and delete for :class:`~storage_engine.logdir.manager.LogManager`, which
    mixes it in: it uses the manager's log dirs, metadata lookups and partition opens."""

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None) -> TopicMetadata:
        """Validate everything, write the metadata file (the commit point), then the partition dirs."""
        self._require_writable()
        overrides = check_creation(name, partitions, configs or {}, self.broker_props)
        with self._metadata_lock():
            found = self._find_metadata(name)
            if found is not None and found[1].deleting:
                self._finish_delete(name, found[0])
            self.check_name_free(name)
            self._check_checkpoint_files()
            meta = TopicMetadata(name, partitions, overrides, uuid.uuid4().hex).placed_also_over(self.placement_ids())
            write_metadata(meta, self.log_dirs[0].path)
            made: list[Path] = []
            try:
                for p in range(partitions):  # under the lock: a concurrent delete waits for every partition
                    loc, paths = self._create_partition_dir(name, p, self.log_dirs[0])
                    made.extend(paths)
                    self._open_log(loc)  # as Kafka does: starts with an empty segment
                    if p == 0:
                        crash_point("topic-create-partway")
            except BaseException:  # a refusal (a kill is not one) leaves no half-made topic behind
                self._discard(name, range(partitions), made)
                remove_metadata(self.log_dirs[0].path, name)
                raise
        return meta

    def check_name_free(self, name: str) -> None:
        """Raise unless a topic called ``name`` can be created here: no live topic has its
        metadata or a partition directory (a topic being deleted is one the create finishes
        deleting), and none differs from it only in '.' and '_'. Read-only, so the CLI asks it
        before making a new log dir for a create that would be refused."""
        found = self._find_metadata(name)
        if found is None and (home := self.orphans().get(name)) is not None:  # its directories would be adopted
            raise self.orphan_error(name, home)
        if (found is not None and not found[1].deleting) or (found is None and self.partition_locations(name)):
            raise TopicExistsError(f"Topic '{name}' already exists.")
        for other in self.topic_names():  # names only: another topic's bad file is not this create's
            if collides(name, other):
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other} (Kafka refuses "
                                        "names that differ only in '.' and '_')")

    def creation_config(self, name: str, configs: Mapping[str, str]) -> LogConfig:
        """The config a topic created now with ``configs`` would have (an internal topic's
        defaults first, the broker's ``log.*`` settings under both); raises as the create would."""
        return _creation_config(name, configs, self.broker_props)[1]

    def alter_topic(self, name: str, set_configs: Mapping[str, str], delete_configs: Sequence[str] = ()) -> TopicMetadata:
        """Change config overrides; the merged result is validated before the file is replaced."""
        self._require_writable()
        validate_topic_name(name)
        check_not_metadata_log(name, "topic alter")
        with self._metadata_lock():
            holder, meta = self._current_metadata(name)
            self._check_checkpoint_files()
            merged = dict(meta.configs)
            for key in delete_configs:
                if key not in merged:  # a stored key goes whatever it is: one refused is what is corrected so
                    check_config_key(key)
                merged.pop(key, None)
            merged.update({k: str(v) for k, v in set_configs.items()})
            topic_log_config(self.broker_props, merged)
            new = replace(meta, configs=merged)
            made: list[Path] = []
            try:
                # a broker's topic gets its metadata here first: its marks, and the dirs holding it
                new = new.placed_also_over(self._mark_for(name, holder, meta.partitions, made))
                write_metadata(new, holder.path)
            except BaseException:  # not committed: no mark points at metadata that is not there
                self._discard(name, (), made)
                raise
        for (topic, partition), log in self._logs.items():
            if topic == name:
                log.config = self.topic_config(name)
        return new

    def add_partitions(self, name: str, count: int) -> TopicMetadata:
        """Raise the topic's partition count to ``count`` (Kafka's ``createPartitions``,
        ``kafka-topics --alter --partitions``); a count never goes down. A directory already there
        for a new partition (a broker's log copied in, a stray until now) is loaded first, then the
        metadata is replaced (the commit point), then the missing partitions' directories are
        made (gaps below the count too). A refusal closes and removes what it made and restores
        the count; a kill after the commit point leaves directories missing, which the next
        writable open makes."""
        self._require_writable()
        validate_topic_name(name)
        check_not_metadata_log(name, "topic alter --partitions")
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= self.max_partitions:
            raise InvalidPartitionsError(f"Number of partitions {count} for topic {name} must be 1 to "
                                         f"{self.max_partitions} ({MAX_PARTITIONS_KEY})")
        with self._metadata_lock():
            holder, meta = self._current_metadata(name)
            if count == meta.partitions:
                raise InvalidPartitionsError(f"Topic {name} already has {count} partitions.")
            if count < meta.partitions:
                raise InvalidPartitionsError(f"Topic {name} currently has {meta.partitions} partitions, which is "
                                             f"higher than the requested {count}: a partition count never goes down.")
            self._check_checkpoint_files()
            not_given = self.log_dirs_not_given(meta, "a partition directory made now may be in a log dir not given")
            if not_given is not None:
                raise not_given
            adopted = {p: loc for p in range(meta.partitions, count) if (loc := self._locate(name, p)) is not None}
            missing = [p for p in range(count) if p not in adopted and (p >= meta.partitions or self._locate(name, p)
                                                                      is None)]  # gaps below the count too
            made: list[Path] = []
            new = replace(meta.placed_also_over(self.placement_ids()), partitions=count)
            committed = False
            try:
                for loc in adopted.values():  # what may fail to load goes first, before anything is made
                    lock = loc.path / LOCK_FILE_NAME
                    if not lock.exists():
                        made.append(lock)
                    self._open_log(loc)
                self._mark_for(name, holder, count, made)  # directories adopted from another log dir
                # the commit point, recording every log dir a directory goes into: a kill from here
                # on leaves the missing directories, which the next writable open makes
                write_metadata(new, holder.path)
                committed = True
                for p in missing:
                    loc, paths = self._create_partition_dir(name, p, holder)
                    made.extend(paths)
                    self._open_log(loc)
                    crash_point("topic-add-partitions-partway")
            except BaseException:  # a refusal: what it opened is closed, what it made removed, the count restored
                self._discard(name, [*adopted, *missing], made)
                if committed:
                    write_metadata(meta, holder.path)
                raise
        return new

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
            placed = f"over log dirs not among those given ({self.dir_list()}): {named}"
        else:
            placed = (f"over {meta.log_dirs} log dirs and {len(self.log_dirs)} "
                      f"{'is' if len(self.log_dirs) == 1 else 'are'} given ({self.dir_list()})")
        return LogDirsNotGivenError(f"topic {meta.name} was placed {placed}: {why}; give every log dir")

    def _discard(self, name: str, partitions: Iterable[int], made: Sequence[Path]) -> None:
        """Undo a refused topic change: close the logs it opened, remove what it made. A
        partition whose open failed, made by the change and now removed, no longer keeps this
        process from writing the clean-shutdown marker (the refusal left the log dir for a
        full recovery, a change on disk)."""
        for p in partitions:
            log = self._logs.pop((name, p), None)
            if log is not None:
                log.close()
        for path in reversed(made):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        removed = set(made)
        for d in self.log_dirs:
            for p in partitions:
                if d.path / partition_dir_name(name, p) in removed:
                    d.forget_load_failure((name, p))

    def _current_metadata(self, name: str) -> tuple[LogDir, TopicMetadata]:
        """The log dir holding the topic's metadata, and the metadata; for a topic without any
        (partition directories copied from a broker), the first log dir and what its directories
        say: one partition past the highest, and the configs it is read with. Raises for an
        unknown topic or one being deleted (``partitions``)."""
        found = self._find_metadata(name)
        parts = self.partitions(name)
        if found is not None:
            return found
        return self.log_dirs[0], TopicMetadata(name, max(parts) + 1, self.topic_overrides(name), uuid.uuid4().hex)

    def _check_checkpoint_files(self) -> None:
        """Parse every log dir's checkpoint files (``CheckpointError`` names the file and the
        line) before any topic change writes anything.

        One rule, Kafka's: a log dir with a malformed checkpoint is offline (its
        ``LogDirFailureChannel``). Every partition in it is refused where it is used (produce,
        consume, describe, verify, the maintenance runs), and so is every topic change (create,
        alter of configs or partitions, delete), which places marks or metadata in every log
        dir given and reads or rewrites the checkpoints after its commit point. Only listing
        topic names and configs reads on, so the code location still loads and names the dir in
        each partition's health."""
        for d in self.log_dirs:
            for checkpoint in d.checkpoint_files:
                checkpoint.read()

    def _metadata_lock(self) -> ContextManager[None]:
        return metadata_lock([d.path for d in self.log_dirs])

    def topics_unchanging(self) -> ContextManager[None]:
        """For a reader listing topics and their partition directories together: no topic
        change is half made while it lists (``topic_store.metadata_read_lock``)."""
        return metadata_read_lock([d.path for d in self.log_dirs])

    def delete_topic(self, name: str) -> TopicMetadata:
        """Kafka's asynchronous delete, made crash-safe across processes.

        Under the metadata lock: mark the metadata ``deleting`` (the commit point), rename each
        ``<topic>-<n>`` to ``<topic>-<n>.<uuid>-delete`` (no longer a partition to anyone), drop
        the topic's checkpoint entries and its metadata file, then remove the renamed dirs. A
        kill at any point leaves the topic whole, or a state the next writable open finishes.
        The checkpoint files it rewrites are parsed, and the placement marks it removes read,
        before the commit point, so a malformed one (a mark that is a directory) refuses the
        delete with the disk unchanged, instead of failing after the renames. What is to be
        deleted is ``_deletable``'s.
        """
        self._require_writable()
        validate_topic_name(name)
        check_not_metadata_log(name, "topic delete")
        with self._metadata_lock():
            holder, meta = self._deletable(name)
            self._check_checkpoint_files()
            for d in self.log_dirs:  # raises, naming a mark that is not a regular file
                placed_elsewhere(d.path, name)
            write_metadata(replace(meta, deleting=True), holder.path)
            crash_point("topic-delete-marked")
            self._finish_delete(name, holder)
        return meta

    def _deletable(self, name: str) -> tuple[LogDir, TopicMetadata]:
        """The log dir a delete of ``name`` commits in, and the metadata it marks ``deleting``
        there. A topic placed over a log dir not given is refused (``log_dirs_not_given``): its
        partitions there would be left behind as an orphan. A topic whose metadata file is
        refused, or an orphan (``orphans``), is deleted from the log dir holding that file, or
        named as home by its marks, under a stand-in metadata: no command reads either, so only
        a delete can remove what is left of them."""
        try:
            found = self._find_metadata(name)
        except TopicMetadataError:
            return next(d for d in self.log_dirs if os.path.lexists(metadata_path(d.path, name))), _stand_in(name)
        home = self.orphans().get(name) if found is None else None
        if home is not None:
            return next(d for d in self.log_dirs if str(d.path) == home), _stand_in(name)
        holder, meta = self._current_metadata(name)
        refusal = self.log_dirs_not_given(meta, "its partitions there would be left behind, an orphan that no command "
                                                "reads")
        if refusal is not None:
            raise refusal
        return holder, meta

    def _finish_delete(self, name: str, holder: LogDir) -> None:
        """Steps after the commit point of a delete; each is idempotent (called with the lock held)."""
        for key in [k for k in self._logs if k[0] == name]:
            self._logs.pop(key).close()
        for loc in list(self._partition_dirs(name).values()):  # strays too
            os.rename(loc.path, loc.log_dir.path / delete_dir_name(name, loc.partition, uuid.uuid4().hex))
            fsync_dir(loc.log_dir.path)
            crash_point("topic-delete-renamed")
        for d in self.log_dirs:
            for checkpoint in d.checkpoint_files:
                stale = [tp for tp in checkpoint.read() if tp[0] == name]
                if stale:
                    checkpoint.update(remove=stale)
        for d in self.log_dirs:
            remove_placed(d.path, name)
        remove_metadata(holder.path, name)
        crash_point("topic-delete-unlisted")
        self._remove_delete_dirs()

    def _mark_placements(self) -> None:
        """At a writable open, ``_mark_for`` every topic with partitions in a log dir without
        their mark, or that its metadata does not record (``placed_over``): topics made before
        the marks or the ids existed, a broker's topic given metadata, a partition an operator
        moved to another log dir (a create, an alter and an ``alter --partitions`` record what
        they place, before their commit point)."""
        if len(self.log_dirs) < 2:
            return
        metas = self.readable_metadata()
        listing = self._listing()
        # metadata written before the ids (no ``placed_over``) keeps its count: recording every
        # such topic at once held the topics lock for 20 s at 2,000 topics
        unrecorded = sorted({t for t, (home, meta) in metas.items() for d in self.log_dirs
                             if any(p < meta.partitions for p in listing.placed[d].get(t, ()))
                             and ((d is not home and t not in listing.marks[d])
                                  or (meta.placed_over and d.directory_id() not in meta.placed_over))})
        if not unrecorded:
            return
        with self._metadata_lock():  # a delete removes the marks under it
            listing = self._listing()
            for t in unrecorded:
                found = self._find_metadata(t)
                if found is not None and not found[1].deleting:
                    home, meta = found
                    holding = self._mark_for(t, home, meta.partitions, [], listing)
                    recorded = meta.placed_also_over(holding) if meta.placed_over else meta
                    if recorded != meta:
                        write_metadata(recorded, home.path)

    def _listing(self) -> "_Listing":
        """The log dirs' partition directories and placement marks, listed once."""
        return _Listing({d: self._partitions_placed_in(d) for d in self.log_dirs},
                        {d: placed_names(d.path) for d in self.log_dirs})

    def _mark_for(self, name: str, home: LogDir, partitions: int, made: list[Path],
                  listing: "_Listing | None" = None) -> dict[str, str]:
        """Record in each log dir but ``home`` that holds partitions of ``name`` (below
        ``partitions``: strays are no partitions) that its metadata is in ``home``
        (``topic_store.mark_placed``); the marks written go into ``made``, which a refused
        change removes. Returns the log dirs holding its partitions (``placement_ids``), for the
        metadata to record. ``listing``: the log dirs as listed under the lock, kept up to date
        (one listing for many topics). Under the topics lock."""
        listing = self._listing() if listing is None else listing
        holding = [d for d in self.log_dirs if any(p < partitions for p in listing.placed[d].get(name, ()))]
        for d in holding:
            self._mark_in(d, name, home, made, listing.marks[d])
        return self.placement_ids(holding)

    @staticmethod
    def _mark_in(log_dir: LogDir, name: str, home: LogDir, made: list[Path], marks: set[str] | None = None) -> None:
        """The one placement mark: in ``log_dir``, unless it is ``home`` or has the mark already
        (``marks``: the dir's marks as listed, kept up to date; else listed now)."""
        marked = placed_names(log_dir.path) if marks is None else marks
        if log_dir is not home and name not in marked:
            mark_placed(log_dir.path, name, home.path)
            made.append(placed_path(log_dir.path, name))
            marked.add(name)

    @staticmethod
    def _partitions_placed_in(log_dir: LogDir) -> dict[str, set[int]]:
        """The partition directories of a log dir by topic, strays included."""
        out: dict[str, set[int]] = {}
        if not log_dir.path.is_dir():
            return out
        with os.scandir(log_dir.path) as it:
            for entry in it:
                if (parsed := parse_partition_dir(entry.name)) is not None and entry.is_dir(follow_symlinks=False):
                    out.setdefault(parsed[0], set()).add(parsed[1])
        return out

    def _pending_deletes(self) -> list[tuple[str, LogDir]]:
        out = []
        for d in self.log_dirs:
            for name in metadata_names(d.path):
                try:
                    meta = read_metadata(d.path, name)
                except LogError:
                    continue  # refused when that topic is used, not for every other topic
                if meta is not None and meta.deleting:
                    out.append((name, d))
        return out

    def _delete_dirs(self) -> list[str]:
        return [entry.path for d in self.log_dirs if d.path.is_dir() for entry in os.scandir(d.path)
                if is_delete_dir_name(entry.name) and entry.is_dir(follow_symlinks=False)]

    def _finish_pending_deletes(self) -> None:
        """At a writable open, as a broker's LogManager does at startup: finish interrupted deletes
        (the lock is only taken when there is something to finish)."""
        if not self._pending_deletes() and not self._delete_dirs():
            return
        with self._metadata_lock():
            for name, d in self._pending_deletes():
                self._finish_delete(name, d)
            self._remove_delete_dirs()

    def _remove_delete_dirs(self) -> None:
        for path in self._delete_dirs():
            shutil.rmtree(path)  # fd-based on Linux: never follows a link inside
            fsync_dir(Path(path).parent)
