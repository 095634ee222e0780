"""Topic administration, Kafka's ``kafka-topics`` create, alter and delete, crash-safe across
processes: what changes which topics and partitions exist, composed into the log manager as
``manager.admin``.

Every change runs under the metadata lock (``topic_store.metadata_lock``), validates everything
before it writes, and has one commit point, the topic's metadata file:

* ``create_topic`` writes the metadata, then makes the partition directories;
* ``add_partitions`` (``--alter --partitions``) loads any directory already there for a new
  partition, rewrites the metadata, then makes the missing ones;
* ``delete_topic`` marks the metadata ``deleting``, then renames, unlists and removes.

The next writable open rolls a change a kill interrupted forward: it finishes a delete
(``TopicAdmin.finish_pending_deletes``) and makes the directories a create or an alter left missing
(``Placement.make_missing_partitions``).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..config.broker import MAX_PARTITIONS_KEY, max_partitions_per_topic, topic_log_config
from ..config.topic import LogConfig, check_config_key, creation_overrides
from ..errors import ConfigError, InvalidPartitionsError, InvalidTopicError, LogError, TopicExistsError
from ..faults import crash_point
from ..files.durable import fsync_dir
from ..files.naming import (
    REMOTE_LOG_METADATA_FILE,
    check_not_metadata_log,
    collides,
    delete_dir_name,
    is_delete_dir_name,
    partition_dir_name,
    validate_topic_name,
)
from ..log.partition_lock import LOCK_FILE_NAME
from .locations import locate, partition_dirs
from .log_dir import LogDir
from .topic_store import (
    TopicMetadata,
    TopicMetadataError,
    metadata_names,
    metadata_path,
    placed_elsewhere,
    read_metadata,
    remove_metadata,
    remove_placed,
    write_metadata,
)

if TYPE_CHECKING:
    from .manager import LogManager


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
    """Topic create, alter and delete over a :class:`~storage_engine.logdir.manager.LogManager`'s
    log dirs (``manager.admin``): it reads through the manager's metadata lookups, places through
    its ``placement`` and opens the partitions it makes through it."""

    def __init__(self, manager: LogManager) -> None:
        self._manager = manager

    @property
    def log_dirs(self) -> list[LogDir]:
        return self._manager.log_dirs

    def _require_writable(self) -> None:
        if self._manager.read_only:
            raise LogError("this log manager was opened read-only")

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None) -> TopicMetadata:
        """Validate everything, write the metadata file (the commit point), then the partition dirs."""
        self._require_writable()
        overrides = check_creation(name, partitions, configs or {}, self._manager.broker_props)
        self._manager.placement.check_placeable()  # before the metadata: nothing is written
        with self._manager.metadata.lock():
            found = self._manager.metadata.find(name)
            if found is not None and found[1].deleting:
                self._finish_delete(name, found[0])
            self.check_name_free(name)
            self._check_checkpoint_files()
            meta = TopicMetadata(name, partitions, overrides, uuid.uuid4().hex)
            meta = meta.placed_also_over(self._manager.placement.placement_ids())
            write_metadata(meta, self.log_dirs[0].path)
            made: list[Path] = []
            try:
                for p in range(partitions):  # under the lock: a concurrent delete waits for every partition
                    loc, paths = self._manager.placement.create_partition_dir(name, p, self.log_dirs[0])
                    made.extend(paths)
                    self._manager.open_at(loc)  # as Kafka does: starts with an empty segment
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
        found = self._manager.metadata.find(name)
        home = self._manager.metadata.orphans().get(name) if found is None else None
        if home is not None:  # its directories would be adopted
            raise self._manager.metadata.orphan_error(name, home)
        if (found is not None and not found[1].deleting) or (found is None and self._manager.partition_locations(name)):
            raise TopicExistsError(f"Topic '{name}' already exists.")
        for other in self._manager.topic_names():  # names only: another topic's bad file is not this create's
            if collides(name, other):
                raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {other} (Kafka refuses "
                                        "names that differ only in '.' and '_')")

    def creation_config(self, name: str, configs: Mapping[str, str]) -> LogConfig:
        """The config a topic created now with ``configs`` would have (an internal topic's
        defaults first, the broker's ``log.*`` settings under both); raises as the create would."""
        return _creation_config(name, configs, self._manager.broker_props)[1]

    def alter_topic(self, name: str, set_configs: Mapping[str, str],
                    delete_configs: Sequence[str] = ()) -> TopicMetadata:
        """Change config overrides; the merged result is validated before the file is replaced."""
        self._require_writable()
        validate_topic_name(name)
        check_not_metadata_log(name, "topic alter")
        with self._manager.metadata.lock():
            holder, meta = self._current_metadata(name)
            self._check_checkpoint_files()
            merged = dict(meta.configs)
            for key in delete_configs:
                if key not in merged:  # a stored key goes whatever it is: one refused is what is corrected so
                    check_config_key(key)
                merged.pop(key, None)
            merged.update({k: str(v) for k, v in set_configs.items()})
            config = topic_log_config(self._manager.broker_props, merged)
            if not config.remote_storage_enable:
                self._check_no_remote_tier(name)
            new = replace(meta, configs=merged)
            made: list[Path] = []
            try:
                # a broker's topic gets its metadata here first: its marks, and the dirs holding it
                new = new.placed_also_over(self._manager.placement.mark_for(name, holder, meta.partitions, made))
                write_metadata(new, holder.path)
            except BaseException:  # not committed: no mark points at metadata that is not there
                self._discard(name, (), made)
                raise
        self._manager.reload_configs(name)
        return new

    def _check_no_remote_tier(self, name: str) -> None:
        """Refuse ``remote.storage.enable=false`` for a topic whose partitions have a remote tier
        (its remembered version is beside their segments): its older records would vanish from
        every read. Kafka refuses it too unless the remote data is deleted with it."""
        for loc in self._manager.partition_locations({name}).values():
            if (loc.path / REMOTE_LOG_METADATA_FILE).exists():
                raise ConfigError("remote.storage.enable", "false",
                                  f"partition {name}-{loc.partition} has a remote tier, whose records reads would no "
                                  "longer see; it cannot be disabled while the tier holds data")

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
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= self._manager.max_partitions:
            raise InvalidPartitionsError(f"Number of partitions {count} for topic {name} must be 1 to "
                                         f"{self._manager.max_partitions} ({MAX_PARTITIONS_KEY})")
        with self._manager.metadata.lock():
            holder, meta = self._current_metadata(name)
            if count == meta.partitions:
                raise InvalidPartitionsError(f"Topic {name} already has {count} partitions.")
            if count < meta.partitions:
                raise InvalidPartitionsError(f"Topic {name} currently has {meta.partitions} partitions, which is "
                                             f"higher than the requested {count}: a partition count never goes down.")
            self._check_checkpoint_files()
            not_given = self._manager.placement.log_dirs_not_given(
                meta, "a partition directory made now may be in a log dir not given")
            if not_given is not None:
                raise not_given
            adopted = {p: loc for p in range(meta.partitions, count)
                       if (loc := locate(self.log_dirs, name, p)) is not None}
            missing = [p for p in range(count) if p not in adopted  # gaps below the count too
                       and (p >= meta.partitions or locate(self.log_dirs, name, p) is None)]
            made: list[Path] = []
            new = replace(meta.placed_also_over(self._manager.placement.placement_ids()), partitions=count)
            committed = False
            try:
                for loc in adopted.values():  # what may fail to load goes first, before anything is made
                    lock = loc.path / LOCK_FILE_NAME
                    if not lock.exists():
                        made.append(lock)
                    self._manager.open_at(loc)
                self._manager.placement.mark_for(name, holder, count, made)  # directories adopted from another log dir
                # the commit point, recording every log dir a directory goes into: a kill from here
                # on leaves the missing directories, which the next writable open makes
                write_metadata(new, holder.path)
                committed = True
                for p in missing:
                    loc, paths = self._manager.placement.create_partition_dir(name, p, holder)
                    made.extend(paths)
                    self._manager.open_at(loc)
                    crash_point("topic-add-partitions-partway")
            except BaseException:  # a refusal: what it opened is closed, what it made removed, the count restored
                self._discard(name, [*adopted, *missing], made)
                if committed:
                    write_metadata(meta, holder.path)
                raise
        return new

    def _discard(self, name: str, partitions: Iterable[int], made: Sequence[Path]) -> None:
        """Undo a refused topic change: close the logs it opened, remove what it made. A
        partition whose open failed, made by the change and now removed, no longer keeps this
        process from writing the clean-shutdown marker (the refusal left the log dir for a
        full recovery, a change on disk)."""
        partitions = list(partitions)
        self._manager.close_logs(name, partitions)
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
        found = self._manager.metadata.find(name)
        parts = self._manager.partitions(name)
        if found is not None:
            return found
        overrides = self._manager.metadata.overrides(name)
        return self.log_dirs[0], TopicMetadata(name, max(parts) + 1, overrides, uuid.uuid4().hex)

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
        with self._manager.metadata.lock():
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
        there. A topic placed over a log dir not given is refused (``Placement.log_dirs_not_given``): its
        partitions there would be left behind as an orphan. A topic whose metadata file is
        refused, or an orphan (``MetadataView.orphans``), is deleted from the log dir holding that file, or
        named as home by its marks, under a stand-in metadata: no command reads either, so only
        a delete can remove what is left of them."""
        try:
            found = self._manager.metadata.find(name)
        except TopicMetadataError:
            return next(d for d in self.log_dirs if os.path.lexists(metadata_path(d.path, name))), _stand_in(name)
        home = self._manager.metadata.orphans().get(name) if found is None else None
        if home is not None:
            return next(d for d in self.log_dirs if str(d.path) == home), _stand_in(name)
        holder, meta = self._current_metadata(name)
        refusal = self._manager.placement.log_dirs_not_given(
            meta, "its partitions there would be left behind, an orphan that no command reads")
        if refusal is not None:
            raise refusal
        return holder, meta

    def _finish_delete(self, name: str, holder: LogDir) -> None:
        """Steps after the commit point of a delete; each is idempotent (called with the lock held)."""
        self._manager.close_logs(name)
        for loc in list(partition_dirs(self.log_dirs, name).values()):  # strays too
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

    def finish_pending_deletes(self) -> None:
        """At a writable open, as a broker's LogManager does at startup: finish interrupted deletes
        (the lock is only taken when there is something to finish)."""
        if not self._pending_deletes() and not self._delete_dirs():
            return
        with self._manager.metadata.lock():
            for name, d in self._pending_deletes():
                self._finish_delete(name, d)
            self._remove_delete_dirs()

    def _remove_delete_dirs(self) -> None:
        for path in self._delete_dirs():
            shutil.rmtree(path)  # fd-based on Linux: never follows a link inside
            fsync_dir(Path(path).parent)
