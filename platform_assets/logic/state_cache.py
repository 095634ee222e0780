"""Partition states kept between sensor ticks, so a tick costs what changed, not what exists.

Reading a partition's state from scratch (``log_state.state_of``: the segment listing, checkpoint
entries, the engine's candidacy and retention plan with their index-tail and batch-header reads)
costs a few hundred microseconds; over 10,000 partitions that is seconds per tick, every tick, for
logs that mostly did not change. The code server that evaluates sensors is a long-lived process,
so this module keeps each partition's last state with a cheap signature of the files it came
from and reuses it while the signature holds:

* the partition directory's mtime, which moves whenever a file is created, deleted or renamed in
  it (a roll, a cleaner swap, a retention deletion, recovery);
* the active segment's size and mtime, which move on every append;
* the partition's entries in the log dir's checkpoint files (the cleaner checkpoint, and the log
  start offset, which ``delete-records`` moves without touching the directory);
* the topic's configuration;
* whether the next writable open recovers the log dir (a crash, no writer since): the state is
  then the one of what recovery will leave, the read-only view's (``LogManager.planning_stats``),
  which the files' metadata alone would not show.

Two things the signature cannot see are handled by recomputing anyway:

* *time*: retention.ms, min/max.compaction.lag.ms judge file contents against the clock. Each
  state knows the next moment the clock alone changes one of its verdicts
  (``log_state.next_transition_ms``: an erasure deadline's urgent point or the deadline itself,
  a segment's retention.ms expiry, the end of min.compaction.lag.ms, an idle segment's roll,
  the next superseded record's due moment in an erasure report), and is recomputed at the
  first read at or after it, whatever the spread below. Besides, a state is recomputed once it
  is ``ttl_ms`` old (default: ``log.retention.check.interval.ms``, the cadence Kafka's own
  retention check keeps), a bounded share of them per read so the work is spread over ticks
  instead of arriving all at once;
* *coarse timestamps*: a change within ``RACY_NS`` of the moment a state was computed may not
  have moved an mtime on a file system with coarse timestamps, so such a state is recomputed at
  the next read (Git's "racy" index entries, same cure).

The cache changes nothing but the cost: a state it returns is the state ``state_of`` would return
at that moment. Losing the process loses only speed.

A read can be given a time budget for the states it must compute (a code server's first read
of 100,000 partitions computes them all: ~20 s, four times a sensor tick's goal). Once it is
spent, the partitions still to compute are returned as *pending*, with no state: never the
last one cached (stale) nor a guess, so every caller sees only states that are true now and
knows which partitions it has not seen this tick. The most time-critical go first: a state past
its clock-driven transition (an erasure deadline just reached), then one whose files changed,
then one past the TTL, and cold first reads last. Every read computes at least one state, so
the pending ones are all read within a few ticks.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from storage_engine.config.topic import LogConfig
from storage_engine.errors import LogChangedError, LogError
from storage_engine.files.naming import parse_partition_dir, partition_dir_name
from storage_engine.files.nofollow import check_not_symlink
from storage_engine.log.stats import log_dir_checkpoints
from storage_engine.logdir.locations import PartitionLocation, duplicate_partition, is_stray
from storage_engine.logdir.log_dir import LogDir
from storage_engine.logdir.manager import LogManager

from .log_state import PartitionState, TopicPartition, next_transition_ms, state_of, with_erasure_proof

RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class _Entry:
    signature: tuple
    config: LogConfig
    state: PartitionState
    computed_ms: int
    trusted: bool  # computed long enough after the last change for the mtimes to be relied on
    transition_ms: int | None  # when the clock alone changes a verdict (``next_transition_ms``)

    def transitioned(self, now_ms: int) -> bool:
        """Past its next clock-driven transition: recomputed at once, outside the TTL's spread."""
        return self.transition_ms is not None and now_ms >= self.transition_ms


def _active_signature(directory: str, state: PartitionState) -> tuple[int, int]:
    if state.active_base_offset is None:
        return (-1, -1)
    try:
        st = os.stat(f"{directory}/{state.active_base_offset:020d}.log")
    except FileNotFoundError:
        return (-2, -2)
    return (st.st_size, st.st_mtime_ns)


def _urgency(previous: _Entry | None, now_ms: int, unchanged: bool) -> int:
    """Which states a budgeted read computes first: 0 past its clock-driven transition (an
    erasure deadline just reached), 1 its files or config changed (or not trusted yet), 2 only
    past the TTL, 3 never read."""
    if previous is None:
        return 3
    if previous.transitioned(now_ms):
        return 0
    return 2 if unchanged else 1


