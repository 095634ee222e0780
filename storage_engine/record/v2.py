"""Magic v2 record batches (Kafka's ``DefaultRecordBatch`` / ``DefaultRecord``): parse, verify,
decode, encode.

Layout (big-endian; Kafka's ``DefaultRecordBatch``): a 61-byte header ``baseOffset int64 | batchLength int32 |
partitionLeaderEpoch int32 | magic int8 | crc uint32 | attributes int16 | lastOffsetDelta int32 |
baseTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
baseSequence int32 | recordsCount int32``, then the records, compressed as one stream when
attribute bits 0-2 name a codec. The CRC is CRC-32C over bytes 21..end, so baseOffset and
partitionLeaderEpoch can be rewritten in place without recomputing it.

Why the decoder looks the way it does: this is pure Python on the hot path of every read,
compaction and Spark scan. So the record loop works on one ``bytes`` object (copied or
decompressed once per batch), binds everything it uses to locals, decodes one- and two-byte
varints inline through lookup tables (longer ones, rare, go through :mod:`.varint`), and emits
either ``Record`` objects or plain tuples for the Arrow path. Records are filled as mutable
drafts with the same slot layout and then re-classed as ``Record`` in one C-level pass
(``records._RecordDraft``), avoiding the frozen dataclass's per-field ``object.__setattr__``
calls (about 4x cheaper) while handing out ordinary, immutable ``Record`` objects.
``bench/bench_codec.py`` measures the result against kafka-python.

This Python code is the *reference*: with the compiled core in use (:mod:`storage_engine.native`),
:func:`decode_v2`, :func:`walk_records` and :func:`timestamp_deltas` run their Rust twins
(``native/src/records.rs``, ``native/src/walk.rs``), which accept exactly what these loops accept;
bytes a twin rejects are read again here, so errors are defined once, in this module. The core
decompresses lz4 and zstd records itself (``native/src/codec.rs``) and hands any stream it does
not accept, and gzip and snappy, to :func:`.compression.decompress`, the codec rules' definition.

Strictness: every record must consume exactly its declared length (which also catches key,
value and header lengths running past it), the record count must match ``recordsCount``
exactly (Kafka's "premature EOF" / "records still remaining"), header counts and key lengths
may not be negative, header keys must be UTF-8, and offset deltas must lie within
``0..lastOffsetDelta``. Corrupt input raises ``CorruptRecordError``; with the CRC verified
first (the default of ``decode_batch``) it never produces a record that was not written.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from crc32c import crc32c

from .. import native
from ..errors import CorruptRecordError, UnknownCompressionError
from .compression import decompress
from .records import RawBatch, Record, _publish, _RecordDraft
from .varint import VarintError, decode_varint, decode_varlong, encode_varint

__all__ = [
    "HEADER_STRUCT",
    "RECORD_BATCH_OVERHEAD",
    "verify_v2",
    "decode_v2",
    "decode_v2_tuples",
    "walk_records",
    "timestamp_deltas",
    "record_header_value",
]

RECORD_BATCH_OVERHEAD = 61
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35

#: The whole 61-byte header, in field order of :class:`BatchHeader`.
HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
# The header split at the CRC: the part before it (not covered) and the part after (covered).
HEAD_STRUCT = struct.Struct(">qiibI")
TAIL_STRUCT = struct.Struct(">hiqqqhii")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")

_INT32_MAX = 0x7FFFFFFF

_ATTR_TIMESTAMP_TYPE = 0x08
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

# Zigzag value of every one-byte varint (0x00..0x7F), and of every two-byte one as
# ``_ZZ2[second byte][first byte]`` (first byte has its continuation bit set; rows for a second
# byte >= 0x80 are None, see ``_decode``): table lookups replace the shift/mask/xor arithmetic
# on the decoder's hot path. Typed loosely: indexing a None row is the decoder's way of
# noticing a third byte (``TypeError``, caught in ``_decode``).
_ZZ1 = tuple((b >> 1) ^ -(b & 1) for b in range(128))
_ZZ2: tuple[Any, ...] = tuple(
    tuple(((u := (b1 & 0x7F) | (b2 << 7)) >> 1) ^ -(u & 1) for b1 in range(256)) if b2 < 128 else None
    for b2 in range(256)
)

# Encoded bytes of every value whose zigzag varint fits in two bytes (-8192..8191); the same
# bytes serve varints and varlongs (zigzag of a small value does not depend on the width).
_ENC = {v: encode_varint(v) for v in range(-8192, 8192)}


def _corrupt(reason: str, raw: RawBatch, path: str | None) -> CorruptRecordError:
    return CorruptRecordError(reason, path=path, position=raw.position, offset=raw.header.base_offset)


# --------------------------------------------------------------------------------------------
# verification


def verify_v2(raw: RawBatch, path: str | None = None) -> None:
    """Kafka's ``ensureValid`` (size >= 61, CRC-32C over bytes 21..end) plus the header checks a
    reader needs before trusting the header: known codec, non-negative record count and last
    offset delta, and bytes matching the declared length."""
    h = raw.header
    size = h.length + 12
    if size < RECORD_BATCH_OVERHEAD:
        raise _corrupt(
            f"Record batch is corrupt (the size {size} is smaller than the minimum allowed overhead 61)", raw, path
        )
    data = raw.data
    if len(data) != size:
        raise _corrupt(f"Record batch is truncated: {len(data)} bytes present of {size} declared", raw, path)
    computed = crc32c(memoryview(data)[ATTRIBUTES_OFFSET:])
    if computed != h.crc:
        raise _corrupt(f"Record is corrupt (stored crc = {h.crc}, computed crc = {computed})", raw, path)
    codec = h.attributes & 0x07
    if codec > 4:
        raise UnknownCompressionError(
            f"Unknown compression type id: {codec}", path=path, position=raw.position, offset=h.base_offset
        )
    if h.records_count < 0:
        raise _corrupt(f"Found invalid record count {h.records_count} in magic v2 batch", raw, path)
    if h.last_offset_delta < 0:
        raise _corrupt(f"Found invalid last offset delta {h.last_offset_delta} in magic v2 batch", raw, path)


# --------------------------------------------------------------------------------------------
# decoding


def _records_buffer(raw: RawBatch, path: str | None) -> bytes:
    """The plain record bytes of a batch: one copy (or one decompression) per batch."""
    h = raw.header
    data = raw.data
    codec = h.attributes & 0x07
    if codec == 0:
        return bytes(memoryview(data)[RECORD_BATCH_OVERHEAD:])
    if codec > 4:
        raise UnknownCompressionError(
            f"Unknown compression type id: {codec}", path=path, position=raw.position, offset=h.base_offset
        )
    try:
        return decompress(codec, memoryview(data)[RECORD_BATCH_OVERHEAD:])
    except CorruptRecordError as exc:
        raise _corrupt(exc.reason, raw, path) from exc


def _decode(raw: RawBatch, path: str | None, as_records: bool) -> list:
    """The record loop shared by :func:`decode_v2` (``Record`` objects) and
    :func:`decode_v2_tuples` (tuples for the Arrow path); see the module docstring for why it is
    written this way. Does not check the CRC (that is :func:`verify_v2`).

    Varints of one or two bytes are decoded inline through ``_ZZ1``/``_ZZ2``; ``_ZZ2`` has
    ``None`` rows for a second byte with the continuation bit, so a longer varint raises
    TypeError and that one record is decoded again by the general :func:`_slow_record`.
    """
    h = raw.header
    count = h.records_count
    if count < 0:
        raise _corrupt(f"Found invalid record count {count} in magic v2 batch", raw, path)
    if count == 0:
        # Kafka's iterator returns nothing for an empty batch without looking at the payload.
        return []
    last_delta = h.last_offset_delta
    if last_delta < 0:
        raise _corrupt(f"Found invalid last offset delta {last_delta} in magic v2 batch", raw, path)
    buf = _records_buffer(raw, path)
    base_offset = h.base_offset
    base_ts = h.base_timestamp
    n = len(buf)
    zz1 = _ZZ1
    zz2 = _ZZ2
    out: list = []
    app = out.append
    draft = _RecordDraft
    pos = 0
    i = 0
    try:
        for i in range(count):
            try:
                # length (varint); IndexError at pos >= n means fewer records than declared
                # (``pos`` stays at the record start until the record is done, for _slow_record)
                b = buf[pos]
                if b < 128:
                    end = pos + 1 + zz1[b]
                    p = pos + 2  # skips the attributes byte (int8, unused)
                else:
                    end = pos + 2 + zz2[buf[pos + 1]][b]
                    p = pos + 3
                # timestampDelta (varlong)
                b = buf[p]
                if b < 128:
                    ts_delta = zz1[b]
                    p += 1
                else:
                    ts_delta = zz2[buf[p + 1]][b]
                    p += 2
                # offsetDelta (varint)
                b = buf[p]
                if b < 128:
                    off_delta = zz1[b]
                    p += 1
                else:
                    off_delta = zz2[buf[p + 1]][b]
                    p += 2
                # key (varint length, -1 = null)
                b = buf[p]
                if b < 128:
                    klen = zz1[b]
                    p += 1
                else:
                    klen = zz2[buf[p + 1]][b]
                    p += 2
                if klen >= 0:
                    key = buf[p : p + klen]
                    p += klen
                elif klen == -1:
                    key = None
                else:
                    raise _corrupt(f"Invalid key size {klen} in record {i}", raw, path)
                # value (varint length, -1 = null = tombstone)
                b = buf[p]
                if b < 128:
                    vlen = zz1[b]
                    p += 1
                else:
                    vlen = zz2[buf[p + 1]][b]
                    p += 2
                if vlen >= 0:
                    value = buf[p : p + vlen]
                    p += vlen
                elif vlen == -1:
                    value = None
                else:
                    raise _corrupt(f"Invalid value size {vlen} in record {i}", raw, path)
                # headers: the common case is a zero count in the record's last byte
                if p + 1 == end and buf[p] == 0:
                    headers: tuple = ()
                else:
                    if p >= end:  # the header count alone needs one more byte
                        _bad_record_size(buf, pos, p + 1, end, raw, path)
                    headers, p = _read_headers(buf, p, end, raw, path)
                    if p != end:
                        _bad_record_size(buf, pos, p, end, raw, path)
            except TypeError:
                end, p, ts_delta, off_delta, key, value, headers = _slow_record(buf, pos, i, raw, path)
                if p != end:
                    _bad_record_size(buf, pos, p, end, raw, path)
            if as_records:
                app(draft(base_offset + off_delta, base_ts + ts_delta, key, value, headers))
            else:
                app((base_offset + off_delta, base_ts + ts_delta, key, value, headers))
            pos = end
    except IndexError:
        if pos >= n:
            raise _corrupt(
                f"Incorrect declared batch size, premature EOF reached ({i} of {count} records read)", raw, path
            ) from None
        raise _corrupt(
            f"Invalid record size: record {i} at byte {pos} of the records runs past their end ({n} bytes)", raw, path
        ) from None
    except VarintError as exc:
        raise _corrupt(f"Found invalid record structure in record {i}: {exc}", raw, path) from exc
    if pos != n:
        raise _corrupt(
            f"Incorrect declared batch size, records still remaining in file ({n - pos} bytes after "
            f"{count} records)",
            raw,
            path,
        )
    # Offset deltas of a valid batch lie in 0..lastOffsetDelta (checked at the ends only: the
    # CRC, not this, is what guards the records in between).
    first_delta = (out[0].offset if as_records else out[0][0]) - base_offset
    if first_delta < 0 or off_delta > last_delta:
        raise _corrupt(
            f"Record offset deltas {first_delta}..{off_delta} lie outside 0..{last_delta} (lastOffsetDelta)", raw, path
        )
    if h.attributes & _ATTR_TIMESTAMP_TYPE:
        # LogAppendTime: every record's timestamp is the batch's maxTimestamp (set by the broker).
        ts = h.max_timestamp
        if as_records:
            for r in out:
                r.timestamp = ts
        else:
            out = [(o, ts, k, v, hs) for o, _, k, v, hs in out]
    return _publish(out) if as_records else out


def _bad_record_size(buf: bytes, pos: int, p: int, end: int, raw: RawBatch, path: str | None) -> None:
    """Raise for a record whose fields do not add up to its declared length (this also catches
    key/value slices that ran past the record or the buffer, and lengths below the minimum)."""
    n = len(buf)
    _, body = decode_varint(buf, pos)
    if end > n:
        raise _corrupt(
            f"Invalid record size: expected {end - body} bytes in record payload, but instead the buffer has only "
            f"{n - body} remaining bytes",
            raw,
            path,
        )
    raise _corrupt(
        f"Invalid record size: expected to read {end - body} bytes in record payload, but instead read {p - body}",
        raw,
        path,
    )


def _slow_record(buf: bytes, pos: int, i: int, raw: RawBatch, path: str | None) -> tuple:
    """General decode of the record at ``pos`` (any varint width), for the records the inline
    fast path cannot handle. Returns ``(end, position reached, timestamp delta, offset delta,
    key, value, headers)``."""
    length, pos = decode_varint(buf, pos)
    end = pos + length
    ts_delta, p = decode_varlong(buf, pos + 1)
    off_delta, p = decode_varint(buf, p)
    klen, p = decode_varint(buf, p)
    if klen >= 0:
        key = buf[p : p + klen]
        p += klen
    elif klen == -1:
        key = None
    else:
        raise _corrupt(f"Invalid key size {klen} in record {i}", raw, path)
    vlen, p = decode_varint(buf, p)
    if vlen >= 0:
        value = buf[p : p + vlen]
        p += vlen
    elif vlen == -1:
        value = None
    else:
        raise _corrupt(f"Invalid value size {vlen} in record {i}", raw, path)
    headers, p = _read_headers(buf, p, end, raw, path)
    return end, p, ts_delta, off_delta, key, value, headers


def decode_v2_tuples(raw: RawBatch, path: str | None = None) -> list[tuple]:
    """Records of a v2 batch as ``(offset, timestamp, key, value, headers)`` tuples (for the
    reference Arrow path, which transposes them into columns). CRC not checked here.

    Reference only, on purpose: with the compiled core in use ``batches_to_arrow`` builds its
    columns in ``_core.decode_arrow`` without tuples, so nothing hot calls this any more."""
    return _decode(raw, path, False)


def decode_v2(raw: RawBatch, path: str | None = None) -> list[Record]:
    """All records of a v2 batch (CRC not checked here; see :func:`verify_v2`). The compiled
    core's ``decode_records`` when it is in use (:mod:`storage_engine.native`)."""
    core = native.compiled()
    if core is None:
        return _decode(raw, path, True)
    h = raw.header
    if h.records_count <= 0 or h.last_offset_delta < 0:
        return _decode(raw, path, True)  # empty, or a header the reference names the fault of
    try:
        # uncompressed, lz4 and zstd records are read (and decompressed) by the core; gzip,
        # snappy and streams its decoders refuse come back as None for the reference's codec call
        records = core.decode_records(raw.data, None, Record)
        if records is None and h.attributes & 0x07:
            records = core.decode_records(raw.data, _records_buffer(raw, path), Record)
    except native.REJECTIONS:
        raise native.reference_error(lambda: _decode(raw, path, True), "a batch") from None
    # None: offsets or timestamps beyond int64 (a damaged base offset), which Python's ints hold
    return _decode(raw, path, True) if records is None else records


