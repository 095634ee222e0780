"""Screenshots of the Dagster UI for a reviewer (not part of CI).

Writes a small workload into a temporary log dir, starts a webserver and daemon on a brand-new
temporary DAGSTER_HOME, turns the state and compaction sensors on, waits until the state sensor
has recorded every partition's log_health and a compaction run has succeeded, then renders
these pages with headless Chromium into OUT (default /tmp/logplat-screenshots, which must lie
outside the repository):

    catalog.png         the asset catalog: every topic, its group, kinds and partition counts
    asset.png           logs/orders: description, metadata (configs as people read them)
    partitions.png      its Partitions view: which partitions are materialized
    partition_0.png     partition 0 selected: its latest cleaning's metadata
    checks.png          its Checks tab: each check's latest result (of any partition)
    check_health.png    log_health's own page: its latest result and the partition it is for
    report.png          platform/cleaning_report: what needs cleaning across topics, worst first
    sensor_state.png    log_state_sensor's ticks
    sensor_compaction.png  compaction_sensor's ticks: what it requested and why
    runs.png            the runs list

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
from platform_assets.tools.workload import TopicWorkload, produce
from storage_engine.logdir.manager import LogManager
from storage_engine.record import CompressionType

REPO = Path(__file__).resolve().parents[1]
#: orders-0 spans many segments (due for compaction); orders-1 barely anything; clicks has
#: expired segments for retention.
TOPICS = [
    TopicWorkload("orders", 3, {"cleanup.policy": "compact", "segment.bytes": "4096"}, records=600, keys=40,
                  tombstone_ratio=0.1, value_bytes=40, partition_records={1: 5}, batch_records=10,
                  compression=CompressionType.NONE),
    TopicWorkload("clicks", 2, {"cleanup.policy": "delete", "segment.bytes": "4096", "retention.ms": "3600000"},
                  records=400, keys=400, value_bytes=40, batch_records=10, compression=CompressionType.NONE,
                  age_ms=2 * 3_600_000),
]


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit("error: no Chromium found (apt-get install chromium)")


def shoot(browser: str, url: str, out: Path) -> None:
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    "--window-size=1600,1000", "--virtual-time-budget=20000", f"--screenshot={out}", url],
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
    with LogManager([logs]) as manager:
        produce(manager, TOPICS, now_ms=int(time.time() * 1000))
    env = {"LOGPLAT_LOG_DIRS": str(logs), "LOGPLAT_AUTOMATION": "stopped", "LOGPLAT_SENSOR_INTERVAL_S": "5",
           "LOGPLAT_SPARK_MASTER": "local[2]"}
    with DevServer(home, REPO / "workspace.yaml", work / "server-logs", env) as server:
        client = server.client()
        client.set_sensor("log_state_sensor", True)
        wait_for("log_health of every partition", lambda: len({e["partition"] for e in client.check_executions(
            ["logs", "orders"], "log_health")}) == 3 or None, timeout_s=300, on_timeout=server.logs)
        client.set_sensor("compaction_sensor", True)
        client.set_sensor("retention_sensor", True)
        wait_for("a compaction run to succeed", lambda: client.runs(tags={"logplat/topic": "orders"},
                                                                     statuses=["SUCCESS"]) or None,
                 timeout_s=600, on_timeout=server.logs)
        wait_for("the runs to finish", lambda: not client.runs(statuses=list(IN_FLIGHT)) or None,
                 timeout_s=600, on_timeout=server.logs)
        time.sleep(15)  # a state tick after the runs records the new verdicts
        client.query("mutation { setNuxSeen }")  # the UI's first-visit "join the community" dialog
        location = client.location_name()
        pages = {
            "catalog": "/assets",
            "asset": "/assets/logs/orders",
            "partitions": "/assets/logs/orders?view=partitions",
            "partition_0": "/assets/logs/orders?view=partitions&partition=0",
            "checks": "/assets/logs/orders?view=checks",
            "check_health": "/assets/logs/orders?view=checks&checkDetail=log_health",
            "report": "/assets/platform/cleaning_report",
            "sensor_state": f"/locations/{location}/sensors/log_state_sensor",
            "sensor_compaction": f"/locations/{location}/sensors/compaction_sensor",
            "runs": "/runs",
        }
        for name, path in pages.items():
            shoot(browser, server.url + path, out / f"{name}.png")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
