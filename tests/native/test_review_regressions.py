"""Review 36's divergences of the compiled core from the reference, each pinned by a plain test.

* #1: after a pass that stopped at a full map, the compiled keep/drop walk's "winners" shortcut
  dropped a live record of a batch whose inner offset deltas do not ascend (Kafka checks only
  the last one against ``lastOffsetDelta``);
* #2: ``decode_batch`` added ``baseOffset``/``baseTimestamp`` and a record's delta in wrapping
  int64 (``baseOffset`` is outside the CRC); the reference's ints are exact (the compiled core
  now leaves such a batch to the reference);
* #3: ``encode_batch`` reserved (first record's size x count) bytes: one big first record then
  many small ones aborted the process when that allocation failed (run in a child process under
  an address-space limit);
* #6: the compiled key map's signed 48-bit offset deltas raised ``OverflowError`` where the
  reference has no limit (a dirty range spanning 2^48 offsets): such a put now ends the pass.

Each test runs the same input under both cores and asserts the reference's result (for #2 in
the cleaner, both cores refuse records past int64 with one message; for #6, the passes differ
and the cleaned log is the same). ``fuzz_targets`` finds the same ones.
"""

from __future__ import annotations

import hashlib
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from storage_engine import native
from storage_engine.cleaner.offset_map import OffsetMap
from storage_engine.cleaner.record_decisions import filter_batch, map_batch
from storage_engine.record import Record, encode_batch, scan_batches
from storage_engine.record.scan import decode_batch
from tests.helpers.cleaner import compact, content, data_batch, raw_log, small_map_cleaner
from tests.helpers.core_switch import CORES, using
from tests.helpers.paths import REPO
from tests.native.fuzz_targets import I32_MAX, I64_MAX, build_batch, outcome, raw_record

pytestmark = pytest.mark.skipif(native._MODULE is None, reason="the compiled core is not built: nothing to compare")

#: deltas 0, 2, 1: the record of kC (offset delta 1) comes after the map's latest offset was put
_PARTS = [raw_record(0, b"kA"), raw_record(2, b"kB"), raw_record(1, b"kC")]
DESCENDING = b"".join(_PARTS)


def under_both(run) -> dict[str, tuple]:
    """``outcome(run)`` under each core."""
    results = {}
    for core in CORES:
        with using(core):
            results[core] = outcome(run)
    return results


def test_1_a_record_after_a_full_map_is_looked_up_not_dropped():
    def walk():
        omap = OffsetMap(OffsetMap.capacity_for(2, 2), 1.0)  # kA and kB fit, kC does not
        complete, _ = map_batch(omap, DESCENDING, 0, len(DESCENDING), 3, 100, 100)
        return complete, filter_batch(omap, DESCENDING, 0, len(DESCENDING), 3, 100, True, dirty_start=100)[0]

    results = under_both(walk)
    size = len(_PARTS[0])  # the three records are of one size
    assert results["reference"] == ("ok", (False, [(i * size, (i + 1) * size, 0) for i in range(3)]))  # kC kept
    assert results["compiled"] == results["reference"]


def test_1_the_cleaner_keeps_the_only_record_of_a_key_after_a_partial_pass(tmp_path: Path):
    segments = [[data_batch(0, [("k0", "a"), ("k1", "a"), ("k2", "a")])],
                [build_batch(DESCENDING, base_offset=3, last_offset_delta=2, count=3)],
                [data_batch(6, [("k3", "a"), ("k4", "a")])], [data_batch(8, [("k0", "b")])]]
    after = {}
    for core in CORES:
        with using(core), raw_log(tmp_path / core, segments) as manager:
            compact(manager, cleaner=small_map_cleaner(5, 2))  # k0..k2, kA, kB fit: the pass stops at kC
            after[core] = content(manager.get_log("t", 0))
    assert (4, "kC", "v") in after["reference"]
    assert after["compiled"] == after["reference"]


@pytest.mark.parametrize(("base_offset", "base_timestamp"), [(I64_MAX, 0), (I64_MAX - 1, I64_MAX - 1), (0, I64_MAX)],
                         ids=["offset", "both", "timestamp"])
