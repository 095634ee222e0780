"""Which logs the queued and running runs are about to clean, from their tags.

A sensor skips a partition while a run covering it is queued or in flight. A run names what it
covers in Dagster's own partition tags (``dagster._core.storage.tags``): one partition, or a
range of keys, which are partition numbers in numeric order (``partition_keys``); a run with
neither covers its topics whole. The Dagster side (``defs/sensors.py``) reads the runs and
their topics; this decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .log_state import TopicPartition
from .partition_keys import partition_number

PARTITION_NAME_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


@dataclass(frozen=True)
class BusyLogs:
    """Partitions (or whole topics) that a queued or running run is about to clean."""

    partitions: frozenset[TopicPartition] = frozenset()
    topics: frozenset[str] = frozenset()

    def __contains__(self, tp: object) -> bool:
        return tp in self.partitions or (isinstance(tp, tuple) and tp[0] in self.topics)


def _partition_numbers(tags: Mapping[str, str]) -> list[int] | None:
    """The partitions a run's tags name; None when they name none (or name them unreadably)."""
    try:
        if PARTITION_NAME_TAG in tags:
            return [partition_number(tags[PARTITION_NAME_TAG])]
        if RANGE_START_TAG in tags and RANGE_END_TAG in tags:
            return list(range(partition_number(tags[RANGE_START_TAG]), partition_number(tags[RANGE_END_TAG]) + 1))
    except ValueError:
        pass
    return None


def logs_covered(runs: Iterable[tuple[Mapping[str, str], Sequence[str]]]) -> BusyLogs:
    """The logs covered by runs given as (tags, topics): the partitions their tags name in each
    of their topics, else those topics whole."""
    partitions: set[TopicPartition] = set()
    topics: set[str] = set()
    for tags, run_topics in runs:
        numbers = _partition_numbers(tags)
        for topic in run_topics:
            if numbers is None:
                topics.add(topic)
            else:
                partitions.update((topic, n) for n in numbers)
    return BusyLogs(frozenset(partitions), frozenset(topics))
