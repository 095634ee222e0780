"""The cleaning report: what needs cleaning across every topic, and why, on one screen.

Dagster 1.13's open-source UI has no view across assets' check results: the catalog shows no
check status, and a check's latest result is the latest of *any* partition, so a healthy
partition checked last hides a WARN on another (``docs/decisions.md``, "One health signal").
The report answers the question for all topics at once: each partition whose ``log_health``
verdict (``health.health_of``) is not "passed", worst first (ERROR, then WARN; within each,
the earliest erasure deadline, then the dirtiest, then the most bytes retention would free),
with the verdict's reasons, and the partitions by verdict as plain numbers the UI plots.

The state sensor records it as the ``platform/cleaning_report`` asset's materialization at each
tick that records a partition's change (``defs/assets.py``); this module only builds it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from .health import health_with_failure
from .log_state import PartitionState, TopicPartition
from .partition_keys import partition_key
from .record_core import record_core_metadata
from .units import iso_time, megabytes, size_text

ERROR, WARN, OK, UNREADABLE = "error", "warn", "ok", "unreadable"
VERDICTS = (UNREADABLE, ERROR, WARN, OK)  # worst first: the order of the rows and the counts
MAX_ROWS = 200

#: What each name on the report's materialization means (for its asset description).
REPORT_GLOSSARY = {
    "report": "the partitions that need cleaning, worst first: topic, partition, verdict, reasons, erasure "
              "deadline (max.compaction.lag.ms after the oldest uncleaned record), dirty ratio, deletable bytes",
    "topics": "topics on disk",
    "partitions": "partitions on disk",
    **{f"partitions_{v}": f"partitions whose log_health verdict is {v}" for v in VERDICTS},
    "deletable_mb": "bytes retention would delete now, over every partition, in MB",
    "earliest_deadline": "the earliest erasure deadline among the rows",
}


@dataclass(frozen=True)
class ReportRow:
    """One partition that needs attention; ``deadline_ms``: its erasure deadline (the oldest
    uncleaned record's ``max.compaction.lag.ms``), if it has one."""

    topic: str
    partition: int
    verdict: str
    reason: str
    deadline_ms: int | None = None
    dirty_ratio: float | None = None
    deletable_bytes: int = 0

    def sort_key(self) -> tuple[Any, ...]:
        no_deadline = self.deadline_ms is None
        return (VERDICTS.index(self.verdict), no_deadline, self.deadline_ms or 0, -(self.dirty_ratio or 0.0),
                -self.deletable_bytes, self.topic, self.partition)


@dataclass(frozen=True)
class CleaningReport:
    """Every partition's verdict, counted, and the rows of those that need attention, worst first."""

    rows: tuple[ReportRow, ...]
    counts: Mapping[str, int]
    topics: int

    @property
    def partitions(self) -> int:
        return sum(self.counts.values())

    def headline(self) -> str:
        counted = ", ".join(f"{self.counts.get(v, 0)} {v}" for v in VERDICTS)
        return f"{counted}, of {self.partitions} partition(s) in {self.topics} topic(s)"

    def markdown(self, max_rows: int = MAX_ROWS) -> str:
        """The rows as a Markdown table, at most ``max_rows`` of them, then how many more."""
        if not self.rows:
            return f"Nothing needs cleaning: {self.headline()}."
        lines = [f"**{self.headline()}**", "",
                 "| topic | partition | verdict | reason | deadline | dirty ratio | deletable |",
                 "|---|---|---|---|---|---|---|"]
        for r in self.rows[:max_rows]:
            cells = (r.topic, partition_key(r.partition), r.verdict.upper(), r.reason,
                     "" if r.deadline_ms is None else iso_time(r.deadline_ms),
                     "" if r.dirty_ratio is None else f"{r.dirty_ratio:.3f}",
                     size_text(r.deletable_bytes) if r.deletable_bytes else "")
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        if len(self.rows) > max_rows:
            lines += ["", f"... and {len(self.rows) - max_rows} more"]
        return "\n".join(lines)

    def metadata(self, max_rows: int = MAX_ROWS) -> dict[str, Any]:
        """The report as the asset's metadata: the table, and the figures as plain numbers."""
        values: dict[str, Any] = {"report": dg.MetadataValue.md(self.markdown(max_rows)),
                                  "topics": self.topics, "partitions": self.partitions}
        values.update({f"partitions_{v}": self.counts.get(v, 0) for v in VERDICTS})
        values["deletable_mb"] = megabytes(sum(r.deletable_bytes for r in self.rows))
        values.update(record_core_metadata())  # the sensors' process, which read the logs for this report
        deadlines = [r.deadline_ms for r in self.rows if r.deadline_ms is not None]
        if deadlines:
            values["earliest_deadline"] = dg.MetadataValue.timestamp(min(deadlines) / 1000)
        return values


def _cell(text: str) -> str:
    """A table cell: a ``|`` or a line break in a reason would end it early."""
    return text.replace("|", "\\|").replace("\n", " ")


def _row(state: PartitionState, failed: str | None) -> tuple[str, ReportRow | None]:
    health = health_with_failure(state, cleaning_failed=failed)
    if health.passed:
        return OK, None
    verdict = ERROR if health.severity is dg.AssetCheckSeverity.ERROR else WARN
    deadline = state.candidacy.deadline if state.candidacy is not None else None
    return verdict, ReportRow(state.topic, state.partition, verdict, "; ".join(health.reasons) or health.summary,
                              None if deadline is None else deadline.deadline_ms, state.dirty_ratio,
                              state.deletable_bytes)


def cleaning_report(states: Iterable[PartitionState], unreadable: Mapping[TopicPartition, str],
                    failed: Mapping[TopicPartition, str] | None = None) -> CleaningReport:
    """The report over ``states`` (every readable partition) and ``unreadable`` (why each other
    one cannot be read); ``failed``: why the partitions whose cleaning failed in their current
    state are held back (``cleaning_failures``), each an ERROR saying so."""
    failed = failed or {}
    counts: Counter[str] = Counter()
    rows: list[ReportRow] = []
    topics: set[str] = set()
    for state in states:
        verdict, row = _row(state, failed.get(state.tp))
        counts[verdict] += 1
        topics.add(state.topic)
        if row is not None:
            rows.append(row)
    for (topic, partition), why in unreadable.items():
        counts[UNREADABLE] += 1
        topics.add(topic)
        rows.append(ReportRow(topic, partition, UNREADABLE, f"cannot be read: {why}"))
    return CleaningReport(tuple(sorted(rows, key=ReportRow.sort_key)), dict(counts), len(topics))

