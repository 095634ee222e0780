"""The README's main job for the engine: drive ``logctl`` through a topic's life on real files.

Creates a ``compact,delete`` topic, produces keyed lz4 batches with headers and tombstones,
consumes, dumps a segment and its index, compacts, plans retention and verifies.

Each step runs the real command line in a subprocess and prints it with its output, so what a
user sees here is exactly what they get by typing the same commands.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

TOPIC = "demo-orders"


def run(args: list[str], stdin: str | None = None, check: bool = True) -> str:
    cmd = [sys.executable, "-m", "storage_engine.cli", *args]
    print(f"$ logctl {shlex.join(args)}" + ("  < records.jsonl" if stdin else ""))
    proc = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    out = proc.stdout.rstrip()
    if out:
        lines = out.splitlines()
        print("\n".join(lines[:12] + ([f"... ({len(lines) - 12} more lines)"] if len(lines) > 12 else [])))
    if proc.returncode != 0 and check:
        print(proc.stderr, file=sys.stderr)
        raise SystemExit(proc.returncode)
    print()
    return proc.stdout


def main() -> int:
    log_dirs = os.environ.get("LOGPLAT_LOG_DIRS", "./data/logs")
    print(f"log dirs: {log_dirs}\n")
    existing = json.loads(run(["topic", "list", "--json"]))
    if TOPIC not in existing:
        run(["topic", "create", TOPIC, "--partitions", "2", "--config", "segment.bytes=4096", "--config", "index.interval.bytes=256",
             "--config", "cleanup.policy=compact,delete"])
    now = int(time.time() * 1000)
    lines = [
        json.dumps({"key": f"order-{i % 7}", "value": None if i % 11 == 10 else f"status-{i}",
                    "timestamp": now + i, "headers": [["source", "demo"]]})
        for i in range(200)
    ]
    run(["produce", TOPIC, "--partition", "0", "--compression", "lz4", "--batch-size", "4", "--json"], stdin="\n".join(lines) + "\n")
    run(["consume", TOPIC, "--partition", "0", "--max-records", "5"])
    run(["topic", "describe", TOPIC])
    part_dir = None
    for d in log_dirs.split(","):
        candidate = os.path.join(d, f"{TOPIC}-0")
        if os.path.isdir(candidate):
            part_dir = candidate
    if part_dir:
        first = sorted(f for f in os.listdir(part_dir) if f.endswith(".log"))[0]
        run(["dump", os.path.join(part_dir, first)])
        run(["dump", os.path.join(part_dir, first.replace(".log", ".index"))])
    run(["compact", "--topic", TOPIC, "--partition", "0"])
    run(["retention", "--topic", TOPIC, "--dry-run"])
    run(["topic", "describe", TOPIC])
    run(["verify", "--topic", TOPIC])
    return 0


if __name__ == "__main__":
    sys.exit(main())
