"""Commands over a log dir whose partitions cannot all be loaded: the clean-shutdown marker,
damaged tails recovery must cut, and segment file names outside Kafka's offsets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from storage_engine.naming import segment_file

CLEAN = ".kafka_cleanshutdown"
BATCH = 97  # bytes of one batch of three records as _build produces them


def _build(logctl) -> Path:
    """The reported layout: t (2 partitions) and compacted c, 400-byte segments, 30 records in
    each partition as batches of 3 (segments at offsets 0, 12 and 24)."""
    assert logctl("topic", "create", "t", "--partitions", "2", "--config", "segment.bytes=400")[0] == 0
    assert logctl("topic", "create", "c", "--partitions", "1", "--config", "cleanup.policy=compact",
                  "--config", "segment.bytes=400")[0] == 0
    lines = "".join(json.dumps({"key": f"k{i % 5}", "value": f"v{i}"}) + "\n" for i in range(30))
    for topic, partition in (("t", "0"), ("t", "1"), ("c", "0")):
        code, _, err = logctl("produce", topic, "--partition", partition, "--now-ms", "1000", "--batch-size", "3",
                              stdin=lines)
        assert code == 0, err
    return logctl.root


def _corrupt_tail(part: Path) -> Path:
    """A copy of the active segment's last batch with one byte flipped in its middle (CRC fails)."""
    log_file = segment_file(part, 24, ".log")
    data = bytearray(log_file.read_bytes()[-BATCH:])
    data[BATCH // 2] ^= 0xFF
    with open(log_file, "ab") as f:
        f.write(data)
    return log_file


def _consumed(logctl, topic: str, partition: int) -> list[int]:
    code, out, err = logctl("consume", topic, "--partition", str(partition))
    assert code == 0, err
    return [json.loads(line)["offset"] for line in out.splitlines()]


def test_a_command_that_could_not_load_every_partition_writes_no_clean_shutdown_marker(logctl):
    root = _build(logctl)
    t1_log = _corrupt_tail(root / "t-1")
    # t-0 cannot load: a second non-empty segment claims offsets 12.. (refused, never repaired)
    shutil.copy(segment_file(root / "t-0", 12, ".log"), segment_file(root / "t-0", 13, ".log"))
    (root / CLEAN).unlink()  # an unclean shutdown: every partition needs recovery
    code, _, err = logctl("delete-records", "c", "--partition", "0", "--before-offset", "1")
    assert code == 1 and "segments overlap" in err and len(err.strip().splitlines()) == 1, err
    assert not (root / CLEAN).exists()  # t-1 was never recovered
    for path in (root / "t-0").glob("00000000000000000013.*"):
        path.unlink()
    assert logctl("delete-records", "c", "--partition", "0", "--before-offset", "1")[0] == 0
    assert t1_log.stat().st_size == 2 * BATCH  # the next open recovered t-1: corrupt tail cut
    assert (root / CLEAN).exists()
    assert _consumed(logctl, "t", 1) == list(range(30))
