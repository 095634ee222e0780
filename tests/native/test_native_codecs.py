"""The compiled core's own lz4 and zstd decompression (``native/src/codec.rs``) against the
reference's ``compression.decompress``.

The core may leave any stream to the reference (``_core.decompress`` returns None, the records
come from Python's codec call), but a stream it decompresses must be one the reference
decompresses, to the same bytes. Held here three ways:

* compressed batches from every producer we can run (our encoder, aiokafka's builder, which
  writes lz4 through cramjam with block checksums, kafka-python's, which writes lz4 frames with
  a content size) and hand-made frames (content size and checksums, concatenated frames,
  4 MB blocks, linked blocks, skippable frames): the same records and Arrow columns under both
  cores, and the common producers' streams decompressed natively (not handed back);
* seeded random damage to the compressed bytes (bits, bytes, cuts, insertions, garbage after
  the frame), the CRC fixed so the decompressor is reached: ``_core.decompress`` gives the
  reference's bytes or None, never bytes where the reference raises, and the batch decodes to
  the same records or fails with the same error class and message under both cores.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import lz4.frame
import pyarrow as pa
import pytest
import zstandard

from storage_engine import native
from storage_engine.record.columnar import batches_to_arrow
from storage_engine.record.compression import CompressionType, compress, decompress
from storage_engine.record.records import Record
from storage_engine.record.scan import decode_batch, scan_batches
from storage_engine.record.v2 import RECORD_BATCH_OVERHEAD
from storage_engine.record.v2_builder import assemble_batch, encode_batch
from tests.helpers.core_switch import outcome

pytestmark = pytest.mark.skipif(native._MODULE is None, reason=f"compiled core not usable here: {native._WHY}")

LZ4, ZSTD = CompressionType.LZ4, CompressionType.ZSTD


@pytest.fixture(autouse=True)
def _restore_core() -> Iterator[None]:
    prev = native.status().requested
    yield
    native.use(prev)


def _records(rng: random.Random, n: int, value_size: int = 100) -> list[Record]:
    return [Record(offset=i, timestamp=1_700_000_000_000 + i, key=rng.randbytes(16),
                   value=rng.randbytes(value_size // 2) * 2,  # compressible, as real values are
                   headers=(("h", b"v"),) if i % 7 == 0 else ())
            for i in range(n)]


def _rebatch(batch: bytes, payload: bytes) -> bytes:
    """``batch`` with its compressed records replaced by ``payload`` and the CRC recomputed."""
    h = next(iter(scan_batches(batch))).header
    return assemble_batch(h.base_offset, h.partition_leader_epoch, h.attributes, h.last_offset_delta,
                          h.base_timestamp, h.max_timestamp, h.producer_id, h.producer_epoch, h.base_sequence,
                          h.records_count, payload)


def _same_under_both(data: bytes) -> tuple[str, Any]:
    """``decode_batch`` and ``batches_to_arrow`` of ``data`` under both cores: the same outcome
    (records, or exception class and message); returns the compiled core's decode outcome."""
    def decoded() -> list:
        return [decode_batch(raw) for raw in scan_batches(data)]

    def arrow() -> pa.RecordBatch:
        return batches_to_arrow(scan_batches(data))

    first: tuple[str, Any] = ("", None)
    for name, fn in (("decode_batch", decoded), ("batches_to_arrow", arrow)):
        native.use("reference")
        ref = outcome(fn)
        native.use("compiled")
        comp = outcome(fn)
        assert ref == comp, f"{name} diverges: {ref!r} != {comp!r}"
        first = first if first[0] else comp
    return first


def _native(codec: CompressionType, payload: bytes) -> bytes | None:
    core = native._MODULE
    assert core is not None
    out = core.decompress(int(codec), payload)
    return None if out is None else bytes(out)


