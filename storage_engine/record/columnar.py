"""Decode batches straight into an Arrow record batch, for Spark and analytics.

The Spark data source and the compaction jobs move records between processes as Arrow. Going
through ``Record`` objects would build (and then discard) one Python object per record, so
this path takes the decoder's ``(offset, timestamp, key, value, headers)`` tuples, filters them,
transposes them with one ``zip`` and hands whole columns to pyarrow's C converters.

Consumers never see control records (transaction markers, KRaft leader-change and snapshot
markers), so control batches are skipped, as Kafka's fetcher does. The schema matches Spark's
built-in Kafka source minus ``topic``/``partition`` (the caller knows those) and with
``timestamp`` as epoch milliseconds (the caller converts to Spark's timestamp type).

The compiled core (:mod:`storage_engine.native`), when it is in use, skips the tuples: Python
picks the batches by header (one rule, :func:`_selected`, for both paths) and decompresses the
gzip and snappy ones with the codec libraries the reference uses; ``_core.decode_arrow``
decompresses lz4 and zstd itself (handing back any stream it does not accept, which Python then
decompresses as the reference does) and walks all of them without the GIL into Arrow's own
buffers (int64 offsets and timestamps, binary columns as offsets + data + validity, the headers
list built natively), which ``pa.Array.from_buffers`` wraps without a copy: no Python object per record. Bytes it rejects are re-read by the
reference, whose error is raised. Legacy (magic 0/1) batches are rare (old segments of
upgraded clusters): a call that meets one runs the reference for all its batches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from .. import native
from ..errors import LogError
from .compression import CompressionType
from .records import RawBatch
from .scan import decode_batch_tuples
from .v2 import _records_buffer, verify_v2

__all__ = ["ARROW_SCHEMA", "HEADERS_TYPE", "batches_to_arrow"]

#: ``list<struct<key: string, value: binary>>``, Spark's Kafka-source header type.
HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.int64()),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", HEADERS_TYPE),
    ]
)


def batches_to_arrow(
    raws: Iterable[RawBatch],
    *,
    verify: bool = True,
    path: str | None = None,
    min_offset: int = 0,
    max_offset: int | None = None,
) -> pa.RecordBatch:
    """All non-control records of ``raws`` with ``min_offset <= offset < max_offset`` as one
    Arrow record batch of :data:`ARROW_SCHEMA`, in input order.

    Batches entirely outside the offset range are skipped before decoding (their header says
    so). ``verify`` checks every decoded batch's CRC first, like :func:`decode_batch`.
    """
    core = native.compiled()
    if core is None:
        return _reference(_selected(raws, min_offset, max_offset), verify, path, min_offset, max_offset)
    selected: list[RawBatch] = []
    try:
        selected.extend(_selected(raws, min_offset, max_offset))
    except Exception:
        # a scan error after some batches: the reference decodes those first, and names their
        # fault when one has one
        _reference(selected, verify, path, min_offset, max_offset)
        raise
    if not _compiled_takes(selected, min_offset, max_offset):
        return _reference(selected, verify, path, min_offset, max_offset)

    def reference() -> pa.RecordBatch:
        return _reference(selected, verify, path, min_offset, max_offset)

    try:
        read = [raw for raw in selected if verify or raw.header.records_count != 0]
        batches = [(raw.data, _plain(raw, verify, path)) for raw in read]
        built = core.decode_arrow(batches, verify, min_offset, max_offset)
        if isinstance(built, list):  # records the core left to the reference's codec call
            for i in built:
                batches[i] = (read[i].data, _decompressed(read[i], verify, path))
            built = core.decode_arrow(batches, verify, min_offset, max_offset)
    except _REJECTIONS:
        raise native.reference_error(reference, "a batch") from None
    if built is None:  # a column past Arrow's 2 GB offsets
        return reference()
    return _record_batch(built)


#: What makes the compiled path hand a call to the reference: the core's rejections, and a codec's
#: error in the decompression ahead of it (the reference names the first fault in its own order).
_REJECTIONS: tuple[type[BaseException], ...] = (*native.REJECTIONS, LogError)


def _selected(raws: Iterable[RawBatch], min_offset: int, max_offset: int | None) -> Iterator[RawBatch]:
    """The batches whose records may be read: not control batches (consumers never see them,
    as Kafka's fetcher skips them), and not wholly outside the offset range by their header."""
    for raw in raws:
        h = raw.header
        if h.magic >= 2 and h.attributes & 0x20:
            continue  # control batch
        if h.base_offset + h.last_offset_delta < min_offset:
            continue
        # A compressed legacy wrapper's header carries only its last offset (records_count -1).
        if max_offset is not None and h.records_count >= 0 and h.base_offset >= max_offset:
            continue
        yield raw


def _compiled_takes(selected: list[RawBatch], min_offset: int, max_offset: int | None) -> bool:
    """Whether ``_core.decode_arrow`` reads these: v2 batches only, and an int64 offset window."""
    lo, hi = -(1 << 63), (1 << 63) - 1
    return (all(raw.header.magic == 2 for raw in selected) and lo <= min_offset <= hi
            and (max_offset is None or lo <= max_offset <= hi))


def _plain(raw: RawBatch, verify: bool, path: str | None) -> bytes | None:
    """A batch's records decompressed here by the reference's codec libraries (gzip, snappy),
    or None: uncompressed, lz4 or zstd (the core decompresses those, and returns the indices of
    any stream it refuses), or a count the core reads no records for."""
    h = raw.header
    if h.attributes & 0x07 in _CORE_CODECS or h.records_count <= 0:
        return None
    return _decompressed(raw, verify, path)


def _decompressed(raw: RawBatch, verify: bool, path: str | None) -> bytes:
    """The reference's codec call, after the CRC check when ``verify`` (as the reference orders
    them: a batch whose CRC is wrong is never inflated)."""
    if verify:
        verify_v2(raw, path)
    return _records_buffer(raw, path)


#: Codec ids whose records ``_core.decode_arrow`` reads itself: none, lz4, zstd.
_CORE_CODECS = frozenset((CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD))


def _binary(kind: pa.DataType, length: int, parts: tuple) -> pa.Array:
    valid, nulls, offsets, data = parts
    return pa.Array.from_buffers(
        kind, length, [None if valid is None else pa.py_buffer(valid), pa.py_buffer(offsets), pa.py_buffer(data)],
        null_count=nulls)


def _record_batch(built: tuple) -> pa.RecordBatch:
    """The record batch of ``_core.decode_arrow``'s buffers (wrapped, not copied)."""
    rows, offset, timestamp, timestamp_type, key, value, header_offsets, headers, header_key, header_value = built
    if rows == 0:
        return _empty()
    struct = pa.Array.from_buffers(
        HEADERS_TYPE.value_type, headers, [None],
        children=[_binary(pa.string(), headers, header_key), _binary(pa.binary(), headers, header_value)])
    return pa.RecordBatch.from_arrays(
        [
            _binary(pa.binary(), rows, key),
            _binary(pa.binary(), rows, value),
            pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(offset)]),
            pa.Array.from_buffers(pa.int64(), rows, [None, pa.py_buffer(timestamp)]),
            pa.Array.from_buffers(pa.int32(), rows, [None, pa.py_buffer(timestamp_type)]),
            pa.Array.from_buffers(HEADERS_TYPE, rows, [None, pa.py_buffer(header_offsets)], children=[struct]),
        ],
        schema=ARROW_SCHEMA,
    )


