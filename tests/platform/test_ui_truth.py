"""The five questions an operator asks the Dagster UI, answered through the GraphQL API the UI
reads, from a real webserver and daemon over one scenario: a dirty partition (``orders-2``), a
partition whose cleaning fails on a corrupt batch (``orders-1``), a clean one (``orders-0``), and
a topic with a short ``max.compaction.lag.ms`` written once and left idle (``erasures-0``).

1. Which logs need cleaning, and why? The cleaning report across topics, each partition's
   ``log_health`` in the check's Partitions view and the topic's one ``topic_health`` agree.
2. Is an erasure deadline at risk? ``log_health`` turns ERROR within one sensor interval of the
   deadline, which it records as a time, and agrees with ``logctl erasure-report`` before and
   after the cleaning.
3. Which partition failed, and why? Its partition is "failed" in the asset's Partitions view, the
   run's failure names it and the engine's reason first, ``topic_health`` names it as an ERROR,
   and the sensors do not relaunch it.
4. What happened? Every verdict change is still in the partition's history afterwards, and every
   cleaning run (sensor, backfill) carries its topic, trigger and reason.
5. Can cleaning be stopped? ``pause_cleaning`` stops every run the sensors would request, saying
   so in each tick, until ``resume_cleaning``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from platform_assets.tools.devserver import DevServer, wait_for
from platform_assets.tools.ui_scenario import LAG_MS, write_erasures, write_scenario
from tests.helpers.paths import REPO

TIMEOUT_S = 420
INTERVAL_S = 5


def _erasure_report(logs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(logs),
                           "erasure-report", "--topic", "erasures", "--partition", "0"],
                          capture_output=True, text=True, timeout=120)


def _levels(observations: list[dict]) -> list[str]:
    """The partition's verdicts in time order, each change once."""
    levels: list[str] = []
    for o in sorted(observations, key=lambda o: float(o["timestamp"])):
        verdict = o["metadata"].get("log_health")
        level = verdict.split(":", 1)[0] if verdict else None
        if level and (not levels or levels[-1] != level):
            levels.append(level)
    return levels


def _topic_health(client) -> dict | None:
    """orders' topic_health as the UI shows it beside every checks screen: its latest execution."""
    executions = client.check_executions(["logs", "orders"], "topic_health", limit=1)
    return executions[0]["evaluation"] if executions and executions[0]["evaluation"] else None


def _cleaning_runs(client) -> list[dict]:
    return [r for r in client.runs() if r["jobName"].startswith("cleanup__") or r["jobName"] == "__ASSET_JOB"]


