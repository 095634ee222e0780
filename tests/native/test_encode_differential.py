"""The compiled encoder and batch rebuilder against the reference (issue 36): random records
under every codec and option give the same batch bytes under both cores, the compiled bytes
decode (by the reference and by aiokafka's codec) to the records written, bad arguments raise
the same exception class and message, and the cleaner's rebuilt batches (``rebuild_v2_batch``
on random survivors) are byte for byte the same.

The core returns None for input it leaves to the reference; the tests call it directly too, so
a core that declined everything (and passed only through the fallback) would fail them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch

from storage_engine import native
from storage_engine.record import CompressionType, Record, TimestampType, decode_batch, encode_batch, scan_batches
from storage_engine.record.rewrite import RebuildPlan, rebuild_v2_batch, record_bytes
from storage_engine.record.v2 import walk_records

pytestmark = pytest.mark.skipif(native._MODULE is None, reason="the compiled core is not built (native/)")

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
HEADER_KEYS = ["", "trace", "ключ", "🔑" * 3, "k" * 200]


def under(kind: str, fn: Callable[[], Any]) -> tuple[str, Any]:
    """``fn()`` under one core: ``("ok", result)`` or ``("error", (class, message))``."""
    prev = native.status().requested
    native.use(kind)
    try:
        return "ok", fn()
    except Exception as exc:  # the comparison is the point: whatever either core raises
        return "error", (type(exc), str(exc))
    finally:
        native.use(prev)


def same_under_both(fn: Callable[[], Any]) -> tuple[str, Any]:
    compiled, reference = under("compiled", fn), under("reference", fn)
    assert compiled == reference
    return compiled


def _blob(rnd: random.Random) -> bytes | None:
    roll = rnd.random()
    if roll < 0.1:
        return None
    if roll < 0.2:
        return b""
    return rnd.randbytes(rnd.choice((1, 16, 100, 127, 128, 300, 20_000)))


def _headers(rnd: random.Random) -> tuple[tuple[str, bytes | None], ...]:
    if rnd.random() < 0.6:
        return ()
    return tuple((rnd.choice(HEADER_KEYS), _blob(rnd)) for _ in range(rnd.randint(1, 4)))


def random_records(rnd: random.Random, first_offset: int) -> list[Record]:
    """Increasing offsets with gaps (some deltas needing 5-byte varints), timestamps around a
    base with negative deltas and some far ones, null keys and values, headers."""
    base_ts = rnd.choice((2**36, 1_700_000_000_000, 2**40))  # above the deltas: a valid first timestamp
    offset = first_offset
    out = []
    for _ in range(rnd.randint(1, 40)):
        ts = base_ts + rnd.choice((0, rnd.randint(-5000, 5000), rnd.randint(-(2**35), 2**35)))
        out.append(Record(offset, ts, _blob(rnd), _blob(rnd), _headers(rnd)))
        offset += rnd.choice((1, 1, 2, 200, 2**20))
    return out


def random_options(rnd: random.Random, records: list[Record], base_offset: int) -> dict[str, Any]:
    opts: dict[str, Any] = {
        "base_offset": base_offset,
        "compression": rnd.choice(list(CompressionType)),
        "timestamp_type": rnd.choice((TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)),
        "producer_id": rnd.choice((-1, 0, 2**62)),
        "producer_epoch": rnd.choice((-1, 0, 32767)),
        "base_sequence": rnd.choice((-1, 0, INT32_MAX)),
        "partition_leader_epoch": rnd.choice((-1, 7)),
        "is_transactional": rnd.random() < 0.3,
        "is_control": rnd.random() < 0.1,
    }
    lod = records[-1].offset - base_offset
    roll = rnd.random()
    if roll < 0.2:
        opts["delete_horizon_ms"] = rnd.choice((0, 1_800_000_000_000))
    elif roll < 0.3:
        opts["base_timestamp"] = rnd.choice((-1, 0, 1_700_000_000_000))
    if rnd.random() < 0.3 and lod <= INT32_MAX:
        opts["last_offset_delta"] = rnd.randint(lod, min(lod + 1000, INT32_MAX))
    if rnd.random() < 0.3:
        opts["max_timestamp"] = rnd.choice((-1, 1_900_000_000_000))
    if opts["compression"] != CompressionType.NONE and rnd.random() < 0.3:
        opts["compression_level"] = {CompressionType.GZIP: 1, CompressionType.LZ4: 12,
                                     CompressionType.ZSTD: 5}.get(opts["compression"])
    return opts


def _decoded_expectation(records: list[Record], data: bytes) -> list[tuple]:
    (raw,) = list(scan_batches(data))
    lat = raw.header.timestamp_type == TimestampType.LOG_APPEND_TIME
    return [(r.offset, raw.header.max_timestamp if lat else r.timestamp, r.key, r.value, tuple(r.headers))
            for r in records]


def _aiokafka_reads(data: bytes) -> list[tuple]:
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    return [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]


@pytest.mark.parametrize("seed", range(60))
def test_random_batches_same_bytes_and_decode_back(seed: int) -> None:
    rnd = random.Random(seed)
    base_offset = rnd.choice((0, 5, 2**40))
    records = random_records(rnd, base_offset + rnd.choice((0, 3)))
    opts = random_options(rnd, records, base_offset)
    kind, data = same_under_both(lambda: encode_batch(records, **opts))
    assert kind == "ok", data
    plain = native._MODULE.encode_records(records, Record, base_offset, opts.get("delete_horizon_ms"),
                                          opts.get("last_offset_delta"), opts.get("max_timestamp"),
                                          opts.get("base_timestamp"))
    assert plain is not None  # the core wrote these records itself
    (raw,) = list(scan_batches(data))
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_batch(raw)]
    assert got == _decoded_expectation(records, data)
    assert _aiokafka_reads(data) == _decoded_expectation(records, data)


@pytest.mark.parametrize("seed", range(20))
def test_core_writes_the_batch_itself(seed: int) -> None:
    """The core's own answer (not the fallback) for ordinary records: the reference's bytes."""
    rnd = random.Random(1000 + seed)
    records = random_records(rnd, 0)
    core = native._MODULE
    assert core is not None
    reference = under("reference", lambda: encode_batch(records, base_offset=0))[1]
    assert core.encode_batch(records, Record, 0, 0, -1, -1, -1, -1, None, None, None, None) == reference
    plain = core.encode_records(records, Record, 0, None, None, None, None)
    assert plain is not None and plain[0] == reference[61:]


def test_records_of_other_types_same_bytes() -> None:
    """Types the core reads through getattr or leaves to the reference: the same bytes."""

    class Sub(Record):
        __slots__ = ()

    class Plain:
        def __init__(self, offset: int, timestamp: int, key: Any, value: Any, headers: Any) -> None:
            self.offset, self.timestamp, self.key, self.value, self.headers = offset, timestamp, key, value, headers

    cases: list[Any] = [
        [Sub(0, 10, b"k", b"v")],
        [Plain(0, 10, b"k", b"v", ()), Plain(1, 9, None, b"w", (("h", b"x"),))],
        [Record(0, 10, bytearray(b"k"), memoryview(b"v"))],
        [Record(0, 10, b"k", b"v", [["h", b"x"]])],
        [Record(0, 10, b"k", b"v", [("h", bytearray(b"x"))])],
        (Record(0, 10, b"k", None, None),),
        [Record(True, 10, b"k", b"v")],
    ]
    for records in cases:
        kind, result = same_under_both(lambda r=records: encode_batch(r, base_offset=0))
        assert kind == "ok", result


BAD: list[tuple[list[Record], dict[str, Any]]] = [
    ([], {}),
    ([Record(0, 1, b"k", b"v")], {"base_timestamp": 1, "delete_horizon_ms": 2}),
    ([Record(0, -5, b"k", b"v")], {}),
    ([Record(0, 1, b"k", b"v")], {"base_timestamp": -2}),
    ([Record(3, 1, b"k", b"v")], {"base_offset": 4}),
    ([Record(3, 1, b"k", b"v"), Record(3, 1, b"k", b"v")], {}),
    ([Record(3, 1, b"k", b"v"), Record(2, 1, b"k", b"v")], {}),
    ([Record(0, 1, b"k", b"v"), Record(INT32_MAX + 1, 1, b"k", b"v")], {}),
    ([Record(0, 1, b"k", b"v")], {"timestamp_type": TimestampType.NO_TIMESTAMP_TYPE}),
    ([Record(0, 1, b"k", b"v")], {"timestamp_type": 2}),
    ([Record(0, 1, b"k", b"v")], {"compression": 7}),
    ([Record(0, 1, b"k", b"v")], {"compression": "lz4"}),
    ([Record(0, 1, b"k", b"v"), Record(5, 1, b"k", b"v")], {"last_offset_delta": 4}),
    ([Record(0, 1, b"k", b"v")], {"last_offset_delta": INT32_MAX + 1}),
    ([Record(0, 1, b"k", b"v"), Record(1, INT64_MAX, b"k", b"v")], {"base_timestamp": -1}),
    ([Record(0, 1, b"k", b"v"), Record(1, 2**64, b"k", b"v")], {}),
    ([Record(0, 1, b"k", b"v", ((None, b"x"),))], {}),  # type: ignore[arg-type]
    ([Record(0, 1, b"k", b"v", (("h", "text"),))], {}),  # type: ignore[arg-type]
    ([Record(0, 1, b"k", b"v", (("\ud800", b"x"),))], {}),
    ([Record(0, 1, b"k", b"v", (("h",),))], {}),  # type: ignore[arg-type]
    ([Record(0, 1, "key", b"v")], {}),  # type: ignore[arg-type]
    ([Record(0, 1.5, b"k", b"v")], {}),  # type: ignore[arg-type]
    ([Record(0, 1, b"k", b"v")], {"producer_epoch": 40_000}),
    ([Record(0, 1, b"k", b"v")], {"partition_leader_epoch": 2**31}),
    ([Record(0, 1, b"k", b"v")], {"producer_id": 2**63}),
    ([Record(0, 1, b"k", b"v")], {"max_timestamp": 2**63}),
    ([Record(0, 1, b"k", b"v")], {"base_offset": 2**63}),
    ([Record(0, 1, b"k", b"v")], {"compression": CompressionType.LZ4, "compression_level": 99}),
    ([Record(0, 1, b"k", b"v")], {"compression": CompressionType.ZSTD, "producer_epoch": 40_000}),
    ([Record(0, 1, b"k", b"v"), Record(0, 1, b"k", b"v")], {"compression": CompressionType.GZIP}),
]


@pytest.mark.parametrize("records, opts", BAD)
def test_bad_arguments_same_error(records: list[Record], opts: dict[str, Any]) -> None:
    kwargs = {"base_offset": 0, **opts}
    kind, result = same_under_both(lambda: encode_batch(records, **kwargs))
    assert kind == "error"


def _survivor_cases(seed: int) -> tuple[Any, bytes, list[tuple[int, int, int]], int | None]:
    """A random batch written by the reference, its plain records and a random set of survivors."""
    rnd = random.Random(seed)
    records = random_records(rnd, 100)
    opts: dict[str, Any] = {
        "base_offset": 100,
        "compression": rnd.choice(list(CompressionType)),
        "timestamp_type": rnd.choice((TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME)),
        "producer_id": 9,
        "producer_epoch": 2,
        "base_sequence": 40,
        "is_transactional": rnd.random() < 0.3,
    }
    if rnd.random() < 0.2:
        opts["delete_horizon_ms"] = 1_800_000_000_000
    data = under("reference", lambda: encode_batch(records, **opts))[1]
    (raw,) = list(scan_batches(data))
    buf, start, end = record_bytes(raw)
    walked = walk_records(buf, raw.header.records_count, start, end)
    kept = sorted(rnd.sample(range(len(walked)), rnd.randint(1, len(walked))))
    spans = [(walked[i][0], walked[i][1], walked[i][3]) for i in kept]
    horizon = rnd.choice((None, None, 1_900_000_000_000))
    return raw.header, buf, spans, horizon


@pytest.mark.parametrize("seed", range(60))
def test_rebuild_same_bytes(seed: int) -> None:
    header, buf, spans, horizon = _survivor_cases(seed)
    kind, (data, max_ts) = same_under_both(lambda: rebuild_v2_batch(header, buf, spans, horizon))
    assert kind == "ok"
    (raw,) = list(scan_batches(data))
    assert raw.header.max_timestamp == max_ts and raw.header.records_count == len(spans)
    decode_batch(raw)  # CRC and structure
    if header.attributes & 0x07 == 0:  # the core's own answer, not the fallback
        plan = RebuildPlan.of(header, spans, horizon)
        fields = (header.base_offset, header.partition_leader_epoch, plan.attributes, header.last_offset_delta,
                  header.producer_id, header.producer_epoch, header.base_sequence)
        assert native._MODULE.rebuild_v2(buf, spans, header.base_timestamp, plan.base_timestamp,
                                         plan.fixed_timestamp, fields) == (data, max_ts)


@pytest.mark.parametrize("seed", range(10))
def test_rebuild_odd_spans_same_outcome(seed: int) -> None:
    """Spans the core does not take (past the buffer, empty, cutting a record): the reference's
    outcome, bytes or error, under both."""
    header, buf, spans, horizon = _survivor_cases(5000 + seed)
    rnd = random.Random(seed)
    s, e, d = spans[0]
    odd = [
        [(s, e + len(buf), d)] + spans[1:],
        [(s, s, d + 1)],
        [(s, s + 1, d + 1)],
        [(s + 1, e, d - 1)],
        [(e, s, d)],
        [],
        [(s, e, d + 2**70)],
    ]
    for case in odd:
        h = rnd.choice((None, 5))
        same_under_both(lambda c=case, h=h: rebuild_v2_batch(header, buf, c, h))
    strided = memoryview(bytes(buf))[::2]  # not contiguous: the core leaves it to the reference
    same_under_both(lambda: rebuild_v2_batch(header, strided, spans[:1], None))
