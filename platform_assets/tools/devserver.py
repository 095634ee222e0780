"""A Dagster webserver and daemon on loopback, and the GraphQL calls the platform drives them with.

``dagster dev`` does the same for a person at a browser; the main job and the end-to-end test
need it from code: start both processes on ``127.0.0.1`` with a given ``DAGSTER_HOME`` and
environment, wait until the code location has loaded and the daemon is healthy, then turn sensors
on, launch backfills and read runs and materializations back through the same GraphQL API the UI uses. Each process
writes its output to a file in ``log_dir``, quoted when something goes wrong.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from spark_jobs.runtime.connect_server import free_port

from .instance_setup import InstanceSetupError, prepare_instance

REPOSITORY = "__repository__"  # the repository name of a Definitions object
T = TypeVar("T")


class DevServerError(RuntimeError):
    """The webserver, the daemon or a GraphQL call failed; the message quotes the process logs."""


def wait_for(what: str, fn: Callable[[], T | None], *, timeout_s: float, interval_s: float = 1.0,
             on_timeout: Callable[[], str] = lambda: "") -> T:
    """Poll ``fn`` until it returns something truthy; :class:`DevServerError` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = fn()
        if value:
            return value
        if time.monotonic() > deadline:
            raise DevServerError(f"timed out after {timeout_s:.0f} s waiting for {what}\n{on_timeout()}")
        time.sleep(interval_s)


