"""The code location loads (in-process and through Dagster's own CLI, as CI would run it), is built
from the topics on disk, and the committed instance config means what the platform relies on."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import dagster as dg
import pytest
from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql, infer_job_selector

from platform_assets.definitions import build_definitions
from platform_assets.logic.catalog import safe_name
from platform_assets.logic.settings import PlatformSettings
from platform_assets.tools.workload import produce
from storage_engine.logdir.manager import LogManager
from tests.helpers.paths import REPO
from tests.helpers.platform import COMPACT_DELETE, COMPACTED, DELETE, definitions_for


@pytest.fixture
def logs(tmp_path):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [COMPACTED, COMPACT_DELETE, DELETE], now_ms=int(time.time() * 1000))
    return root


def test_definitions_are_built_from_the_topics_on_disk(logs):
    defs, _ = definitions_for(logs)
    with dg.instance_for_test():  # a live instance for the load context, whatever earlier tests left
        dg.Definitions.validate_loadable(defs)
    repo = defs.get_repository_def()
    assert {a.key for a in defs.assets} == {dg.AssetKey(["logs", t]) for t in ("orders", "profiles.v1", "clicks")} | {
        dg.AssetKey(["platform", "cleaning_report"])}
    orders = next(a for a in defs.assets if a.key == dg.AssetKey(["logs", "orders"]))
    assert orders.partitions_def == dg.DynamicPartitionsDefinition(name="partitions__orders")
    assert orders.backfill_policy == dg.BackfillPolicy.single_run()
    assert orders.group_names_by_key[orders.key] == "compact"
    assert orders.metadata_by_key[orders.key]["cleanup.policy"] == "compact"
    assert orders.metadata_by_key[orders.key]["segment.bytes"] == "4096 (4 KiB)"
    # the UI's Definition tab links to the code that cleans it
    [reference] = orders.metadata_by_key[orders.key]["dagster/code_references"].code_references
    assert reference.file_path.endswith("platform_assets/defs/assets.py") and reference.line_number
    checks = {k.asset_key.path[1]: set() for c in defs.asset_checks for k in c.check_keys}
    for c in defs.asset_checks:
        for k in c.check_keys:
            checks[k.asset_key.path[1]].add(k.name)
    assert len(checks["orders"]) == 6 and not orders.check_specs_by_output_name  # not outputs of the op
    # no compaction for the four compaction checks to guard; its health is checked all the same
    assert checks["clicks"] == {"log_health", "topic_health"}
    topics = ("orders", "profiles.v1", "clicks")
    assert {j for j in repo.job_names if j.startswith("cleanup__")} == {f"cleanup__{safe_name(t)}" for t in topics}
    assert {s.name for s in repo.sensor_defs} == {"log_state_sensor", "deleted_files_sensor", "compaction_sensor",
                                                  "retention_sensor"}
    assert {s.name for s in repo.schedule_defs} == {f"sweep__{safe_name(t)}" for t in topics}


def test_a_topic_named_as_another_topics_dagster_name_loads(tmp_path):
    """``profiles.v1`` is ``profiles_v1_<digest>`` to Dagster; a topic of exactly that name kept
    it, and the duplicate job and schedule names stopped the whole code location from loading."""
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        for name in ("profiles.v1", safe_name("profiles.v1")):
            manager.admin.create_topic(name, 1)
    defs, _ = definitions_for(root)
    with dg.instance_for_test():
        dg.Definitions.validate_loadable(defs)
    assert len({j for j in defs.get_repository_def().job_names if j.startswith("cleanup__")}) == 2


def test_owners_come_from_logplat_owners_and_a_bad_one_is_refused_naming_it(logs, monkeypatch):
    monkeypatch.setenv("LOGPLAT_LOG_DIRS", str(logs))
    monkeypatch.setenv("LOGPLAT_OWNERS", " team:logs , ops@example.com,")
    settings = PlatformSettings.from_env()
    assert settings.owners == ("team:logs", "ops@example.com")
    defs = build_definitions(settings)
    topics = [a for a in defs.assets if isinstance(a, dg.AssetsDefinition)]
    [report] = [a for a in defs.assets if isinstance(a, dg.AssetSpec)]
    assert len(topics) == 3 and all(a.owners_by_key[a.key] == ["team:logs", "ops@example.com"] for a in topics)
    assert report.owners == ["team:logs", "ops@example.com"]
    monkeypatch.setenv("LOGPLAT_OWNERS", "team:logs,logs team")
    with pytest.raises(ValueError, match="^LOGPLAT_OWNERS='team:logs,logs team': 'logs team' is neither an e-mail "):
        PlatformSettings.from_env()


def test_an_empty_log_dir_loads_with_only_the_state_sensor(tmp_path):
    defs, _ = definitions_for(tmp_path / "nothing-yet")
    with dg.instance_for_test():  # a live instance for the load context, whatever earlier tests left
        dg.Definitions.validate_loadable(defs)
    assert [s.name for s in defs.get_repository_def().sensor_defs] == ["log_state_sensor"]


@pytest.mark.parametrize("master", [None, "sc://127.0.0.1:1"])
def test_dagster_validates_the_workspace(logs, master):
    """What CI runs: Dagster's CLI loads workspace.yaml in a fresh process with the environment;
    also with a Spark Connect URL, as the main job and ``ui.sh`` hand their servers one (the code
    location checks its form and connects nowhere: the server may still be warming up)."""
    env = {**os.environ, "LOGPLAT_LOG_DIRS": str(logs)}
    env.pop("DAGSTER_HOME", None)
    env.pop("LOGPLAT_SPARK_MASTER", None)
    if master is not None:
        env["LOGPLAT_SPARK_MASTER"] = master
    proc = subprocess.run([sys.executable, "-m", "dagster", "definitions", "validate", "-w", str(REPO / "workspace.yaml")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Validation successful" in proc.stdout + proc.stderr


def test_the_committed_instance_config(tmp_path, monkeypatch):
    """dagster_home/dagster.yaml: SQLite under DAGSTER_HOME, one run per topic, pools, daemons."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text((REPO / "dagster_home" / "dagster.yaml").read_text())
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        config = instance.get_concurrency_config()
        assert config.run_queue_config.tag_concurrency_limits == [
            {"key": "logplat/topic", "value": {"applyLimitPerUniqueValue": True}, "limit": 1}]
        assert config.run_queue_config.max_concurrent_runs == 2
        assert config.pool_config.default_pool_limit == 1
        assert config.pool_config.pool_granularity.value == "run"
        assert instance.event_log_storage.supports_global_concurrency_limits
        assert not instance.telemetry_enabled
        assert instance.run_retries_max_retries == 1
        assert not instance.run_retries_retry_on_asset_or_op_failure  # a step that failed on the data fails again
        assert (home / "history").is_dir()  # SQLite storage under DAGSTER_HOME


