"""Differential fuzz targets: the compiled record core against the pure-Python reference.

Run one by hand (libFuzzer's options after the target's name; a corpus directory to grow)::

    python tests/native/fuzz_targets.py batches -max_total_time=60 -rss_limit_mb=2048 CORPUS_DIR
    python tests/native/fuzz_targets.py batches --seed CORPUS_DIR   # write the seed corpus
    python tests/native/fuzz_targets.py batches CRASH_FILE          # replay one input

Each target feeds the same bytes to a public API of the engine under both cores
(``native.use``) and asserts the outcomes are equal: the same results, or the same exception
class and message (the switch's contract: bytes the compiled core rejects are named by the
reference). A divergence or a crash is a libFuzzer crash, with the input saved
(``-artifact_prefix``). Only public APIs are called, so the targets hold whatever the compiled
internals are; ``tests/native/test_fuzz.py`` runs each for a bounded time in CI. The engine is
imported under ``atheris.instrument_imports`` (the engine alone) so the reference's Python branches guide the
search (the compiled core is not instrumented: its branches are reached through them).

* ``batches``: raw segment bytes -> ``scan_batches`` -> ``decode_batch(verify=True)`` per batch
  and ``columnar.batches_to_arrow(verify=True)`` (framing and CRC: a mutation past byte 21
  fails the CRC, so this target rarely reaches the records);
* ``batches_fixed``: header fields chosen by the first bytes (attributes: codec bits, the
  LogAppendTime bit; base offset and timestamps from ``EXTREMES``: int64's ends, 2^47/2^48;
  lastOffsetDelta; the records count; one to three batches whose base offsets may jump by
  2^47/2^48) over the fuzzed record bytes (compressed with the codec when asked), the CRC
  computed (``build_batch``) so the record walk of both outputs is reached;
* ``walk``: plain v2 record bytes (first byte: the record count) -> ``v2.walk_records`` and
  ``v2.timestamp_deltas``;
* ``compaction``: fuzzed record bytes as a v2 batch (count, lastOffsetDelta -- not always
  count-1, so inner deltas need not ascend -- codec and CRC from the first bytes) placed among
  template batches, a segment each, of a compacted log (at offsets that may jump by 2^31/2^32 or
  sit near int64's end), cleaned by ``LogCleaner`` with a default map or one of one to seven
  keys (``small_map_cleaner``: passes stop at a full map) -> the partition's files after, or
  the error.
"""

from __future__ import annotations

import atexit
import shutil
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import atheris
import lz4.frame

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from anywhere

from crc32c import crc32c  # noqa: E402  (after the path)

with atheris.instrument_imports(include=["storage_engine"]):  # the engine's branches only, not numpy's
    from storage_engine import native
    from storage_engine.record import CompressionType, Record, encode_batch, scan_batches
    from storage_engine.record.columnar import batches_to_arrow
    from storage_engine.record.compression import compress
    from storage_engine.record.scan import decode_batch
    from storage_engine.record.v2 import timestamp_deltas, walk_records
    from storage_engine.record.varint import encode_varint, encode_varlong
    from tests.helpers.cleaner import compact, raw_log, small_map_cleaner

CORES = ("compiled", "reference")
_HEADER = 61  # a v2 batch's header: records start here (Kafka's RECORDS_OFFSET)
_HEADER_FORMAT = struct.Struct(">qiibIhiqqqhii")  # DefaultRecordBatch: baseOffset .. recordsCount
_CRC_AT, _ATTRIBUTES_AT = 17, 21
I64_MAX, I32_MAX, I32_MIN = (1 << 63) - 1, (1 << 31) - 1, -(1 << 31)
#: header values where int64 sums (base + delta) or the key map's signed 48-bit deltas break
EXTREMES = (0, 1_000, (1 << 47) - 1, 1 << 47, (1 << 48) - 1, 1 << 48, 1 << 62, I64_MAX - 16, I64_MAX, -I64_MAX - 1,
            -I64_MAX + 15, -1, (1 << 32) - 1, 1 << 31, -(1 << 47), 1_700_000_000_000)
#: gaps between a batch's last offset and the next batch's base offset
JUMPS = (0, 1 << 48, 1 << 47, (1 << 48) - 1, 1 << 31)
_COMPRESS = 0x80  # not an attribute (Kafka's end at bit 6): compress the fuzzed records with the codec


def outcome(run: Callable[[], Any]) -> tuple:
    """``("ok", result)`` or ``("error", class name, message)``."""
    try:
        return ("ok", run())
    except Exception as exc:  # every error is compared: its class and message are the contract
        return ("error", type(exc).__name__, str(exc))


