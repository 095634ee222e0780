"""``bench/bench_kafka_cleaner.py`` refuses arguments it cannot measure with, in argparse's one
line and before it generates a log or fetches Kafka (``--size-mb 0`` used to end in a traceback)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.paths import REPO


@pytest.mark.parametrize("argv, named", [
    (["--size-mb", "0"], "--size-mb"), (["--size-mb", "-1"], "--size-mb"), (["--value-size", "-5"], "--value-size"),
    (["--live-fraction", "0"], "--live-fraction"), (["--live-fraction", "2"], "--live-fraction"),
    (["--live-fraction", "nan"], "--live-fraction"), (["--timeout", "0"], "--timeout"),
    (["--dir", "/nonexistent/bench"], "--dir"),
])
def test_a_bad_argument_is_one_line_naming_it(tmp_path, argv, named):
    done = subprocess.run([sys.executable, str(REPO / "bench" / "bench_kafka_cleaner.py"), *argv], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and f"argument {named}:" in done.stderr.splitlines()[-1]
    assert list(tmp_path.iterdir()) == []
