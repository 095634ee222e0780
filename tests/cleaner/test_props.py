"""Property test: the cleaner against a plain model of what compaction keeps, for every
compaction strategy (KIP-280: ``offset``, ``timestamp``, ``header``).

Random appends (keys from a small set, values or tombstones, several records per batch, some
batches compressed, out-of-order timestamps and header versions, some versions missing or
unparsable), random segment sizes (so rolls happen on their own), explicit rolls, and
compactions at random, rising clocks with a large or a deliberately tiny offset map. The model
is a dict of the winning ``(version, offset)`` per key over the pass's whole cleaned range,
plus the KIP-534 horizon of every batch; after every pass the log must hold exactly the model's
records (offset, key, value, timestamp), every record above the cleaned range untouched, and
the horizons the model expects. Under ``offset`` every version is equal, so the winner is the
latest offset: Kafka's rule.
"""

from __future__ import annotations

import bisect
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage_engine.cleaner import Cleaner, LogCleaner
from storage_engine.cleaner.strategy import MISSING_VERSION
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.record import CompressionType, Record, encode_batch
from storage_engine.tools.verify import verify_log
from tests.helpers.cleaner import NOW, compacted, marker, raw_log, small_map_cleaner
from tests.helpers.core_switch import using

KEYS = [f"k{i}" for i in range(6)]
SMALL_MAP_KEYS = 3

# key, value (None: tombstone), timestamp delta, header version (None: no header; "bad": not 8 bytes)
record = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.text(alphabet="xyz", max_size=6)),
                   st.integers(-500, 500), st.one_of(st.integers(-3, 3), st.none(), st.just("bad")))
VERSION_HEADER = "ver"


def version_headers(version) -> tuple:
    """The record headers carrying ``version``, after a decoy of the same name (the last counts)."""
    if version is None:
        return (("other", b"x"),)
    if version == "bad":
        return ((VERSION_HEADER, b"12"),)
    return ((VERSION_HEADER, struct.pack(">q", -99)), ("other", b"x"), (VERSION_HEADER, struct.pack(">q", version)))


def model_version(strategy: str, timestamp: int, version) -> int:
    if strategy == "offset":
        return 0
    if strategy == "timestamp":
        return timestamp
    return version if isinstance(version, int) else MISSING_VERSION
batch = st.tuples(st.lists(record, min_size=1, max_size=4),
                  st.sampled_from([CompressionType.NONE, CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4]))
# A round: some batches, maybe an explicit roll, then a compaction after a clock advance with a
# large map or a tiny one (three keys: partial passes).
rounds = st.lists(
    st.tuples(st.lists(batch, min_size=1, max_size=10), st.booleans(), st.integers(0, 3000), st.booleans()),
    min_size=1,
    max_size=8,
)


