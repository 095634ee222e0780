"""Numeric limits every layer shares: Java's ``int`` and ``long`` ranges, and the smallest index.

Kafka's formats and configs are typed in Java: a partition, a record count or a sequence is an
``int32``, an offset or a timestamp an ``int64``, and ``Integer.MAX_VALUE``/``Long.MAX_VALUE``
double as "unbounded". File names, record batches, indexes, configs and checkpoints all check
against these ranges, so they live in this base module, below every layer, once.
"""

from __future__ import annotations

INT_MAX = 2**31 - 1
INT_MIN = -(2**31)
LONG_MAX = 2**63 - 1
LONG_MIN = -(2**63)

#: Bytes of one ``.timeindex`` entry (``timestamp int64 | relative offset int32``, Kafka's
#: ``TimeIndex``): the index format's entry size and the smallest ``segment.index.bytes`` a topic
#: config accepts, since the index file must hold at least one entry.
TIME_INDEX_ENTRY_SIZE = 12