@dataclass
class DevServer:
    """``dagster-webserver`` and ``dagster-daemon`` over ``workspace`` (use as a context manager)."""

    dagster_home: Path
    workspace: Path
    log_dir: Path
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    startup_timeout_s: float = 180.0
    _procs: dict[str, subprocess.Popen] = field(default_factory=dict, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: Sequence[str]) -> None:
        env = {**os.environ, **self.env, "DAGSTER_HOME": str(self.dagster_home)}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{name}.log", "ab") as out:  # the child keeps its own descriptor
            self._procs[name] = subprocess.Popen([sys.executable, *args], env=env, stdout=out,
                                                 stderr=subprocess.STDOUT, cwd=self.workspace.parent,
                                                 start_new_session=True)

    def logs(self, lines: int = 40) -> str:
        parts = []
        for name in self._procs:
            path = self.log_dir / f"{name}.log"
            text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else []
            parts.append(f"--- {name} ({path}) ---\n" + "\n".join(text))
        return "\n".join(parts)

    def start(self) -> DevServer:
        """Prepare the instance in this process first (see ``instance_setup``: two processes
        initialising a new SQLite instance at once corrupt it), then start both processes."""
        try:
            prepare_instance(self.dagster_home)
        except InstanceSetupError as exc:
            raise DevServerError(str(exc)) from None
        self.port = self.port or free_port()
        workspace = str(self.workspace)
        self._spawn("webserver", ["-m", "dagster_webserver", "-w", workspace, "-h", "127.0.0.1", "-p", str(self.port)])
        self._spawn("daemon", ["-m", "dagster._daemon", "run", "-w", workspace])
        client = self.client()
        wait_for("the webserver", client.is_up, timeout_s=self.startup_timeout_s, on_timeout=self.logs)
        errors = wait_for("the code location to load", client.location_errors, timeout_s=self.startup_timeout_s,
                          on_timeout=self.logs)
        if errors != ["ok"]:
            raise DevServerError(f"the code location did not load: {errors}\n{self.logs()}")
        wait_for("the daemon's heartbeat", client.daemons_healthy, timeout_s=self.startup_timeout_s, on_timeout=self.logs)
        return self

    def client(self) -> GraphQL:
        return GraphQL(self.url, self.logs)

    def stop(self) -> None:
        """SIGINT each process group (as Ctrl-C would), then SIGKILL what is left after 30 s."""
        for proc in self._procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGINT)
        deadline = time.monotonic() + 30
        for proc in self._procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def __enter__(self) -> DevServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class GraphQL:
    """The handful of GraphQL calls the platform needs (the public Python client covers fewer),
    over the standard library's HTTP client."""

    url: str
    logs: Callable[[], str] = lambda: ""

    def query(self, text: str, variables: Mapping[str, Any] | None = None) -> dict:
        payload = json.dumps({"query": text, "variables": dict(variables or {})}).encode()
        request = urllib.request.Request(f"{self.url}/graphql", data=payload,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise DevServerError(f"GraphQL HTTP {exc.code}: {exc.read()[:2000]!r}") from None
        except (OSError, ValueError) as exc:  # the webserver gone or hung, or not answering JSON
            raise DevServerError(f"GraphQL request to {self.url} failed: {type(exc).__name__}: {exc}") from None
        if body.get("errors"):
            raise DevServerError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def is_up(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/server_info", timeout=5) as response:
                return response.status == 200
        except OSError:
            return False

    def location_errors(self) -> list[str] | None:
        """``["ok"]`` once every location loaded, the load errors if one failed, ``None`` while loading."""
        data = self.query("""{ workspaceOrError { ... on Workspace { locationEntries {
            name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }""")
        entries = data["workspaceOrError"].get("locationEntries") or []
        if not entries or any(e["loadStatus"] != "LOADED" for e in entries):
            return None
        errors = [e["locationOrLoadError"].get("message", "") for e in entries
                  if e["locationOrLoadError"]["__typename"] == "PythonError"]
        return errors or ["ok"]

    def daemons_healthy(self) -> bool:
        """Every daemon the instance requires has sent a recent heartbeat."""
        data = self.query("{ instance { daemonHealth { allDaemonStatuses { daemonType required healthy } } } }")
        statuses = [d for d in data["instance"]["daemonHealth"]["allDaemonStatuses"] if d["required"]]
        return bool(statuses) and all(d["healthy"] for d in statuses)

    def location_name(self) -> str:
        data = self.query("{ workspaceOrError { ... on Workspace { locationEntries { name } } } }")
        return data["workspaceOrError"]["locationEntries"][0]["name"]

    def set_sensor(self, name: str, running: bool) -> str:
        """Start or stop a sensor; returns its status."""
        selector = {"repositoryLocationName": self.location_name(), "repositoryName": REPOSITORY, "sensorName": name}
        if running:
            data = self.query("""mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) {
                __typename ... on Sensor { sensorState { status } } ... on PythonError { message } } }""", {"s": selector})
            result = data["startSensor"]
            if result["__typename"] != "Sensor":
                raise DevServerError(f"startSensor {name}: {result}")
            return result["sensorState"]["status"]
        state = self.query("""query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) {
            ... on Sensor { id sensorState { id selectorId } } } }""", {"s": selector})["sensorOrError"]
        data = self.query("""mutation($id: String, $sel: String) { stopSensor(id: $id, jobSelectorId: $sel) {
            __typename ... on StopSensorMutationResult { instigationState { status } } } }""",
                          {"id": state["sensorState"]["id"], "sel": state["sensorState"]["selectorId"]})
        return data["stopSensor"]["instigationState"]["status"]

    def failed_ticks(self, name: str, *, after: float | None = None, limit: int = 100) -> list[str]:
        """The first line of each failed tick's error of a sensor, newest first; with ``after``
        (a Unix time), only the ticks since then (an instance's earlier failures are not this
        run's)."""
        selector = {"repositoryLocationName": self.location_name(), "repositoryName": REPOSITORY, "sensorName": name}
        data = self.query("""query($s: SensorSelector!, $n: Int, $after: Float) { sensorOrError(sensorSelector: $s) {
            ... on Sensor { sensorState { ticks(limit: $n, statuses: [FAILURE], afterTimestamp: $after) {
                error { message } } } } } }""", {"s": selector, "n": limit, "after": after})
        messages = [((t.get("error") or {}).get("message") or "").strip()
                    for t in data["sensorOrError"]["sensorState"]["ticks"]]
        return [m.splitlines()[0] if m else "(no message)" for m in messages]

    def runs(self, *, tags: Mapping[str, str] | None = None, statuses: Sequence[str] | None = None,
             created_after: float | None = None) -> list[dict]:
        """Runs (newest first) with these tags, in these statuses, created after a Unix time."""
        flt: dict[str, Any] = {}
        if created_after is not None:
            flt["createdAfter"] = created_after
        if tags:
            flt["tags"] = [{"key": k, "value": v} for k, v in tags.items()]
        if statuses:
            flt["statuses"] = list(statuses)
        data = self.query("""query($f: RunsFilter) { runsOrError(filter: $f) { ... on Runs { results {
            runId status jobName startTime endTime tags { key value } } } } }""", {"f": flt})
        return [r | {"tags": {t["key"]: t["value"] for t in r["tags"]}} for r in data["runsOrError"]["results"]]

    def launch_backfill(self, asset_key: Sequence[str], partitions: Sequence[str]) -> str:
        data = self.query("""mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) {
            __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }""",
                          {"p": {"assetSelection": [{"path": list(asset_key)}], "partitionNames": list(partitions)}})
        result = data["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise DevServerError(f"launchPartitionBackfill: {result}")
        return result["backfillId"]

    def backfill(self, backfill_id: str) -> dict:
        data = self.query("""query($id: String!) { partitionBackfillOrError(backfillId: $id) {
            ... on PartitionBackfill { id status isAssetBackfill runs { runId status tags { key value } } } } }""",
                          {"id": backfill_id})
        return data["partitionBackfillOrError"]

    def check_executions(self, asset_key: Sequence[str], check_name: str, *, limit: int = 100) -> list[dict]:
        """A check's executions, newest first: partition, status, and its evaluation (severity,
        description, the materialization it checked)."""
        data = self.query("""query($k: AssetKeyInput!, $c: String!, $n: Int!) {
            assetCheckExecutions(assetKey: $k, checkName: $c, limit: $n) { runId status partition
              evaluation { severity description partition success
                targetMaterialization { runId timestamp } } } }""",
                          {"k": {"path": list(asset_key)}, "c": check_name, "n": limit})
        return data["assetCheckExecutions"]

    def materializations(self, asset_key: Sequence[str], *, limit: int = 100) -> list[dict]:
        """Materializations of an asset, newest first, metadata as a label -> value dict."""
        return self._asset_events(asset_key, "assetMaterializations", limit)

    def observations(self, asset_key: Sequence[str], *, limit: int = 100) -> list[dict]:
        """Observations of an asset, newest first, metadata as a label -> value dict."""
        return self._asset_events(asset_key, "assetObservations", limit)

    def _asset_events(self, asset_key: Sequence[str], field: str, limit: int) -> list[dict]:
        data = self.query("""query($k: AssetKeyInput!, $n: Int) { assetOrError(assetKey: $k) { ... on Asset {
            EVENTS(limit: $n) { runId partition timestamp metadataEntries { label __typename
              ... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue }
              ... on TextMetadataEntry { text } ... on BoolMetadataEntry { boolValue }
              ... on MarkdownMetadataEntry { mdStr } ... on TimestampMetadataEntry { timestamp }
              ... on PathMetadataEntry { path } ... on UrlMetadataEntry { url } } } } } }""".replace("EVENTS", field),
                          {"k": {"path": list(asset_key)}, "n": limit})
        fields = ("intValue", "floatValue", "text", "boolValue", "mdStr", "timestamp", "path", "url")
        return [{"runId": m["runId"], "partition": m["partition"], "timestamp": m["timestamp"],
                 "metadata": {e["label"]: next((e[f] for f in fields if f in e), None) for e in m["metadataEntries"]}}
                for m in (data["assetOrError"] or {}).get(field) or []]

    def partition_statuses(self, asset_key: Sequence[str]) -> dict[str, list[str]]:
        """The asset's partitions by status, as its Partitions view shows them: ``materialized``,
        ``failed``, ``unmaterialized``, ``materializing``."""
        data = self.query("""query($k: AssetKeyInput!) { assetNodeOrError(assetKey: $k) { ... on AssetNode {
            assetPartitionStatuses { ... on DefaultPartitionStatuses { materializedPartitions failedPartitions
              unmaterializedPartitions materializingPartitions } } } } }""", {"k": {"path": list(asset_key)}})
        statuses = data["assetNodeOrError"]["assetPartitionStatuses"]
        return {name.removesuffix("Partitions"): sorted(keys) for name, keys in statuses.items()}

    def check_partition_statuses(self, asset_key: Sequence[str], check_name: str) -> dict[str, list[str]]:
        """A partitioned check's partitions by status, as the check's Partitions tab shows them:
        ``succeeded``, ``failed``, ``inProgress``, ``skipped``, ``executionFailed``."""
        data = self.query("""query($k: AssetKeyInput!) { assetNodeOrError(assetKey: $k) { ... on AssetNode {
            assetChecksOrError { ... on AssetChecks { checks { name partitionStatuses {
              ... on AssetCheckDefaultPartitionStatuses { succeededPartitions failedPartitions inProgressPartitions
                skippedPartitions executionFailedPartitions } } } } } } } }""", {"k": {"path": list(asset_key)}})
        check = next(c for c in data["assetNodeOrError"]["assetChecksOrError"]["checks"] if c["name"] == check_name)
        return {name.removesuffix("Partitions"): sorted(keys) for name, keys in (check["partitionStatuses"] or {}).items()}

    def ticks(self, name: str, *, limit: int = 20) -> list[dict]:
        """A sensor's latest ticks, newest first: status, timestamp, skip reason, run ids."""
        selector = {"repositoryLocationName": self.location_name(), "repositoryName": REPOSITORY, "sensorName": name}
        data = self.query("""query($s: SensorSelector!, $n: Int) { sensorOrError(sensorSelector: $s) {
            ... on Sensor { sensorState { ticks(limit: $n) { status timestamp skipReason runIds } } } } }""",
                          {"s": selector, "n": limit})
        return data["sensorOrError"]["sensorState"]["ticks"]

    def launch_job(self, job: str, run_config: Mapping[str, Any] | None = None) -> str:
        """Launch a job of the code location (as the Launchpad does); returns the run id."""
        selector = {"repositoryLocationName": self.location_name(), "repositoryName": REPOSITORY, "jobName": job}
        data = self.query("""mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
            ... on LaunchRunSuccess { run { runId } } ... on PythonError { message }
            ... on RunConfigValidationInvalid { errors { message } } } }""",
                          {"p": {"selector": selector, "runConfigData": dict(run_config or {})}})
        result = data["launchRun"]
        if result["__typename"] != "LaunchRunSuccess":
            raise DevServerError(f"launchRun {job}: {result}")
        return result["run"]["runId"]

    def run_failure(self, run_id: str) -> list[str]:
        """The failure messages of a run, in order: each failed step's error, then the run's."""
        data = self.query("""query($id: ID!) { runOrError(runId: $id) { ... on Run { eventConnection(afterCursor: null) {
            events { __typename ... on ExecutionStepFailureEvent { error { message } failureMetadata { label } }
              ... on RunFailureEvent { message } } } } } }""", {"id": run_id})
        events = data["runOrError"]["eventConnection"]["events"]
        return [e["error"]["message"] if e["__typename"] == "ExecutionStepFailureEvent" else e["message"]
                for e in events if e["__typename"] in ("ExecutionStepFailureEvent", "RunFailureEvent")]
