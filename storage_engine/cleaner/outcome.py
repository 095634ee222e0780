"""Which outcome an engine error gives a partition's cleaning: one table, read by the local
cleaner's runs over many partitions, the Spark job's tasks and its commit.

Kafka's cleaner thread catches a partition's failure, marks the partition uncleanable and goes
on with the others (``LogCleaner.CleanerThread.tryCleanFilthiestLog``); here the error names
the partition's outcome instead, and the run goes on all the same.
"""

from __future__ import annotations

from ..errors import LogChangedError, LogError
from ..outcomes import CHANGED, FAILED, SKIPPED, Outcome
from .staging import CleanerBusyError

#: Most specific first: the first class the error is an instance of names its outcome.
OUTCOME_OF_ERROR: tuple[tuple[type[BaseException], Outcome], ...] = (
    (CleanerBusyError, SKIPPED),  # another process is cleaning the partition
    (LogChangedError, CHANGED),  # another writer changed its segments under the pass: nothing swapped
    (LogError, FAILED),  # its files cannot be read or written as Kafka's format says
    (OSError, FAILED),
)

#: The errors a partition's cleaning turns into its outcome; any other propagates.
PARTITION_ERRORS: tuple[type[BaseException], ...] = tuple(cls for cls, _ in OUTCOME_OF_ERROR)


def outcome_of(exc: BaseException) -> tuple[Outcome, str]:
    """The outcome and the reason for ``exc`` (one of :data:`PARTITION_ERRORS`): a failure's
    reason names the error's class, a skip or a change says only what happened."""
    for cls, outcome in OUTCOME_OF_ERROR:
        if isinstance(exc, cls):
            return outcome, f"{type(exc).__name__}: {exc}" if outcome == FAILED else str(exc)
    raise TypeError(f"no outcome for {type(exc).__name__}") from exc