def differential(run: Callable[[], Any], data: bytes) -> None:
    """Run under both cores; a different outcome is a divergence (an AssertionError: a crash)."""
    prev = native.status().requested
    try:
        results = {}
        for core in CORES:
            native.use(core)
            results[core] = outcome(run)
    finally:
        native.use(prev)
    if not _same(results["compiled"], results["reference"]):
        raise AssertionError(f"the cores diverge on {data!r}:\n compiled:  {results['compiled']!r}\n "
                             f"reference: {results['reference']!r}")


def _same(a: Any, b: Any) -> bool:
    """``==``, through tuples and lists, with ``equals`` for Arrow objects (their ``==`` is per element)."""
    if hasattr(a, "equals") and type(a) is type(b):
        return bool(a.equals(b))
    if isinstance(a, tuple | list) and type(a) is type(b):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _int64(value: int) -> int:
    """``value`` wrapped into int64, as a header field holds it."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _int32(value: int) -> int:
    return (value + (1 << 31)) % (1 << 32) - (1 << 31)


def extreme(byte: int) -> int:
    """A header value from one fuzz byte: one of ``EXTREMES`` (low nibble) moved by -8..+7 (high)."""
    return _int64(EXTREMES[byte & 15] + (byte >> 4) - 8)


def build_batch(records: bytes, *, base_offset: int = 0, attributes: int = 0, last_offset_delta: int = 0,
                base_timestamp: int = 0, max_timestamp: int = 0, count: int = 0) -> bytes:
    """A v2 batch of these header fields over ``records`` (the batch's payload, compressed or not)
    with its length and CRC computed, so the checks that come first pass and the records are parsed."""
    out = bytearray(_HEADER_FORMAT.pack(_int64(base_offset), _HEADER - 12 + len(records), -1, 2, 0, attributes,
                                        _int32(last_offset_delta), _int64(base_timestamp), _int64(max_timestamp),
                                        -1, -1, -1, count) + records)
    struct.pack_into(">I", out, _CRC_AT, crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)


def _payload(records: bytes, attributes: int) -> bytes:
    """The batch's payload: ``records`` compressed with the attributes' codec when asked (and valid)."""
    codec = attributes & 7
    if attributes & _COMPRESS and 0 < codec < len(CompressionType):
        return compress(codec, records)
    return records


def _batches(data: bytes) -> Any:
    raws = list(scan_batches(data))
    return outcome(lambda: [decode_batch(raw, verify=True) for raw in raws]), outcome(
        lambda: batches_to_arrow(raws, verify=True))


def _count(byte: int) -> int:
    return {255: I32_MAX, 254: -1}.get(byte, byte % 64)


def _last_offset_delta(byte: int, count: int) -> int:
    return {0: I32_MAX, 1: I32_MIN}.get(byte, count - 1 + (byte >> 4) - 8)


def _fixed_log(data: bytes) -> bytes:
    """``batches_fixed``'s input as segment bytes: 7 header bytes (attributes, base offset, base
    and max timestamp, lastOffsetDelta, count, batches and jump), then the records."""
    head, records = data[:7].ljust(7, b"\0"), data[7:]
    attributes = head[0]
    count = _count(head[5])
    delta = _last_offset_delta(head[4], count)
    payload = _payload(records, attributes)
    base, out = extreme(head[1]), []
    for _ in range(1 + head[6] % 3):
        out.append(build_batch(payload, base_offset=base, attributes=attributes & 0x7F, last_offset_delta=delta,
                               base_timestamp=extreme(head[2]), max_timestamp=extreme(head[3]), count=count))
        base = _int64(base + delta + 1 + JUMPS[(head[6] >> 2) % len(JUMPS)])
    return b"".join(out)


def _batches_fixed(data: bytes) -> Any:
    return _batches(_fixed_log(data))


def _walk(data: bytes) -> Any:
    count, buf = (data[0], data[1:]) if data else (0, b"")
    return outcome(lambda: walk_records(buf, count)), outcome(lambda: timestamp_deltas(buf, count))


def _records(base: int, keys: range, value: bytes = b"v") -> list[Record]:
    return [Record(base + i, 1_000 + i, f"k{k}".encode(), value) for i, k in enumerate(keys)]


def _template(base: int, keys: range) -> bytes:
    """A valid batch of keys ``k<i>`` at ``base`` (any int64: baseOffset is outside the CRC)."""
    batch = encode_batch(_records(0, keys), base_offset=0)
    return struct.pack(">q", _int64(base)) + batch[8:]


#: where the compaction target's fuzzed batch starts (after three template records at 0..2). No
#: place 2^47 or more away: the compiled key map ends a pass there (its offset range) where the
#: reference's dict does not, so the passes differ, and with a fuzzed batch's inner offsets out of
#: order so may the bytes, rightly; ``test_review_regressions`` cleans such a jump with offsets in
#: order under both cores (the decode targets still place batches 2^47 and 2^48 apart).
PLACES = (3, I64_MAX - 40, 3 + (1 << 31), 3 + (1 << 32))
_SHM = Path("/dev/shm")  # tmpfs: the cleaner's fsyncs cost nothing there (half the time of a run on disk)
_RUN_DIR = Path(tempfile.mkdtemp(prefix="fuzz-compaction-", dir=_SHM if _SHM.is_dir() else None))
atexit.register(shutil.rmtree, _RUN_DIR, True)


def _all_keys_of_two_bytes(records: bytes, count: int) -> bool:
    """Whether every keyed record of ``records`` has a key of 2 bytes, as the templates' keys:
    ``small_map_cleaner`` sizes a map that holds the same number of such keys under both cores
    (the compiled map is denser, so for other lengths the cores' passes legitimately split
    elsewhere, and the bytes written may differ)."""
    try:
        walked = walk_records(records, count)
    except Exception:  # damaged records: the default map, the error is compared as it is
        return False
    return all(key is None or len(key) == 2 for *_, key, _tombstone in walked)


def _compaction_log(data: bytes) -> tuple[int, list[list[bytes]]]:
    """``compaction``'s input as (map keys, 0 = the default map; segments): 4 header bytes (map
    keys and placement, count, lastOffsetDelta, codec), then the records."""
    head, records = data[:4].ljust(4, b"\0"), data[4:]
    keys, count = head[0] % 8, head[1] % 16
    if keys and not _all_keys_of_two_bytes(records, count):
        keys = 0  # a budget holds ``keys`` keys under both cores for 2-byte keys only: else passes differ, rightly
    delta = count - 3 + head[2] % 8  # count-1 give or take: inner deltas need not ascend to it
    base = PLACES[(head[0] >> 3) % len(PLACES)]
    # never below the fuzzed batch's end: overlapping segments test only the loader (whose refusal
    # leaves their files open: ten descriptors a run, EMFILE after a few thousand)
    after = _int64(base + max(delta, 0) + 1 + (1 << 31 if head[0] & 0x40 else 0))
    fuzzed = build_batch(_payload(records, _COMPRESS | head[3] % len(CompressionType)), base_offset=base,
                         attributes=head[3] % len(CompressionType), last_offset_delta=delta, base_timestamp=1_000,
                         max_timestamp=1_000, count=count)
    # a segment each: the loader cuts a segment at a batch 2^31 or more past the segment's base
    return keys, [[_template(0, range(3))], [fuzzed], [_template(after, range(3, 5))],
                  [_template(_int64(after + 2), range(1))]]


def _compaction(data: bytes) -> Any:
    keys, segments = _compaction_log(data)
    shutil.rmtree(_RUN_DIR, ignore_errors=True)
    _RUN_DIR.mkdir()
    with raw_log(_RUN_DIR, segments) as manager:
        cleaner = small_map_cleaner(keys, 2) if keys else None  # sized under the core in use: after native.use
        result = outcome(lambda: compact(manager, cleaner=cleaner))
        report = ("ok", None) if result[0] == "ok" else result  # the report object holds timings
    part = _RUN_DIR / "t-0"
    return report, {p.name: p.read_bytes() for p in sorted(part.iterdir()) if p.suffix == ".log"}


def _compressed(data: bytes) -> Any:
    """A fuzzed lz4 (first byte's high bit clear) or zstd stream as a batch's payload, under a
    valid header (count: the first byte's low 6 bits), so the core's decompressors are reached."""
    head, payload = (data[0], data[1:]) if data else (0, b"")
    codec = CompressionType.ZSTD if head & 0x80 else CompressionType.LZ4
    count = head & 0x3F
    return _batches(build_batch(payload, attributes=codec, last_offset_delta=max(count - 1, 0), count=count))


def _compressed_seeds() -> list[bytes]:
    """lz4 and zstd streams of 3 and 40 records: ours, and an lz4 frame with a content size and
    both checksums (as kafka-python and aiokafka's cramjam write some of them)."""
    out = []
    for codec, flag in ((CompressionType.LZ4, 0), (CompressionType.ZSTD, 0x80)):
        for n in (3, 40):
            batch = encode_batch(_records(0, range(n), b"value" * 30), base_offset=0, compression=codec)
            out.append(bytes([flag | n]) + batch[_HEADER:])
    plain = encode_batch(_records(0, range(40), b"value" * 30), base_offset=0)[_HEADER:]
    out.append(bytes([40]) + lz4.frame.compress(plain, block_linked=False, store_size=True, content_checksum=True,
                                                block_checksum=True))
    return out


TARGETS: dict[str, Callable[[bytes], Any]] = {"batches": _batches, "batches_fixed": _batches_fixed, "walk": _walk,
                                              "compressed": _compressed, "compaction": _compaction}


def raw_record(offset_delta: int, key: bytes | None, value: bytes | None = b"v", timestamp_delta: int = 0) -> bytes:
    """One v2 record's bytes with any deltas (``encode_batch`` takes only ascending offsets)."""
    def blob(b: bytes | None) -> bytes:
        return encode_varint(-1) if b is None else encode_varint(len(b)) + b
    body = b"\0" + encode_varlong(timestamp_delta) + encode_varint(offset_delta) + blob(key) + blob(value) + b"\0"
    return encode_varint(len(body)) + body


def seeds(target: str) -> list[bytes]:
    """Valid inputs of ``target`` (batches of every codec, extreme deltas, a map that fills while
    the inner offsets descend): where the fuzzer starts."""
    batches = [encode_batch(_records(10 * i, range(1 + i % 4), b"value" * i), base_offset=10 * i, compression=codec)
               for i, codec in enumerate(CompressionType)]
    plain = encode_batch(_records(0, range(3)), base_offset=0)[_HEADER:]  # three records, uncompressed
    extremes = [raw_record(0, b"kA", timestamp_delta=I64_MAX) + raw_record(I32_MAX, b"kB", timestamp_delta=-I64_MAX - 1),
                raw_record(2, b"kA") + raw_record(0, None, None) + raw_record(1, b"kC", timestamp_delta=-1)]
    # header bytes: attributes (| _COMPRESS), base offset, base and max timestamp (``extreme``: 0x80 = 0,
    # 0x88 = int64 max, 0x85 = 2^48), lastOffsetDelta (0x80 = count-1, 0 = int32 max), count, batches + 4*jump
    fixed = [bytes([_COMPRESS | codec, base, ts, ts, 0x80, 3, more]) + plain
             for codec, (base, ts, more) in zip(CompressionType, [(0x88, 0x80, 0), (0x80, 0x88, 0), (0x85, 0x8F, 5),
                                                                   (0x82, 0x89, 10), (0x87, 0x80, 2)], strict=True)]
    fixed += [bytes([0x0B | _COMPRESS, 0x80, 0x81, 0x81, 0x80, 3, 1]) + plain,  # LogAppendTime, lz4
              bytes([0x0D, 0x80, 0x80, 0x80, 0x80, 3, 0]) + plain,  # codec 5: no such codec
              bytes([0, 0x86, 0x81, 0x81, 0, 2, 0]) + extremes[0],
              bytes([_COMPRESS | 4, 0x88, 0x80, 0x80, 0x80, 3, 0]) + extremes[1]]
    # review 36 #1: keys k0..k2, kA, kB fit a five-key map, kC (offset between them) does not
    winners = raw_record(0, b"kA") + raw_record(2, b"kB") + raw_record(1, b"kC")
    partial = raw_record(0, b"kA") + raw_record(1, b"kB") + raw_record(2, b"kC")  # the pass stops at kC
    beyond = raw_record(0, b"kA") + raw_record(I32_MAX, b"kB") + raw_record(1, b"kC")  # past int64 near its end
    # header bytes: map keys + 8*place + 0x40 (a 2^31 jump after), count, lastOffsetDelta + 2 - count, codec
    compaction = [bytes([0, 3, 2, 0]) + plain, bytes([0]), bytes([5, 3, 2, 0]) + partial, bytes([5, 3, 2, 0]) + winners,
                  bytes([5 | 8 * 1, 3, 2, 4]) + winners, bytes([0x40, 3, 2, 0]) + plain,
                  bytes([8 * 3, 3, 1, 0]) + beyond, bytes([2 | 8 * 2, 3, 2, 3]) + extremes[1]]
    return {"batches": [*batches, b"".join(batches)], "batches_fixed": fixed,
            "walk": [bytes([3]) + plain, bytes([2]) + extremes[0], bytes([3]) + extremes[1]],
            "compaction": compaction, "compressed": _compressed_seeds()}[target]


def write_seeds(target: str, corpus: Path) -> None:
    corpus.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(seeds(target)):
        (corpus / f"seed-{i}").write_bytes(seed)


def main(argv: list[str]) -> None:
    if len(argv) < 2 or argv[1] not in TARGETS:
        raise SystemExit(f"usage: {argv[0]} {{{','.join(TARGETS)}}} [--seed DIR | libFuzzer options and corpus]")
    target = TARGETS[argv[1]]
    if argv[2:3] == ["--seed"]:
        write_seeds(argv[1], Path(argv[3]))
        return
    native.use("compiled")  # refused (CoreUnavailableError) when the core is not built: nothing to compare

    def one_input(data: bytes) -> None:
        differential(lambda: target(data), data)

    atheris.Setup([argv[0], *argv[2:]], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