def test_2_offsets_and_timestamps_past_int64_are_the_references_exact_ints(base_offset, base_timestamp):
    records = raw_record(0, b"a") + raw_record(1, b"b", timestamp_delta=5) + raw_record(I32_MAX, b"c")
    batch = build_batch(records, base_offset=base_offset, base_timestamp=base_timestamp, max_timestamp=base_timestamp,
                        last_offset_delta=I32_MAX, count=3)
    raw = next(scan_batches(batch))
    results = under_both(lambda: [(r.offset, r.timestamp) for r in decode_batch(raw, verify=True)])
    assert results["reference"] == ("ok", [(base_offset, base_timestamp), (base_offset + 1, base_timestamp + 5),
                                           (base_offset + I32_MAX, base_timestamp)])
    assert results["compiled"] == results["reference"]


def test_2_a_compaction_walk_past_int64_is_malformed_records_under_both_cores():
    """Kafka's offsets are int64: a batch whose records' offsets leave it (its base offset, which
    the CRC does not cover, damaged) is malformed for the cleaner under both cores, with one
    message (``walk_records`` with the batch's base offset is the rule)."""
    records = raw_record(I32_MAX - 1, b"k") + raw_record(I32_MAX, b"k")  # both past int64
    base = I64_MAX - 5

    def walk():
        omap = OffsetMap(1 << 20, 1.0)
        map_batch(omap, records, 0, len(records), 2, base, base)
        return filter_batch(omap, records, 0, len(records), 2, base, True)[0]

    results = under_both(walk)
    assert results["reference"][:2] == ("error", "ValueError") and "is beyond int64" in results["reference"][2]
    assert results["compiled"] == results["reference"]


#: one 1 MiB first record then 4,999 small ones: reserving first x count bytes needs ~5 GB
_ENCODE = """
import hashlib, sys
from storage_engine.record import Record, encode_batch
recs = [Record(0, 0, b"k", b"x" * (1 << 20))] + [Record(i, 0, b"k", b"") for i in range(1, 5000)]
sys.stdout.write(hashlib.sha256(encode_batch(recs, base_offset=0)).hexdigest())
"""


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3_000_000 * 1024,) * 2)  # ulimit -v 3000000: an abort, not a swap storm


def test_3_encoding_one_big_record_then_many_small_ones_does_not_abort():
    with using("reference"):
        recs = [Record(0, 0, b"k", b"x" * (1 << 20))] + [Record(i, 0, b"k", b"") for i in range(1, 5000)]
        expected = hashlib.sha256(encode_batch(recs, base_offset=0)).hexdigest()
    env = {**os.environ, "LOGPLAT_CORE": "compiled", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", _ENCODE], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, preexec_fn=_limit_address_space)
    assert proc.returncode == 0, f"the compiled encoder exited {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout == expected


def test_6_a_map_spanning_2_to_the_48_offsets_ends_the_pass_instead_of_raising():
    """The compiled map holds offsets within 2^47 of its first: a put beyond is refused as a full
    map's is (the pass ends there and the next starts from that offset, see the cleaner test
    below), never an ``OverflowError``; the reference's dict has no such limit."""
    record = raw_record(0, b"key-A")

    def put_twice():
        omap = OffsetMap(1 << 20, 1.0)
        map_batch(omap, record, 0, len(record), 1, 0, 0)
        return map_batch(omap, record, 0, len(record), 1, 1 << 48, 0)[0], omap.get(b"key-A")

    results = under_both(put_twice)
    assert results["reference"] == ("ok", (True, 1 << 48))
    assert results["compiled"] == ("ok", (False, 0))


def test_6_the_cleaner_compacts_a_log_whose_offsets_jump_by_2_to_the_48(tmp_path: Path):
    jump = 1 << 48
    segments = [[data_batch(0, [("a", "1"), ("b", "1")])], [data_batch(jump, [("a", "2")])],
                [data_batch(jump + 1, [("c", "1")])]]
    after = {}
    for core in CORES:
        with using(core), raw_log(tmp_path / core, segments) as manager:
            after[core] = outcome(lambda: compact(manager).status.value), content(manager.get_log("t", 0))
    assert after["reference"] == (("ok", "compacted"), [(1, "b", "1"), (jump, "a", "2"), (jump + 1, "c", "1")])
    assert after["compiled"] == after["reference"]
