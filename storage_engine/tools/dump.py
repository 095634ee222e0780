"""``logctl dump``: the contents of segment, index and checkpoint files, as Kafka's
``kafka-dump-log`` (``DumpLogSegments``) prints them.

Every batch is shown with its header fields and, when its CRC and structure check out, its
records; an invalid batch is shown with the error instead, and bytes after the last complete
batch are reported (with why, when a header no batch can have stops the walk there), so a
damaged file can be inspected rather than refused. The file is mapped, not read into memory,
so a file larger than the memory dumps too. Temporary names
(``.deleted``, ``.cleaned``, ``.swap``) are dumped as the file they hold. A remote segment's
``.log`` object is dumped the same way (:func:`dump_remote_segments`), read in ranged GETs.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import CorruptRecordError, LogError
from ..files.naming import INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, offset_from_file_name
from ..files.nofollow import file_kind
from ..index import OffsetIndex, TimeIndex
from ..index.txn_index import ABORTED_TXN, ABORTED_TXN_SIZE
from ..log.checkpoint import read_checkpoint
from ..record import RawBatch, decode_batch, scan_batches, verify_batch
from ..remote.partition import RemotePartition
from ..remote.reads import object_url, remote_segment_batches
from ..remote.version import PartitionVersion

#: Renders a key, value or header value for output (None stays None).
Encoder = Callable[[bytes | None], "str | None"]


class DumpError(LogError):
    """A file ``dump`` cannot show: missing, or not a kind it knows."""


def _dump_log_file(path: Path, encode: Encoder) -> list[Any]:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return []
        try:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:  # no address space left for it (a ulimit -v)
            raise DumpError(f"{path}: cannot map the file to read it: {exc.strerror}") from None
        with data:
            return _dump_batches(data, path, encode)  # returns before the map closes: no view of it outlives it


def _dump_batches(data: mmap.mmap, path: Path, encode: Encoder) -> list[Any]:
    out: list[Any] = []
    end = 0
    try:
        for raw in scan_batches(data, path=str(path)):
            out.append(_batch_entry(raw, path, encode))
            end = raw.position + raw.header.size_in_bytes
    except CorruptRecordError as exc:  # a header no batch can have: the batches before it are shown
        out.append({"trailingBytes": len(data) - end, "position": end, "error": str(exc)})
        return out
    if end != len(data):
        out.append({"trailingBytes": len(data) - end, "position": end})
    return out


def _batch_entry(raw: RawBatch, path: Path | str, encode: Encoder) -> dict[str, Any]:
    """One batch as ``dump`` shows it: its header, and its records or why they cannot be read."""
    h = raw.header
    entry: dict[str, Any] = {
        "baseOffset": h.base_offset, "lastOffset": h.last_offset, "count": h.records_count,
        "position": raw.position, "size": h.size_in_bytes, "magic": h.magic, "crc": h.crc,
        "compresscodec": h.compression.name.lower(),
        "timestampType": "LogAppendTime" if h.timestamp_type == 1 else "CreateTime",
        "maxTimestamp": h.max_timestamp, "producerId": h.producer_id, "producerEpoch": h.producer_epoch,
        "baseSequence": h.base_sequence, "partitionLeaderEpoch": h.partition_leader_epoch,
        "isTransactional": h.is_transactional, "isControl": h.is_control,
        "deleteHorizonMs": h.delete_horizon_ms,
    }
    try:
        verify_batch(raw, path=str(path))
        entry["isValid"] = True
        entry["records"] = [
            {"offset": r.offset, "timestamp": r.timestamp, "key": encode(r.key), "value": encode(r.value),
             "headers": [[k, encode(v)] for k, v in r.headers]}
            for r in decode_batch(raw, path=str(path), verify=False)
        ]
    except LogError as exc:
        entry["isValid"] = False
        entry["error"] = str(exc)
    return entry


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


def _one_line(text: str | None) -> str:
    """A key or value as it shows in the text dump: control characters (a newline, a terminal
    escape) written as ``\\n``, ``\\x1b``, so a record can neither forge lines of the dump nor
    drive the terminal (kafka-dump-log prints them raw). The JSON output is exact."""
    return str(text) if text is None else _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def _format_batch(e: dict[str, Any]) -> str:
    if "trailingBytes" in e:
        why = f": {e['error']}" if "error" in e else ""
        return f"Found {e['trailingBytes']} invalid bytes at the end of the file (position {e['position']}){why}"
    line = (f"baseOffset: {e['baseOffset']} lastOffset: {e['lastOffset']} count: {e['count']} "
            f"baseSequence: {e['baseSequence']} partitionLeaderEpoch: {e['partitionLeaderEpoch']} "
            f"isTransactional: {str(e['isTransactional']).lower()} isControl: {str(e['isControl']).lower()} "
            f"deleteHorizonMs: {e['deleteHorizonMs']} position: {e['position']} {e['timestampType']}: {e['maxTimestamp']} "
            f"size: {e['size']} magic: {e['magic']} compresscodec: {e['compresscodec']} crc: {e['crc']} "
            f"isvalid: {str(e['isValid']).lower()}")
    lines = [line]
    for r in e.get("records", []):
        lines.append(f"| offset: {r['offset']} timestamp: {r['timestamp']} key: {_one_line(r['key'])} "
                     f"payload: {_one_line(r['value'])} headers: {r['headers']}")
    if "error" in e:
        lines.append(f"| error: {e['error']}")
    return "\n".join(lines)


def dump_file(path: Path, encode: Encoder) -> tuple[Any, str]:
    """One file's contents as ``(JSON data, text)``; ``encode`` renders keys, values and header
    values (UTF-8 or base64). Raises :class:`DumpError` for a file that is missing or of no
    known kind."""
    name = path.name
    try:
        mode = os.stat(path).st_mode  # follows a symlink: the user names the file
    except ValueError:  # a NUL in the name
        raise DumpError(f"{path}: no such file") from None
    except OSError as exc:
        raise DumpError(f"{path}: {'no such file' if exc.errno == errno.ENOENT else exc.strerror}") from None
    if not stat.S_ISREG(mode):  # a FIFO would block the read for ever
        raise DumpError(f"{path} is {file_kind(mode)}: only a regular file can be dumped")
    bare = name
    for temp in (".deleted", ".cleaned", ".swap"):
        if bare.endswith(temp):
            bare = bare[: -len(temp)]
    if bare.endswith(".log") or bare.endswith(".checkpoint"):  # KRaft snapshots hold record batches too
        entries = _dump_log_file(path, encode)
        return {"file": str(path), "batches": entries}, f"Dumping {path}\n" + "\n".join(_format_batch(e) for e in entries)
    if bare.endswith(INDEX_SUFFIX) or bare.endswith(TIME_INDEX_SUFFIX):
        try:
            base = offset_from_file_name(name)
        except ValueError as exc:
            raise DumpError(f"{path}: an index file name must start with its segment's base offset ({exc})") from None
        is_time = bare.endswith(TIME_INDEX_SUFFIX)
        index = (TimeIndex if is_time else OffsetIndex)(path, base, max(path.stat().st_size, 12), writable=False)
        rows = []
        for n in range(index.entries):
            e = index.entry(n)
            rows.append({"timestamp": e.timestamp, "offset": e.offset} if is_time else {"offset": e.offset, "position": e.position})
        text = "\n".join((f"timestamp: {r['timestamp']} offset: {r['offset']}" if is_time
                          else f"offset: {r['offset']} position: {r['position']}") for r in rows)
        return {"file": str(path), "entries": rows}, f"Dumping {path}\n{text}"
    if bare.endswith(TXN_INDEX_SUFFIX):
        return _dump_txn_index(path)
    if name == LEADER_EPOCH_CHECKPOINT:  # lines of "epoch start-offset", not "topic partition offset"
        raise DumpError(f"{path}: a leader epoch checkpoint (a broker's replication state, which this engine "
                        "neither reads nor writes) is not dumped")
    if "checkpoint" in name:
        rows = [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(read_checkpoint(path).items())]
        return {"file": str(path), "entries": rows}, f"Dumping {path}\n" + "\n".join(
            f"{r['topic']} {r['partition']} {r['offset']}" for r in rows)
    raise DumpError(f"{path}: not a .log, .index, .timeindex, .txnindex or checkpoint file")


def _dump_txn_index(path: Path) -> tuple[Any, str]:
    """A ``.txnindex`` as ``DumpLogSegments.dumpTxnIndex`` prints it, one ``AbortedTxn`` a line.
    Every whole entry is shown as it is (a version other than 0 included: the loader's strict
    checks are ``verify``'s to report), then the bytes of a torn last entry, so a damaged file
    can be inspected rather than refused."""
    data = path.read_bytes()
    whole = len(data) - len(data) % ABORTED_TXN_SIZE
    rows = [{"version": v, "producerId": pid, "firstOffset": first, "lastOffset": last, "lastStableOffset": lso}
            for v, pid, first, last, lso in ABORTED_TXN.iter_unpack(data[:whole])]
    lines = [f"version: {r['version']} producerId: {r['producerId']} firstOffset: {r['firstOffset']} "
             f"lastOffset: {r['lastOffset']} lastStableOffset: {r['lastStableOffset']}" for r in rows]
    result: dict[str, Any] = {"file": str(path), "entries": rows}
    if whole < len(data):
        result["trailingBytes"] = len(data) - whole
        lines.append(f"Found {len(data) - whole} invalid bytes at the end of the file (position {whole}): "
                     f"not a whole {ABORTED_TXN_SIZE}-byte entry")
    return result, f"Dumping {path}\n" + "\n".join(lines)


def dump_remote_segments(rp: RemotePartition, version: PartitionVersion, encode: Encoder,
                         base_offset: int | None = None) -> tuple[Any, str]:
    """The ``.log`` objects of ``version``'s remote segments (or the one at ``base_offset``) as
    ``dump`` shows a local file: each batch valid or with its error, and bytes after the last
    complete batch. An object gone or short is the command's error (``RemoteStorageError``)."""
    segments = [s for s in version.segments if base_offset is None or s.base_offset == base_offset]
    if not segments:
        raise DumpError(f"{rp.tp}: version {version.version} has no remote segment at base offset {base_offset} "
                        f"(its segments start at {[s.base_offset for s in version.segments]})")
    data, texts = [], []
    for seg in segments:
        url = object_url(rp, seg.log)
        entries: list[Any] = []
        end = 0
        try:
            for raw in remote_segment_batches(rp, seg, verify=False):
                entries.append(_batch_entry(raw, url, encode))
                end = raw.position + raw.header.size_in_bytes
        except CorruptRecordError as exc:  # shown as for a local file: the batches before it, then why
            entries.append({"trailingBytes": seg.size_bytes - end, "position": end, "error": str(exc)})
        data.append({"file": url, "version": version.version, "base_offset": seg.base_offset,
                     "end_offset": seg.end_offset, "batches": entries})
        texts.append(f"Dumping {url} (version {version.version}, offsets {seg.base_offset}..{seg.end_offset - 1})\n"
                     + "\n".join(_format_batch(e) for e in entries))
    return data, "\n".join(texts)
