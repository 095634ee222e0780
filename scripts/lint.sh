#!/usr/bin/env bash
# The guardrails, configured in pyproject.toml, in the project's virtual environment: ruff
# (pyflakes, import order, bugbear, pyupgrade), mypy on the engine, and the import-linter
# contracts (platform_assets -> spark_jobs -> storage_engine, the engine's folder layers, no
# Dagster or Spark in the engine, no Dagster in the Spark jobs). Runs all three, fails if any fails.
source "$(dirname "$0")/env.sh"
status=0
echo "== ruff check"; ruff check . || status=1
echo "== mypy"; mypy || status=1
echo "== lint-imports"; lint-imports || status=1
exit $status