def test_the_main_job_finds_the_workspace_and_instance_config_it_starts_dagster_with():
    """The main job resolves the repository from its own file: a wrong depth after a move left
    the webserver and daemon without a workspace, which only a full main-job run noticed."""
    from platform_assets.tools import demo

    assert (demo.REPO / "workspace.yaml").is_file() and (demo.REPO / "dagster_home" / "dagster.yaml").is_file()


def test_the_main_job_says_where_the_runs_time_went():
    """The summary the main job prints from the runs' start and end times and timing tags."""
    from platform_assets.defs.cleanup import CHECK_READ_SECONDS_TAG, SPARK_JOB_SECONDS_TAG, SPARK_SESSION_SECONDS_TAG
    from platform_assets.tools.demo import run_times

    tags = {SPARK_SESSION_SECONDS_TAG: "0.5", SPARK_JOB_SECONDS_TAG: "0.3", CHECK_READ_SECONDS_TAG: "1.0"}
    runs = [{"startTime": 100.0, "endTime": 102.0, "tags": tags},
            {"startTime": 100.0, "endTime": 104.5, "tags": {**tags, SPARK_SESSION_SECONDS_TAG: "1.5"}},
            {"startTime": 100.0, "endTime": None, "tags": {}}]  # still running: not counted
    assert run_times(runs) == ("a run took 2.0 to 4.5 s; on average getting its Spark session 1.0 s, "
                               "the cleaning jobs 0.3 s, the checks' reads 1.0 s")
    assert run_times([]) == "no run finished"


