"""Transactions written through the engine's own append path, as a broker's leader takes them:
producers' transactional batches (``Log.append_batch``) and the coordinator's markers
(``Log.append_end_txn_marker``)."""

from __future__ import annotations

from storage_engine.log.appender import AppendInfo
from storage_engine.record import Record, encode_batch

NOW = 1_000_000_000


class TxnWriter:
    """Appends to ``log`` for several producers (epoch 0), keeping each one's sequence."""

    def __init__(self, log, now: int = NOW) -> None:
        self.log = log
        self.now = now
        self._seq: dict[int, int] = {}

    def data(self, pid: int, *pairs: tuple[str, str | None]) -> AppendInfo:
        """One transactional batch of ``(key, value)`` strings (value None: a tombstone)."""
        recs = [Record(i, self.now, k.encode(), None if v is None else v.encode()) for i, (k, v) in enumerate(pairs)]
        seq = self._seq.get(pid, 0)
        self._seq[pid] = seq + len(recs)
        data = encode_batch(recs, base_offset=0, producer_id=pid, producer_epoch=0, base_sequence=seq,
                            is_transactional=True)
        return self.log.append_batch(data, now=self.now)

    def commit(self, pid: int) -> AppendInfo:
        return self.log.append_end_txn_marker(pid, 0, commit=True, now=self.now)

    def abort(self, pid: int) -> AppendInfo:
        return self.log.append_end_txn_marker(pid, 0, commit=False, now=self.now)
