"""Asset partitions: one dynamic partition set per topic, keyed by the Kafka partition number
(``logic/partition_keys.py``: the keys, and how a set is kept in numeric order).
"""

from __future__ import annotations

import functools

import dagster as dg

from ..logic.partition_keys import KeyUpdate


def partitions_def_name(topic: str) -> str:
    """The name of a topic's partition set. Dagster takes any text here, so the topic goes in
    unchanged: the name must never change while a backfill is in flight."""
    return f"partitions__{topic}"


@functools.cache
def topic_partitions_def(topic: str) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=partitions_def_name(topic))


def key_update_requests(
    topic: str, update: KeyUpdate
) -> list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest]:
    """The sensor requests carrying out ``update`` (deletions first: the daemon applies them in order)."""
    pdef = topic_partitions_def(topic)
    requests: list[dg.AddDynamicPartitionsRequest | dg.DeleteDynamicPartitionsRequest] = []
    if update.delete:
        requests.append(pdef.build_delete_request(list(update.delete)))
    if update.add:
        requests.append(pdef.build_add_request(list(update.add)))
    return requests
