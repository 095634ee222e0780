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

* ``batches``: segment bytes -> ``scan_batches`` -> ``decode_batch(verify=True)`` per batch;
* ``arrow``: segment bytes -> ``columnar.batches_to_arrow(verify=True)``;
* ``walk``: plain v2 record bytes (first byte: the record count) -> ``v2.walk_records`` and
  ``v2.timestamp_deltas``;
* ``compressed``: a fuzzed lz4 or zstd stream (first byte: the codec and the record count) as
  the records of a valid v2 batch (length and CRC fixed, so the decompressors are reached: the
  core's own lz4/zstd and, for what it refuses, the reference's codec libraries) ->
  ``decode_batch(verify=True)`` and ``batches_to_arrow``;
* ``compaction``: fuzzed record bytes spliced into a valid v2 batch (count, length and CRC
  fixed, so the record parser is reached) in a two-segment compacted log, cleaned by
  ``LogCleaner`` -> the partition's files after, or the error.
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
    from storage_engine.record.scan import decode_batch
    from storage_engine.record.v2 import timestamp_deltas, walk_records
    from tests.helpers.cleaner import compact, raw_log

CORES = ("compiled", "reference")
_HEADER = 61  # a v2 batch's header: records start here (Kafka's RECORDS_OFFSET)
_CRC_AT, _ATTRIBUTES_AT, _LAST_DELTA_AT, _COUNT_AT = 17, 21, 23, 57


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


def _same(a: tuple, b: tuple) -> bool:
    if a[0] == b[0] == "ok" and hasattr(a[1], "equals"):  # Arrow: equals, not ==
        return bool(a[1].equals(b[1]))
    return a == b


def _batches(data: bytes) -> Any:
    return [decode_batch(raw, verify=True) for raw in scan_batches(data)]


def _arrow(data: bytes) -> Any:
    return batches_to_arrow(list(scan_batches(data)), verify=True)


def _walk(data: bytes) -> Any:
    count, buf = (data[0], data[1:]) if data else (0, b"")
    return outcome(lambda: walk_records(buf, count)), outcome(lambda: timestamp_deltas(buf, count))


def fix_batch(batch: bytes, records: bytes, count: int) -> bytes:
    """``batch``'s header over ``records``: length, last offset delta, count and CRC made
    consistent, so what is checked first passes and the records themselves are parsed."""
    out = bytearray(batch[:_HEADER] + records)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">i", out, _LAST_DELTA_AT, max(count - 1, 0))
    struct.pack_into(">i", out, _COUNT_AT, count)
    struct.pack_into(">I", out, _CRC_AT, crc32c(memoryview(out)[_ATTRIBUTES_AT:]))
    return bytes(out)


def _records(base: int, keys: range, value: bytes = b"v") -> list[Record]:
    return [Record(base + i, 1_000 + i, f"k{k}".encode(), value) for i, k in enumerate(keys)]


_TEMPLATE = encode_batch(_records(3, range(1)), base_offset=3)
_RUN_DIR = Path(tempfile.mkdtemp(prefix="fuzz-compaction-"))
atexit.register(shutil.rmtree, _RUN_DIR, True)


def _compaction(data: bytes) -> Any:
    count, records = (data[0] % 16, data[1:]) if data else (0, b"")
    fuzzed = fix_batch(_TEMPLATE, records, count)
    segments = [[encode_batch(_records(0, range(3)), base_offset=0), fuzzed,
                 encode_batch(_records(3 + count, range(2)), base_offset=3 + count)],
                [encode_batch(_records(5 + count, range(1)), base_offset=5 + count)]]
    shutil.rmtree(_RUN_DIR, ignore_errors=True)
    _RUN_DIR.mkdir()
    with raw_log(_RUN_DIR, segments) as manager:
        result = outcome(lambda: compact(manager))
        report = ("ok", None) if result[0] == "ok" else result  # the report object holds timings
    part = _RUN_DIR / "t-0"
    return report, {p.name: p.read_bytes() for p in sorted(part.iterdir()) if p.suffix == ".log"}


def _compressed_template(codec: CompressionType) -> bytes:
    return encode_batch(_records(0, range(3), b"value" * 30), base_offset=0, compression=codec)


_COMPRESSED = {codec: _compressed_template(codec) for codec in (CompressionType.LZ4, CompressionType.ZSTD)}


def _compressed(data: bytes) -> Any:
    head, payload = (data[0], data[1:]) if data else (0, b"")
    batch = fix_batch(_COMPRESSED[CompressionType.ZSTD if head & 0x80 else CompressionType.LZ4], payload, head & 0x3F)
    return outcome(lambda: _batches(batch)), outcome(lambda: _arrow(batch))


TARGETS: dict[str, Callable[[bytes], Any]] = {"batches": _batches, "arrow": _arrow, "walk": _walk,
                                              "compressed": _compressed, "compaction": _compaction}


def _compressed_seeds() -> list[bytes]:
    """lz4 and zstd streams of 3 and 40 records: ours, and lz4 frames with a content size and
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


def seeds(target: str) -> list[bytes]:
    """Valid inputs of ``target``, from batches of every codec: where the fuzzer starts."""
    batches = [encode_batch(_records(10 * i, range(1 + i % 4), b"value" * i), base_offset=10 * i, compression=codec)
               for i, codec in enumerate(CompressionType)]
    plain = encode_batch(_records(0, range(3)), base_offset=0)[_HEADER:]  # three records, uncompressed
    if target == "compressed":
        return _compressed_seeds()
    return {"batches": [*batches, b"".join(batches)], "arrow": [*batches, b"".join(batches)],
            "walk": [bytes([3]) + plain], "compaction": [bytes([3]) + plain, bytes([0])]}[target]


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