class Model:
    """The records the log should hold, and each batch's delete horizon."""

    def __init__(self, retention: int) -> None:
        self.retention = retention
        self.records: dict[int, tuple[str, str | None, int, int]] = {}  # offset -> key, value, ts, batch base
        self.versions: dict[int, int] = {}  # offset -> version
        self.horizon: dict[int, int] = {}  # batch base -> delete horizon
        self.next_offset = 0

    def append(self, recs) -> None:
        """``recs``: (key, value, timestamp, version) of one batch."""
        base = self.next_offset
        for i, (k, v, ts, version) in enumerate(recs):
            self.records[base + i] = (k, v, ts, base)
            self.versions[base + i] = version
        self.next_offset += len(recs)

    def end_of_map(self, first_dirty: int, end: int, capacity: int | None) -> int:
        """Where the offset map stops: the first new key that does not fit, else ``end``."""
        seen: set[str] = set()
        for off in sorted(o for o in self.records if first_dirty <= o < end):
            key = self.records[off][0]
            if key not in seen:
                if capacity is not None and len(seen) >= capacity:
                    return off
                seen.add(key)
        return end

    def clean(self, segment_bases: list[int], end: int, now: int) -> None:
        """One pass over ``[0, end)``: per key, the highest ``(version, offset)`` wins; the newest
        record (``end - 1``) stays whatever its version; a winning tombstone goes after its horizon,
        unless the newest record is a lower version of its key."""
        winner: dict[str, tuple[int, int]] = {}
        for off in sorted(o for o in self.records if o < end):
            key = self.records[off][0]
            winner[key] = max(winner.get(key, (MISSING_VERSION - 1, -1)), (self.versions[off], off))
        newest = self.records.get(end - 1)
        recopied = lambda off: segment_bases[bisect.bisect_right(segment_bases, off) - 1] < end  # noqa: E731
        batches_with_tombstones: set[int] = set()
        for off in sorted(self.records):
            if not recopied(off):
                continue
            key, value, _, base = self.records[off]
            if off < end:
                wins = (self.versions[off], off) == winner[key]
                if not wins and off != end - 1:
                    del self.records[off]
                    continue
                # a winning tombstone stays while the newest record is a lower version of its key
                shadows_newest = newest is not None and newest[0] == key and self.versions[end - 1] < self.versions[off]
                if wins and value is None and base in self.horizon and now >= self.horizon[base] and not shadows_newest:
                    del self.records[off]
                    continue
            if value is None:
                batches_with_tombstones.add(base)
        for base in batches_with_tombstones:
            self.horizon.setdefault(base, now + self.retention)

    def content(self) -> list[tuple]:
        return [(off, k, v, ts) for off, (k, v, ts, _) in sorted(self.records.items())]


def read_all(log) -> list[tuple]:
    log.refresh()
    if log.log_end_offset == log.log_start_offset:
        return []
    return [(r.offset, r.key.decode(), None if r.value is None else r.value.decode(), r.timestamp)
            for r in log.read(log.log_start_offset, max_records=10**9)]


# The offset strategy's map building and keep/drop walk run compiled under the compiled core:
# both cores are held to the model. The version strategies run the reference's loops under both.
@pytest.mark.parametrize(("strategy", "core"), [("offset", "compiled"), ("offset", "reference"),
                                                ("timestamp", None), ("header", None)])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=rounds, segment_bytes=st.integers(300, 1500), retention=st.sampled_from([0, 700, 5000]))
def test_compaction_matches_the_model(tmp_path_factory, strategy, core, rounds, segment_bytes, retention):
    if core is None:
        _matches_the_model(tmp_path_factory, strategy, rounds, segment_bytes, retention)
    else:
        with using(core):
            _matches_the_model(tmp_path_factory, strategy, rounds, segment_bytes, retention)


def _matches_the_model(tmp_path_factory, strategy, rounds, segment_bytes, retention):
    root = tmp_path_factory.mktemp("prop")
    model = Model(retention)
    now = NOW
    header = VERSION_HEADER if strategy == "header" else ""
    with compacted(root, segment_bytes=segment_bytes, delete_retention_ms=retention,
                   compaction_strategy=strategy, compaction_strategy_header=header) as m:
        log = m.get_log("t", 0)
        big = Cleaner()
        small = small_map_cleaner(SMALL_MAP_KEYS, key_len=2, versioned=strategy != "offset")
        for batches, roll, advance, tiny in rounds:
            for recs, codec in batches:
                log.append([ProducerRecord(k.encode(), None if v is None else v.encode(), now + dt, version_headers(ver))
                            for k, v, dt, ver in recs], now=now, compression=codec)
                model.append([(k, v, now + dt, model_version(strategy, now + dt, ver)) for k, v, dt, ver in recs])
            if roll:
                log.roll()
            now += advance
            log.refresh()
            bases = [s.base_offset for s in log.segments]
            first_dirty = log.log_dir.cleaner_offsets.get(("t", 0)) or 0
            active = bases[-1]
            report = LogCleaner(m).compact("t", 0, now_ms=now, cleaner=small if tiny else big, max_passes=1)
            if first_dirty >= active:
                assert report.passes == 0, report.to_dict()
                continue
            # a version strategy maps from the last pass's newest record (it competes again)
            map_from = first_dirty - 1 if strategy != "offset" and first_dirty > 0 else first_dirty
            end = model.end_of_map(map_from, active, SMALL_MAP_KEYS if tiny else None)
            assert report.passes == 1 and report.new_checkpoint == end, (report.to_dict(), end)
            model.clean(bases, end, now)
            assert read_all(log) == model.content()
            horizons = {b.header.base_offset: b.header.delete_horizon_ms for b in log.iter_batches()}
            for base, horizon in model.horizon.items():
                if any(rb == base for _, _, _, rb in model.records.values()):
                    assert horizons.get(base) == horizon, (base, horizon, horizons.get(base))
        assert read_all(log) == model.content()
        report = verify_log(log)
        assert report.ok, report.problems


