"""Batches read from a segment file by position: the one header iterator and the one chunked
batch iterator that every reader of ``.log`` files uses (Kafka's ``FileRecords.batchesFrom`` and
``FileLogInputStream``).

Both stop silently at a torn tail, where a batch runs past ``end`` or past the file (how a crash
leaves an active segment; recovery truncates it), and raise ``CorruptRecordError`` for a size or
magic no batch can have. :func:`read_headers` reads only headers, hopping over the bodies of
large batches (producer-state replay, time and end-offset lookups); :func:`read_batches` reads
whole batches in chunks and yields each with the chunk it sits in, so records can be decoded in
place (reads, compaction).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from ..errors import CorruptRecordError
from .records import BatchHeader, RawBatch
from .scan import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD, header_at, scan_batches

__all__ = ["read_headers", "read_batches", "read_batches_by", "read_batches_skipping", "read_batch_at",
           "HEADER_WINDOW", "SKIP_AT_LEAST"]

#: Bytes read per step by :func:`read_headers`: many small batches' headers in one read.
HEADER_WINDOW = 16 * 1024

#: The smallest batch :func:`read_batches_skipping` leaves unread: smaller ones cost less to read
#: with their neighbours than a read of their header alone.
SKIP_AT_LEAST = 16 * 1024


def read_headers(fd: int, *, end: int, start: int = 0, path: str | None = None
                 ) -> Iterator[tuple[BatchHeader, int]]:
    """Every batch header from ``start`` to ``end`` (or the end of the file, if it is shorter)
    with its file position, never reading a batch's records."""
    end = min(end, os.fstat(fd).st_size)
    pos = start
    buf, buf_pos = b"", start
    while pos + HEADER_SIZE_UP_TO_MAGIC <= end:
        if pos + RECORD_BATCH_OVERHEAD > buf_pos + len(buf):
            want = min(HEADER_WINDOW, end - pos)
            buf, buf_pos = os.pread(fd, want, pos), pos
            if len(buf) < min(want, RECORD_BATCH_OVERHEAD):
                return  # the file ends before ``end``: a torn tail
        header = header_at(buf, pos - buf_pos, available=end - pos, position=pos, path=path)
        if header is None:
            return
        yield header, pos
        pos += header.size_in_bytes


def read_batches(fd: int, *, end: int, start: int = 0, chunk: int, path: str | None = None
                 ) -> Iterator[tuple[RawBatch, bytes, int]]:
    """Complete batches from ``start`` to ``end``, read ``chunk`` bytes at a time, each with the
    chunk it was read in and its offset there. A batch larger than the chunk doubles the chunk
    for the rest of the file, as Kafka's cleaner grows its buffers (the cleaner writes in the
    chunks it reads, so this rule decides where its index entries fall)."""
    return read_batches_by(lambda size, pos: os.pread(fd, size, pos), end=end, start=start, chunk=chunk, path=path)


def read_batches_by(read: Callable[[int, int], bytes], *, end: int, start: int = 0, chunk: int,
                    path: str | None = None) -> Iterator[tuple[RawBatch, bytes, int]]:
    """:func:`read_batches` of any bytes ``read(size, position)`` returns: a file's ``pread``,
    or ranged GETs of a segment object in the remote tier."""
    pos = start
    while pos < end:
        want = min(chunk, end - pos)
        buf = read(want, pos)
        consumed = 0
        for raw in scan_batches(buf, path=path, base_position=pos):
            offset = raw.position - pos
            consumed = offset + raw.header.size_in_bytes
            yield raw, buf, offset
        if consumed:
            pos += consumed
            continue
        grown = _grown_chunk(buf, want, pos, end, chunk)
        if grown is None:
            return
        chunk = grown


def read_batches_skipping(fd: int, *, end: int, start: int = 0, chunk: int, skip: Callable[[BatchHeader], bool],
                          path: str | None = None) -> Iterator[tuple[RawBatch, bytes | None, int]]:
    """:func:`read_batches`, except that a v2 batch of at least :data:`SKIP_AT_LEAST` bytes whose
    header ``skip`` accepts is not read: only its header is, and it comes as ``(RawBatch(header,
    position, b""), None, 0)``. Smaller batches, and those ``skip`` refuses, come as
    :func:`read_batches` gives them (``skip`` is asked about the large ones only). For a reader
    that decides some batches by their header alone: the cleaner's recopy drops whole batches
    none of whose records wins its key, which would otherwise be read a second time for nothing.
    The batches and errors are :func:`read_batches`' (the header is checked by the same
    ``header_at``)."""
    end = min(end, os.fstat(fd).st_size)
    pos = start
    while pos < end:
        if end - pos >= SKIP_AT_LEAST:
            head = os.pread(fd, RECORD_BATCH_OVERHEAD, pos)
            if len(head) == RECORD_BATCH_OVERHEAD and head[16] == 2:
                header = header_at(head, 0, available=end - pos, position=pos, path=path)
                if header is not None and header.size_in_bytes >= SKIP_AT_LEAST and skip(header):
                    yield RawBatch(header, pos, b""), None, 0
                    pos += header.size_in_bytes
                    continue
        want = min(chunk, end - pos)
        buf = os.pread(fd, want, pos)
        consumed = 0
        for raw in scan_batches(buf, path=path, base_position=pos):
            offset = raw.position - pos
            if offset and raw.header.size_in_bytes >= SKIP_AT_LEAST and raw.header.magic == 2 and skip(raw.header):
                break  # left for the header read above
            consumed = offset + raw.header.size_in_bytes
            yield raw, buf, offset
        if consumed:
            pos += consumed
            continue
        grown = _grown_chunk(buf, want, pos, end, chunk)
        if grown is None:
            return
        chunk = grown


def _grown_chunk(buf: bytes, want: int, pos: int, end: int, chunk: int) -> int | None:
    """After a read of ``want`` bytes at ``pos`` that held no whole batch: the chunk size that
    holds the next one, or None when the bytes end there (the file ends before ``end``: a torn
    tail; or the batch runs past ``end``)."""
    if len(buf) < want or len(buf) < LOG_OVERHEAD:
        return None
    needed = LOG_OVERHEAD + int.from_bytes(buf[8:12], "big", signed=True)
    if pos + needed > end or needed <= len(buf):
        return None
    return max(needed, 2 * chunk)


def read_batch_at(fd: int, position: int, size: int, path: str | None = None) -> RawBatch:
    """The one batch of ``size`` bytes at ``position`` (a header read earlier said where)."""
    data = os.pread(fd, size, position)
    raws = list(scan_batches(data, path=path, base_position=position))
    if len(raws) != 1 or raws[0].header.size_in_bytes != size:
        raise CorruptRecordError("batch could not be re-read", path=path, position=position)
    return raws[0]
