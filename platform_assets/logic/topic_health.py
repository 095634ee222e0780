"""A topic's one health signal: the rollup of its partitions' current ``log_health`` results.

Dagster 1.13's open-source UI shows a check's latest execution of *any* partition in the asset's
Checks list detail pane and its Overview ("Latest check results"), while the list's status is
the rollup over the partitions: two screens side by side disagreed (``docs/decisions.md``,
section 10). ``topic_health`` is unpartitioned, so it has one latest result, which every screen
shows alike; that result is this rollup over what Dagster itself holds as each partition's
current ``log_health`` (``AssetCheckPartitionInfo``: the check's Partitions view), so it agrees
with that view by construction:

* **failed, ERROR** when any partition's current result is an ERROR failure (an erasure deadline
  missed, the last cleaning failed, a partition that cannot be read);
* **failed, WARN** when any is a WARN failure (cleaning due);
* **passed** otherwise. A partition whose result is not current (materialized since, so the
  Partitions view shows it "Missing") or whose check a run planned but has not evaluated yet
  is counted, and named, but fails nothing: the view shows no verdict for it either.

The description counts them and names the worst partitions first with their reasons, bounded in
length; the metadata has the counts as plain numbers and the failing partitions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import dagster as dg

from .partition_keys import partition_number

UNREADABLE, ERROR, WARN, PASSED, PENDING, MISSING = "unreadable", "error", "warn", "passed", "pending", "missing"
LEVELS = (UNREADABLE, ERROR, WARN, PASSED, PENDING, MISSING)  # worst first
FAILING = (UNREADABLE, ERROR, WARN)
NAMED_PER_LEVEL = 3  # partitions named with their reason per level; the rest are counted
MAX_REASON = 160
MAX_DESCRIPTION = 1000


@dataclass(frozen=True)
class PartitionVerdict:
    """One partition's current ``log_health`` as Dagster holds it: ``level`` is one of ``LEVELS``."""

    partition: str
    level: str
    reason: str = ""

    def sort_key(self) -> tuple[int, int, str]:
        try:
            number = partition_number(self.partition)
        except ValueError:
            number = -1
        return LEVELS.index(self.level), number, self.partition


def verdict_of(partition: str, *, passed: bool, severity: dg.AssetCheckSeverity, description: str,
               status: str | None) -> PartitionVerdict:
    """A recorded ``log_health`` evaluation as a verdict; ``status`` is its ``status`` metadata
    (``unreadable`` for a partition the engine refuses to open). The description's leading
    ``partition N:`` (``CheckOutcome.shown``) is dropped: the rollup names the partition itself."""
    reason = description.removeprefix(f"partition {partition}: ")
    if passed:
        return PartitionVerdict(partition, PASSED, reason)
    if status == UNREADABLE:
        return PartitionVerdict(partition, UNREADABLE, reason)
    return PartitionVerdict(partition, ERROR if severity is dg.AssetCheckSeverity.ERROR else WARN, reason)


@dataclass(frozen=True)
class TopicHealth:
    """The rollup of one topic's partition verdicts, as ``topic_health``'s one result."""

    verdicts: tuple[PartitionVerdict, ...]

    def count(self, level: str) -> int:
        return sum(1 for v in self.verdicts if v.level == level)

    @property
    def failing(self) -> tuple[PartitionVerdict, ...]:
        return tuple(v for v in self.verdicts if v.level in FAILING)

    @property
    def passed(self) -> bool:
        return not self.failing

    @property
    def severity(self) -> dg.AssetCheckSeverity:
        """How a failure shows: ERROR when any partition is unreadable or ERROR, else WARN."""
        worst = {v.level for v in self.failing}
        return dg.AssetCheckSeverity.ERROR if worst & {UNREADABLE, ERROR} else dg.AssetCheckSeverity.WARN

    def description(self) -> str:
        total = len(self.verdicts)
        parts = []
        for level in LEVELS:
            if level == PASSED:
                continue
            of_level = [v for v in self.verdicts if v.level == level]
            if of_level:
                named = "; ".join(f"{v.partition}: {_short(v.reason)}" for v in of_level[:NAMED_PER_LEVEL])
                more = f"; {len(of_level) - NAMED_PER_LEVEL} more" if len(of_level) > NAMED_PER_LEVEL else ""
                parts.append(f"{level.upper()} {len(of_level)} ({named}{more})")
        if not total:
            head = "no partition has a log_health result yet"
        elif self.failing:
            head = f"{len(self.failing)} of {total} partition(s) need attention"
        else:
            head = f"{self.count(PASSED)} of {total} partition(s) passed"
        text = head + (": " + ", ".join(parts) if parts else "")
        return text if len(text) <= MAX_DESCRIPTION else text[:MAX_DESCRIPTION - 3] + "..."

    def metadata(self) -> dict[str, Any]:
        """The counts by verdict as plain numbers the UI plots, and the failing partitions, worst first."""
        values: dict[str, Any] = {"partitions": len(self.verdicts)}
        values.update({f"partitions_{level}": self.count(level) for level in LEVELS})
        values["failing_partitions"] = dg.MetadataValue.text(", ".join(v.partition for v in self.failing))
        return values

    def digest(self) -> str:
        """12 hex digits of what the result shows: a new result is recorded only when it changes."""
        shown = f"{self.passed}|{self.severity.value}|{self.description()}|{sorted(self.metadata().items(), key=str)}"
        return hashlib.sha256(shown.encode()).hexdigest()[:12]


def topic_health(verdicts: Iterable[PartitionVerdict]) -> TopicHealth:
    """The rollup of a topic's partitions' verdicts, worst first (then by partition number)."""
    return TopicHealth(tuple(sorted(verdicts, key=PartitionVerdict.sort_key)))


def _short(reason: str) -> str:
    return reason if len(reason) <= MAX_REASON else reason[:MAX_REASON - 3] + "..."