def _empty() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in ARROW_SCHEMA], schema=ARROW_SCHEMA)


def _reference(selected: Iterable[RawBatch], verify: bool, path: str | None, min_offset: int,
               max_offset: int | None) -> pa.RecordBatch:
    """The reference: each batch's tuples (``decode_batch_tuples``), filtered, transposed with
    one ``zip`` and converted by pyarrow's C converters."""
    rows: list[tuple] = []
    extend = rows.extend
    types: list[int] = []
    hi = max_offset
    for raw in selected:
        tuples = decode_batch_tuples(raw, verify=verify, path=path)
        if not tuples:
            continue
        if tuples[0][0] < min_offset or (hi is not None and tuples[-1][0] >= hi):
            tuples = [t for t in tuples if min_offset <= t[0] and (hi is None or t[0] < hi)]
        extend(tuples)
        types.extend([int(raw.header.timestamp_type)] * len(tuples))

    if not rows:
        return _empty()
    offsets, timestamps, keys, values, headers = zip(*rows, strict=False)  # 5-tuples; a check costs ~25% here
    if any(headers):
        headers_arr = pa.array(headers, type=HEADERS_TYPE)
    else:
        headers_arr = pa.ListArray.from_arrays(
            pa.array(np.zeros(len(rows) + 1, dtype=np.int32)),
            pa.array([], type=HEADERS_TYPE.value_type),
            type=HEADERS_TYPE,
        )
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, type=pa.binary()),
            pa.array(values, type=pa.binary()),
            pa.array(offsets, type=pa.int64()),
            pa.array(timestamps, type=pa.int64()),
            pa.array(types, type=pa.int32()),
            headers_arr,
        ],
        schema=ARROW_SCHEMA,
    )
