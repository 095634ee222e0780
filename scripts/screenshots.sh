#!/usr/bin/env bash
# Screenshots of the Dagster UI after a small workload was cleaned (scripts/screenshots.py);
# for a reviewer, not part of CI. Needs Chromium (apt-get install chromium).
source "$(dirname "$0")/env.sh"
exec python "$ROOT/scripts/screenshots.py" "$@"