class StateCache:
    """Partition states by directory, shared by every sensor of the process (thread-safe)."""

    def __init__(self, racy_ns: int = RACY_NS) -> None:
        self.racy_ns = racy_ns
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self.computed = 0  # states computed by the last read (for tests and the benchmark)
        self.reused = 0

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def read(self, manager: LogManager, *, now_ms: int, ttl_ms: int, refresh_share: float,
             topics: Collection[str] | None = None,
             unreadable: dict[TopicPartition, str] | None = None,
             budget_s: float | None = None, pending: set[TopicPartition] | None = None) -> list[PartitionState]:
        """Every partition's state (of ``topics``, or of all), by topic and partition number.

        A state expires at ``ttl_ms`` after it was computed or at its next clock-driven
        transition, whichever comes first. ``refresh_share`` bounds how many states past
        ``ttl_ms`` are recomputed in this read, as a share of the partitions read (the sensor
        interval over the TTL spreads a full refresh evenly over one TTL); a state past its
        transition is recomputed in this read, whatever the share. A partition the engine would refuse to open (a symlink, a misnamed
        or wrong-kind file, a malformed checkpoint of its log dir, a second copy) raises its
        error; given ``unreadable``, it is left out and its error recorded there instead, so one
        damaged partition does not hide every other one's state.

        With ``budget_s``, states stop being computed once that many seconds of computing are
        spent (the listing is not counted); the partitions left are added to ``pending``, which
        a budgeted read needs, and have no state in the result (see the module docstring)."""
        if budget_s is not None and pending is None:
            raise ValueError("a read with a time budget needs a pending set to say which partitions it left")
        with self._lock:
            states, gaps = self._read(manager, now_ms, ttl_ms, refresh_share, topics, unreadable, budget_s, pending)
        if gaps:  # outside the cache's lock: the look may wait for a topic change in flight
            self._missing_directories(manager, gaps, unreadable)
        return states

    def _read(self, manager: LogManager, now_ms: int, ttl_ms: int, refresh_share: float,
              topics: Collection[str] | None, unreadable: dict[TopicPartition, str] | None,
              budget_s: float | None, pending: set[TopicPartition] | None
              ) -> tuple[list[PartitionState], list[TopicPartition]]:
        """The states read, and the partitions counted by their topic's metadata that had no
        directory in the listing."""
        wanted = None if topics is None else set(topics)
        found: list[tuple[str, TopicPartition, tuple, tuple, _Entry | None]] = []
        # where each partition was found: made a ``PartitionLocation`` (a ``Path``) only when
        # its state is computed, as building 100,000 Paths was a third of a warm read
        where: dict[TopicPartition, tuple[LogDir, str]] = {}

        def location(tp: TopicPartition) -> PartitionLocation:
            log_dir, path = where[tp]
            return PartitionLocation(tp[0], tp[1], log_dir, Path(path))

        def refused(tp: TopicPartition, exc: Exception) -> None:
            if unreadable is None:
                raise exc
            unreadable[tp] = str(exc) if isinstance(exc, LogError) else f"{type(exc).__name__}: {exc}"

        counts = manager.metadata.partition_counts()
        deleting = manager.metadata.being_deleted()  # a delete a kill left half done: no topic any more
        for log_dir in manager.log_dirs:
            if not log_dir.path.is_dir():
                continue
            try:
                checkpoints = log_dir_checkpoints(log_dir.path)
            except LogError as exc:
                checkpoints = exc
            with os.scandir(log_dir.path) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                tp = parse_partition_dir(entry.name)
                if tp is None or (wanted is not None and tp[0] not in wanted) or is_stray(tp, counts) or tp[0] in deleting:
                    continue  # not a partition, not asked for, a stray the engine never opens, or being deleted
                try:
                    if entry.is_symlink():  # the engine refuses it, so the read does too, naming it
                        check_not_symlink(entry.path)
                    if not entry.is_dir(follow_symlinks=False):
                        continue
                    if tp in where:
                        raise duplicate_partition(location(tp), Path(entry.path))
                    if isinstance(checkpoints, LogError):
                        raise checkpoints
                except LogError as exc:
                    refused(tp, exc)
                    continue
                try:
                    dir_mtime = entry.stat().st_mtime_ns
                except FileNotFoundError:
                    continue  # deleted since the listing (a topic delete)
                where[tp] = (log_dir, entry.path)
                previous = self._entries.get(entry.path)
                active = _active_signature(entry.path, previous.state) if previous else ()
                lso, cleaner = checkpoints
                signature = (dir_mtime, active, lso.get(tp), cleaner.get(tp), log_dir.recovery_pending)
                found.append((entry.path, tp, signature, checkpoints, previous))
        budget = max(1, math.ceil(len(found) * refresh_share))
        expired = sorted((e.computed_ms, path) for path, _, _, _, e in found
                         if e is not None and now_ms - e.computed_ms >= ttl_ms and not e.transitioned(now_ms))
        refresh = {path for _, path in expired[:budget]}
        refresh.update(path for path, _, _, _, e in found if e is not None and e.transitioned(now_ms))
        config_refusals: dict[str, LogError] = {}  # the topic's metadata or config, refused for each of its partitions
        configs = manager.topic_configs(dict.fromkeys(tp[0] for _, tp, _, _, _ in found), config_refusals)
        states = []
        self.computed = self.reused = 0
        seen = set()
        to_compute: list[tuple[int, str, TopicPartition, tuple, tuple, LogConfig]] = []
        for path, tp, signature, checkpoints, previous in found:
            seen.add(path)
            if tp[0] in config_refusals:
                refused(tp, config_refusals[tp[0]])
                continue
            config = configs[tp[0]]
            unchanged = (previous is not None and previous.trusted and previous.signature == signature
                         and previous.config == config)
            if unchanged and path not in refresh:
                states.append(previous.state)
                self.reused += 1
                continue
            to_compute.append((_urgency(previous, now_ms, unchanged), path, tp, signature, checkpoints, config))
        to_compute.sort(key=lambda c: c[0])  # stable: by directory within each urgency
        started = time.monotonic()
        for i, (_, path, tp, signature, checkpoints, config) in enumerate(to_compute):
            if budget_s is not None and pending is not None and i and time.monotonic() - started >= budget_s:
                pending.update(c[2] for c in to_compute[i:])
                break
            started_ns = time.time_ns()
            try:
                state = with_erasure_proof(manager, state_of(manager.planning_stats(location(tp), checkpoints), config,
                                                             now_ms=now_ms), now_ms)
            except LogChangedError as exc:  # a writer changed it while it was read: no state is one
                self._entries.pop(path, None)
                if pending is None:
                    refused(tp, exc)
                else:
                    pending.add(tp)  # read again at the next tick, never shown as unreadable
                continue
            except (LogError, OSError) as exc:
                self._entries.pop(path, None)
                if not (isinstance(exc, FileNotFoundError) and not os.path.lexists(path)):
                    refused(tp, exc)
                continue  # or deleted since the listing (a topic delete), as ``partition_stats`` skips it
            active = _active_signature(path, state)
            latest_change = max(signature[0], active[1])
            self._entries[path] = _Entry((signature[0], active, *signature[2:]), config, state, now_ms,
                                         trusted=started_ns - latest_change > self.racy_ns,
                                         transition_ms=next_transition_ms(state, now_ms))
            states.append(state)
            self.computed += 1
        if wanted is None:
            for path in set(self._entries) - seen:
                del self._entries[path]
        gaps = [(topic, p) for topic, count in sorted(counts.items()) if wanted is None or topic in wanted
                for p in range(count) if (topic, p) not in where and (unreadable is None or (topic, p) not in unreadable)]
        return sorted(states, key=lambda s: (s.topic, s.partition)), gaps

    @staticmethod
    def _missing_directories(manager: LogManager, gaps: list[TopicPartition],
                             unreadable: dict[TopicPartition, str] | None) -> None:
        """Refuse the partitions counted by their topic's metadata that have no directory, as a
        reader's open does (``Placement.missing_partition_error``), looking as it looks (a directory or a
        link, which it refuses). Looked at again under the topics lock, shared: a create writes
        its metadata before its directories, and a delete marks its metadata first (then the
        topic is no longer counted)."""
        with manager.metadata.read_lock():
            for topic, p in gaps:
                paths = [d.path / partition_dir_name(topic, p) for d in manager.log_dirs]
                meta = manager.metadata.topic(topic)
                if meta is None or p >= meta.partitions or any(path.is_dir() or path.is_symlink() for path in paths):
                    continue
                error = manager.placement.missing_partition_error(meta, p)
                if unreadable is None:
                    raise error
                unreadable[(topic, p)] = str(error)


#: The process's cache, shared by the sensors and schedules of the code location.
STATE_CACHE = StateCache()
