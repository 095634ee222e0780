"""The Spark retention job's executor side on a tiered topic: each task runs the engine's tiered
retention (remote version, then local copies), as the local engine does; on the real S3 server.
The task runs in this process with the location the driver resolved (``job_location``): it
needs no environment of its own, as on an executor that sees none."""

from __future__ import annotations

from spark_jobs.remote_tier import executor_partition, job_location
from spark_jobs.retention import RetentionItem, retain_slice
from storage_engine.logdir.manager import LogManager
from storage_engine.remote.tier_runs import tier_partitions
from tests.helpers.engine import append_each, open_topic, records


def test_a_retention_task_retains_a_tiered_partition_on_both_tiers(remote_env, tmp_path, monkeypatch) -> None:
    with open_topic(tmp_path, segment_bytes=300, remote_storage_enable="true", retention_ms=1000) as m:
        log = m.get_log("t", 0)
        append_each(log, records(30))
        end = log.segments[-1].base_offset
        tier_partitions(m, "t", now_ms=0)
        configs = m.topic_configs()
    item = RetentionItem("t", 0, str(tmp_path), configs, (), job_location())
    monkeypatch.delenv("LOGPLAT_REMOTE_STORAGE")  # the task uses the location it carries
    planned = retain_slice([item], 10**7, dry_run=True)
    assert [(getattr(o, "remote_version", None), o.status) for o in planned] == [(1, "planned"), (None, "planned")]
    outcomes = retain_slice([item], 10**7, dry_run=False)
    assert [(getattr(o, "remote_version", None), o.status) for o in outcomes] == [(2, "deleted"), (None, "deleted")]
    version = executor_partition(item.location, "t", 0).latest()
    assert version.operation == "retention" and version.log_start_offset == end and version.segments == ()
    with LogManager([tmp_path], read_only=True) as m:
        assert m.get_log("t", 0).log_start_offset == end
