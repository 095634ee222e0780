"""Checking a log end to end: what ``logctl verify`` and the platform's asset checks run. A
tiered partition's remote tier is checked too, as one log with the local one.

Reads every byte, so it is the expensive path; it reports every problem it finds instead of
stopping at the first, and never changes anything on disk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CorruptIndexError, CorruptRecordError, LogError
from ..files.naming import OFFSET_DIGITS
from ..index import AbortedTxn
from ..index.txn_index import parse_txn_index
from ..log.aborted_txns import AbortedTxnTracker
from ..log.log import Log
from ..log.producer_state import transactions_open_at
from ..log.reads import offset_order_error
from ..log.segment import LogSegment
from ..record import RawBatch, decode_batch, verify_batch
from ..record.control import ControlRecordType, control_type_of
from ..remote.partition import RemotePartition
from ..remote.reads import object_url, remote_segment_batches, tiered_log
from ..remote.store import ObjectMissingError, ObjectStore
from ..remote.version import PartitionVersion, RemoteSegment

if TYPE_CHECKING:
    from ..logdir.manager import LogManager


@dataclass
class SegmentReport:
    file: str
    batches: int = 0
    records: int = 0
    size_bytes: int = 0
    index_entries: int = 0
    time_index_entries: int = 0
    txn_index_entries: int = 0
    shadowed: bool = False  # a local copy wholly below the remote tier's end: verified, not the log's records


@dataclass
class VerifyReport:
    topic: str
    partition: int
    log_start_offset: int | None  # None: the log could not be opened (see ``problems``)
    log_end_offset: int | None
    segments: list[SegmentReport] = field(default_factory=list)  # remote ones first (``file``: the object's URL)
    problems: list[str] = field(default_factory=list)
    remote_version: int | None = None  # the remote tier's latest version read (None: not tiered)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def batches(self) -> int:
        return sum(s.batches for s in self.segments if not s.shadowed)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.segments if not s.shadowed)


def verify_partition(manager: LogManager, topic: str, partition: int, store: ObjectStore | None = None
                     ) -> VerifyReport:
    """``verify_log`` of one partition; a log that a read-only open refuses (an interrupted swap,
    overlapping segments) is reported with that refusal as its problem, so one damaged
    partition does not hide the others. So is a directory gone (its topic deleted meanwhile).
    A tiered partition's remote tier is verified too, in ``store`` (default: the environment's)."""
    try:
        log = manager.get_log(topic, partition)
    except (LogError, FileNotFoundError) as exc:
        return VerifyReport(topic, partition, None, None, problems=[str(exc)])
    report = verify_log(log)
    if log.config.remote_storage_enable:
        verify_remote_tier(log, report, store)
    return report


def verify_remote_tier(log: Log, report: VerifyReport, store: ObjectStore | None = None) -> None:
    """The remote tier of a tiered partition, added to ``report``: its latest version parses
    (names only objects of its own prefix), every object it names exists with the recorded
    size, every remote batch's CRC and offsets, every segment's ``.txnindex`` object (or its
    absence) against the aborted transactions its batches make, and the step from the tier's
    end to the local log (no offsets in neither tier, none in both). Reads the bucket; never
    writes to it."""
    tp = f"{log.topic}-{log.partition}"
    try:
        view = tiered_log(log, store=store)
    except LogError as exc:
        report.problems.append(f"{tp}: the remote tier's latest version cannot be read: {exc}")
        return
    version, rp = view.version, view.remote
    if version is None or rp is None:
        return
    report.remote_version, report.log_start_offset = version.version, version.log_start_offset
    local = report.segments  # verify_log's, one per local segment, named <base offset>.log
    ends = [int(r.file[:OFFSET_DIGITS]) for r in local[1:]] + [report.log_end_offset or log.log_end_offset]
    for rep, end in zip(local, ends, strict=True):  # the local copies the tier shadows
        rep.shadowed = end <= version.end_offset
    unreadable = _missing_or_short(rp, version, report.problems)
    remote: list[SegmentReport] = []
    expected: int | None = None
    tracker = AbortedTxnTracker()  # transactions open before the tier's first batch are not knowable
    for seg in version.segments:
        url = object_url(rp, seg.log)
        rep = SegmentReport(url, size_bytes=seg.size_bytes)
        remote.append(rep)
        if seg.log in unreadable:
            expected = None
            continue
        txns = _SegmentTxns(tracker)
        try:
            for raw in remote_segment_batches(rp, seg):
                txns.observe(raw, url)
                rep.batches += 1
                rep.records += len(decode_batch(raw, path=url))
                order = offset_order_error(expected if expected is not None else raw.header.base_offset,
                                           raw.header.base_offset, f"{url} at position {raw.position}",
                                           first=False, cleaned=view.may_be_cleaned(expected or 0))
                if order:
                    report.problems.append(str(order))
                expected = raw.header.next_offset
        except LogError as exc:
            report.problems.append(str(exc))
            expected = None
            continue
        if seg.txn_index is None or seg.txn_index not in unreadable:
            _verify_remote_txn_index(rp, seg, txns, rep, report.problems)
    report.segments[:0] = remote
    _verify_boundary(log, view.may_be_cleaned, version.end_offset, expected, report.problems)


def _verify_remote_txn_index(rp: RemotePartition, seg: RemoteSegment, txns: _SegmentTxns, rep: SegmentReport,
                             problems: list[str]) -> None:
    """A remote segment's ``.txnindex`` object (none: no entry) against what its batches say: a
    segment that comes back from the bucket brings this object as its ``.txnindex``."""
    if seg.txn_index is None:
        name, entries = f"{object_url(rp, seg.log)} (its segment has no .txnindex object)", []
    else:
        name = object_url(rp, seg.txn_index)
        try:
            entries = parse_txn_index(rp.read(seg.txn_index), name, seg.base_offset)
        except LogError as exc:
            problems.append(str(exc))
            return
    rep.txn_index_entries = len(entries)
    _check_txn_entries(name, entries, txns, problems)


def _missing_or_short(rp: RemotePartition, version: PartitionVersion, problems: list[str]) -> set[str]:
    """Objects ``version`` names that are not in the store, or not of the recorded size (one
    HEAD each), each listed as a problem."""
    sizes = {seg.log: seg.size_bytes for seg in version.segments}
    bad = set()
    for name in sorted(version.objects):
        try:
            size = rp.store.head(rp.name(name)).size
        except ObjectMissingError:
            problems.append(f"{object_url(rp, name)}: named by version {version.version} but not in the store")
            bad.add(name)
            continue
        if name in sizes and size != sizes[name]:
            problems.append(f"{object_url(rp, name)}: {size} bytes, but version {version.version} records "
                            f"{sizes[name]}")
            bad.add(name)
    return bad


def _verify_boundary(log: Log, may_be_cleaned: Callable[[int], bool], tier_end: int, expected: int | None, problems: list[str]) -> None:
    """Offsets go on from the remote tier's last batch to its end and on into the local log."""
    tp = f"{log.topic}-{log.partition}"
    if expected is not None and (order := offset_order_error(expected, tier_end, f"{tp} at the remote tier's end",
                                                             first=False, cleaned=may_be_cleaned(expected))):
        problems.append(str(order))
    if tier_end > log.log_end_offset:
        problems.append(f"{tp}: the remote tier ends at offset {tier_end}, past the local log end offset "
                        f"{log.log_end_offset}")
    elif log.log_start_offset > tier_end:
        problems.append(f"{tp}: offsets {tier_end} to {log.log_start_offset - 1} are in neither tier (the remote "
                        f"tier ends at {tier_end}, the local log starts at {log.log_start_offset})")
    elif tier_end < log.log_end_offset:
        try:
            first = next(iter(log.iter_batches(tier_end)), None)
        except LogError as exc:
            problems.append(f"{tp}: the local log cannot be read from the remote tier's end {tier_end}: {exc}")
            return
        if first is not None and (order := offset_order_error(
                tier_end, first.header.base_offset, f"{log.segment_path(first.header.base_offset)} at position "
                f"{first.position}, after the remote tier's end", first=False, cleaned=may_be_cleaned(tier_end))):
            problems.append(str(order))


