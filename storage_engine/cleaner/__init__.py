"""Log compaction: Kafka's ``LogCleaner`` for one partition, crash-safe and optimistic.

One module per idea, in three layers, so a distributed job reuses the first two unchanged:

1. **Rules** (pure, no I/O): ``rules`` (producer state from a header scan, transactions, batch
   and record retention: Kafka's ``checkBatchRetention`` / ``shouldRetainRecord``),
   ``record_decisions`` (the per-record hot loops of map building and recopying) and
   ``batch_filter`` (:class:`BatchFilter`: one batch in, the bytes to write out, Kafka's
   ``MemoryRecords.filterTo``). Batch bytes themselves are written by the record layer
   (``storage_engine.record.rewrite``): retained records are copied as bytes; a rebuilt batch's
   base timestamp is Kafka's (the first survivor's, or the delete horizon), and only a record
   whose delta against it changes is rewritten, and then only its timestamp delta.
2. **Plan** (pure, ``plan``): the cleanable range, the dirty ratio, grouping (``LogToClean``).
3. **I/O**: ``inputs`` (the segments a pass reads), ``dirty_scan`` (map building's walk),
   ``recopy`` (one group into a staged segment), ``cleaner`` (:class:`Cleaner`: a partition's
   passes and the swap), ``staging`` (the cleaner lock and staged files), ``candidacy`` (due or
   not from file metadata alone), with ``stats``, ``report`` and ``throttler`` beside them.

The lifecycle has one owner, here: :class:`LogCleaner` (``log_cleaner``, Kafka's ``LogCleaner``)
loops over a manager's partitions (candidates, clean one, clean the due ones, the after-steps);
:class:`PartitionCleaning` (``partition_cleaning``) holds one partition from lock to report when
its round is recopied elsewhere, through the task API of ``split``; ``remote_cleaning`` cleans
a partition's remote tier (a tiered topic) with the same :class:`Cleaner`; ``outcome`` maps each engine
error to the partition's outcome, once for all of them. A distributed job (``spark_jobs``) uses
only the names exported below.

After map building, the map's offsets are exactly the dirty records that win their key, so a
dirty batch holding none of them is dropped without decompressing or walking it; with heavy
duplication most batches go that way.

A pass (Kafka's ``Cleaner.doClean``):

* under the partition lock, briefly: re-sync, then open every segment read-only (our own file
  descriptors: later swaps or appends by other processes do not disturb the read) and note
  each one's inode and size;
* without the lock: scan batch headers of the whole log (producer state, aborted
  transactions, the last stable offset), compute the range, build the offset map over the
  dirty section, and write the replacement segments, flushed, under the staging suffix
  ``.cleaning`` (loader.py deletes any ``.cleaned`` file it finds, which would destroy this
  output whenever another process reloads the log). A writer in another process keeps
  appending to the active segment meanwhile, and may roll;
* under the lock again: re-sync, check that every input segment is still on disk with the same
  inode and size (otherwise delete the staged files and raise ``LogChangedError``), then swap:
  ``.cleaning`` -> ``.cleaned``, then Kafka's steps: ``.cleaned`` -> ``.swap`` in descending
  base order (the commit point is the last of these renames: from then on a load completes the
  swap), fsync the directory, the old segments -> ``.deleted`` (``.log`` first), ``.swap`` ->
  final names in ascending order, fsync the directory, publish the new segment list, and only
  then write ``cleaner-offset-checkpoint``. Only one cleaner runs per partition (an ``flock``
  on ``.logplat-cleaner.lock``); another finds it busy and skips the partition.

Every file step is followed by ``crash_point("compaction.<step>")``; the kill tests check that
``loader.py`` turns a kill at any of them into the content before or after, never a mix.

Where this differs from Kafka, and why:

* One swap replaces *all* groups of a pass at once (Kafka swaps group by group), so a kill
  leaves the whole pass done or undone.
* Aborted transactions come from scanning the log's ABORT markers, not from the ``.txnindex``
  files Kafka reads (``collectAbortedTransactions``): a marker aborts its producer's
  transactional batches since that producer's previous marker, and a directory whose
  transaction indexes are missing (written before the engine wrote them, or damaged) is still
  cleaned right. The entries are the ones the appender writes (``log.aborted_txns``), and the
  cleaned segment's ``.txnindex`` gets those of the markers kept, as Kafka's does.
* The last batch of the round (the last batch of the last recopied segment) is always kept,
  as an empty header if nothing in it survives: Kafka keeps it when its next offset is the
  round's upper bound. Keeping it always means the swap's last segment always ends where the
  replaced range ended, which is what the loader needs to find every replaced segment.
* When the offset map is full, keys already in it are still updated; the pass stops at the
  first *new* key that does not fit (Kafka stops at the first record once full).
* A magic 0/1 compressed wrapper that loses records is rewritten as uncompressed messages
  (this engine does not write legacy compressed wrappers); one that keeps all is copied.
"""

from __future__ import annotations

from .batch_filter import BatchFilter
from .candidacy import candidacy_from_stats
from .cleaner import Cleaner
from .dirty_scan import segment_latest_offsets, transaction_states
from .inputs import InputSegment, SegmentRef
from .log_cleaner import LogCleaner
from .outcome import OUTCOME_OF_ERROR, PARTITION_ERRORS, outcome_of
from .partition_cleaning import PartitionCleaning, after_steps, finish
from .plan import LogToClean, order_by_dirtiness
from .recopy import discard_staged, recopy_group
from .remote_cleaning import RemoteCompaction, compact_remote, settle_tiered_compaction
from .report import CompactionReport
from .rules import (
    AbortedTxn,
    LastRecord,
    ProducerStateBuilder,
    RecordOutcome,
    TransactionTracker,
    retain_record,
)
from .split import GroupTask, KeysTask, SpanTask, SplitRound, recopy_spans, scan_span_keys, split_round
from .staging import STAGING_SUFFIX, CleanerBusyError, CleanerLock, remote_staging_dir
from .stats import CleanerStats
from .strategy import CompactionStrategy, Winners, version_rule
from .throttler import Throttler

__all__ = [
    "AbortedTxn",
    "BatchFilter",
    "Cleaner",
    "CleanerBusyError",
    "CleanerLock",
    "CleanerStats",
    "CompactionReport",
    "CompactionStrategy",
    "GroupTask",
    "InputSegment",
    "KeysTask",
    "LastRecord",
    "LogCleaner",
    "LogToClean",
    "OUTCOME_OF_ERROR",
    "PARTITION_ERRORS",
    "PartitionCleaning",
    "RemoteCompaction",
    "ProducerStateBuilder",
    "RecordOutcome",
    "STAGING_SUFFIX",
    "SegmentRef",
    "SpanTask",
    "SplitRound",
    "Throttler",
    "TransactionTracker",
    "Winners",
    "after_steps",
    "candidacy_from_stats",
    "compact_remote",
    "settle_tiered_compaction",
    "discard_staged",
    "finish",
    "order_by_dirtiness",
    "outcome_of",
    "recopy_group",
    "recopy_spans",
    "remote_staging_dir",
    "retain_record",
    "scan_span_keys",
    "segment_latest_offsets",
    "split_round",
    "transaction_states",
    "version_rule",
]