def _read_headers(buf: bytes, p: int, end: int, raw: RawBatch, path: str | None) -> tuple[tuple, int]:
    count, p = decode_varint(buf, p)
    if count < 0:
        raise _corrupt(f"Found invalid number of record headers {count}", raw, path)
    if count > end - p:
        raise _corrupt(
            f"Found invalid number of record headers {count}: it is larger than the remaining size of the buffer",
            raw,
            path,
        )
    headers = []
    for _ in range(count):
        klen, p = decode_varint(buf, p)
        if klen < 0 or p + klen > end:
            raise _corrupt(f"Invalid header key size {klen}", raw, path)
        try:
            hkey = buf[p : p + klen].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _corrupt(f"Header key is not valid UTF-8: {exc}", raw, path) from exc
        p += klen
        vlen, p = decode_varint(buf, p)
        if vlen >= 0:
            if p + vlen > end:
                raise _corrupt(f"Invalid header value size {vlen}", raw, path)
            hval = buf[p : p + vlen]
            p += vlen
        elif vlen == -1:
            hval = None
        else:
            raise _corrupt(f"Invalid header value size {vlen}", raw, path)
        headers.append((hkey, hval))
    return tuple(headers), p


#: Base offsets whose records' offsets fit int64 whatever their (int32) deltas: only a base
#: offset outside these (damaged: the CRC does not cover it) needs each record checked.
_SAFE_BASES = range(-(1 << 63) + (1 << 31), (1 << 63) - (1 << 31) + 1)


