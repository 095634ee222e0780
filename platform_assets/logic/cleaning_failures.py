"""Which partitions whose cleaning failed may be asked again, and when: one rule for the run
sensors and the sweep.

A failure is keyed on the partition's state as the run saw it (``PartitionState.state_hash``,
which covers the topic's config: altering the config is a new state). Its kind comes from the
engine's error class, which the run records per partition (``<partition>:<ErrorClass>`` in
``logplat/failed_partitions``):

* **permanent** for that state: the bytes are bad or do not fit the topic's rules
  (``CorruptRecordError``, ``CorruptIndexError``, ``LogGapError``, ...). Asked again, the same
  log fails the same way, so the partition is left until its state changes (an append that
  rolls a segment, a repair, a config change); Kafka's cleaner does the same with a log it could
  not clean: ``LogCleanerManager`` marks it uncleanable and leaves it until the broker restarts
  (KAFKA-19895 reports such partitions stuck there); here it is until the log changes, and
  ``log_health`` says why meanwhile.
* **transient**: a disk that was full, an I/O error, a Spark or JVM failure, a run worker killed
  (a run that failed without reporting its partitions). Retried after a backoff that doubles
  from the sensor interval with each failure of the same state, up to ``MAX_BACKOFF_S``.

Pure decisions over plain run facts; ``defs/sensors.py`` reads the runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from storage_engine.errors import (
    CheckpointError,
    ConfigError,
    CorruptIndexError,
    CorruptRecordError,
    InvalidRecordError,
    InvalidSegmentNameError,
    LogGapError,
    NotRegularFileError,
    OffsetOverflowError,
    RecordTooLargeError,
    UnsafePathError,
)
from storage_engine.files.naming import parse_partition_number

from .log_state import TopicPartition
from .units import iso_time

PERMANENT, TRANSIENT = "permanent", "transient"
#: The engine errors that mean the partition's bytes (or its files) are bad for the state they
#: were read in; their subclasses too.
PERMANENT_ERRORS: tuple[type[Exception], ...] = (
    CorruptRecordError, CorruptIndexError, InvalidRecordError, RecordTooLargeError, InvalidSegmentNameError,
    OffsetOverflowError, LogGapError, CheckpointError, UnsafePathError, NotRegularFileError, ConfigError,
)
#: What a run that failed without naming its partitions (a worker killed, Spark gone) is counted as.
RUN_FAILED = "RunFailed"
MAX_BACKOFF_S = 3600.0


def _with_subclasses(classes: Iterable[type]) -> set[str]:
    names: set[str] = set()
    todo = list(classes)
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return names


_PERMANENT_NAMES = _with_subclasses(PERMANENT_ERRORS)


def error_class(reason: str) -> str:
    """The error class a failure reason starts with (``CorruptRecordError: ...``, as the engine's
    ``outcome_of`` spells it)."""
    head, sep, _ = reason.partition(":")
    return head.strip() if sep and head.strip().isidentifier() else RUN_FAILED


def failure_kind(error: str) -> str:
    """``permanent`` for an engine error meaning the bytes are bad, else ``transient``."""
    return PERMANENT if error in _PERMANENT_NAMES else TRANSIENT


def encode_failed(failed: Mapping[str, str]) -> str:
    """The ``logplat/failed_partitions`` tag: ``<partition key>:<error class>`` for each."""
    return ",".join(f"{key}:{error}" for key, error in failed.items())


@dataclass(frozen=True)
class PastFailure:
    """One partition's failed cleaning: in which state, of which kind, when the run ended."""

    tp: TopicPartition
    state: str
    error: str
    ended_s: float

    @property
    def kind(self) -> str:
        return failure_kind(self.error)


def failures_of_run(topic: str, tags: Mapping[str, str], states_tag: str, failed_tag: str,
                    ended_s: float) -> list[PastFailure]:
    """The partitions a failed run failed on: those it named (``failed_tag``), else every
    partition it covered (``states_tag``: ``<partition>:<token>``, a token starting with the
    state hash), as a transient failure of the run. A bare ``<partition>`` names a permanent
    failure (runs tagged before the error class was recorded)."""
    states = {}
    for item in filter(None, tags.get(states_tag, "").split(",")):
        key, _, token = item.partition(":")
        states[key] = token.split("-")[0]
    named = [item.partition(":") for item in filter(None, tags.get(failed_tag, "").split(","))]
    errors = ({key: error if sep else CorruptRecordError.__name__ for key, sep, error in named} if named
              else dict.fromkeys(states, RUN_FAILED))
    out = []
    for key, error in errors.items():
        partition = parse_partition_number(key)
        if partition is not None and key in states:
            out.append(PastFailure((topic, partition), states[key], error, ended_s))
    return out


@dataclass(frozen=True)
class Hold:
    """Why a partition that needs work is not asked for now."""

    tp: TopicPartition
    error: str
    failures: int
    retry_at_s: float | None  # None: not until the state changes

    @property
    def text(self) -> str:
        name = f"{self.tp[0]}-{self.tp[1]}"
        if self.retry_at_s is None:
            return f"{name} ({self.error}: permanent for this state, left until the log or its config changes)"
        return f"{name} ({self.error}, {self.failures} failure(s): retry after {iso_time(int(self.retry_at_s * 1000))})"


@dataclass(frozen=True)
class FailureVerdicts:
    """For the partitions that need work: which are held back, and how often the others
    already failed in their current state (the attempt number a retry's run key carries)."""

    held: dict[TopicPartition, Hold]
    attempts: dict[TopicPartition, int]

    def note(self) -> str | None:
        """The tick's sentence on the held partitions: how many, which, why."""
        if not self.held:
            return None
        holds = sorted(self.held.values(), key=lambda h: h.tp)
        shown = "; ".join(h.text for h in holds[:3]) + (f"; and {len(holds) - 3} more" if len(holds) > 3 else "")
        return (f"{len(holds)} partition(s) whose cleaning failed in their current state are held back "
                f"(log_health says why): {shown}")


def judge_failures(failures: Iterable[PastFailure], states: Mapping[TopicPartition, str], *, now_s: float,
                   base_s: float, cap_s: float = MAX_BACKOFF_S) -> FailureVerdicts:
    """``states``: each partition's current state hash. A permanent failure in the current
    state holds the partition until it changes; ``n`` transient ones hold it for
    ``min(base_s * 2**(n-1), cap_s)`` after the last."""
    same: dict[TopicPartition, list[PastFailure]] = {}
    for f in failures:
        if states.get(f.tp) == f.state:
            same.setdefault(f.tp, []).append(f)
    held: dict[TopicPartition, Hold] = {}
    attempts: dict[TopicPartition, int] = {}
    for tp, found in same.items():
        permanent = [f for f in found if f.kind == PERMANENT]
        last = max(found, key=lambda f: f.ended_s)
        if permanent:
            held[tp] = Hold(tp, permanent[0].error, len(found), None)
            continue
        retry_at = last.ended_s + min(base_s * 2 ** (len(found) - 1), cap_s)
        if now_s < retry_at:
            held[tp] = Hold(tp, last.error, len(found), retry_at)
        else:
            attempts[tp] = len(found)
    return FailureVerdicts(held, attempts)
