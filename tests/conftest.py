"""Shared fixtures: the broker-written logs beside the repository, and fresh log dirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import run_logctl
from tests.helpers.object_store import remote_env, s3_server  # noqa: F401  (fixtures)
from tests.helpers.paths import REAL_KAFKA, SKIP_REASON


@pytest.fixture
def fixtures_root() -> Path:
    return REAL_KAFKA


@pytest.fixture
def real_kafka() -> Path:
    if not REAL_KAFKA.is_dir():
        pytest.skip(SKIP_REASON)
    return REAL_KAFKA


@pytest.fixture(scope="session")
def spark():
    """One SparkSession for the whole test run (JVM start-up is the slow part: ~5-10 s here).

    ``local[2]``: two task slots, so the jobs' parallel paths really run in parallel.
    """
    from spark_jobs.runtime.session import build_spark_session

    session = build_spark_session(
        "local[2]",
        app_name="logplat-tests",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.sql.adaptive.enabled": "false",
            "spark.driver.memory": "1g",
            "spark.driver.extraJavaOptions": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1",
        },
    )
    yield session
    session.stop()


@pytest.fixture
def logctl(tmp_path, monkeypatch, capsys):
    """``logctl`` in-process over ``tmp_path / "logs"`` (its ``root`` attribute)."""
    root = tmp_path / "logs"

    def call(*args: str, stdin: str = "") -> tuple[int, str, str]:
        return run_logctl(root, monkeypatch, capsys, *args, stdin=stdin)

    call.root = root  # type: ignore[attr-defined]
    return call