def test_a_workload_a_topic_refuses_writes_nothing(tmp_path):
    """The main job on log dirs whose topic was altered (``segment.bytes`` below a batch) failed
    part way, after appending to the topics before it; every batch is validated first now."""
    from storage_engine.errors import RecordTooLargeError

    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [COMPACTED], now_ms=int(time.time() * 1000))
        manager.admin.alter_topic(COMPACTED.name, {"segment.bytes": "100"})
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with LogManager([root]) as manager, pytest.raises(RecordTooLargeError):
        produce(manager, [DELETE, COMPACTED], now_ms=int(time.time() * 1000))  # DELETE's topic came first
    with LogManager([root], read_only=True) as manager:
        assert manager.topics() == [COMPACTED.name]
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and "session" not in p.name} == {
        p: b for p, b in before.items() if "session" not in p.name}


@pytest.mark.parametrize("resource, config", [
    ("log_store", {"log_dirs": ["/elsewhere"]}),
    ("log_store", {"broker_properties": {"log.retention.ms": "1"}}),
    ("pyspark", {"spark_config": {"spark.master": "spark://elsewhere:7077"}}),
])
def test_the_launchpad_refuses_run_config_for_the_log_dirs_broker_settings_and_spark_master(logs, resource, config):
    """They are the code location's environment: nothing for the launchpad to scaffold, and a run
    config naming them is invalid (``isPipelineConfigValid`` and a launch validate the same schema)."""
    defs, _ = definitions_for(logs)
    with dg.instance_for_test():  # a live instance for the load context, whatever earlier tests left
        job = defs.resolve_job_def("cleanup__clicks")
    resources = job.run_config_schema.config_type.fields["resources"].config_type
    assert resources.fields[resource].config_type.fields["config"].config_type.fields == {}
    with pytest.raises(dg.DagsterInvalidConfigError, match=f'Received unexpected config entry "{next(iter(config))}"'):
        dg.validate_run_config(job, {"resources": {resource: {"config": config}}})


IS_CONFIG_VALID = """query($selector: PipelineSelector!, $runConfigData: RunConfigData) {
  isPipelineConfigValid(pipeline: $selector, mode: "default", runConfigData: $runConfigData) {
    __typename ... on RunConfigValidationInvalid { errors { message } } } }"""


def test_through_graphql_the_launchpad_refuses_resource_config_and_a_launch_refuses_an_out_of_range_now_ms(
        logs, monkeypatch):
    """The webserver's own calls on the real code location (a gRPC server process): the launchpad's
    check (``isPipelineConfigValid``, schema types only) refuses any resource config; a launch,
    which also post-processes the config in the code location, refuses ``now_ms=-1`` naming the
    range. Neither creates a run."""
    monkeypatch.setenv("LOGPLAT_LOG_DIRS", str(logs))
    monkeypatch.setenv("LOGPLAT_AUTOMATION", "stopped")
    with dg.instance_for_test() as instance, define_out_of_process_context(
            str(REPO / "workspace.yaml"), None, instance) as context:
        selector = infer_job_selector(context, "cleanup__clicks")
        elsewhere = {"resources": {"log_store": {"config": {"log_dirs": ["/elsewhere"]}}}}
        checked = execute_dagster_graphql(context, IS_CONFIG_VALID, {"selector": selector, "runConfigData": elsewhere})
        assert checked.data["isPipelineConfigValid"]["errors"] == [
            {"message": 'Received unexpected config entry "log_dirs" at path root:resources:log_store:config. '
                        'Expected: "{ }".'}]
        clock = {"ops": {"logs__clicks": {"config": {"now_ms": -1}}}}
        launched = execute_dagster_graphql(context, LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": {
            "selector": selector, "runConfigData": clock,
            "executionMetadata": {"tags": [{"key": "dagster/partition", "value": "0"}]}}})
        error = launched.data["launchPipelineExecution"]["message"]
        assert "config:now_ms" in error and "Invalid value -1 for configuration now_ms: Value must be at least 0" in error
        assert not instance.get_run_records()
