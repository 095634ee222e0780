#!/usr/bin/env bash
# The Dagster UI (webserver and daemon, `dagster dev`) on 127.0.0.1:3000 over the log dirs. The
# instance is created and migrated first, in one process (platform_assets/tools/instance_setup.py):
# two processes creating a new SQLite instance at once leave it unusable. Unless
# LOGPLAT_SPARK_MASTER is set, the runs share a local Spark Connect server that lives as long as
# the UI (spark_jobs/connect_server.py), instead of each starting a JVM of its own.
source "$(dirname "$0")/env.sh"
export LOGPLAT_LOG_DIRS="${LOGPLAT_LOG_DIRS:-$ROOT/data/logs}"
export DAGSTER_HOME="$(cd "${DAGSTER_HOME:-$ROOT/dagster_home}" && pwd)"
python -m platform_assets.tools.preflight
python -m platform_assets.tools.instance_setup "$DAGSTER_HOME"
ui=(dagster dev -w "$ROOT/workspace.yaml" -h 127.0.0.1 -p "${PORT:-3000}" "$@")
if [ -n "${LOGPLAT_SPARK_MASTER:-}" ]; then
    exec "${ui[@]}"
fi
exec python -m spark_jobs.connect_server --port 0 --log "$DAGSTER_HOME/spark-connect.log" -- "${ui[@]}"