def _check_payload(codec: CompressionType, payload: bytes) -> bool:
    """The core's decompression of ``payload`` agrees with the reference's; True when the core
    decompressed it itself."""
    mine = _native(codec, payload)
    if mine is None:
        return False
    try:
        theirs = decompress(codec, payload)
    except Exception as exc:
        raise AssertionError(f"the core decompressed {codec.name} bytes the reference rejects ({exc}): "
                             f"{payload.hex()}") from exc
    assert mine == theirs, f"the core decompressed {codec.name} bytes differently: {payload.hex()}"
    return True


# --- producers ------------------------------------------------------------------------------


def _ours(codec: CompressionType, records: list[Record]) -> bytes:
    return encode_batch(records, base_offset=0, compression=codec)


def _aiokafka(codec: CompressionType, records: list[Record]) -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder
    b = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for r in records:
        b.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(b.build())


def _kafka_python(codec: CompressionType, records: list[Record]) -> bytes:
    kafka_records = pytest.importorskip("kafka.record.default_records", reason="kafka-python is not installed")
    b = kafka_records.DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=0,
                                                producer_id=-1, producer_epoch=-1, base_sequence=-1,
                                                batch_size=1 << 30)
    for r in records:
        b.append(r.offset, timestamp=r.timestamp, key=r.key, value=r.value, headers=list(r.headers))
    return bytes(b.build())


@pytest.mark.parametrize("codec", [LZ4, ZSTD], ids=lambda c: c.name.lower())
@pytest.mark.parametrize("producer", [_ours, _aiokafka, _kafka_python], ids=lambda p: p.__name__.strip("_"))
@pytest.mark.parametrize("n", [1, 300, 1500])  # 1500 x ~170 bytes: several 64 KB lz4 blocks
def test_producers_batches_are_decompressed_natively_and_read_the_same(
        producer: Callable[[CompressionType, list[Record]], bytes], codec: CompressionType, n: int) -> None:
    records = _records(random.Random(n), n)
    batch = producer(codec, records)
    assert _check_payload(codec, batch[RECORD_BATCH_OVERHEAD:]), "the core handed a common producer's stream back"
    kind, decoded = _same_under_both(batch)
    assert kind == "ok" and [(r.offset, r.key, r.value, r.headers) for r in decoded[0]] == [
        (r.offset, r.key, r.value, tuple(r.headers)) for r in records]


def _lz4(plain: bytes, **kw: Any) -> bytes:
    return bytes(lz4.frame.compress(plain, **kw))


def _zstd_skippable(body: bytes) -> bytes:
    return (0x184D2A50).to_bytes(4, "little") + len(body).to_bytes(4, "little") + body


FRAMES: list[tuple[str, CompressionType, Callable[[bytes], bytes], bool]] = [
    # name, codec, plain -> payload, whether the core reads it itself
    ("lz4 content size and both checksums", LZ4,
     lambda p: _lz4(p, block_linked=False, store_size=True, content_checksum=True, block_checksum=True), True),
    ("lz4 4 MB blocks", LZ4, lambda p: _lz4(p, block_linked=False, block_size=lz4.frame.BLOCKSIZE_MAX4MB), True),
    ("lz4 concatenated frames", LZ4, lambda p: _lz4(p[:5000], block_linked=False) + _lz4(p[5000:], block_linked=False),
     True),
    ("lz4 linked blocks", LZ4, lambda p: _lz4(p, block_linked=True), False),
    ("lz4 high compression", LZ4, lambda p: _lz4(p, block_linked=False, compression_level=12), True),
    ("zstd with content size and checksum", ZSTD,
     lambda p: zstandard.ZstdCompressor(level=5, write_checksum=True).compress(p), True),
    ("zstd concatenated frames", ZSTD,
     lambda p: zstandard.ZstdCompressor().compress(p[:7000]) + compress(ZSTD, p[7000:]), True),
    ("zstd skippable frame first", ZSTD, lambda p: _zstd_skippable(b"meta") + compress(ZSTD, p), True),
    ("zstd long window", ZSTD,
     lambda p: zstandard.ZstdCompressor(level=19, write_content_size=False).compress(p), True),
]