def verify_log(log: Log) -> VerifyReport:
    """CRCs, record structure, offsets strictly increasing and without gaps no cleaner explains
    (``Log.offset_order_error``), the three indexes agreeing with the log, and whatever a
    writable open would change (``Log.pending_repairs``)."""
    log.refresh()
    report = VerifyReport(log.topic, log.partition, log.log_start_offset, log.log_end_offset)
    report.problems.extend(log.pending_repairs)
    previous_next = None
    segments = log.segments
    transactions = transactions_open_at(log.dir, segments, 0) if segments else AbortedTxnTracker()
    for i, seg in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        seg_report, previous_next = _verify_segment(log, seg, next_base, previous_next, transactions, report.problems)
        report.segments.append(seg_report)
    if previous_next is not None:  # offsets lost at the end, before the log end offset (``LogReader.batches_from``)
        order = log.offset_order_error(previous_next, log.log_end_offset, f"{log.dir} after its last batch")
        if order:
            report.problems.append(f"{order} (consumers stop there; a writable open changes nothing)")
    return report


def _verify_segment(
    log: Log, seg: LogSegment, next_base: int | None, previous_next: int | None, transactions: AbortedTxnTracker,
    problems: list[str]
) -> tuple[SegmentReport, int | None]:
    path = str(seg.log_path)
    size = seg.refresh_size()
    rep = SegmentReport(seg.log_path.name, size_bytes=size)
    starts: dict[int, tuple[int, int]] = {}  # position -> (base offset, last offset)
    txns = _SegmentTxns(transactions)
    end = 0
    last_offset = None
    max_ts = -1
    try:
        for raw in seg.batches(0, size):
            header = raw.header
            verify_batch(raw, path=path)
            records = decode_batch(raw, path=path)
            rep.batches += 1
            rep.records += len(records)
            if header.base_offset < seg.base_offset:
                problems.append(f"{path}: batch at position {raw.position} has base offset {header.base_offset} below the segment base {seg.base_offset}")
            order = (log.offset_order_error(previous_next, header.base_offset, f"{path} at position {raw.position}")
                     if previous_next is not None else None)
            if order:
                problems.append(f"{order} (consumers stop there; a writable open changes nothing)")
            if next_base is not None and header.last_offset >= next_base:
                problems.append(f"{path}: batch at position {raw.position} ends at offset {header.last_offset}, in the next segment's range")
            prev = None
            for r in records:
                if prev is not None and r.offset <= prev:
                    problems.append(f"{path}: record offsets not increasing inside the batch at position {raw.position}")
                    break
                prev = r.offset
            txns.observe(raw, path)
            starts[raw.position] = (header.base_offset, header.last_offset)
            previous_next = header.next_offset
            last_offset = header.last_offset
            max_ts = max(max_ts, header.max_timestamp)
            end = raw.position + header.size_in_bytes
    except CorruptRecordError as exc:
        problems.append(str(exc))
        return rep, previous_next
    if end != size:
        problems.append(f"{path}: {size - end} bytes after the last complete batch (position {end})")
    try:
        _verify_indexes(seg, starts, last_offset, max_ts, next_base is None, rep, problems)
    except LogError as exc:
        problems.append(f"{path}: index unreadable: {exc}")
    _verify_txn_index(seg, txns, rep, problems)
    return rep, previous_next


