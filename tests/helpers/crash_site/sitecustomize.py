"""Run by Python at start-up in a process given this folder on ``PYTHONPATH`` (only the kill
tests do, through ``tests.helpers.crash.crash_env``): arms its crash point."""

from tests.helpers.crash import arm_from_environment

arm_from_environment()
