"""Screenshots of the Dagster UI for a reviewer (not part of CI).

Writes the scenario ``tests/platform/test_ui_truth.py`` judges the UI on
(``platform_assets/tools/ui_scenario.py``: a dirty partition, a corrupt one, a clean one, and a
topic with a one-minute ``max.compaction.lag.ms`` left idle) into a temporary log dir, starts a
webserver and daemon on a brand-new temporary DAGSTER_HOME, pauses cleaning, turns the sensors
on and waits until the erasure deadline has passed (about a minute), then resumes cleaning and
waits for the runs (one fails on the corrupt batch). It renders these pages with headless
Chromium into OUT (default /tmp/logplat-screenshots, which must lie outside the repository):

    catalog.png            the asset catalog: every topic, its group, kinds and partition counts
    report.png             platform/cleaning_report: what needs cleaning across topics, and why
    paused.png             compaction_sensor's ticks while cleaning is paused (the reason in each)
    deadline.png           logs/erasures' log_health once the deadline passed: ERROR, the deadline's time
    asset.png              logs/orders: description (the glossary), metadata
    partitions.png         its Partitions view: partition 1 failed, 2 materialized, 0 missing
    failure.png            partition 1 selected: the failure, its reason first
    failed_run.png         the failed run's page
    checks.png             its Checks tab
    check_health.png       log_health's Partitions: each partition's verdict
    history.png            logs/erasures' events: every verdict, in order
    plots.png              logs/erasures' log_health page, whole: its plots of size, dirty ratio, log start
    sensor_compaction.png  compaction_sensor's ticks after the failure: partition 1 held back, and why
    runs.png               the runs list, with their trigger and reason tags

    bash scripts/screenshots.sh [OUT]
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from platform_assets.tools.demo import IN_FLIGHT
from platform_assets.tools.devserver import DevServer, wait_for
from platform_assets.tools.ui_scenario import write_erasures, write_scenario

REPO = Path(__file__).resolve().parents[1]
def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("error: no Chromium found (apt-get install chromium)")


def shoot(browser: str, url: str, out: Path, height: int = 1000) -> None:
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size=1600,{height}", "--virtual-time-budget=20000", f"--screenshot={out}", url],
                   check=True, capture_output=True, timeout=120)
    print(f"{out}  <- {url}")


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else "/tmp/logplat-screenshots").resolve()
    if out == REPO or REPO in out.parents:
        raise SystemExit(f"error: {out} is inside the repository; pick a folder outside it")
    out.mkdir(parents=True, exist_ok=True)
    browser = chromium()
    work = Path(tempfile.mkdtemp(prefix="logplat-shots-"))
    logs, home = work / "logs", work / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    write_scenario(logs, int(time.time() * 1000))
    env = {"LOGPLAT_LOG_DIRS": str(logs), "LOGPLAT_AUTOMATION": "stopped", "LOGPLAT_SENSOR_INTERVAL_S": "5",
           "LOGPLAT_SPARK_MASTER": "local[2]", "LOGPLAT_CLEANING": "paused"}
    with DevServer(home, REPO / "workspace.yaml", work / "server-logs", env) as server:
        client = server.client()
        client.query("mutation { setNuxSeen }")  # the UI's first-visit "join the community" dialog
        location = client.location_name()

        def shots(pages: dict[str, str], height: int = 1000) -> None:
            for name, path in pages.items():
                shoot(browser, server.url + path, out / f"{name}.png", height)

        for sensor in ("log_state_sensor", "compaction_sensor", "retention_sensor", "deleted_files_sensor"):
            client.set_sensor(sensor, True)
        write_erasures(logs)
        wait_for("log_health ERROR on erasures-0 (its deadline passed)", lambda: [
            o for o in client.observations(["logs", "erasures"])
            if (o["metadata"].get("log_health") or "").startswith("error")], timeout_s=300, on_timeout=server.logs)
        time.sleep(6)  # the report of the same tick
        shots({"catalog": "/assets", "report": "/assets/platform/cleaning_report",
               "paused": f"/locations/{location}/sensors/compaction_sensor",
               "deadline": "/assets/logs/erasures?view=checks&checkDetail=log_health"})
        client.launch_job("resume_cleaning")
        wait_for("orders-1 to fail", lambda: "1" in client.partition_statuses(["logs", "orders"])["failed"],
                 timeout_s=600, on_timeout=server.logs)
        wait_for("the runs to finish", lambda: not client.runs(statuses=list(IN_FLIGHT)) or None,
                 timeout_s=600, on_timeout=server.logs)
        time.sleep(15)  # state ticks after the runs record the new verdicts
        failed = client.runs(statuses=["FAILURE"])
        shots({
            "asset": "/assets/logs/orders",
            "partitions": "/assets/logs/orders?view=partitions",
            "failure": "/assets/logs/orders?view=partitions&partition=1",
            **({"failed_run": f"/runs/{failed[0]['runId']}"} if failed else {}),
            "checks": "/assets/logs/orders?view=checks",
            "check_health": "/assets/logs/orders?view=checks&checkDetail=log_health",
            "history": "/assets/logs/erasures?view=events&partition=0",
            "sensor_compaction": f"/locations/{location}/sensors/compaction_sensor",
            "runs": "/runs",
        })
        # Dagster's asset plots mix every partition; log_health's results name one, and its page
        # plots their figures (size, dirty ratio, log start) below the latest one
        shots({"plots": "/assets/logs/erasures?view=checks&checkDetail=log_health"}, height=2600)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