def walk_records(buf: bytes, count: int, start: int = 0, end: int | None = None,
                 base_offset: int | None = None) -> list[tuple[int, int, int, int, bytes | None, bool]]:
    """``(start, end, offset_delta, timestamp_delta, key, is_tombstone)`` of every record in the
    plain record bytes of a v2 batch; ``buf[start:end]`` is the record exactly as stored.

    The compaction's view of a batch: record spans it can copy as bytes, and just the fields its
    keep/drop rules read (values and headers are not decoded). The compiled core's twin
    (``_core.walk_records``) runs when it is in use and ``buf`` is ``bytes``; the reference loop
    (:func:`_walk_records`) defines the result.

    Raises ``IndexError``/``VarintError``/``ValueError`` on malformed bytes (callers turn them
    into ``CorruptRecordError``), the reference's own under both cores. With ``base_offset``, a
    record whose offset leaves int64 (Kafka's offsets are int64: only a damaged base offset gets
    there) is malformed too: a ``ValueError`` naming it."""
    core = native.compiled()
    n = len(buf) if end is None else end
    if core is None or not _walkable(buf, count, start, n):
        walked = _walk_records(buf, count, start, end)
    else:
        try:
            walked = core.walk_records(buf, count, start, n)
        except native.REJECTIONS:
            raise _walk_error(lambda: _walk_records(buf, count, start, end)) from None
    if base_offset is not None and base_offset not in _SAFE_BASES:
        for record in walked:
            if base_offset + record[2] not in _INT64_VALUES:
                raise ValueError(f"record offset {base_offset} + {record[2]} at byte {record[0]} is beyond int64")
    return walked


