#!/usr/bin/env bash
# The main job, end to end on real files: create a topic, produce, consume, dump, verify.
source "$(dirname "$0")/env.sh"
export LOGPLAT_LOG_DIRS="${LOGPLAT_LOG_DIRS:-$ROOT/data/logs}"
python -m storage_engine.demo "$@"
