"""Which log directory a new partition goes to: the one holding the fewest partitions, as Kafka's
``LogManager.nextLogDirs`` picks (``log.dirs``). Broker replica and rack assignment is not here:
this platform has no brokers.
"""

from __future__ import annotations

from typing import Mapping

from ..errors import LogError


def choose_log_dir(partition_counts: Mapping[str, int]) -> str:
    """The log dir holding the fewest partitions; ties go to the earliest in the given order."""
    if not partition_counts:
        raise LogError("no log directory to place a partition in")
    best = None
    for log_dir, count in partition_counts.items():
        if best is None or count < partition_counts[best]:
            best = log_dir
    return best  # type: ignore[return-value]
