"""The compiled decode side against the reference, on random batches and damaged bytes.

Seeded random logs cover what the record walk branches on: every codec, null keys and values,
headers (none, empty values, null values, non-ASCII keys), CreateTime and LogAppendTime,
control and transactional batches, negative timestamp deltas, varints longer than two bytes
(values over 8 KB, timestamp deltas over 2^13), several batches per log and offset windows.
Each log is read under both cores by ``decode_batch``, ``batches_to_arrow`` (``.equals()``),
``walk_records`` and ``timestamp_deltas``; damaged copies (bytes flipped, cut, appended, with
and without the CRC recomputed so the record parser is reached) must give the same exception
class and message under both, or the same output. aiokafka's ``DefaultRecordBatch`` is a third,
independent reader of the uncompressed and lz4 batches.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from crc32c import crc32c

from storage_engine import native
from storage_engine.record.columnar import batches_to_arrow
from storage_engine.record.compression import CompressionType, compress, decompress
from storage_engine.record.records import Record, TimestampType
from storage_engine.record.scan import decode_batch, scan_batches
from storage_engine.record.v2 import RECORD_BATCH_OVERHEAD, timestamp_deltas, walk_records
from storage_engine.record.v2_builder import HEAD_STRUCT, assemble_batch, encode_batch
from tests.helpers.core_switch import outcome

pytestmark = pytest.mark.skipif(native._MODULE is None, reason=f"compiled core not usable here: {native._WHY}")

CODECS = list(CompressionType)
HEADER_KEYS = ["trace", "", "clé", "ключ", "鍵"]


@pytest.fixture(autouse=True)
def _restore_core() -> Iterator[None]:
    prev = native.status().requested
    yield
    native.use(prev)


def _record(rng: random.Random, offset: int, base_ts: int) -> Record:
    key = None if rng.random() < 0.15 else rng.randbytes(rng.choice([0, 3, 16, 200]))
    value = None if rng.random() < 0.15 else rng.randbytes(rng.choice([0, 1, 100, 9000]))  # 9000: 3-byte varint
    headers: tuple[tuple[str, bytes | None], ...] = ()
    if rng.random() < 0.4:
        headers = tuple((rng.choice(HEADER_KEYS), rng.choice([None, b"", rng.randbytes(rng.randint(1, 40))]))
                        for _ in range(rng.randint(1, 3)))
    ts = base_ts + rng.choice([0, 1, -7, 5000, -20000, 10**9])  # negative and > 2-byte deltas
    return Record(offset=offset, timestamp=ts, key=key, value=value, headers=headers)


def _batch(rng: random.Random, base_offset: int, codec: CompressionType) -> tuple[bytes, int]:
    """One random v2 batch and the offset after it."""
    n = rng.choice([1, 2, 5, 30])
    offsets = sorted(rng.sample(range(base_offset, base_offset + 3 * n), n))  # gaps, as compaction leaves
    base_ts = 1_700_000_000_000
    records = [_record(rng, o, base_ts) for o in offsets]
    lat = rng.random() < 0.2
    data = encode_batch(
        records, base_offset=base_offset, compression=codec,
        timestamp_type=TimestampType.LOG_APPEND_TIME if lat else TimestampType.CREATE_TIME,
        max_timestamp=base_ts + 99 if lat else None,
        producer_id=7 if rng.random() < 0.3 else -1, producer_epoch=0, base_sequence=0,
        is_transactional=rng.random() < 0.3, is_control=rng.random() < 0.1,
        last_offset_delta=offsets[-1] - base_offset + rng.choice([0, 0, 2]))
    return data, offsets[-1] + 3


def _log(rng: random.Random, codecs: list[CompressionType] = CODECS) -> bytes:
    out, offset = [], rng.randint(0, 1000)
    for _ in range(rng.randint(1, 4)):
        data, offset = _batch(rng, offset, rng.choice(codecs))
        out.append(data)
    return b"".join(out)


def _under_both(fn: Callable[[], Any]) -> tuple[tuple[str, Any], tuple[str, Any]]:
    native.use("reference")
    ref = outcome(fn)
    native.use("compiled")
    return ref, outcome(fn)


def _readers(data: bytes, verify: bool, lo: int, hi: int | None) -> list[tuple[str, Callable[[], Any]]]:
    """Every decode-side entry point over ``data``: name and call."""
    def decoded() -> list:
        return [decode_batch(raw, verify=verify) for raw in scan_batches(data)]

    def arrow() -> pa.RecordBatch:
        return batches_to_arrow(scan_batches(data), verify=verify, min_offset=lo, max_offset=hi)

    out = [("decode_batch", decoded), ("batches_to_arrow", arrow)]
    try:
        raws = list(scan_batches(data))
    except Exception:  # a damaged batch header: the two decoders above cover it
        raws = []
    for raw in raws:
        if raw.header.attributes & 0x07 == 0:
            start = raw.position + RECORD_BATCH_OVERHEAD
            end, count = raw.position + raw.header.size_in_bytes, raw.header.records_count
            out.append(("walk_records", lambda s=start, e=end, c=count: walk_records(data, c, s, e)))
            out.append(("timestamp_deltas", lambda s=start, e=end, c=count: timestamp_deltas(data, c, s, e)))
        else:
            try:
                plain = decompress(raw.header.attributes & 0x07, raw.data[RECORD_BATCH_OVERHEAD:])
            except Exception:  # damaged compressed bytes: the decoders above cover them
                continue
            c = raw.header.records_count
            out.append(("walk_records", lambda p=plain, c=c: walk_records(p, c)))
            out.append(("timestamp_deltas", lambda p=plain, c=c: timestamp_deltas(p, c)))
    return out


def _check(data: bytes, rng: random.Random) -> None:
    lo = rng.choice([0, 0, rng.randint(0, 1200)])
    hi = rng.choice([None, rng.randint(lo, lo + 200)])
    for verify in (True, False):
        for name, fn in _readers(data, verify, lo, hi):
            ref, comp = _under_both(fn)
            assert ref == comp, f"{name} (verify={verify}, window {lo}..{hi}) diverges: {ref!r} != {comp!r}"


def _fix_crc(data: bytearray) -> None:
    """Recompute the CRC of every v2 batch in ``data`` that still has a sane header, so the
    damage reaches the record parser instead of the CRC check."""
    pos = 0
    while pos + RECORD_BATCH_OVERHEAD <= len(data):
        base, length, epoch, magic, _crc = HEAD_STRUCT.unpack_from(data, pos)
        end = pos + 12 + length
        if magic != 2 or length < RECORD_BATCH_OVERHEAD - 12 or end > len(data):
            return
        HEAD_STRUCT.pack_into(data, pos, base, length, epoch, magic, crc32c(bytes(data[pos + 21:end])))
        pos = end


def _damage(rng: random.Random, data: bytes) -> bytes:
    d = bytearray(data)
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        if kind < 0.6 and d:
            at = rng.randrange(RECORD_BATCH_OVERHEAD if rng.random() < 0.8 and len(d) > RECORD_BATCH_OVERHEAD else 0,
                               len(d))
            d[at] = rng.randrange(256) if rng.random() < 0.5 else d[at] ^ (1 << rng.randrange(8))
        elif kind < 0.8:
            del d[rng.randrange(len(d)):]
        else:
            at = rng.randrange(len(d) + 1)
            d[at:at] = rng.randbytes(rng.randint(1, 8))
    if rng.random() < 0.7:
        _fix_crc(d)
    return bytes(d)


def _damage_compressed(rng: random.Random, data: bytes) -> bytes:
    """A compressed batch whose *plain* records are damaged, then compressed again and given a
    valid CRC: the decompression succeeds and the record walk meets the damage."""
    raw = next(iter(scan_batches(data)))
    h = raw.header
    plain = bytearray(decompress(h.attributes & 0x07, raw.data[RECORD_BATCH_OVERHEAD:]))
    if plain:
        at = rng.randrange(len(plain))
        plain[at] = rng.randrange(256)
    if rng.random() < 0.3:
        del plain[rng.randrange(len(plain) + 1):]
    return assemble_batch(h.base_offset, h.partition_leader_epoch, h.attributes, h.last_offset_delta,
                          h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence,
                          h.records_count, compress(h.attributes & 0x07, bytes(plain)))


def test_random_logs_read_the_same_under_both_cores() -> None:
    rng = random.Random(36)
    for _ in range(60):
        _check(_log(rng), rng)


def test_offset_windows_cut_batches_the_same_way() -> None:
    rng = random.Random(3601)
    data = _log(rng, [CompressionType.NONE, CompressionType.LZ4])
    offsets = [r.offset for raw in scan_batches(data) for r in decode_batch(raw)]
    for lo in (0, offsets[0], offsets[0] + 1, offsets[len(offsets) // 2], offsets[-1], offsets[-1] + 1):
        for hi in (None, lo, lo + 1, offsets[-1], offsets[-1] + 1):
            ref, comp = _under_both(lambda lo=lo, hi=hi: batches_to_arrow(scan_batches(data), min_offset=lo,
                                                                           max_offset=hi))
            assert ref == comp, (lo, hi)


def test_empty_and_header_only_input() -> None:
    for data in (b"", encode_batch([Record(5, 1, b"k", b"v")], base_offset=5, is_control=True)):
        ref, comp = _under_both(lambda data=data: batches_to_arrow(scan_batches(data)))
        assert ref == comp and ref[1][1] == []


def test_damaged_bytes_fail_the_same_way() -> None:
    rng = random.Random(3602)
    for _ in range(250):
        _check(_damage(rng, _log(rng, [CompressionType.NONE] * 3 + CODECS)), rng)


def test_damaged_records_inside_compressed_batches_fail_the_same_way() -> None:
    rng = random.Random(3603)
    for _ in range(80):
        data, _ = _batch(rng, rng.randint(0, 100), rng.choice(CODECS[1:]))
        _check(_damage_compressed(rng, data), rng)


def test_walks_mirror_the_reference_checks() -> None:
    """Hand-made records at the walks' own limits: shorter than 6 bytes, ending inside the key,
    a key length below -1, bytes after the last record, a count past the records."""
    good = encode_batch([Record(0, 5, b"key", b"value"), Record(1, 6, None, None)], base_offset=0)
    plain = good[RECORD_BATCH_OVERHEAD:]
    cases = [
        (plain, 2), (plain, 3), (plain, 1), (plain, 0), (plain, -1), (plain + b"\x00", 2),
        (b"\x0a\x00\x00\x00\x00\x00", 1),  # length 5
        (b"\x0c\x00\x00\x00\x06ab\x00", 1),  # key of 3 bytes in a 6-byte record: ends inside its key
        (b"\x0c\x00\x00\x00\x03\x00\x00", 1),  # key length -2
        (b"\x0c\x00\x00\x00\x01\x01\x00", 1),  # null key, null value: a tombstone
        (b"\x0c\x00\xff\xff\xff\xff\xff", 1),  # a varlong running past the record
        (b"", 1), (b"\x80", 1),
    ]
    for buf, count in cases:
        for fn in (walk_records, timestamp_deltas):
            ref, comp = _under_both(lambda fn=fn, buf=buf, count=count: fn(buf, count))
            assert ref == comp, (fn.__name__, buf, count, ref, comp)


def test_legacy_batches_beside_v2_read_the_same() -> None:
    """A magic 0/1 message set makes the compiled ``batches_to_arrow`` hand the whole call to the
    reference (old segments of upgraded clusters are rare); the result must not change."""
    legacy_records = pytest.importorskip("kafka.record.legacy_records", reason="kafka-python (test extra) missing")
    rng = random.Random(3605)
    for magic in (0, 1):
        builder = legacy_records.LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 30)
        for off in range(3):
            builder.append(off, timestamp=1_700_000_000_000 + off if magic else None, key=b"k%d" % off, value=b"v")
        data = bytes(builder.build()) + _batch(rng, 3, CompressionType.NONE)[0]
        _check(data, rng)
        native.use("compiled")
        assert batches_to_arrow(scan_batches(data)).num_rows > 3


def test_aiokafka_reads_the_same_records() -> None:
    default_records = pytest.importorskip("aiokafka.record.default_records", reason="aiokafka (test extra) missing")
    rng = random.Random(3604)
    native.use("compiled")
    for _ in range(30):
        data = _log(rng, [CompressionType.NONE, CompressionType.LZ4])
        for raw in scan_batches(data):
            ours = [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in decode_batch(raw)]
            theirs = [(r.offset, r.timestamp, r.key, r.value, list(r.headers))
                      for r in default_records.DefaultRecordBatch(bytearray(raw.data))]
            assert ours == theirs
