"""The Kafka-compatible log store shared by every part of the platform.

Each topic-partition is a Kafka log directory (``<topic>-<n>/`` holding ``.log``, ``.index``
and ``.timeindex`` segment files) byte-compatible with Apache Kafka. This package imports
neither Dagster nor Spark: Spark jobs and Dagster assets call into it, never the reverse.

Its folders are layers, and imports point one way (``tools -> cleaner -> logdir -> log ->
index/config -> record -> files``; checked by the import-linter contracts in ``pyproject.toml``):

* ``files``: names, no-follow opens, durable writes;
* ``record``: every byte of a record batch: codecs, v2 and legacy formats, control records;
* ``index`` and ``config``: Kafka's sparse indexes; Kafka's topic, broker and cleaner configs;
* ``log``: one partition (Kafka's ``UnifiedLog``): segments, loader, producer state, retention;
* ``logdir``: many partitions (Kafka's ``LogManager``): log dirs, checkpoints, topics, placement;
* ``cleaner``: compaction (Kafka's ``LogCleaner``);
* ``tools``: ``logctl``, dump and verify.

``errors``, ``faults``, ``outcomes`` and ``limits`` are base modules every layer may import.
The names below are what a user of the library needs; the rest is reached through its folder.
"""

from __future__ import annotations

from .config.topic import LogConfig
from .errors import CorruptRecordError, LogError
from .log.append_validation import ProducerRecord
from .log.log import Log
from .logdir.manager import LogManager
from .record import CompressionType, RawBatch, Record, TimestampType

__all__ = [
    "CompressionType",
    "CorruptRecordError",
    "Log",
    "LogConfig",
    "LogError",
    "LogManager",
    "ProducerRecord",
    "RawBatch",
    "Record",
    "TimestampType",
]
