#!/usr/bin/env bash
# Runs the whole test suite in the project's virtual environment (created on first use).
source "$(dirname "$0")/env.sh"
exec python -m pytest -q "$@"