_INT64_VALUES = range(-(1 << 63), 1 << 63)


def timestamp_deltas(buf: bytes, count: int, start: int = 0, end: int | None = None) -> tuple[list[int], int]:
    """Every record's timestamp delta in the plain record bytes of a v2 batch, and where its
    last record starts: all a broker's ``LogValidator`` must read of a batch it keeps in place
    (Kafka's ``skipKeyValueIterator``). The compiled core's ``timestamp_deltas`` when it is in
    use and ``buf`` is ``bytes``, else the reference loop :func:`_timestamp_deltas`.

    Raises ``IndexError``/``VarintError``/``ValueError`` on malformed bytes, as
    :func:`walk_records` does."""
    core = native.compiled()
    n = len(buf) if end is None else end
    if core is None or not _walkable(buf, count, start, n):
        return _timestamp_deltas(buf, count, start, end)
    try:
        return core.timestamp_deltas(buf, count, start, n)
    except native.REJECTIONS:
        raise _walk_error(lambda: _timestamp_deltas(buf, count, start, end)) from None


def _walkable(buf: object, count: int, start: int, n: int) -> bool:
    """Arguments the compiled walks take: ``bytes`` (a key of another buffer type would be a
    slice of that type), positions inside it (a negative one indexes from the end in Python)
    and an int32 count, as a batch header holds."""
    return type(buf) is bytes and 0 <= start and 0 <= n <= len(buf) and -_INT32_MAX - 1 <= count <= _INT32_MAX


