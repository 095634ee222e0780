"""Which transactions a segment's ``.txnindex`` lists, and with what last stable offset: the
one rule for the appender, recovery, ``verify``, the cleaner's header scan and the
``read_committed`` filter (``isolation.py``).

Kafka derives the entries from producer state as batches are appended or replayed
(``ProducerAppendInfo.append`` and ``appendEndTxnMarker``, ``ProducerStateManager.lastStableOffset``,
``LogSegment.updateTxnIndex``): a producer's first transactional data batch opens its
transaction at that batch's base offset; its COMMIT or ABORT marker closes it; an ABORT that
closes a non-empty transaction becomes an entry whose last stable offset is the first offset
of the oldest transaction of *another* producer still open, or the marker's offset + 1 when
none is. A marker without an open transaction (an empty transaction, or one whose data the
cleaner removed) adds nothing, and an emptied control batch (no record left) changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..index import AbortedTxn
from ..record.control import ControlRecordType
from ..record.records import BatchHeader


class AbortedTxnTracker:
    """Open transactions (producer id -> first offset) as batches stream past in offset order;
    ``observe`` returns the ``.txnindex`` entry a batch adds, if any."""

    def __init__(self, ongoing: Mapping[int, int] | None = None) -> None:
        self._ongoing: dict[int, int] = dict(ongoing or {})

    @property
    def ongoing(self) -> Mapping[int, int]:
        """The open transactions, read-only: only ``observe`` and ``end`` change them."""
        return MappingProxyType(self._ongoing)

    def observe(self, header: BatchHeader, control_type: int | None) -> AbortedTxn | None:
        """``control_type``: the control record type of a control batch (None when emptied)."""
        pid = header.producer_id
        if header.magic < 2 or pid < 0:
            return None
        if not header.is_control:
            if header.is_transactional and pid not in self._ongoing:
                self._ongoing[pid] = header.base_offset
            return None
        return self.end(pid, header.last_offset, control_type)

    def end(self, producer_id: int, marker_offset: int, control_type: int | None) -> AbortedTxn | None:
        """A control record of type ``control_type`` at ``marker_offset`` for ``producer_id``: a
        COMMIT or ABORT closes the producer's open transaction; the entry when it aborted one."""
        if control_type not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
            return None
        first = self._ongoing.pop(producer_id, None)
        if first is None or control_type != ControlRecordType.ABORT:
            return None
        return AbortedTxn(producer_id, first, marker_offset, min(self._ongoing.values(), default=marker_offset + 1))
