"""The platform on a production instance: runs, event logs and schedules in a real PostgreSQL
server (``dagster-postgres``), set up the way docs/operations.md tells an operator to: the
committed ``dagster.yaml`` with its ``storage:`` block replaced by the page's, the connection in
``DAGSTER_PG_*`` variables, the instance prepared by ``instance_setup`` as the main job does.
The server is a throwaway cluster (``tests/helpers/postgres.py``), one per test session, a new
database per test."""

from __future__ import annotations

import time
import uuid

import dagster as dg
import pytest

from platform_assets.defs.checks import SENSOR_RESULTS_RUN_ID
from platform_assets.defs.partitions import partitions_def_name
from platform_assets.logic.check_outcomes import HEALTH_CHECK, KEYS_UNIQUE
from platform_assets.tools.instance_setup import prepare_instance
from platform_assets.tools.workload import produce
from storage_engine.logdir.manager import LogManager
from tests.helpers.platform import (
    COMPACTED,
    apply_partition_requests,
    definitions_for,
    resources_with_test_session,
    tick,
)
from tests.helpers.postgres import PostgresUnavailable, postgres_server, write_postgres_home

NOW = int(time.time() * 1000)
ORDERS = dg.AssetKey(["logs", "orders"])


@pytest.fixture(scope="session")
def postgres():
    pytest.importorskip("dagster_postgres", reason="dagster-postgres is not installed (pip install -e .)")
    try:
        with postgres_server() as server:
            yield server
    except PostgresUnavailable as exc:
        pytest.skip(f"no PostgreSQL server for the instance tests: {exc}")


@pytest.fixture
def instance(postgres, tmp_path, monkeypatch):
    """A fresh PostgreSQL-backed instance, created and migrated by ``instance_setup``."""
    database = f"dagster_{uuid.uuid4().hex[:12]}"
    postgres.create_database(database)
    home = tmp_path / "dagster_home"
    for name, value in write_postgres_home(home, postgres, database).items():
        monkeypatch.setenv(name, value)
    prepare_instance(home)
    with dg.DagsterInstance.from_config(str(home)) as inst:
        yield inst


@pytest.fixture
def logs(tmp_path):
    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        produce(manager, [COMPACTED], now_ms=NOW)
    return root


def record_tick(instance: dg.DagsterInstance, data) -> None:
    """What the sensor daemon does with a tick: partition requests applied, asset events stored."""
    apply_partition_requests(instance, data.dynamic_partitions_requests)
    for event in data.asset_events or ():
        instance.report_runless_asset_event(event)


def latest_health(instance: dg.DagsterInstance) -> dict:
    """Each orders partition's newest ``log_health`` execution record, read back from the instance."""
    history = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(ORDERS, HEALTH_CHECK), limit=100)
    out: dict = {}
    for record in history:  # newest first
        out.setdefault(record.partition, record)
    return out


def test_the_instance_is_postgres_all_through(instance):
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

    assert isinstance(instance.run_storage, PostgresRunStorage)
    assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
    assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
    # the rest of the committed settings came along
    assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 2
    assert instance.run_monitoring_enabled and instance.run_retries_max_retries == 1


@pytest.mark.slow
def test_sensor_ticks_and_a_cleaning_run_are_recorded_in_postgres(logs, instance, spark):
    defs, settings = definitions_for(logs)
    first = tick(defs, settings, instance, "log_state_sensor")
    record_tick(instance, first)
    assert instance.get_dynamic_partitions(partitions_def_name("orders")) == ["0", "1", "2"]
    observed = {r.partition_key for r in instance.fetch_observations(ORDERS, limit=100).records}
    assert observed == {"0", "1", "2"}
    health = latest_health(instance)
    assert set(health) == {"0", "1", "2"} and health["0"].status.value == "FAILED"
    assert health["0"].run_id == SENSOR_RESULTS_RUN_ID

    requests = tick(defs, settings, instance, "compaction_sensor").run_requests
    request = next(r for r in requests if r.partition_key == "0")
    asset = next(a for a in defs.assets if a.key == ORDERS)
    result = dg.materialize([asset], instance=instance, partition_key="0", tags=request.tags,
                            run_config=request.run_config, resources=resources_with_test_session(settings))
    assert result.success

    [run] = instance.get_run_records(dg.RunsFilter(run_ids=[result.run_id]))
    assert run.dagster_run.status == dg.DagsterRunStatus.SUCCESS
    assert run.dagster_run.tags["logplat/trigger"] == "compaction-sensor"
    [materialization] = instance.fetch_materializations(ORDERS, limit=10).records
    assert materialization.run_id == result.run_id and materialization.partition_key == "0"
    assert materialization.asset_materialization.metadata["status"].value == "compacted"
    [keys_unique] = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(ORDERS, KEYS_UNIQUE), limit=10)
    assert keys_unique.run_id == result.run_id and keys_unique.status.value == "SUCCEEDED"

    # the next state tick records partition 0's changed health: its second sensor result
    record_tick(instance, tick(defs, settings, instance, "log_state_sensor", first.cursor))
    latest = latest_health(instance)["0"]
    assert latest.run_id == SENSOR_RESULTS_RUN_ID and latest.status.value == "SUCCEEDED"
    later = tick(defs, settings, instance, "compaction_sensor").run_requests
    assert not [r for r in later if r.partition_key == "0"] and [r for r in later if r.partition_key == "2"]



@pytest.fixture
def sqlite_instance():
    with dg.instance_for_test() as inst:
        yield inst


@pytest.mark.parametrize("storage", ["postgres", "sqlite"])
def test_a_second_runless_log_health_for_a_partition_fails_on_postgres_as_on_sqlite(storage, request):
    """Dagster 1.13 stores a run-less check result (the state sensor's ``log_health``) in
    ``asset_check_executions`` with an empty run id, under the unique index
    ``idx_asset_check_executions_unique`` on (asset, check, run id, partition). PostgreSQL treats
    NULLs as distinct but an empty string is not NULL, so a partition's second result is refused
    there as in SQLite: written to the event log, missing from the check's history. The state
    sensor records its results under a run id of its own instead (``record_sensor_results``).
    Should a Dagster upgrade change this, this test fails and says so."""
    from sqlalchemy.exc import IntegrityError

    instance = request.getfixturevalue("instance" if storage == "postgres" else "sqlite_instance")

    def report(passed: bool) -> None:
        instance.report_runless_asset_event(dg.AssetCheckEvaluation(
            asset_key=ORDERS, check_name=HEALTH_CHECK, passed=passed, partition="0"))

    report(False)
    with pytest.raises(IntegrityError, match="idx_asset_check_executions_unique|UNIQUE constraint failed"):
        report(True)
    [kept] = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(ORDERS, HEALTH_CHECK), limit=10)
    assert kept.run_id == "" and kept.status.value == "FAILED"
    logged = instance.get_records_for_run("", of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    assert [r.event_log_entry.dagster_event.event_specific_data.passed for r in logged] == [False, True]
