"""The compiled compaction core against the reference (issue 36): random logs cleaned by the real
cleaner under each core must come out byte for byte the same, with the same stats and
checkpoints; a budget too small for one pass still ends at the same records; and the compiled
record walk accepts exactly the bytes ``walk_records`` accepts, with the same verdicts.

The logs mix several segments, keys with many duplicates or all distinct, tombstones, records
without a key, committed and aborted transactions with their markers, every codec and record
headers. The map's cost fields of the report differ by design (each core charges its own map);
everything else must not.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage_engine import native
from storage_engine.cleaner import LogCleaner
from storage_engine.cleaner.dirty_scan import segment_latest_offsets
from storage_engine.cleaner.inputs import InputSegment
from storage_engine.cleaner.offset_map import OffsetMap
from storage_engine.cleaner.record_decisions import filter_batch, filter_v2_records, map_batch, map_v2_records
from storage_engine.record import CompressionType, Record, encode_batch
from storage_engine.record.v2 import walk_records
from storage_engine.record.varint import VarintError
from tests.helpers.cleaner import NOW, content, marker, raw_log, small_map_cleaner
from tests.helpers.core_switch import CORES, using

pytestmark = pytest.mark.skipif(native._MODULE is None, reason="the compiled core is not built here")

#: report fields that are timings or the map's cost, which each core measures its own way
MAP_COST_AND_TIME = {"duration_s", "scan_s", "index_s", "clean_s", "swap_s", "throttled_s", "mb_per_s",
                     "records_per_s", "map_capacity_entries", "map_used_bytes", "map_fill", "map_bytes_per_entry"}
RETENTION = 1000


def random_segments(seed: int, *, distinct: bool) -> list[list[bytes]]:
    """A log of 3-5 segments of raw batches (the last one active): every codec, headers, null
    keys, tombstones, transactions that commit or abort (their marker follows at once)."""
    rnd = random.Random(seed)
    segments: list[list[bytes]] = []
    offset = 0
    serial = 0
    pid = 1000
    for _ in range(rnd.randint(3, 5)):
        batches = []
        for _ in range(rnd.randint(1, 6)):
            recs = []
            for i in range(rnd.randint(1, 25)):
                serial += 1
                if rnd.random() < 0.05:
                    key = None
                elif distinct:
                    key = b"key-%08d" % serial
                else:
                    key = b"k%d" % rnd.randint(0, 12)
                value = None if rnd.random() < 0.15 else rnd.randbytes(rnd.randint(0, 40))
                headers = (("h", rnd.randbytes(3)),) if rnd.random() < 0.3 else ()
                recs.append(Record(offset + i, NOW + rnd.randint(-50, 50), key, value, headers))
            txn = rnd.choice([None, None, None, "commit", "abort"])
            codec = rnd.choice(list(CompressionType))
            if txn is None:
                batches.append(encode_batch(recs, base_offset=offset, compression=codec))
            else:
                pid += 1
                batches.append(encode_batch(recs, base_offset=offset, compression=codec, producer_id=pid,
                                            producer_epoch=0, base_sequence=0, is_transactional=True))
            offset += len(recs)
            if txn is not None:
                batches.append(marker(offset, pid, 0, commit=txn == "commit"))
                offset += 1
        segments.append(batches)
    return segments


def log_files(root: Path) -> dict[str, bytes]:
    part = root / "t-0"
    return {p.name: p.read_bytes() for p in sorted(part.iterdir()) if p.suffix == ".log"}


def clean_under(core: str, root: Path, segments, rounds: list[int], cleaner=None) -> list[dict]:
    """Write the log at ``root``, compact it once at each clock of ``rounds`` under ``core``;
    the reports without their timings and map costs."""
    out = []
    with using(core):
        m = raw_log(root, segments, delete_retention_ms=str(RETENTION))
        try:
            for now in rounds:
                kwargs = {} if cleaner is None else {"cleaner": cleaner()}
                report = LogCleaner(m).compact("t", 0, now_ms=now, **kwargs).to_dict()
                out.append({k: v for k, v in report.items() if k not in MAP_COST_AND_TIME})
            out.append({"checkpoint": m.get_log("t", 0).log_dir.cleaner_offsets.get(("t", 0)),
                        "records": content(m.get_log("t", 0))})
        finally:
            m.close()
    return out


@pytest.mark.parametrize("distinct", [False, True], ids=["duplicates", "distinct"])
@pytest.mark.parametrize("seed", range(6))
def test_both_cores_write_the_same_segments(tmp_path, seed, distinct):
    segments = random_segments(seed, distinct=distinct)
    rounds = [NOW, NOW + RETENTION + 1]  # the second pass is past every horizon the first stamped
    results = {}
    for core in CORES:
        root = tmp_path / core
        results[core] = (clean_under(core, root, segments, rounds), log_files(root))
    (c_reports, c_files), (r_reports, r_files) = results["compiled"], results["reference"]
    assert c_reports == r_reports
    assert c_files.keys() == r_files.keys()
    for name in c_files:
        assert c_files[name] == r_files[name], name


def test_a_tiny_budget_splits_passes_and_ends_at_the_same_records(tmp_path):
    """The same small byte budget: the compiled map holds several times the keys, so its passes
    differ from the reference's (and so may the bytes), but the records left do not."""
    segments = random_segments(7, distinct=True)
    ends = {}
    passes = {}
    for core in CORES:
        with using("reference"):  # the same byte budget for both: what the reference needs for 8 keys
            made = small_map_cleaner(8, key_len=12)
        rounds = [NOW] * 4 + [NOW + RETENTION + 1] * 2
        reports = clean_under(core, tmp_path / core, segments, rounds, cleaner=lambda m=made: m)
        ends[core] = reports[-1]["records"]
        passes[core] = sum(r["passes"] for r in reports[:-1])
    assert ends["compiled"] == ends["reference"]
    assert 1 < passes["compiled"] < passes["reference"], passes


