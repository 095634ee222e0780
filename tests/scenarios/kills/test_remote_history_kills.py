"""Restore and the sweep under kills, with real processes and the real S3 server: a subprocess
SIGKILLs itself at a crash point (``tests.helpers.crash.crash_env``) of a restore (after its pin,
after its commit) or of a sweep (between its deletions). After every kill the latest version is
readable and complete, it holds the records it should, and running the same again completes."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from storage_engine.remote.partition import wall_clock_ms
from storage_engine.remote.restore import restore
from storage_engine.remote.sweeper import sweep_partition
from tests.helpers.crash import crash_env
from tests.remote.history_scenario import tiered, version_records

RESTORE = textwrap.dedent("""
    import sys
    from storage_engine.logdir.manager import LogManager
    from storage_engine.remote.access import remote_partition
    from storage_engine.remote.restore import restore
    with LogManager([sys.argv[1]], read_only=True) as m:
        config = m.topic_config("t")
    restore(remote_partition("t", 0, config), config, 1)
""")

SWEEP = textwrap.dedent("""
    import sys
    from storage_engine.logdir.manager import LogManager
    from storage_engine.remote.access import remote_partition
    from storage_engine.remote.sweeper import sweep_partition
    with LogManager([sys.argv[1]], read_only=True) as m:
        config = m.topic_config("t")
    sweep_partition(remote_partition("t", 0, config), config, now_ms_wall=int(sys.argv[2]))
""")


def _killed(script: str, point: str, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-c", script, *args], env=crash_env(point), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -9, (point, proc.returncode, proc.stderr)  # the point was reached


@pytest.mark.parametrize("point", ["restore.after-pin", "restore.after-commit"])
def test_a_kill_during_restore_leaves_the_latest_complete(remote_env, tmp_path, point) -> None:
    t = tiered(tmp_path / "logs")
    v1 = t.rp.latest()
    t.retention()
    t.manager.close()
    _killed(RESTORE, point, str(t.root))
    latest = t.rp.latest()
    assert t.rp.missing_objects(latest) == []
    assert latest.version == (3 if point == "restore.after-commit" else 2)
    assert len(t.pins()) == 1  # the dead holder's pin stays until it expires
    if latest.version == 2:  # killed before its commit: the restore runs again from the start
        restore(t.rp, t.config, 1)
        latest = t.rp.latest()
    assert latest.version == 3 and latest.operation == "restore"
    assert version_records(t.rp, latest) == version_records(t.rp, v1)


@pytest.mark.parametrize("point", ["sweep.after-delete-0", "sweep.after-delete-3", "sweep.after-delete-6"])
def test_a_kill_between_sweep_deletions_leaves_the_latest_complete(remote_env, tmp_path, point) -> None:
    t = tiered(tmp_path / "logs", file_delete_delay_ms=0, logplat_remote_version_retention_ms=0)
    t.retention()
    latest = t.rp.latest()
    expected = version_records(t.rp, latest)
    t.manager.close()
    now = wall_clock_ms() + 1000
    _killed(SWEEP, point, str(t.root), str(now))  # six released objects, then version 1
    assert t.rp.missing_objects(t.rp.latest()) == [] and version_records(t.rp, t.rp.latest()) == expected
    again = sweep_partition(t.rp, t.config, now_ms_wall=now)
    assert again.status in ("deleted", "nothing") and t.rp.version_numbers() == [latest.version]
    assert t.names() == latest.objects | {f"versions/{latest.version:020d}.json"}