def _walk_error(run_reference: Callable[[], object]) -> BaseException:
    """The reference's exception for bytes a compiled walk rejected (class and message defined
    once), or :class:`~storage_engine.native.CoreDivergenceError` if the reference reads them."""
    try:
        run_reference()
    except (IndexError, ValueError) as exc:
        return exc
    return native.CoreDivergenceError("the compiled core rejected records that the reference walks: set "
                                      f"{native.ENV_VAR}=reference and report it")


def _walk_records(buf: bytes, count: int, start: int = 0,
                  end: int | None = None) -> list[tuple[int, int, int, int, bytes | None, bool]]:
    """The reference of :func:`walk_records` (varints inlined as ``bench/bench_varint_inline.py``
    measures)."""
    zz1, zz2 = _ZZ1, _ZZ2
    out: list[tuple[int, int, int, int, bytes | None, bool]] = []
    app = out.append
    pos = start
    n = len(buf) if end is None else end
    for _ in range(count):
        b = buf[pos]
        if b < 128:
            length = zz1[b]
            p = pos + 1
        else:
            b2 = buf[pos + 1]
            if b2 < 128:
                length = zz2[b2][b]
                p = pos + 2
            else:
                length, p = decode_varint(buf, pos)
        rec_end = p + length
        if rec_end > n or length < 6:
            raise ValueError(f"record length {length} at {pos} runs past the batch")
        p += 1  # attributes
        b = buf[p]
        if b < 128:
            tsd = zz1[b]
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 128:
                tsd = zz2[b2][b]
                p += 2
            else:
                tsd, p = decode_varlong(buf, p)
        b = buf[p]
        if b < 128:
            od = zz1[b]
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 128:
                od = zz2[b2][b]
                p += 2
            else:
                od, p = decode_varint(buf, p)
        b = buf[p]
        if b < 128:
            kl = zz1[b]
            p += 1
        else:
            b2 = buf[p + 1]
            if b2 < 128:
                kl = zz2[b2][b]
                p += 2
            else:
                kl, p = decode_varint(buf, p)
        if kl >= 0:
            key = buf[p : p + kl]
            p += kl
        elif kl == -1:
            key = None
        else:
            raise ValueError(f"invalid key length {kl}")
        if p >= rec_end:
            raise ValueError(f"record at {pos} ends inside its key")
        app((pos, rec_end, od, tsd, key, buf[p] == 1))  # value length varint -1 is the byte 0x01
        pos = rec_end
    if pos != n:
        raise ValueError(f"{n - pos} bytes after the declared {count} records")
    return out


