# Sourced by the other scripts: creates .venv from pyproject.toml on first use.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3.11}"
# rustup puts cargo in ~/.cargo/bin, which a non-login shell may not have on its PATH: the
# install builds the compiled record core with it (native/, optional: docs/record-core.md)
if ! command -v cargo >/dev/null 2>&1 && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
  export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
have_cargo() { command -v cargo >/dev/null 2>&1 && echo cargo || echo no-cargo; }
# (re)installs when pyproject.toml, setup.py or the compiled core's sources (native/) changed,
# or when cargo has appeared since an install without it (the stamp says which)
if [ ! -x .venv/bin/python ] || [ ! -e .venv/.installed ] \
   || { [ "$(cat .venv/.installed)" = no-cargo ] && [ "$(have_cargo)" = cargo ]; } \
   || [ -n "$(find pyproject.toml setup.py native/Cargo.toml native/Cargo.lock native/build.rs native/src -newer .venv/.installed 2>/dev/null | head -1)" ]; then
  "$PY" -m venv .venv
  .venv/bin/pip install --quiet --upgrade pip
  # compat: the editable install is a path entry, so Spark's lookup of pyspark_* modules (which
  # lists sys.path) finds pyspark_kafka_log; the default import hook would hide it
  .venv/bin/pip install --quiet -e '.[test,lint]' --config-settings editable_mode=compat
  have_cargo > .venv/.installed
  # says whether the compiled record core was built, or why the reference runs
  echo "record core: $(LOGPLAT_CORE=auto .venv/bin/python -c 'from storage_engine import native; print(native.status().describe())')" >&2
fi
export PATH="$ROOT/.venv/bin:$PATH"
# Dagster draws tqdm progress bars for its storage migrations (0/17 ...) on every start of a
# webserver or daemon: noise on the main job's and the UI's terminal
export TQDM_DISABLE="${TQDM_DISABLE:-1}"