class _SegmentTxns:
    """What one segment's batches say its ``.txnindex`` holds, as they stream past: the entries
    they make (``AbortedTxnTracker``, the rule the appender and recovery follow; the tracker
    goes on into the next segment) and every ABORT marker's (producer id, offset)."""

    def __init__(self, tracker: AbortedTxnTracker) -> None:
        self.tracker = tracker
        self.derived: list[AbortedTxn] = []
        self.aborts: set[tuple[int, int]] = set()

    def observe(self, raw: RawBatch, path: str) -> None:
        header = raw.header
        control_type = control_type_of(raw, path) if header.is_control and header.magic >= 2 else None
        if control_type == ControlRecordType.ABORT:
            self.aborts.add((header.producer_id, header.last_offset))
        entry = self.tracker.observe(header, control_type)
        if entry is not None:
            self.derived.append(entry)


def _verify_txn_index(seg: LogSegment, txns: _SegmentTxns, rep: SegmentReport, problems: list[str]) -> None:
    """The local segment's ``.txnindex`` against what its batches say (:func:`check_txn_entries`);
    not when the load left the segment's indexes out of the view (a damaged ``.txnindex``
    included): its warning names the file and the rebuild, and saying it again would double it."""
    if seg.indexes_forgotten:
        return
    txn_index = seg.txn_index
    try:
        txn_index.forget()
        entries = txn_index.entries
    except CorruptIndexError as exc:
        problems.append(f"{exc} (a writable open rebuilds it)")
        return
    rep.txn_index_entries = len(entries)
    _check_txn_entries(str(txn_index.path), entries, txns, problems)


