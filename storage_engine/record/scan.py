"""Shallow iteration over the batches of a log buffer, and the magic-byte dispatch.

Scanning follows Kafka's ``FileLogInputStream.nextBatch``: it reads the 17 bytes up to and
including the magic byte, rejects a length below the smallest legacy message (14) and a magic
outside 0..2, and stops *silently* at a batch that extends past the end of the data, because
that is how a crash leaves the tail of an active segment (recovery truncates it). It parses
only headers and never checks CRCs or touches records, so recovery, index rebuilds and offset
lookups pay one ``struct.unpack_from`` per batch. Verifying and decoding are separate steps
(:func:`verify_batch`, :func:`decode_batch`) so each caller pays only for what it needs.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Iterator

from ..errors import CorruptRecordError
from . import legacy, v2
from .records import BatchHeader, RawBatch, Record

__all__ = [
    "scan_batches",
    "header_at",
    "verify_batch",
    "decode_batch",
    "LOG_OVERHEAD",
    "HEADER_SIZE_UP_TO_MAGIC",
    "RECORD_BATCH_OVERHEAD",
    "MIN_RECORD_OVERHEAD",
]

LOG_OVERHEAD = 12
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_BATCH_OVERHEAD = v2.RECORD_BATCH_OVERHEAD
#: ``LegacyRecord.RECORD_OVERHEAD_V0``: the smallest size field any batch may declare.
MIN_RECORD_OVERHEAD = 14

_UP_TO_MAGIC = struct.Struct(">qiib")
_V2_HEADER = v2.HEADER_STRUCT


def scan_batches(
    buf: bytes | bytearray | memoryview | mmap.mmap,  # a mapped segment file: read in place
    *,
    start: int = 0,
    end: int | None = None,
    path: str | None = None,
    base_position: int = 0,
) -> Iterator[RawBatch]:
    """Yield every complete batch in ``buf[start:end]`` without decoding records.

    ``RawBatch.position`` is ``base_position`` plus the index in ``buf`` (pass the file offset
    ``buf`` was read from to get file positions). ``RawBatch.data`` is a memoryview into ``buf``:
    nothing is copied, and a bytearray or mmap cannot be resized or closed while views are alive.
    Errors name ``path``, the batch position and the base offset read from the header.
    """
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    limit = len(mv) if end is None else min(end, len(mv))
    pos = start
    unpack_v2 = _V2_HEADER.unpack_from
    Header = BatchHeader
    Raw = RawBatch
    while pos + HEADER_SIZE_UP_TO_MAGIC <= limit:
        if mv[pos + 16] == 2 and pos + RECORD_BATCH_OVERHEAD <= limit:
            # Common case: the whole v2 header in one unpack.
            fields = unpack_v2(mv, pos)
            length = fields[1]
            batch_end = pos + LOG_OVERHEAD + length
            if length >= RECORD_BATCH_OVERHEAD - LOG_OVERHEAD and batch_end <= limit:
                yield Raw(Header(*fields), base_position + pos, mv[pos:batch_end])
                pos = batch_end
                continue
        header = header_at(mv, pos, available=limit - pos, position=base_position + pos, path=path)
        if header is None:
            return  # partial batch at the tail
        batch_end = pos + LOG_OVERHEAD + header.length
        yield Raw(header, base_position + pos, mv[pos:batch_end])
        pos = batch_end


def header_at(buf: bytes | bytearray | memoryview, pos: int, *, available: int, position: int,
              path: str | None) -> BatchHeader | None:
    """The header of the batch at ``buf[pos]`` (file position ``position``), of any magic; None
    when the batch does not end within ``available`` bytes (a torn tail). ``buf`` must hold the
    header (61 bytes for v2, 26 for v1, 18 for v0, or up to the end of the data). Raises
    ``CorruptRecordError`` for a size or magic no batch can have, as ``FileLogInputStream`` does."""
    base_offset, length, _, magic = _UP_TO_MAGIC.unpack_from(buf, pos)
    if length < MIN_RECORD_OVERHEAD:
        raise CorruptRecordError(
            f"Found record size {length} smaller than minimum record overhead ({MIN_RECORD_OVERHEAD})",
            path=path,
            position=position,
            offset=base_offset,
        )
    if LOG_OVERHEAD + length > available:
        return None
    if magic == 2:
        if length + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {length + LOG_OVERHEAD} is smaller than the minimum "
                f"allowed overhead {RECORD_BATCH_OVERHEAD})",
                path=path,
                position=position,
                offset=base_offset,
            )
        return BatchHeader(*_V2_HEADER.unpack_from(buf, pos))
    if magic == 0 or magic == 1:
        return legacy.parse_legacy_header(buf, pos, magic)
    raise CorruptRecordError(f"Invalid magic found in record: {magic}", path=path, position=position,
                             offset=base_offset)


def verify_batch(raw: RawBatch, *, path: str | None = None) -> None:
    """Check a batch's CRC and header structure (v2: CRC-32C over bytes 21..end; v0/v1: zlib
    CRC-32 over magic..end). Raises ``CorruptRecordError`` (``UnknownCompressionError`` for a
    codec id 5..7) naming ``path``, ``raw.position`` and the base offset."""
    if raw.header.magic == 2:
        v2.verify_v2(raw, path)
    else:
        legacy.verify_legacy(raw, path)


def decode_batch(raw: RawBatch, *, verify: bool = True, path: str | None = None) -> list[Record]:
    """All records of a batch of any magic and codec, control records included.

    ``verify`` runs :func:`verify_batch` first. Structural checks (record count, lengths,
    varints, header counts) always run, so even unverified input never yields invented records.
    """
    if raw.header.magic == 2:
        if verify:
            v2.verify_v2(raw, path)
        return v2.decode_v2(raw, path)
    if verify:
        legacy.verify_legacy(raw, path)
    return legacy.decode_legacy(raw, path, verify_inner=verify)


def decode_batch_tuples(raw: RawBatch, *, verify: bool = True, path: str | None = None) -> list[tuple]:
    """Like :func:`decode_batch` but ``(offset, timestamp, key, value, headers)`` tuples, for
    callers that build columns rather than objects."""
    if raw.header.magic == 2:
        if verify:
            v2.verify_v2(raw, path)
        return v2.decode_v2_tuples(raw, path)
    if verify:
        legacy.verify_legacy(raw, path)
    return legacy.decode_legacy_tuples(raw, path, verify_inner=verify)