# ------------------------------------------------------------------ the record walk, byte for byte


def _payload(records: list[Record]) -> bytes:
    return encode_batch(records, base_offset=records[0].offset)[61:]


def _reference(buf: bytes, start: int, stop: int, count: int, base: int, latest: int, table: dict, retain: bool):
    try:
        return filter_v2_records(buf, start, stop, count, base, latest, table.get, retain)
    except (IndexError, VarintError, ValueError):
        return "rejected"


def _compiled(buf: bytes, start: int, stop: int, count: int, base: int, latest: int, table: dict, retain: bool):
    core = native._MODULE
    km = core.KeyMap(1 << 20)
    for key, off in sorted(table.items(), key=lambda kv: kv[1]):
        km.put(key, off)
    try:
        return core.filter_v2_records(km, buf, start, stop, count, base, latest, retain)
    except core.CorruptBatch:
        return "rejected"


record = st.builds(lambda k, v, h: (k, v, h), st.one_of(st.none(), st.binary(max_size=5)),
                   st.one_of(st.none(), st.binary(max_size=8)), st.booleans())


@settings(max_examples=300, deadline=None)
@given(recs=st.lists(record, min_size=1, max_size=6), flips=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 255)),
                                                                       max_size=3),
       cut=st.integers(-3, 3), count_delta=st.integers(-1, 1), pad=st.integers(0, 3), latest=st.integers(-1, 8),
       retain=st.booleans())
def test_the_compiled_walk_accepts_and_decides_exactly_as_the_reference(recs, flips, cut, count_delta, pad, latest,
                                                                       retain):
    """Damaged record bytes (flipped bytes, cut or padded, a wrong count, bytes around the span):
    both refuse, or both give the same kept spans and counts."""
    records = [Record(i, NOW, k, v, (("h", b"x"),) if h else ()) for i, (k, v, h) in enumerate(recs)]
    body = bytearray(_payload(records))
    for at, byte in flips:
        if body:
            body[at % len(body)] = byte
    body = body[:len(body) + cut] if cut < 0 else body + bytes(cut)
    buf = bytes(pad) + bytes(body) + bytes(pad)
    start, stop, count = pad, pad + len(body), len(records) + count_delta
    table = {k: i for i, (k, _v, _h) in enumerate(recs) if k is not None}
    expected = _reference(buf, start, stop, count, 0, latest, table, retain)
    assert _compiled(buf, start, stop, count, 0, latest, table, retain) == expected


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=4)), min_size=1, max_size=30),
       min_offset=st.integers(0, 12), base=st.integers(0, 5))