@pytest.mark.slow
def test_the_five_questions_through_a_real_webserver_and_daemon(tmp_path):
    logs = tmp_path / "logs"
    write_scenario(logs, int(time.time() * 1000))
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    env = {"LOGPLAT_LOG_DIRS": str(logs), "LOGPLAT_AUTOMATION": "stopped", "LOGPLAT_SENSOR_INTERVAL_S": str(INTERVAL_S),
           "LOGPLAT_SPARK_MASTER": "local[2]"}

    with DevServer(home, REPO / "workspace.yaml", tmp_path / "server-logs", env) as server:
        client = server.client()
        # 5. the switch first: paused from the UI's Launchpad, with a reason
        pause = client.launch_job("pause_cleaning", {"ops": {"pause_cleaning_op": {"config": {"reason": "audit"}}}})
        wait_for("pause_cleaning to succeed", lambda: [r for r in client.runs() if r["runId"] == pause
                                                       and r["status"] == "SUCCESS"], timeout_s=TIMEOUT_S,
                 on_timeout=server.logs)
        for sensor in ("log_state_sensor", "compaction_sensor", "retention_sensor"):
            assert client.set_sensor(sensor, True) == "RUNNING"
        written_ms = int(time.time() * 1000)
        write_erasures(logs)  # written once, then left idle

        # 1. which logs need cleaning, and why: the report and each partition's log_health agree
        def report_with_orders():
            reports = client.materializations(["platform", "cleaning_report"], limit=1)
            return reports and "orders" in (reports[0]["metadata"].get("report") or "") and reports[0]
        report = wait_for("the cleaning report", report_with_orders, timeout_s=TIMEOUT_S, on_timeout=server.logs)
        text = report["metadata"]["report"]
        assert "| orders | 2 | WARN" in text and "| orders | 1 | WARN" in text, text
        assert "| orders | 0 |" not in text, text
        checks = wait_for("log_health of every orders partition",
                          lambda: (s := client.check_partition_statuses(["logs", "orders"], "log_health"))
                          and set(s["failed"]) | set(s["succeeded"]) >= {"0", "1", "2"} and s,
                          timeout_s=TIMEOUT_S, on_timeout=server.logs)
        assert checks["failed"] == ["1", "2"] and checks["succeeded"] == ["0"], checks
        # the topic's one signal agrees with that view: the Checks list, its detail pane and the
        # Overview all show this one result
        health = wait_for("topic_health of orders", lambda: (h := _topic_health(client))
                          and "WARN 2 (1: " in h["description"] and h, timeout_s=TIMEOUT_S, on_timeout=server.logs)
        assert health["severity"] == "WARN" and not health["success"] and health["partition"] is None, health
        assert health["description"].startswith("2 of 3 partition(s) need attention: WARN 2 (1: "), health
        assert "; 2: " in health["description"], health

        # 5. nothing is cleaned while paused, and every run sensor's tick says why
        time.sleep(3 * INTERVAL_S)
        assert _cleaning_runs(client) == []
        for sensor in ("compaction_sensor", "retention_sensor"):
            reasons = [t["skipReason"] or "" for t in client.ticks(sensor, limit=3)]
            assert reasons and all("cleaning paused" in r and "audit" in r for r in reasons), (sensor, reasons)

        # 2. the erasure deadline: ERROR within one sensor interval of it, recorded as a time
        deadline_s = (written_ms + LAG_MS) / 1000

        def error_observed():
            return [o for o in client.observations(["logs", "erasures"])
                    if (o["metadata"].get("log_health") or "").startswith("error")]
        errors = wait_for("log_health ERROR on erasures-0", error_observed, timeout_s=LAG_MS / 1000 + TIMEOUT_S,
                          on_timeout=server.logs)
        first_error = min(errors, key=lambda o: float(o["timestamp"]))
        late_s = float(first_error["timestamp"]) / 1000 - deadline_s
        # the tick after the deadline records it: one interval, plus the tick's own evaluation on a busy box
        assert late_s <= INTERVAL_S + 5, f"recorded {late_s:.1f} s after the deadline"
        recorded_deadline = first_error["metadata"]["erasure_deadline"]
        assert abs(recorded_deadline - deadline_s) < 2, (recorded_deadline, deadline_s)
        assert "NOT ERASED" in first_error["metadata"]["log_health"], first_error["metadata"]
        report = _erasure_report(logs)
        assert report.returncode == 1 and "NOT ERASED" in report.stdout, report.stdout + report.stderr

        # resumed: the sensors clean; orders-1 fails on its corrupt batch, the others are cleaned
        resume = client.launch_job("resume_cleaning")
        wait_for("resume_cleaning to succeed", lambda: [r for r in client.runs() if r["runId"] == resume
                                                        and r["status"] == "SUCCESS"], timeout_s=TIMEOUT_S,
                 on_timeout=server.logs)

        # 3. which partition failed, and why
        statuses = wait_for("orders-1 failed and orders-2 materialized",
                            lambda: (s := client.partition_statuses(["logs", "orders"]))
                            and "1" in s["failed"] and "2" in s["materialized"] and s,
                            timeout_s=TIMEOUT_S, interval_s=2, on_timeout=server.logs)
        assert statuses["failed"] == ["1"], statuses
        failed_run = next(r for r in _cleaning_runs(client) if r["status"] == "FAILURE")
        first_line = client.run_failure(failed_run["runId"])[0].splitlines()[0]
        # Python formats an exception's message after its class (Dagster shows it so): then ours
        first_line = first_line.removeprefix("dagster._core.definitions.events.Failure: ")
        assert first_line.startswith("partition 1 of orders") and "CorruptRecordError" in first_line, first_line
        # topic_health turns ERROR naming partition 1 and the run's reason
        health = wait_for("topic_health of orders to name orders-1's failed cleaning",
                          lambda: (h := _topic_health(client)) and h["severity"] == "ERROR" and h,
                          timeout_s=TIMEOUT_S, interval_s=2, on_timeout=server.logs)
        assert "ERROR 1 (1: last cleaning failed: CorruptRecordError" in health["description"], health
        # erasures-0 was cleaned for its deadline, its idle active segment rolled: erased, say both
        wait_for("log_health to pass on erasures-0 after its cleaning",
                 lambda: _levels(client.observations(["logs", "erasures"]))[-1:] == ["passed"],
                 timeout_s=TIMEOUT_S, interval_s=2, on_timeout=server.logs)
        report = _erasure_report(logs)
        assert report.returncode == 0, report.stdout + report.stderr
        # never relaunched blindly: later ticks hold orders-1 back and say why
        time.sleep(3 * INTERVAL_S)
        held = [t["skipReason"] or "" for t in client.ticks("compaction_sensor", limit=3)]
        assert any("orders-1" in r and "failed" in r for r in held), held
        assert len([r for r in _cleaning_runs(client) if r["status"] == "FAILURE"]) == 1

        # 4. history: a backfill's run is tagged like the sensors' runs, and no verdict was rewritten
        backfill_id = client.launch_backfill(["logs", "orders"], ["0"])
        wait_for("the backfill to complete", lambda: client.backfill(backfill_id)["status"].startswith("COMPLETED"),
                 timeout_s=TIMEOUT_S, interval_s=2, on_timeout=server.logs)
        runs = _cleaning_runs(client)
        health_history = client.observations(["logs", "erasures"])
    for run in runs:
        tags = run["tags"]
        assert {"logplat/topic", "logplat/trigger", "logplat/reason"} <= set(tags), (run["runId"], tags)
    assert {r["tags"]["logplat/trigger"] for r in runs} == {"compaction-sensor", "backfill"}
    levels = _levels(health_history)
    assert levels[-3:] == ["warn", "error", "passed"], levels
