"""Differential tests of the Spark compaction job on a tiered topic: the random logs of
``tests/remote/test_remote_compaction.py`` (codecs, committed and aborted transactions,
tombstones, version headers; ``tests.helpers.random_logs``), compacted round after round at a
rising clock by the Spark job (``local[2]``: the driver tiers, an executor cleans and commits,
the driver settles) on the tiered copy and by the local engine on the untiered copy, keep the
same records (offset, key, value, headers, timestamp) after every round, on the real S3 server."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_jobs.compaction import compact_partitions
from storage_engine.cleaner import CompactionReport
from storage_engine.logdir.manager import LogManager
from storage_engine.remote.location import ENV_REMOTE_STORAGE
from tests.helpers.random_logs import differential, rounds, txn_batch

STRATEGIES = st.sampled_from(["offset", "timestamp", "header"])


def spark_compactor(spark):
    """The Spark job's compaction of ``t``-0, forced as ``LogCleaner.compact`` is by default."""

    def compact(manager: LogManager, now_ms: int) -> CompactionReport:
        [report] = compact_partitions(spark, manager=manager, partitions=[("t", 0)], now_ms=now_ms,
                                      force=True).outcomes
        assert report.engine == "spark", report.reason
        return report

    return compact


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(strategy=STRATEGIES, batches=st.lists(txn_batch, min_size=1, max_size=8), per_segment=st.integers(1, 4),
       rounds=rounds, segment_bytes=st.integers(300, 1500), retention=st.sampled_from([0, 700, 5000]))
def test_the_spark_job_on_a_tiered_topic_keeps_what_the_local_cleaner_keeps(spark, remote_env, tmp_path_factory,
                                                                            strategy, batches, per_segment, rounds,
                                                                            segment_bytes, retention) -> None:
    differential(tmp_path_factory.mktemp("spark-diff"), remote_env[ENV_REMOTE_STORAGE], batches, per_segment, rounds,
                 segment_bytes, retention, strategy, compact_tiered=spark_compactor(spark))


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(strategy=STRATEGIES, batches=st.lists(txn_batch, min_size=1, max_size=30), per_segment=st.integers(1, 4),
       rounds=rounds, segment_bytes=st.integers(300, 1500), retention=st.sampled_from([0, 700, 5000]))
def test_the_spark_job_on_a_tiered_topic_keeps_what_the_local_cleaner_keeps_many(spark, remote_env,
                                                                                 tmp_path_factory, strategy, batches,
                                                                                 per_segment, rounds, segment_bytes,
                                                                                 retention) -> None:
    differential(tmp_path_factory.mktemp("spark-diff"), remote_env[ENV_REMOTE_STORAGE], batches, per_segment, rounds,
                 segment_bytes, retention, strategy, compact_tiered=spark_compactor(spark))