def test_the_compiled_map_building_puts_what_the_reference_puts(keys, min_offset, base):
    records = [Record(base + i, NOW, k, b"v") for i, k in enumerate(keys)]
    buf = _payload(records)
    table: dict = {}
    complete, _rem, added, last, unkeyed = map_v2_records(buf, 0, len(buf), len(keys), base, min_offset, table,
                                                          1 << 30, 0)
    core = native._MODULE
    km = core.KeyMap(1 << 20)
    assert core.map_v2_records(km, buf, 0, len(buf), len(keys), base, min_offset) == (complete, added, last, unkeyed)
    assert len(km) == len(table) and all(km.get(k) == off for k, off in table.items())
    assert km.sorted_offsets() == sorted(table.values())


def test_a_walk_error_is_the_references_under_both_cores():
    """A batch the compiled walk refuses is re-walked by ``walk_records``: its error is raised."""
    buf = _payload([Record(0, NOW, b"k", b"v")])[:-1]
    with pytest.raises(ValueError) as ref:
        walk_records(buf, 1, 0, len(buf))
    for core in CORES:
        with using(core):
            omap = OffsetMap(1 << 20)
            with pytest.raises(ValueError) as got:
                map_batch(omap, buf, 0, len(buf), 1, 0, 0)
            assert type(got.value) is type(ref.value) and str(got.value) == str(ref.value)
            with pytest.raises(ValueError) as got:
                filter_batch(omap, buf, 0, len(buf), 1, 0, True)
            assert type(got.value) is type(ref.value) and str(got.value) == str(ref.value)


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.sampled_from([b"a", b"b", b"c", b""])), min_size=1, max_size=12),
       deltas=st.one_of(st.none(), st.lists(st.integers(-3, 14), min_size=12, max_size=12)),
       tombs=st.lists(st.booleans(), min_size=12, max_size=12), retain=st.booleans())
def test_deciding_the_dirty_range_by_offsets_matches_looking_keys_up(keys, deltas, tombs, retain):
    """A batch mapped by ``map_v2_records`` then filtered with ``dirty_start`` (the compiled walk
    decides its records by the map's offsets) against the reference's lookups, including batches
    whose offset deltas repeat or go backwards (the compiled map then looks keys up)."""
    records = [Record(i if deltas is None else deltas[i], NOW, k, None if tombs[i] else b"v")
               for i, k in enumerate(keys)]
    buf = _raw_payload(records)
    table: dict = {}
    map_v2_records(buf, 0, len(buf), len(keys), 100, 100, table, 1 << 30, 0)
    latest = max([100, *table.values()])
    expected = filter_v2_records(buf, 0, len(buf), len(keys), 100, latest, table.get, retain)
    core = native._MODULE
    km = core.KeyMap(1 << 20)
    core.map_v2_records(km, buf, 0, len(buf), len(keys), 100, 100)
    got = core.filter_v2_records(km, buf, 0, len(buf), len(keys), 100, latest, retain, 100)
    assert got == expected


def _raw_payload(records: list[Record]) -> bytes:
    """Records with the offset deltas given (``Record.offset``), repeated or falling ones too,
    which ``encode_batch`` refuses: built by hand as ``DefaultRecord`` bytes."""
    from storage_engine.record.varint import encode_varint

    out = b""
    for r in records:
        key = encode_varint(-1) if r.key is None else encode_varint(len(r.key)) + r.key
        value = encode_varint(-1) if r.value is None else encode_varint(len(r.value)) + r.value
        body = b"\x00" + encode_varint(0) + encode_varint(r.offset) + key + value + encode_varint(0)
        out += encode_varint(len(body)) + body
    return out


@pytest.mark.parametrize("seed", range(3))
def test_the_split_key_scan_gives_the_same_table_under_both_cores(tmp_path, seed):
    """The Spark job's per-span key scan (``segment_latest_offsets``): the same keys, offsets and
    order (the map file written from it is then the same bytes)."""
    segments = random_segments(seed, distinct=seed == 2)
    m = raw_log(tmp_path, segments)
    try:
        log = m.get_log("t", 0)
        tables = {}
        for core in CORES:
            with using(core):
                table: dict = {}
                for seg in log.segments[:-1]:
                    inp = InputSegment(seg, False, 1 << 16)
                    try:
                        segment_latest_offsets(inp, 3, 10**9, [], into=table)
                    finally:
                        inp.close()
                tables[core] = list(table.items())
        assert tables["compiled"] == tables["reference"] and tables["reference"]
    finally:
        m.close()
