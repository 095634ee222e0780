#!/usr/bin/env bash
# The Dagster UI (webserver and daemon, `dagster dev`) on 127.0.0.1:3000 over the log dirs. The
# instance is created and migrated first, in one process (platform_assets/tools/instance_setup.py):
# two processes creating a new SQLite instance at once leave it unusable. Unless
# LOGPLAT_SPARK_MASTER is set, the runs share a local Spark Connect server that lives as long as
# the UI (spark_jobs/runtime/connect_server.py), instead of each starting a JVM of its own.
source "$(dirname "$0")/env.sh"
if [ -z "${LOGPLAT_LOG_DIRS:-}" ]; then  # the default log dir is ours to make; a given one must be there
    export LOGPLAT_LOG_DIRS="$ROOT/data/logs"
    mkdir -p "$LOGPLAT_LOG_DIRS"
fi
export DAGSTER_HOME="$(cd "${DAGSTER_HOME:-$ROOT/dagster_home}" && pwd)"
# One platform per instance (this UI or the main job, platform_assets/tools/instance_setup.py:
# SERVERS_LOCK_FILE): fd 9 holds the lock, and the processes exec'd below keep it for their life.
servers="from platform_assets.tools.instance_setup import SERVERS_BUSY as B, SERVERS_LOCK_FILE as F"
exec 9>>"$DAGSTER_HOME/$(python -c "$servers; print(F)")"
if ! flock -n 9; then
    echo "error: $(python -c "$servers; import sys; print(B.format(home=sys.argv[1]))" "$DAGSTER_HOME")" >&2
    exit 1
fi
python -m platform_assets.tools.preflight
python -m platform_assets.tools.instance_setup "$DAGSTER_HOME"
ui=(dagster dev -w "$ROOT/workspace.yaml" -h 127.0.0.1 -p "${PORT:-3000}" "$@")
# The main job's tiered topic keeps its versions in an embedded S3 server's data under DAGSTER_HOME:
# unless LOGPLAT_REMOTE_STORAGE names a bucket, the UI runs beside that server again
# (platform_assets/tools/object_store_server.py), so its runs and checks reach the remote tier.
s3=()
if [ -z "${LOGPLAT_REMOTE_STORAGE:-}" ] && [ -d "$DAGSTER_HOME/seaweedfs" ]; then
    s3=(python -m platform_assets.tools.object_store_server "$DAGSTER_HOME/seaweedfs" --)
fi
if [ -n "${LOGPLAT_SPARK_MASTER:-}" ]; then
    exec "${s3[@]}" "${ui[@]}"
fi
exec "${s3[@]}" python -m spark_jobs.runtime.connect_server --port 0 --log "$DAGSTER_HOME/spark-connect.log" -- "${ui[@]}"