def _timestamp_deltas(buf: bytes, count: int, start: int = 0, end: int | None = None) -> tuple[list[int], int]:
    """The reference of :func:`timestamp_deltas`: about 3x faster than :func:`_walk_records`,
    whose offset delta and key this loop skips (the append's hot path; varints inlined as
    ``bench/bench_varint_inline.py`` measures)."""
    zz1, zz2 = _ZZ1, _ZZ2
    out: list[int] = []
    app = out.append
    pos = last = start
    n = len(buf) if end is None else end
    for _ in range(count):
        b = buf[pos]
        if b < 128:
            length = zz1[b]
            p = pos + 1
        else:
            b2 = buf[pos + 1]
            if b2 < 128:
                length = zz2[b2][b]
                p = pos + 2
            else:
                length, p = decode_varint(buf, pos)
        if p + length > n or length < 6:
            raise ValueError(f"record length {length} at {pos} runs past the batch")
        b = buf[p + 1]  # after the attributes byte
        if b < 128:
            app(zz1[b])
        else:
            b2 = buf[p + 2]
            app(zz2[b2][b] if b2 < 128 else decode_varlong(buf, p + 1)[0])
        last, pos = pos, p + length
    if pos != n:
        raise ValueError(f"{n - pos} bytes after the declared {count} records")
    return out, last


def record_header_value(buf: bytes, start: int, end: int, name: bytes) -> bytes | None:
    """The value of the last header called ``name`` (UTF-8 bytes) of the v2 record stored at
    ``buf[start:end]`` (a span of :func:`walk_records`), None when it has none or a null one.

    What a compaction strategy reads of a record beyond :func:`walk_records`' fields. Raises
    ``ValueError``/``VarintError`` on malformed bytes, as :func:`walk_records` does."""
    _length, p = decode_varint(buf, start)
    p += 1  # attributes
    _tsd, p = decode_varlong(buf, p)
    _od, p = decode_varint(buf, p)
    for _field in ("key", "value"):
        size, p = decode_varint(buf, p)
        if size > 0:
            p += size
    count, p = decode_varint(buf, p)
    if count < 0 or count > end - p:
        raise ValueError(f"invalid number of record headers {count}")
    found = None
    for _ in range(count):
        klen, p = decode_varint(buf, p)
        if klen < 0 or p + klen > end:
            raise ValueError(f"invalid header key size {klen}")
        hkey = buf[p : p + klen]
        p += klen
        vlen, p = decode_varint(buf, p)
        if vlen > end - p:
            raise ValueError(f"invalid header value size {vlen}")
        if hkey == name:
            found = buf[p : p + vlen] if vlen >= 0 else None
        if vlen > 0:
            p += vlen
    if p != end:
        raise ValueError(f"record at {start} does not end where its headers do")
    return found
