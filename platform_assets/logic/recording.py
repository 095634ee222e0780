"""Which partitions a state-sensor tick records, worst verdict first, within its budget.

Recording a partition costs Dagster two events (its observation, which the sensor daemon writes
after the tick, and its ``log_health`` evaluation, which the sensor writes itself:
``checks.record_sensor_results``): ~10-28 ms apiece in the SQLite event log
(``bench/bench_events.py``). A tick therefore records
at most ``LOGPLAT_MAX_OBSERVATIONS_PER_TICK`` partitions, and when more changed (a first tick
over 100,000 partitions), what needs attention goes first: a partition that cannot be read,
then an ERROR verdict (an erasure deadline missed), then a WARN (cleaning due), then the ones
that passed. The rest keep their old digest in the cursor, so they are "changed" again at the
next tick, which records them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import dagster as dg

from .check_outcomes import CheckOutcome
from .log_state import PartitionState


@dataclass(frozen=True)
class Recording:
    """One partition to record: its ``log_health`` outcome, and its state, or why it cannot be
    read (``unreadable``: then only its outcome, which says so)."""

    topic: str
    outcome: CheckOutcome
    state: PartitionState | None = None
    unreadable: str | None = None

    @property
    def rank(self) -> int:
        """0 unreadable, 1 ERROR, 2 WARN, 3 passed: lower goes first."""
        if self.unreadable is not None:
            return 0
        if self.outcome.passed:
            return 3
        return 1 if self.outcome.severity is dg.AssetCheckSeverity.ERROR else 2


def worst_first(recordings: Iterable[Recording], budget: int) -> tuple[list[Recording], int]:
    """The ``budget`` recordings to make now, worst verdict first (then by topic and partition),
    and how many are left for the next tick."""
    ordered = sorted(recordings, key=lambda r: (r.rank, r.topic, r.outcome.partition))
    return ordered[:budget], max(0, len(ordered) - budget)
