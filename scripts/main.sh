#!/usr/bin/env bash
# The main job: creates .venv on first use, generates a realistic workload (compact, delete and
# compact,delete topics with many segments, duplicates and tombstones), runs the sensors and the
# Spark cleaning runs through a real Dagster webserver and daemon on 127.0.0.1, and prints a
# before/after table. Options: --scale, --timeout (see `python -m platform_assets.tools.demo --help`).
source "$(dirname "$0")/env.sh"
export DAGSTER_HOME="${DAGSTER_HOME:-$ROOT/dagster_home}"
exec python -m platform_assets.tools.demo "$@"