@pytest.mark.parametrize("name,codec,make,native_reads", FRAMES, ids=[f[0] for f in FRAMES])
def test_frame_variants_read_the_same(name: str, codec: CompressionType, make: Callable[[bytes], bytes],
                                      native_reads: bool) -> None:
    records = _records(random.Random(5), 900)
    batch = _ours(codec, records)
    plain = decompress(codec, batch[RECORD_BATCH_OVERHEAD:])
    payload = make(plain)
    assert _check_payload(codec, payload) is native_reads
    kind, _ = _same_under_both(_rebatch(batch, payload))
    assert kind == "ok"


# --- damage ---------------------------------------------------------------------------------


def _damage(rng: random.Random, payload: bytes) -> bytes:
    d = bytearray(payload)
    for _ in range(rng.randint(1, 3)):
        kind = rng.random()
        if kind < 0.5:
            at = rng.randrange(len(d))
            d[at] = rng.randrange(256) if rng.random() < 0.5 else d[at] ^ (1 << rng.randrange(8))
        elif kind < 0.65:
            del d[rng.randrange(len(d)):]
        elif kind < 0.8:
            at = rng.randrange(len(d) + 1)
            d[at:at] = rng.randbytes(rng.randint(1, 8))
        elif kind < 0.9:
            d += rng.randbytes(rng.randint(1, 6))  # trailing bytes
        else:
            d += d[: rng.randint(4, 40)]  # a second, cut frame
        if not d:
            d = bytearray(b"\x00")
    return bytes(d)


@pytest.mark.parametrize("codec", [LZ4, ZSTD], ids=lambda c: c.name.lower())
def test_damaged_compressed_bytes_never_decompress_where_the_reference_fails(codec: CompressionType) -> None:
    rng = random.Random(36 + int(codec))
    sources = [
        _ours(codec, _records(rng, 40, 60)),
        _aiokafka(codec, _records(rng, 40, 60)),
        _rebatch(_ours(codec, _records(rng, 40, 60)),
                 _lz4(decompress(LZ4, _ours(LZ4, _records(rng, 40, 60))[RECORD_BATCH_OVERHEAD:]),
                      block_linked=False, store_size=True, content_checksum=True, block_checksum=True)
                 if codec is LZ4 else zstandard.ZstdCompressor(write_checksum=True).compress(b"x" * 3000)),
    ]
    read_natively = 0
    for i in range(1500):
        batch = sources[i % len(sources)]
        payload = _damage(rng, batch[RECORD_BATCH_OVERHEAD:])
        read_natively += _check_payload(codec, payload)
        if i % 10 == 0:
            _same_under_both(_rebatch(batch, payload))
    # the damage is not all refused up front: the decoders' own checks are what is tested
    assert read_natively > 0


@pytest.mark.parametrize("codec", [LZ4, ZSTD], ids=lambda c: c.name.lower())
def test_damaged_records_under_a_valid_compressed_stream_fail_the_same_way(codec: CompressionType) -> None:
    rng = random.Random(7)
    batch = _ours(codec, _records(rng, 50, 40))
    plain = decompress(codec, batch[RECORD_BATCH_OVERHEAD:])
    for _ in range(150):
        d = bytearray(plain)
        d[rng.randrange(len(d))] = rng.randrange(256)
        payload = compress(codec, bytes(d))
        assert _check_payload(codec, payload)
        _same_under_both(_rebatch(batch, payload))


def test_gzip_and_snappy_stay_with_the_reference_codecs() -> None:
    records = _records(random.Random(1), 200)
    for codec in (CompressionType.GZIP, CompressionType.SNAPPY):
        batch = _ours(codec, records)
        assert _native(codec, batch[RECORD_BATCH_OVERHEAD:]) is None
        assert _same_under_both(batch)[0] == "ok"
