#!/usr/bin/env bash
# The Dagster UI (webserver and daemon, `dagster dev`) on 127.0.0.1:3000 over the log dirs. The
# instance is created and migrated first, in one process (platform_assets/tools/instance_setup.py):
# two processes creating a new SQLite instance at once leave it unusable.
source "$(dirname "$0")/env.sh"
export LOGPLAT_LOG_DIRS="${LOGPLAT_LOG_DIRS:-$ROOT/data/logs}"
export DAGSTER_HOME="$(cd "${DAGSTER_HOME:-$ROOT/dagster_home}" && pwd)"
python -m platform_assets.tools.instance_setup "$DAGSTER_HOME"
exec dagster dev -w "$ROOT/workspace.yaml" -h 127.0.0.1 -p "${PORT:-3000}" "$@"