def _check_txn_entries(name: str, entries: list[AbortedTxn], txns: _SegmentTxns, problems: list[str]) -> None:
    """A segment's ``.txnindex`` entries (local file or remote object ``name``) against what its
    batches say. A broker serves ``read_committed`` fetches from this file alone, so an entry
    missing is aborted records served as committed. The cleaner
    keeps the entry of an ABORT marker it keeps after removing the transaction's batches (as
    Kafka's does), which no batch makes any more: an entry whose marker is in the segment is
    fine. An entry's first offset and last stable offset may be lower than the batches now say:
    a cleaning up to the active segment removes the first batches of a transaction that goes on
    past it, or of another producer's transaction that was open then (seen on a live broker's
    cleaned log); lower ones only make a broker filter and look further back."""
    by_marker = {(e.producer_id, e.last_offset): e for e in entries}
    for want in txns.derived:
        have = by_marker.get((want.producer_id, want.last_offset))
        if have is None:
            problems.append(f"{name}: no entry for the transaction of producer {want.producer_id} aborted at "
                            f"offset {want.last_offset}: a broker serves its records to read_committed consumers")
        elif have.first_offset > want.first_offset or have.last_stable_offset > want.last_stable_offset:
            problems.append(f"{name}: the entry for the transaction of producer {want.producer_id} aborted at "
                            f"offset {want.last_offset} says first offset {have.first_offset} and last stable offset "
                            f"{have.last_stable_offset}; the batches say {want.first_offset} and {want.last_stable_offset}")
    made = {(e.producer_id, e.last_offset) for e in txns.derived}
    for key, entry in by_marker.items():
        if key not in made and key not in txns.aborts:
            problems.append(f"{name}: an entry for producer {entry.producer_id} at offset {entry.last_offset}, "
                            f"where the segment has no ABORT marker of that producer")


def _verify_indexes(
    seg: LogSegment,
    starts: dict[int, tuple[int, int]],
    last_offset: int | None,
    max_ts: int,
    is_active: bool,
    rep: SegmentReport,
    problems: list[str],
) -> None:
    oi, ti = seg.offset_index, seg.time_index
    rep.index_entries = oi.entries
    for n in range(oi.entries):
        e = oi.entry(n)
        batch = starts.get(e.position)
        if batch is None:
            problems.append(f"{oi.path}: entry {n} (offset {e.offset}) points at position {e.position}, not a batch start")
        elif e.offset < batch[0] or (last_offset is not None and e.offset > last_offset):
            problems.append(f"{oi.path}: entry {n} offset {e.offset} does not match the batch at position {e.position}")
    rep.time_index_entries = ti.entries
    prev_ts = -1
    for n in range(ti.entries):
        e = ti.entry(n)
        if e.timestamp < prev_ts:
            problems.append(f"{ti.path}: entry {n} timestamp {e.timestamp} goes backwards")
        if e.timestamp > max_ts:
            problems.append(f"{ti.path}: entry {n} timestamp {e.timestamp} is above the segment's max timestamp {max_ts}")
        if e.offset < seg.base_offset or (last_offset is not None and e.offset > last_offset):
            problems.append(f"{ti.path}: entry {n} offset {e.offset} is outside the segment")
        prev_ts = e.timestamp
    # what retention plans judge the segment by (the sensors' stats): a closed segment's time
    # index's last entry; the active segment's, then the batches after its last index entry
    judged = seg.read_max_timestamp()[0] if is_active else ti.last_entry().timestamp
    if judged < max_ts and not seg.indexes_forgotten:  # forgotten: a writable open rebuilds them
        read = f"timestamp {judged}" if judged >= 0 else "no timestamp (so the file's mtime)"
        problems.append(f"{ti.path}: understates the segment's largest timestamp: retention reads {read} from it, "
                        f"but the batches it covers reach {max_ts}, so time retention would delete the segment "
                        "early (delete the .timeindex file and a writable open rebuilds it from the log)")
