"""The embedded S3 server as a wrapper of a command (what ``scripts/ui.sh`` runs for the main
job's tiered topic): the command gets the server's environment, the server stops with it, and
the command's exit status is the wrapper's."""

from __future__ import annotations

import subprocess
import sys

CHILD = ("import os, sys; from storage_engine.remote.location import location_from_env; "
         "print(location_from_env().open().url); sys.exit(3)")


def _weed_running(data_dir) -> bool:
    out = subprocess.run(["pgrep", "-f", f"weed mini -dir={data_dir}"], capture_output=True, text=True)
    return bool(out.stdout.strip())


def test_a_command_runs_with_the_servers_environment_and_the_server_stops_with_it(tmp_path) -> None:
    data = tmp_path / "seaweedfs"
    proc = subprocess.run([sys.executable, "-m", "platform_assets.tools.object_store_server", str(data), "--",
                           sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.splitlines()[-1] == "s3://logplat/logs"  # the child reached the bucket (one LIST)
    assert not _weed_running(data)


def test_bad_usage_and_an_unknown_command_are_one_line_errors_before_a_server_starts(tmp_path) -> None:
    for args in ([str(tmp_path)], [str(tmp_path), "--", "no-such-command-here"]):
        proc = subprocess.run([sys.executable, "-m", "platform_assets.tools.object_store_server", *args],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
        assert not (tmp_path / "weed.log").exists()
