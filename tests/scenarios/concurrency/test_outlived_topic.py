"""A cleaner that outlives its topic: the topic is deleted and made anew under the same name by
other processes while a throttled pass recopies. The new topic's partition directory must hold
only the new topic's files, and ``verify`` must name index files that have no ``.log``."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from storage_engine.cleaner import Cleaner, LogCleaner
from storage_engine.cleaner.staging import STAGING_SUFFIX
from storage_engine.config.cleaner import CleanerConfig
from storage_engine.errors import LogChangedError
from storage_engine.logdir.manager import LogManager
from tests.helpers.paths import REPO

RATE = 5_000.0  # bytes per second: each 16 KiB group of segments takes the recopy over 3 s


def logctl(root: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(root), *args],
                          input=stdin, capture_output=True, text=True, cwd=REPO, timeout=120)


def create_topic(root: Path) -> None:
    result = logctl(root, "topic", "create", "t", "--partitions", "1", "--config", "cleanup.policy=compact",
                    "--config", "segment.bytes=16384", "--config", "segment.index.bytes=4096")
    assert result.returncode == 0, result.stderr


def compact_in_thread(root: Path, outcome: dict) -> threading.Thread:
    """A real compaction of t-0 in this process, throttled and checking its rate every millisecond."""
    def run() -> None:
        cleaner = Cleaner(CleanerConfig(io_max_bytes_per_second=RATE))
        cleaner.throttler.check_interval_s = 0.001
        try:
            with LogManager([root]) as manager:
                outcome["report"] = LogCleaner(manager).compact("t", 0, now_ms=int(time.time() * 1000), cleaner=cleaner)
        except Exception as exc:  # the thread's result, asserted on by the test
            outcome["error"] = exc
    thread = threading.Thread(target=run)
    thread.start()
    return thread


def wait_for_staged_output(partition_dir: Path, thread: threading.Thread) -> None:
    deadline = time.monotonic() + 60
    while not any(p.name.endswith(STAGING_SUFFIX) for p in partition_dir.iterdir()):
        assert thread.is_alive() and time.monotonic() < deadline, "the cleaner never started its recopy"
        time.sleep(0.01)


def test_a_cleaner_whose_topic_is_deleted_and_recreated_writes_nothing_into_the_new_one(tmp_path):
    root = tmp_path / "logs"
    create_topic(root)
    lines = "".join(json.dumps({"key": f"k{i % 100}", "value": "v" * 100}) + "\n" for i in range(800))
    assert logctl(root, "produce", "t", "--partition", "0", "--batch-size", "20", stdin=lines).returncode == 0
    outcome: dict = {}
    thread = compact_in_thread(root, outcome)
    wait_for_staged_output(root / "t-0", thread)  # the first group's recopy has begun

    assert logctl(root, "topic", "delete", "t").returncode == 0
    create_topic(root)
    new_files = sorted(p.name for p in (root / "t-0").iterdir())
    thread.join(timeout=120)

    assert isinstance(outcome.get("error"), LogChangedError), outcome  # nothing swapped
    assert sorted(p.name for p in (root / "t-0").iterdir()) == new_files
    verified = logctl(root, "verify")
    assert verified.returncode == 0 and "t-0: OK" in verified.stdout, verified


def test_verify_names_an_index_file_that_has_no_log(tmp_path):
    root = tmp_path / "logs"
    create_topic(root)
    assert logctl(root, "produce", "t", "--partition", "0", stdin='{"key": "k", "value": "v"}\n').returncode == 0
    stray = root / "t-0" / "00000000000000000140.timeindex"
    stray.write_bytes(b"")

    result = logctl(root, "verify")

    assert result.returncode == 1, result
    assert f"{stray}: a writable open would remove it (an index file without its .log)" in result.stdout
    assert stray.exists()  # verify changes nothing
