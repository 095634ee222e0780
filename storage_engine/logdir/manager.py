"""The log manager: topics and partitions over several ``log.dirs``.

Kafka keeps topic metadata (partition count, config overrides) in the controller's metadata log,
stored in the first log dir unless ``metadata.log.dir`` says otherwise. The engine keeps the
same facts as one small JSON file per topic under ``<log dir>/.logplat-topics/``, written
atomically, in the first log dir unless the topic's file already lives in another one, and only
under the metadata lock (``topic_store``). That file is the commit point of every topic change;
the changes themselves (create, alter, add partitions, delete) are ``topic_admin.TopicAdmin``'s,
composed into the manager as ``manager.admin``. The manager composes the rest likewise: where
partitions go is ``placement.Placement``'s (``manager.placement``), what the metadata files say
``metadata_view.MetadataView``'s (``manager.metadata``), retention over the log dirs
``retention.Retention``'s (``manager.retention``); the manager itself opens the log dirs,
recovers them, finds partitions and hands out their logs.

Directories copied from a broker have no such file: their topics are discovered from the
partition directory names and use the broker defaults, except Kafka's internal
``__consumer_offsets`` and ``__transaction_state``, which Kafka always creates compacted.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..config.broker import build_log_config, max_partitions_per_topic, topic_log_config
from ..config.topic import LogConfig
from ..errors import CleanShutdownMarkerError, ConfigError, LogError, UnknownConfigError, UnknownTopicOrPartitionError
from ..files.naming import parse_partition_dir, validate_topic_name
from ..files.nofollow import check_under
from ..log.loader import REFUSED_UNCHANGED
from ..log.log import Log
from ..log.stats import PartitionStats, live_stats, log_dir_checkpoints, read_partition_stats
from .locations import PartitionLocation, Topics, dir_list, is_stray, locate, partition_dirs, scan_dir, topic_set
from .log_dir import LogDir, check_distinct_ids, check_log_dirs
from .metadata_view import MetadataView
from .placement import Placement
from .retention import Retention
from .topic_admin import TopicAdmin
from .topic_store import TopicConfigError, TopicMetadataError, metadata_names, metadata_path


@dataclass(frozen=True)
class PartitionFacts:
    """One partition's cheap stats and its topic's config: what its compaction candidacy and
    retention plan are decided from; its log end offset when it was asked for."""

    stats: PartitionStats
    config: LogConfig
    log_end_offset: int | None = None


#: What opening a partition refuses before it changes anything: the loader's refusals and a
#: topic config, read before the loader starts.
_REFUSED_UNCHANGED = (*REFUSED_UNCHANGED, ConfigError, TopicMetadataError)


class LogManager:
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
        self.metadata = MetadataView(self.log_dirs)
        self.placement = Placement(self)
        self.admin = TopicAdmin(self)
        self.retention = Retention(self)
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
                self.admin.finish_pending_deletes()
                self.placement.make_missing_partitions()
                self.placement.mark_placements()
        except BaseException:
            self.close()  # leave the sessions (and the clean-shutdown marker) as they were
            raise

    def _recover_dir(self, log_dir: LogDir) -> None:
        """After an unclean shutdown, recover every partition of the dir, as a broker does at
        startup; a scan that fails part-way (a symlink refused) leaves the rest unrecovered, so
        it withholds the clean-shutdown marker as a failed load does."""
        try:
            counts = self.metadata.partition_counts()
            configs: dict[str, LogConfig] = {}
            for loc in scan_dir(log_dir):
                if not is_stray((loc.topic, loc.partition), counts):  # a stray is never opened
                    if loc.topic not in configs:
                        configs[loc.topic] = self._recovery_config(loc.topic)
                    self.load_log(loc, had_clean_shutdown=False, config=configs[loc.topic]).close()
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
            stored = self.metadata.find(topic)
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

    def load_log(self, loc: PartitionLocation, *, had_clean_shutdown: bool = True,
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

    def partition_locations(self, topics: Topics = None, refused: dict[str, str] | None = None
                            ) -> dict[tuple[str, int], PartitionLocation]:
        """Every partition's directory (of ``topics`` only, when given: one name or several); a
        stray one (``stray_partition_dirs``) is no partition. ``refused``: see ``locations.partition_dirs``.
        A topic whose metadata file is refused (``MetadataView.unreadable``) is refused when named,
        recorded in ``refused``, or, listing every topic, left out for the command to name."""
        found = partition_dirs(self.log_dirs, topics, refused)
        counts = self.metadata.partition_counts()
        wanted = topic_set(topics)
        unreadable = {t: why for t, why in self.metadata.unreadable().items() if wanted is None or t in wanted}
        if unreadable and refused is None and wanted is not None:
            raise TopicMetadataError(next(iter(unreadable.values())))
        if refused is not None:
            for topic, why in unreadable.items():
                refused.setdefault(topic, why)
        return {key: loc for key, loc in found.items() if not is_stray(key, counts) and key[0] not in unreadable}

    def stray_partition_dirs(self, topic: str | None = None) -> list[tuple[Path, int]]:
        """Directories named like a partition of a topic whose metadata has fewer partitions
        (``t-7`` of a two-partition topic), with that count. A KRaft broker deletes such a log
        at startup as a stray; here no command reads or writes it (it is no partition), ``verify``
        names it rather than leaving it out in silence, and ``topic delete`` removes it with its
        topic."""
        counts = self.metadata.partition_counts()
        return [(loc.path, counts[key[0]]) for key, loc in sorted(partition_dirs(self.log_dirs, topic).items())
                if is_stray(key, counts)]

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
        (``locations.scan_dir``): a command over all topics is refused before it changes any of them, not
        part way through. A topic whose metadata file is refused (``MetadataView.unreadable``) is
        left out, for the command to name, and so is an orphan (``MetadataView.orphans``)."""
        partition_dirs(self.log_dirs)
        return sorted(self._listed_names() - self.metadata.hidden() - set(self.metadata.orphans()))

    def topic_names(self) -> list[str]:
        """Every topic, from the names of the metadata files and partition directories alone:
        nothing inside them is checked, so one topic's bad file or metadata does not hide the
        others (the code location lists topics so). Each topic is checked where it is used. An
        orphan (``MetadataView.orphans``) is no topic."""
        return sorted(self._listed_names() - self.metadata.being_deleted() - set(self.metadata.orphans()))

    def partitions(self, topic: str) -> list[int]:
        found = self.metadata.find(topic)
        if found is not None and found[1].deleting:
            raise UnknownTopicOrPartitionError(f"Topic {topic} is marked for deletion")
        if found is None and (home := self.metadata.orphans().get(topic)) is not None:
            raise self.metadata.orphan_error(topic, home)
        on_disk = {p for _, p in partition_dirs(self.log_dirs, topic)}  # refuses a symlink or FIFO there first
        if found is not None:  # its metadata's count: a directory beyond it is a stray
            return list(range(found[1].partitions))
        if not on_disk:
            raise UnknownTopicOrPartitionError(f"Topic {topic} does not exist in log dirs {self.dir_list()}")
        return sorted(on_disk)

    def dir_list(self) -> str:
        """The log dirs as an error message names them."""
        return dir_list(self.log_dirs)

    # ------------------------------------------------------------------ configuration

    def topic_configs(self, topics: Iterable[str] | None = None,
                      refused: dict[str, LogError] | None = None) -> dict[str, LogConfig]:
        """The configs of ``topics`` (default: every topic, ``topic_names``), in that order, in
        one call: for managers opened on some of the log dirs only (``topic_configs=``), as a
        Spark task opening an unclean log dir first recovers every partition there, of any
        topic; for the code location, which builds its assets from them; and for the sensors,
        which read each topic's once per tick. A topic whose config is refused is left out, with
        why in ``refused`` when given; opening it is refused there as here."""
        out = {}
        for topic in self.topic_names() if topics is None else topics:
            try:
                out[topic] = self.topic_config(topic)
            except LogError as exc:
                if refused is not None:
                    refused[topic] = exc
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
            return topic_log_config(self.broker_props, self.metadata.overrides(topic))
        except (ConfigError, UnknownConfigError) as exc:
            found = self.metadata.find(topic)
            if found is None:  # an internal topic's defaults: nothing on disk to correct
                raise
            raise TopicConfigError(topic, metadata_path(found[0].path, topic), exc) from None

    # ------------------------------------------------------------------ logs

    def get_log(self, topic: str, partition: int) -> Log:
        key = (topic, partition)
        log = self._logs.get(key)
        if log is not None:
            return log
        validate_topic_name(topic)
        meta = self.metadata.topic(topic)
        # a directory beyond the topic's partition count is a stray, never opened
        loc = None if meta is not None and partition >= meta.partitions else locate(self.log_dirs, topic, partition)
        if loc is None:
            if meta is None or not 0 <= partition < meta.partitions:
                known = self.partitions(topic)
                raise UnknownTopicOrPartitionError(
                    f"Partition {partition} of topic {topic} does not exist (partitions: {known})"
                )
            if self.read_only:  # the partition exists (the metadata says so); its directory does not
                raise self.placement.missing_partition_error(meta, partition)
            with self.metadata.lock():  # a create in flight makes the directory itself: wait, then look again
                found = self.metadata.find(topic)
                if found is None or found[1].deleting:
                    raise UnknownTopicOrPartitionError(f"Topic {topic} was deleted meanwhile")
                loc = locate(self.log_dirs, topic, partition)
                if loc is None:
                    loc = self.placement.make_missing_partition(*found, partition)
        return self.open_at(loc)

    def open_at(self, loc: PartitionLocation) -> Log:
        check_under(loc.path, loc.log_dir.path)
        log = self.load_log(loc)
        self._logs[(loc.topic, loc.partition)] = log
        return log

    def close_logs(self, topic: str, partitions: Iterable[int] | None = None) -> None:
        """Close and forget the open logs of ``topic`` (of ``partitions`` only, when given): a
        topic change that removes or renames their directories."""
        keys = [k for k in self._logs if k[0] == topic and (partitions is None or k[1] in partitions)]
        for key in keys:
            self._logs.pop(key).close()

    def reload_configs(self, topic: str) -> None:
        """Give the open logs of ``topic`` its config as now stored (after ``topic alter``)."""
        for (name, _), log in self._logs.items():
            if name == topic:
                log.config = self.topic_config(name)

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
        wanted = topic_set(topics)
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

    def partition_facts(self, topics: Topics = None, partitions: Collection[int] | None = None, *,
                        log_end_offsets: bool = False) -> list[PartitionFacts]:
        """What a plan of each partition of ``topics`` (one name, several, or all) is made from,
        by topic and partition: its stats (``partition_stats``) with its topic's config, read
        once per topic; with ``partitions``, of those numbers of ``topics`` alone; with
        ``log_end_offsets``, each log opened for its end offset too. One call per question
        for the sensors, the runs and the retention plans, the names validated once."""
        only = None if partitions is None else {(t, p) for t in topic_set(topics) or () for p in partitions}
        configs: dict[str, LogConfig] = {}
        out = []
        for stats in self.partition_stats(topics, only):
            config = configs.get(stats.topic) or configs.setdefault(stats.topic, self.topic_config(stats.topic))
            end = self.get_log(stats.topic, stats.partition).log_end_offset if log_end_offsets else None
            out.append(PartitionFacts(stats, config, end))
        return out

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
        log = self.load_log(loc)
        try:
            return live_stats(log)
        finally:
            log.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        errors: list[Exception] = []
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

    def __enter__(self) -> LogManager:
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
