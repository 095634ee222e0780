"""Several processes on one partition: a producer, a reader, and a maintainer rolling and deleting.

The maintainer only deletes below what the reader has consumed (it advances the log start
offset to the reader's published position and runs retention), so the reader must see every
record the producer wrote: none lost, none twice, none out of order.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

from storage_engine.logdir.manager import LogManager
from tests.helpers.engine import open_topic

DURATION_S = 4.0

PRODUCER = """
import sys, time
from storage_engine.logdir.manager import LogManager
from storage_engine.log.append_validation import ProducerRecord
root, deadline = sys.argv[1], float(sys.argv[2])
m = LogManager([root]); log = m.get_log("t", 0)
seq = 0
while time.time() < deadline:
    batch = [ProducerRecord(b"k%d" % (seq + i), b"seq-%d" % (seq + i)) for i in range(5)]
    info = log.append(batch)
    assert info.first_offset == seq, (info, seq)
    seq += 5
m.close()
print(seq)
"""

READER = """
import sys, time
from storage_engine.errors import OffsetOutOfRangeError
from storage_engine.logdir.manager import LogManager
root, deadline, pos_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
m = LogManager([root]); log = m.get_log("t", 0)
nxt = 0
idle_after_deadline = 0
while True:
    recs = log.read(nxt, max_records=500)
    for r in recs:
        assert r.offset == nxt, ("out of order or gap", r.offset, nxt)
        assert r.value == b"seq-%d" % nxt, (r.value, nxt)
        nxt += 1
    with open(pos_file + ".tmp", "w") as f:
        f.write(str(nxt))
    import os; os.replace(pos_file + ".tmp", pos_file)
    if not recs:
        if time.time() > deadline:
            idle_after_deadline += 1
            if idle_after_deadline > 20:
                break
        time.sleep(0.005)
m.close()
print(nxt)
"""

MAINTAINER = """
import sys, time
from storage_engine.logdir.manager import LogManager
from storage_engine.log.retention import apply_retention
root, deadline, pos_file = sys.argv[1], float(sys.argv[2]), sys.argv[3]
m = LogManager([root]); log = m.get_log("t", 0)
rolls = deleted = 0
while time.time() < deadline:
    log.roll(); rolls += 1
    try:
        consumed = int(open(pos_file).read())
    except (FileNotFoundError, ValueError):
        consumed = 0
    log.delete_records(min(consumed, log.log_end_offset))
    deleted += len(apply_retention(log, None, int(time.time() * 1000)).deleted_segments)
    time.sleep(0.05)
m.close()
print(rolls, deleted)
"""


def _spawn(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_producer_reader_and_maintainer_processes(tmp_path):
    root = tmp_path / "logs"
    with open_topic(root, segment_bytes=4000, retention_ms=-1, file_delete_delay_ms=0):
        pass
    pos_file = str(tmp_path / "reader.pos")
    deadline = str(time.time() + DURATION_S)
    producer = _spawn(PRODUCER, str(root), deadline)
    reader = _spawn(READER, str(root), deadline, pos_file)
    maintainer = _spawn(MAINTAINER, str(root), deadline, pos_file)
    outs = {}
    for name, proc in (("producer", producer), ("maintainer", maintainer), ("reader", reader)):
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, f"{name} failed:\n{err}"
        outs[name] = out.split()
    produced = int(outs["producer"][0])
    read = int(outs["reader"][0])
    rolls, deleted = map(int, outs["maintainer"])
    print(f"produced={produced} read={read} rolls={rolls} segments_deleted={deleted}")
    assert produced > 500, "the producer should have appended for the whole run"
    assert read == produced, f"reader saw {read} of {produced} records"
    assert rolls > 10 and deleted > 0, "the maintainer must really have rolled and deleted segments"
    with LogManager([root]) as m:
        log = m.get_log("t", 0)
        assert log.log_end_offset == produced
        tail = log.read(log.log_start_offset, max_records=produced)
        assert [r.offset for r in tail] == list(range(log.log_start_offset, produced))
        assert not [n for n in os.listdir(root / "t-0") if n.endswith(".deleted")]
