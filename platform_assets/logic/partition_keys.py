"""Partition keys: a topic's asset partitions are its Kafka partition numbers.

Keys are the partition number as Kafka writes it (``"0"``, ``"1"``, ... ``"10"``), not zero-padded:
a key is what a user types and reads next to the ``<topic>-<n>`` directory. Dagster orders a
dynamic partition set by *insertion*, not by key, and a single-run backfill covers a contiguous
range in that order, so the keys must be inserted in numeric order. Kafka only ever adds
partitions at the end, so appending new numbers keeps the order; when a gap is filled (a
partition directory copied in late, or discovered out of order), :func:`plan_key_update` deletes
the keys after the gap and adds them back in order over two ticks. Deleting a key never touches
its materializations: Dagster keeps events by key, and they reappear with the key.

A key that is not a partition on disk (one added by hand, a typo) is deleted unless it has a
history; see :func:`plan_key_update`. ``defs/partitions.py`` holds the Dagster side.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from storage_engine.files.naming import parse_partition_number


def partition_key(partition: int) -> str:
    return str(partition)


def partition_number(key: str) -> int:
    """The Kafka partition of a key; ``ValueError`` for a key that is not a partition number."""
    number = parse_partition_number(key)
    if number is None:
        raise ValueError(f"partition key {key!r} is not a partition number")
    return number


@dataclass(frozen=True)
class KeyUpdate:
    """Keys to delete, then keys to add (in this order), to make a partition set list every
    partition on disk in numeric order."""

    delete: tuple[str, ...] = ()
    add: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.delete or self.add)


def plan_key_update(existing: Sequence[str], on_disk: Iterable[int], with_history: Collection[str] = ()) -> KeyUpdate:
    """The next step towards ``existing`` (in insertion order) listing every partition on disk,
    and every partition with a history (``with_history``: keys ever materialized), in numeric
    order.

    A key that is neither (one typed into the UI's "Add partition", a typo, a partition that
    never existed) is deleted: its run fails, saying the partition is not in the log dirs, and
    it must not linger as a grey "missing" partition.

    Keys already in order are kept. When a key is missing before others (a gap filled), the keys
    after the gap are deleted and the missing ones added; Dagster refuses to delete and add one
    key in the same tick, so the deleted keys come back, in order, at the next step (one sensor
    tick later; meanwhile no run is requested for them). Partitions that disappeared from disk
    keep their keys when they have a history: it stays visible, and Kafka never removes a
    partition of a live topic.
    """
    on_disk = set(on_disk)
    strays = tuple(dict.fromkeys(k for k in keys_not_on_disk(existing, on_disk) if k not in with_history))
    existing = [k for k in existing if k not in strays]
    numbers = [n for n in (parse_partition_number(k) for k in existing) if n is not None]
    desired = sorted(set(numbers) | on_disk)
    if desired == numbers:
        return KeyUpdate(delete=strays)
    cut = next((i for i, (a, b) in enumerate(zip(numbers, desired, strict=False)) if a != b), len(numbers))
    # Deleting a key removes every row holding it, so a key listed twice (once in the kept
    # prefix, once after the cut) must be cut from its first position too.
    tail = set(numbers[cut:])
    cut = next((i for i in range(cut) if numbers[i] in tail), cut)
    deleted = set(numbers[cut:])
    return KeyUpdate(
        delete=strays + tuple(partition_key(n) for n in sorted(deleted)),
        add=tuple(partition_key(n) for n in desired[cut:] if n not in deleted),
    )


def keys_not_on_disk(existing: Iterable[str], on_disk: Collection[int]) -> list[str]:
    """Keys that name no partition on disk (the ones ``plan_key_update`` asks the history of)."""
    return [k for k in existing if parse_partition_number(k) is None or parse_partition_number(k) not in on_disk]
