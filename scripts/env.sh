# Sourced by the other scripts: creates .venv from pyproject.toml on first use.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3.11}"
if [ ! -x .venv/bin/python ] || [ pyproject.toml -nt .venv/.installed ]; then
  "$PY" -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  .venv/bin/pip install --quiet -e '.[test,lint]'
  touch .venv/.installed
fi
export PATH="$ROOT/.venv/bin:$PATH"
# Dagster draws tqdm progress bars for its storage migrations (0/17 ...) on every start of a
# webserver or daemon: noise on the main job's and the UI's terminal
export TQDM_DISABLE="${TQDM_DISABLE:-1}"
