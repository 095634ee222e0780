"""Kafka's record formats: the bytes of a ``.log`` segment.

One module per concern, as in kafka-python's ``record`` package:

* :mod:`.varint`: zigzag varints/varlongs of the v2 record format;
* :mod:`.compression`: the five codecs with Kafka's container formats;
* :mod:`.records`: ``Record``, ``BatchHeader``, ``RawBatch``, ``TimestampType``;
* :mod:`.v2`: magic 2 batches (decode, verify, encode, in-place header updates);
* :mod:`.legacy`: magic 0/1 messages, read-only (brokers stopped writing them in 0.11);
* :mod:`.scan`: shallow iteration over a buffer of batches, dispatching on the magic byte;
* :mod:`.columnar`: decoding straight to Arrow for Spark and analytics (import it directly: it
  loads pyarrow and numpy, which nothing else here needs);
* :mod:`.rewrite`: the batch bytes the cleaner writes (records copied, restamped, assembled).

The split between scanning (headers only), verifying (CRC and header structure) and decoding
(records) is deliberate: recovery, index rebuilds and retention read millions of headers and
no records, while consumers and compaction need records. Every corrupt-input error is a
``CorruptRecordError`` naming the file, the byte position of the batch and its base offset.
"""

from __future__ import annotations

from .compression import CompressionType
from .records import BatchHeader, RawBatch, Record, TimestampType
from .scan import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    decode_batch,
    decode_batch_tuples,
    scan_batches,
    verify_batch,
)
from .v2_builder import (
    encode_batch,
    encode_empty_batch,
    set_base_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
)

__all__ = [
    "Record",
    "BatchHeader",
    "RawBatch",
    "TimestampType",
    "CompressionType",
    "scan_batches",
    "verify_batch",
    "decode_batch",
    "decode_batch_tuples",
    "encode_batch",
    "encode_empty_batch",
    "set_base_offset",
    "set_partition_leader_epoch",
    "set_log_append_time",
    "set_max_timestamp",
    "RECORD_BATCH_OVERHEAD",
    "LOG_OVERHEAD",
    "HEADER_SIZE_UP_TO_MAGIC",
]
