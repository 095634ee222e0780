"""Fetch isolation: what a ``read_committed`` consumer sees of a partition (Kafka's
``FetchIsolation.TXN_COMMITTED``), pure over a stream of batches.

Kafka splits the work: the broker returns batches below the last stable offset (LSO) with the
aborted transactions of that range from its ``.txnindex`` files (``collectAbortedTransactions``),
and the consumer drops a producer's transactional data batches that lie inside one of its
aborted transactions (``[first offset, marker offset]``), and every control batch. The engine
has both halves in one process: the aborted transactions come from the rule that writes the
``.txnindex`` entries (``AbortedTxnTracker``) run over the same stream, so the filter, the
index and the cleaner agree on which marker ends which transaction. A transactional data batch
is held back until its producer's marker decides it. Below the LSO every transaction is
decided, so that marker exists, though it may lie above the LSO (an older transaction of
another producer can end after a newer one began); the filter reads on past the LSO only
until the batches it holds back are decided. A cleaned log keeps this true: Kafka's cleaner
removes a COMMIT or ABORT marker only once no batch of its transaction is left, and an emptied
control batch (no marker in it any more) ends nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from ..errors import ConfigError
from ..record import RawBatch
from ..record.control import control_type_of
from .aborted_txns import AbortedTxnTracker


class FetchIsolation(Enum):
    """Kafka's consumer ``isolation.level`` (the broker's ``FetchIsolation``; a single replica's
    high watermark is its log end, so ``FETCH_LOG_END`` and ``HIGH_WATERMARK`` are one here)."""

    READ_UNCOMMITTED = "read_uncommitted"
    READ_COMMITTED = "read_committed"


def fetch_isolation(value: str | FetchIsolation) -> FetchIsolation:
    """``value`` as a :class:`FetchIsolation`; anything else is refused in the consumer's words."""
    if isinstance(value, FetchIsolation):
        return value
    try:
        return FetchIsolation(value)
    except ValueError:
        raise ConfigError("isolation.level", value,
                          "String must be one of: read_committed, read_uncommitted") from None


def committed_batches(batches: Iterable[RawBatch], stable_end: int,
                      path_of: Callable[[int], str | None] = lambda _offset: None) -> Iterator[RawBatch]:
    """The batches of ``batches`` (in offset order) a ``read_committed`` fetch returns: those
    below ``stable_end`` (the LSO, or less), less the data batches of aborted transactions,
    in their order. Control batches stay (readers skip them as they always do).

    A transactional data batch is held back, and every batch after it with it, until its
    producer's next marker ends its transaction; ``batches`` is read past ``stable_end`` only
    while something is held back. ``path_of(offset)`` names the file of a batch for the error of
    a damaged control record.
    """
    txns = AbortedTxnTracker()  # transactions begun in this stream: the ones held batches are in
    held: deque[_Held] = deque()  # in offset order
    undecided: dict[int, list[_Held]] = {}  # producer id -> its held batches no marker decided yet
    for raw in batches:
        h = raw.header
        if h.is_control and h.producer_id in txns.ongoing:
            aborted = txns.observe(h, control_type_of(raw, path_of(h.base_offset)))
            if h.producer_id not in txns.ongoing:  # the marker ended the transaction
                for entry in undecided.pop(h.producer_id, ()):
                    entry.decided = True
                    entry.aborted = aborted is not None and aborted.first_offset <= entry.batch.header.base_offset
        elif not h.is_control:
            txns.observe(h, None)
        if h.base_offset < stable_end:
            waits = h.is_transactional and not h.is_control
            entry = _Held(raw, decided=not waits)
            if waits:
                undecided.setdefault(h.producer_id, []).append(entry)
            held.append(entry)
        while held and held[0].decided:
            done = held.popleft()
            if not done.aborted:
                yield done.batch
        if h.base_offset >= stable_end and not held:
            return
    # batches no marker decided (a log cut short of its markers): below the LSO they count as
    # committed, as Kafka's consumer counts every batch its aborted-transaction list misses
    yield from (entry.batch for entry in held if not entry.aborted)


@dataclass(slots=True)
class _Held:
    """A batch :func:`committed_batches` holds back until it and those before it are decided."""

    batch: RawBatch
    decided: bool
    aborted: bool = False