# A transactional batch: its records, and whether its transaction commits or aborts (None: not
# transactional).
txn_batch = st.tuples(st.lists(record, min_size=1, max_size=4), st.sampled_from([None, None, "commit", "abort"]))


@pytest.mark.parametrize("strategy", ["timestamp", "header"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(txn_batch, min_size=1, max_size=12), per_segment=st.integers(1, 4),
       later=st.lists(record, min_size=1, max_size=4))
def test_versions_with_transactions_match_the_model(tmp_path_factory, strategy, batches, per_segment, later):
    """Version strategies over transactions: each transactional batch is followed by its marker;
    aborted records never compete (they go), committed ones compete like any other. Two passes,
    the second past every tombstone's horizon after one more batch."""
    root = tmp_path_factory.mktemp("txn")
    model = Model(0)
    segments: list[list[bytes]] = [[]]
    for n, (recs, txn) in enumerate(batches):
        if len(segments[-1]) >= per_segment:
            segments.append([])
        base = model.next_offset
        records = [Record(base + i, NOW + dt, k.encode(), None if v is None else v.encode(), version_headers(ver))
                   for i, (k, v, dt, ver) in enumerate(recs)]
        pid = 100 + n if txn else -1
        segments[-1].append(encode_batch(records, base_offset=base, producer_id=pid, producer_epoch=0 if txn else -1,
                                         base_sequence=0 if txn else -1, is_transactional=txn is not None))
        if txn == "abort":
            model.next_offset += len(recs)  # never in the model: the first pass removes them
        else:
            model.append([(k, v, NOW + dt, model_version(strategy, NOW + dt, ver)) for k, v, dt, ver in recs])
        if txn:
            segments[-1].append(marker(model.next_offset, pid, 0, commit=txn == "commit"))
            model.next_offset += 1
    end = model.next_offset
    segments.append([encode_batch([Record(end, NOW, b"zz", b"active")], base_offset=end)])
    model.append([("zz", "active", NOW, model_version(strategy, NOW, None))])
    header = VERSION_HEADER if strategy == "header" else ""
    with raw_log(root, segments, delete_retention_ms="0", compaction_strategy=strategy,
                 compaction_strategy_header=header) as m:
        log = m.get_log("t", 0)
        bases = [s.base_offset for s in log.segments]
        assert LogCleaner(m).compact("t", 0, now_ms=NOW).new_checkpoint == end
        model.clean(bases, end, NOW)
        assert read_all(log) == model.content()
        log.append([ProducerRecord(k.encode(), None if v is None else v.encode(), NOW + dt, version_headers(ver))
                    for k, v, dt, ver in later], now=NOW)
        model.append([(k, v, NOW + dt, model_version(strategy, NOW + dt, ver)) for k, v, dt, ver in later])
        log.roll()
        log.refresh()
        bases = [s.base_offset for s in log.segments]
        second = LogCleaner(m).compact("t", 0, now_ms=NOW + 1)
        assert second.new_checkpoint == bases[-1]
        model.clean(bases, bases[-1], NOW + 1)
        assert read_all(log) == model.content()
        assert verify_log(log).ok
