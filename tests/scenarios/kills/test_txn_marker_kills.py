"""A transaction's ABORT marker and its ``.txnindex`` entry under a kill, with a real process.

A subprocess appends a transactional batch and its ABORT marker (``Log.append_end_txn_marker``)
with ``flush.messages=1`` and SIGKILLs itself between the marker and its entry (crash point
``append.before-txn-index``). The marker is in the log and the entry is not on disk. The
segment is past the recovery point (the appender flushes nothing between the two), so a
read-only view takes it as recovery will make it: its indexes are left out of the view, and
``verify`` finds nothing to report, as for any segment an unclean shutdown left unflushed. The
next writable open's recovery writes the entry back, and then ``verify`` is clean on disk too
and ``read_committed`` leaves the aborted batch out.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

from storage_engine.index import AbortedTxn
from storage_engine.logdir.manager import LogManager
from storage_engine.tools.verify import verify_partition
from tests.helpers.crash import crash_env
from tests.helpers.engine import open_topic
from tests.helpers.transactions import TxnWriter

RUN = textwrap.dedent("""
    import sys
    from storage_engine.logdir.manager import LogManager
    from tests.helpers.transactions import TxnWriter
    with LogManager([sys.argv[1]]) as m:
        w = TxnWriter(m.get_log("t", 0))
        w.data(9, ("c", "3"))
        w.abort(9)
""")


def test_a_kill_between_an_abort_marker_and_its_txnindex_entry_is_recovered(tmp_path):
    with open_topic(tmp_path, flush_messages=1) as m:
        w = TxnWriter(m.get_log("t", 0))
        w.data(1, ("a", "1"))
        w.commit(1)  # offsets 0-1, committed: stays readable
    proc = subprocess.run([sys.executable, "-c", RUN, str(tmp_path)], env=crash_env("append.before-txn-index"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, (proc.returncode, proc.stderr)
    with LogManager([tmp_path], read_only=True) as view:
        log = view.get_log("t", 0)
        assert log.log_end_offset == 4  # the marker at 3 is in the log
        assert log.segments[-1].txn_index.entries == []  # on disk
        assert log.segments[-1].indexes_forgotten  # recovery rebuilds them: the view does not trust them
        report = verify_partition(view, "t", 0)
        assert report.ok, report.problems
    with LogManager([tmp_path]) as m:
        log = m.get_log("t", 0)
        assert log.segments[-1].txn_index.entries == [AbortedTxn(9, 2, 3, 4)]
        report = verify_partition(m, "t", 0)
        assert report.ok, report.problems
        assert [r.offset for r in log.read(0, max_records=10, isolation_level="read_committed")] == [0]
