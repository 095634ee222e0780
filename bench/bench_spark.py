"""Benchmark: the Spark compaction job against the engine's local cleaner, on the same logs.

Two workloads of uncompressed 1 KB-value records (16-byte keys, every key written exactly twice
in random order, so half the records are superseded), written straight into segments:

* ``one``:  one partition of ``--size-mb`` MB (default 1024) in ``--segment-mb`` segments (128);
* ``many``: ``--partitions`` partitions (64) of ``--partition-mb`` MB (16) each.

For each, in the same run and on fresh copies of the same generated files (so every engine
reads from the page cache alike), each engine runs in its own process:

* ``local``: ``LogCleaner.compact_due`` (the engine's cleaner, partition after partition);
* ``spark local[1]`` and ``spark local[2]``: ``spark_jobs.compaction.compact_partitions``
  with ``force=False`` (same partitions as ``compact_due``) on a session built by
  ``build_spark_session`` with the production defaults. The master is fixed per JVM, hence one
  process each. The session start and a warm-up job on a tiny log (JIT, Python workers; when
  the measured job splits a partition, a second one with the tiny log split, so that path is
  warm too) are timed apart from the measured job, which starts on a warm session; a third job on a fresh
  copy of the tiny log ("tiny job") shows the fixed cost of any job.

For ``many``, the local cleaner also runs as two processes at once, each on half the partitions:
what two cores give the engine itself on this machine (the same files, page cache and disk as
Spark's two tasks), printed beside the 1 -> 2 cores goal.

A third workload, ``retention``, is ``--retention-partitions`` (2000) partitions of a ``delete``
topic with three of their four segments past ``retention.ms``: the local engine plans and applies
(``retention_plans``, ``apply_retention``) against one Spark ``local[2]`` job
(``retention_partitions``), and the results (files, checkpoints) must be the same.

Then the compacted directories are compared: every ``.log``/``.index``/``.timeindex`` byte and
the checkpoints must equal the local cleaner's, and the reports' counts too. Printed: job time,
the CPU seconds the engine's processes used meanwhile (for Spark: driver, JVM and Python workers),
MB/s and records/s (of what was read), Spark/local time ratio, and the scaling from one core to
two, ``time(local[1]) / time(local[2])`` (2.0 would be perfect). Each engine runs ``--repeat``
times (fresh copy each time, same process) and the fastest run is reported: on a shared machine
wall times vary a lot, CPU seconds much less.

Each workload ends with its goals beside the measured ratios: ``one`` (1 GB, one partition)
Spark ``local[2]`` at least as fast as the local cleaner and >= 1.5x from one core to two;
``many`` (1 GB over 64 partitions) ``local[2]`` at most 0.62x the local cleaner's time and
>= 1.8x from one core to two; both at most 1.5x the local cleaner's CPU seconds; ``retention``
within 2x of the local engine.

Usage: ``.venv/bin/python bench/bench_spark.py [--quick] [--size-mb 1024] [--partitions 64]
[--partition-mb 16] [--segment-mb 128] [--workload one|many|retention|all]
[--retention-partitions 2000] [--repeat 2] [--io-buffer-kb N] [--dir DIR] [--keep] [--json]``;
exits 1 when a Spark result differs from the local engine's.
``--quick``: 64 MB in 16 MB segments and 8 partitions of 8 MB (a smoke run: ~3 min on a busy 2-core
VM, mostly Spark start-up; the full run took ~6 min there).
Not a test.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from spark_jobs.compaction import MIN_SPLIT_BYTES  # noqa: E402
from storage_engine.log.checkpoint import read_checkpoint  # noqa: E402
from storage_engine.log.segment import LogSegment  # noqa: E402
from storage_engine.logdir.manager import LogManager  # noqa: E402
from storage_engine.record import Record, encode_batch  # noqa: E402

MB = 1024 * 1024
NOW = 1_700_000_000_000
KEY_BYTES = 16
VALUE_BYTES = 1000
BATCH_BYTES = 64 * 1024
RECORD_BYTES = KEY_BYTES + VALUE_BYTES + 8  # about: the record's varints and attributes
ENGINES = ("local", "local[1]", "local[2]")
#: The goals (issue "Spark jobs that pay for themselves"): Spark local[2] job time over the local
#: cleaner's at most ``time``, local[1] over local[2] at least ``scaling``, Spark CPU seconds over
#: the local cleaner's at most ``cpu``.
GOALS = {"one": {"time": 1.0, "scaling": 1.5, "cpu": 1.5},
         "many": {"time": 0.62, "scaling": 1.8, "cpu": 1.5},
         "retention": {"time": 2.0, "cpu": 2.0}}
# counts that must agree between the engines (timings and the engine name may not)
REPORT_FIELDS = (
    "new_checkpoint", "first_dirty_offset", "first_uncleanable_offset", "bytes_read", "bytes_written",
    "records_read", "records_written", "duplicates_removed", "tombstones_removed", "segments_before",
    "segments_after", "segments_written", "distinct_keys",
)


# ------------------------------------------------------------------------------------------
# data


def generate(root: Path, topic: str, partitions: int, partition_bytes: int, segment_bytes: int, seed: int = 7) -> dict:
    """A compacted topic written straight into segments (batches from ``encode_batch``, indexes
    built by ``LogSegment.append``), each partition ending with an empty active segment so that
    all of its data is cleanable; then opened and closed once through a ``LogManager`` so every
    engine starts from a cleanly shut down log dir with its checkpoints."""
    with LogManager([root]) as m:
        m.admin.create_topic(topic, partitions, {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes),
                                                 "file.delete.delay.ms": "0"})
        config = m.topic_config(topic)
    rnd = random.Random(seed)
    filler = rnd.randbytes(VALUE_BYTES - 16)
    per_batch = max(1, BATCH_BYTES // RECORD_BYTES)
    n_records = max(2, partition_bytes // RECORD_BYTES)
    totals = {"records": 0, "keys": 0, "bytes": 0, "segments": 0, "records_per_batch": per_batch}
    for p in range(partitions):
        part = root / f"{topic}-{p}"
        for name in os.listdir(part):  # whatever the manager created for an empty partition
            if name[:1].isdigit():
                os.unlink(part / name)
        n_keys = n_records // 2
        ids = list(range(n_keys)) * 2 + list(range(n_records - 2 * n_keys))
        rnd.shuffle(ids)
        keys = [b"key-%012d" % i for i in range(n_keys + 1)]
        seg = None
        offset = 0
        while offset < n_records:
            count = min(per_batch, n_records - offset)
            batch = encode_batch([Record(o, NOW, keys[ids[o]], b"%016d" % o + filler)
                                  for o in range(offset, offset + count)], base_offset=offset)
            if seg is None or seg.size + len(batch) > segment_bytes:
                if seg is not None:
                    seg.on_become_inactive()
                    seg.close()
                seg = LogSegment(part, offset, config, create=True)
                totals["segments"] += 1
            seg.append(offset + count - 1, NOW, offset + count - 1, batch)
            offset += count
            totals["bytes"] += len(batch)
        seg.on_become_inactive()
        seg.close()
        LogSegment(part, offset, config, create=True).close()  # the empty active segment
        totals["records"] += n_records
        totals["keys"] += n_keys + (n_records - 2 * n_keys)
    with LogManager([root]) as m:
        for p in range(partitions):
            m.get_log(topic, p)
    return totals


def summarize(diffs: list[str]) -> str:
    """``'3 .index files differ (t-0/...index, ...)'``-style summary of :func:`same_dirs`' list."""
    kinds: dict[str, list[str]] = {}
    for d in diffs:
        kind = next((k for k in (".log ", ".index ", ".timeindex ", "checkpoint", "files", "report") if k in d), "other")
        kinds.setdefault(kind.strip(), []).append(d.split(" ")[0])
    return "; ".join(f"{len(v)} {k} differ ({', '.join(v[:2])}{', ...' if len(v) > 2 else ''})" for k, v in kinds.items())


def same_dirs(a: Path, b: Path) -> tuple[int, list[str]]:
    """(files compared, differences) between two compacted log dirs."""
    diffs: list[str] = []
    compared = 0
    parts = sorted(p.name for p in a.iterdir() if p.is_dir() and not p.name.startswith("."))
    for part in parts:
        names_a = sorted(n for n in os.listdir(a / part) if n[:1].isdigit())
        names_b = sorted(n for n in os.listdir(b / part) if n[:1].isdigit())
        if names_a != names_b:
            diffs.append(f"{part}: files {names_a} != {names_b}")
            continue
        for n in names_a:
            if n.endswith((".log", ".index", ".timeindex")):
                compared += 1
                if not filecmp.cmp(a / part / n, b / part / n, shallow=False):
                    diffs.append(f"{part}/{n} differs")
    for cp in ("cleaner-offset-checkpoint", "log-start-offset-checkpoint"):
        ca, cb = (read_checkpoint(d / cp) if (d / cp).exists() else {} for d in (a, b))
        if ca != cb:
            diffs.append(f"{cp} differs")
    return compared, diffs


# ------------------------------------------------------------------------------------------
# the engines, each in its own process


def tree_cpu_s(root: int | None = None) -> float:
    """CPU seconds (user + system) used so far by ``root`` (default: this process) and every
    live descendant (the driver's JVM, Python worker daemon and workers), including the
    children they have reaped. Linux ``/proc`` only; 0.0 elsewhere."""
    root = root or os.getpid()
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    try:
        pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[pid] = int(fields[1])
        ticks[pid] = sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    total, todo = 0, [root]
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / tick


# The local child: argv = kind (compaction or retention), src, work, repo, now_ms, broker props
# (JSON), repeat, and optionally "together": then each repetition, once its copy is ready, prints
# READY and starts its clock at the line its parent sends to every such child at once. Each
# repetition works on a fresh copy of ``src`` at ``work`` (the copy is not
# timed, and is written back to disk before the clock starts, so that no engine's job waits on
# the writeback of a copy); the last one stays there for the comparison. Compaction is ``compact_due``, retention
# ``retention_plans`` then ``apply_retention``.
LOCAL_CHILD = textwrap.dedent("""
    import json, os, shutil, sys, time
    kind, src, work, repo, now, props, repeat = sys.argv[1:8]
    together = sys.argv[8:] == ["together"]
    sys.path.insert(0, repo)
    from storage_engine.cleaner import LogCleaner
    from storage_engine.logdir.manager import LogManager

    runs = []
    for _ in range(int(repeat)):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        os.sync()  # the copy's writeback is not the measured job's
        if together:
            print("READY", flush=True)
            sys.stdin.readline()
        t0, c0 = time.perf_counter(), time.process_time()
        with LogManager([work], json.loads(props)) as m:
            if kind == "compaction":
                reports = LogCleaner(m).compact_due(now_ms=int(now))
            else:
                results = m.retention.apply(m.retention.plans(now_ms=int(now)), now_ms=int(now))
        runs.append({"job_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0})
    if kind == "compaction":
        out = {"statuses": ["compacted" if r.skipped is None else "skipped" for r in reports],
               "reports": [r.to_dict() | {"topic": r.topic, "partition": r.partition} for r in reports]}
    else:
        out = {"deleted": sum(len(r.deleted_segments) for r in results)}
    print("RESULT " + json.dumps({"runs": runs, **out}))
""")

# The Spark compaction child: argv = src, work, repo, now_ms, broker props (JSON), repeat, master,
# and whether the measured job splits a partition (then a split warm-up job too).
SPARK_CHILD = textwrap.dedent("""
    import json, os, shutil, sys, tempfile, time
    from pathlib import Path
    src, work, repo, now, props, repeat, master, splits = sys.argv[1:9]
    now, props = int(now), json.loads(props)
    sys.path.insert(0, repo)
    sys.path.insert(0, repo + "/bench")
    t0 = time.perf_counter()
    from spark_jobs.compaction import compact_partitions
    from storage_engine.outcomes import COMPACTED
    from spark_jobs.runtime.session import build_spark_session
    from bench_spark import generate, tree_cpu_s

    spark = build_spark_session(master, app_name="bench-spark")
    session_s = time.perf_counter() - t0
    # warm-up: the same job on a tiny log (JIT, Python workers), and once more with the tiny log
    # split when the measured job splits a partition; then once more on a fresh copy of it: the
    # fixed cost of any job on a warm session
    warm = Path(tempfile.mkdtemp(prefix="bench-spark-warmup-"))
    try:
        generate(warm / "src", "warm", 2, 256 * 1024, 64 * 1024, seed=1)
        times = []
        for i, split_bytes in enumerate([None, 0, None] if splits == "1" else [None, None]):
            shutil.copytree(warm / "src", warm / str(i))
            t1 = time.perf_counter()
            res = compact_partitions(spark, [warm / str(i)], now_ms=now, broker_props=props, split_bytes=split_bytes)
            times.append(time.perf_counter() - t1)
            assert [o.status for o in res.outcomes] == [COMPACTED] * 2, [o.reason for o in res.outcomes]
        warmup_s, tiny_s = sum(times[:-1]), times[-1]
    finally:
        shutil.rmtree(warm, ignore_errors=True)
    runs = []
    for _ in range(int(repeat)):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        os.sync()  # the copy's writeback is not the measured job's
        cpu0 = tree_cpu_s()
        t2 = time.perf_counter()
        result = compact_partitions(spark, [work], now_ms=now, broker_props=props)
        runs.append({"job_s": time.perf_counter() - t2, "cpu_s": tree_cpu_s() - cpu0})
    conf = {k: spark.conf.get(k) for k in ("spark.sql.shuffle.partitions", "spark.driver.memory",
                                            "spark.sql.adaptive.enabled")}
    spark.stop()
    print("RESULT " + json.dumps({"runs": runs, "session_s": session_s, "warmup_s": warmup_s, "tiny_s": tiny_s,
                                  "conf": conf, "statuses": [o.status for o in result.outcomes],
                                  "reasons": [o.reason for o in result.outcomes if o.reason],
                                  "reports": [o.to_dict() | {"topic": o.topic, "partition": o.partition}
                                              for o in result.outcomes]}))
""")


# The Spark retention child: argv = src, work, repo, now_ms, repeat, master.
SPARK_RETENTION_CHILD = textwrap.dedent("""
    import json, os, shutil, sys, time
    src, work, repo, now, repeat, master = sys.argv[1:7]
    sys.path.insert(0, repo)
    sys.path.insert(0, repo + "/bench")
    t0 = time.perf_counter()
    from spark_jobs.retention import retention_partitions
    from spark_jobs.runtime.session import build_spark_session
    from bench_spark import tree_cpu_s

    spark = build_spark_session(master, app_name="bench-spark")
    session_s = time.perf_counter() - t0
    times = []
    for i in range(2):  # warm-up, then the fixed cost of a job: dry runs over the source
        t1 = time.perf_counter()
        retention_partitions(spark, [src], now_ms=int(now), dry_run=True)
        times.append(time.perf_counter() - t1)
    runs = []
    for _ in range(int(repeat)):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        os.sync()  # the copy's writeback is not the measured job's
        cpu0, t2 = tree_cpu_s(), time.perf_counter()
        result = retention_partitions(spark, [work], now_ms=int(now))
        runs.append({"job_s": time.perf_counter() - t2, "cpu_s": tree_cpu_s() - cpu0})
    spark.stop()
    print("RESULT " + json.dumps({"runs": runs, "session_s": session_s, "warmup_s": times[0], "tiny_s": times[1],
                                  "deleted": sum(len(o.deleted_segments) for o in result.outcomes),
                                  "statuses": sorted({o.status for o in result.outcomes})}))
""")


def generate_retention(root: Path, partitions: int) -> dict:
    """A ``delete`` topic of many small partitions, each of four segments of which the three
    oldest are past ``retention.ms`` at ``NOW``: retention has a plan for every partition."""
    per_topic, per_manager = 1000, 200  # logplat.max.partitions.per.topic; open files per manager
    tps = []
    with LogManager([root]) as m:
        for t, first in enumerate(range(0, partitions, per_topic)):
            count = min(per_topic, partitions - first)
            m.admin.create_topic(f"r{t}", count, {"retention.ms": "60000", "segment.bytes": "1200",
                                                  "file.delete.delay.ms": "0"})
            tps += [(f"r{t}", p) for p in range(count)]
    for first in range(0, len(tps), per_manager):
        with LogManager([root]) as m:
            for topic, p in tps[first:first + per_manager]:
                log = m.get_log(topic, p)
                for b in range(4):
                    ts = NOW - 3_600_000 + b * 1_000 if b < 3 else NOW
                    log.append([Record(0, ts, b"k%d" % i, b"v" * 200) for i in range(5)], now=ts)
    return {"partitions": partitions, "segments": 4 * partitions}


def run_retention_workload(partitions: int, base: Path, repeat: int) -> dict:
    root = base / "retention"
    shutil.rmtree(root, ignore_errors=True)
    src = root / "src"
    t0 = time.perf_counter()
    info = generate_retention(src, partitions)
    gen_s = time.perf_counter() - t0
    runs = {"local": run_child(LOCAL_CHILD, ["retention", str(src), str(root / "local"), str(REPO), str(NOW), "{}",
                                            str(repeat)]),
            "local[2]": run_child(SPARK_RETENTION_CHILD, [str(src), str(root / "spark"), str(REPO), str(NOW),
                                                          str(repeat), "local[2]"])}
    out = {"workload": "retention", "partitions": partitions, "generated": info, "generate_s": round(gen_s, 1),
           "engines": {}}
    for engine, run in runs.items():
        best = min(run["runs"], key=lambda r: r["job_s"])
        row = {"job_s": round(best["job_s"], 2), "cpu_s": round(best["cpu_s"], 2), "deleted": run["deleted"],
               "all_job_s": [round(r["job_s"], 2) for r in run["runs"]]}
        if engine != "local":
            compared, diffs = same_dirs(root / "local", root / "spark")
            row.update(session_s=round(run["session_s"], 1), warmup_s=round(run["warmup_s"], 1),
                       tiny_job_s=round(run["tiny_s"], 2), identical=not diffs and run["deleted"] == runs["local"]["deleted"],
                       differences=summarize(diffs))
        out["engines"][engine] = row
    shutil.rmtree(root, ignore_errors=True)
    return out


def start_child(code: str, args: list[str]) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("LOGPLAT_SPARK_MASTER", None)
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def child_result(proc: subprocess.Popen) -> dict:
    stdout, stderr = proc.communicate()
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child failed ({proc.returncode}):\n{stdout[-3000:]}\n{stderr[-5000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def run_child(code: str, args: list[str]) -> dict:
    return child_result(start_child(code, args))


def partition_dirs(log_dir: Path) -> list[Path]:
    return sorted((p for p in log_dir.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)


def deal_partitions(src: Path, parts: int) -> list[Path]:
    """``src``'s partitions dealt round-robin into ``parts`` log dirs beside it, each with a copy
    of everything else in the log dir (topic configs, checkpoints, markers)."""
    dirs = [src.parent / f"{src.name}-part{k}" for k in range(parts)]
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
    partitions = partition_dirs(src)
    for i, p in enumerate(partitions):
        shutil.copytree(p, dirs[i % parts] / p.name)
    for entry in src.iterdir():
        if entry not in partitions:
            for d in dirs:
                (shutil.copytree if entry.is_dir() else shutil.copy2)(entry, d / entry.name)
    return dirs


def local_side_by_side(src: Path, broker_props: dict[str, str], repeat: int) -> float:
    """What two cores give the local cleaner itself on this machine: two processes at once, each
    compacting half the partitions (same files, same page cache, same disk as Spark's two
    tasks), their clocks started at once. The best over ``repeat`` of the slower half's job time."""
    halves = deal_partitions(src, 2)
    procs: list[subprocess.Popen] = []
    try:
        best = float("inf")
        for _ in range(repeat):
            procs = [start_child(LOCAL_CHILD, ["compaction", str(h), str(h) + "-work", str(REPO), str(NOW),
                                               json.dumps(broker_props), "1", "together"]) for h in halves]
            for p in procs:  # each copied its half and wrote it back: start both clocks now
                while (line := p.stdout.readline()) and line.strip() != "READY":
                    pass
            for p in procs:
                p.stdin.write("\n")
                p.stdin.flush()
            results = [child_result(p) for p in procs]
            statuses = [st for r in results for st in r["statuses"]]
            assert statuses == ["compacted"] * len(statuses) and len(statuses) == len(partition_dirs(src)), statuses
            best = min(best, max(r["runs"][0]["job_s"] for r in results))
        return best
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for h in halves:
            shutil.rmtree(h, ignore_errors=True)
            shutil.rmtree(str(h) + "-work", ignore_errors=True)


def run_workload(name: str, partitions: int, partition_mb: float, segment_mb: float, base: Path, keep: bool,
                 broker_props: dict[str, str], repeat: int) -> dict:
    root = base / name
    shutil.rmtree(root, ignore_errors=True)
    src = root / "src"
    t0 = time.perf_counter()
    info = generate(src, "t", partitions, int(partition_mb * MB), int(segment_mb * MB))
    gen_s = time.perf_counter() - t0
    os.sync()
    runs: dict[str, dict] = {}
    for engine in ENGINES:
        work = root / engine.replace("[", "-").replace("]", "")
        args = [str(src), str(work), str(REPO), str(NOW), json.dumps(broker_props), str(repeat)]
        runs[engine] = run_child(LOCAL_CHILD, ["compaction", *args]) if engine == "local" else \
            run_child(SPARK_CHILD, [*args, engine, "1" if partition_mb * MB > MIN_SPLIT_BYTES else "0"])
        runs[engine]["dir"] = work
        best = min(runs[engine]["runs"], key=lambda r: r["job_s"])
        runs[engine].update(job_s=best["job_s"], cpu_s=best["cpu_s"])
    side_by_side_s = local_side_by_side(src, broker_props, repeat) if partitions > 1 else None
    if not keep:
        shutil.rmtree(src)

    local = runs["local"]
    expected = {(r["topic"], r["partition"]): r for r in local["reports"]}
    assert len(expected) == partitions and all(r["skipped"] is None for r in expected.values()), \
        [r["skipped"] for r in expected.values()]
    records_read = sum(r["records_read"] for r in expected.values())
    bytes_read = sum(r["bytes_read"] for r in expected.values())
    out = {"workload": name, "partitions": partitions, "partition_mb": partition_mb, "segment_mb": segment_mb,
           "generated": info, "generate_s": round(gen_s, 1), "records_read": records_read,
           "bytes_read": bytes_read, "records_written": sum(r["records_written"] for r in expected.values()),
           "bytes_written": sum(r["bytes_written"] for r in expected.values()),
           "passes": max(r["passes"] for r in expected.values()), "engines": {}}
    for engine in ENGINES:
        run = runs[engine]
        row = {"job_s": round(run["job_s"], 2), "cpu_s": round(run["cpu_s"], 2),
               "all_job_s": [round(r["job_s"], 2) for r in run["runs"]],
               "all_cpu_s": [round(r["cpu_s"], 2) for r in run["runs"]],
               "mb_s": round(bytes_read / MB / run["job_s"], 1),
               "records_s": round(records_read / run["job_s"]),
               "vs_local": round(run["job_s"] / local["job_s"], 2)}
        if engine != "local":
            row.update(session_s=round(run["session_s"], 1), warmup_s=round(run["warmup_s"], 1),
                       tiny_job_s=round(run["tiny_s"], 2), conf=run["conf"])
            got = {(r["topic"], r["partition"]): r for r in run["reports"]}
            mismatched = [tp for tp, rep in expected.items()
                          if {f: got.get(tp, {}).get(f) for f in REPORT_FIELDS} != {f: rep[f] for f in REPORT_FIELDS}]
            compared, diffs = same_dirs(runs["local"]["dir"], run["dir"])
            row.update(statuses=sorted(set(run["statuses"])), reasons=run["reasons"][:3], files_compared=compared,
                       identical=not diffs and not mismatched and set(run["statuses"]) == {"compacted"},
                       differences=summarize(diffs + [f"{tp[0]}-{tp[1]} report" for tp in mismatched]))
        out["engines"][engine] = row
    one, two = runs["local[1]"]["job_s"], runs["local[2]"]["job_s"]
    out["scaling_1_to_2_cores"] = round(one / two, 2)
    if side_by_side_s is not None:
        out["local_two_processes_s"] = round(side_by_side_s, 2)
        out["local_scaling_1_to_2_cores"] = round(local["job_s"] / side_by_side_s, 2)
    if not keep:
        shutil.rmtree(root)
    return out


def print_compaction(r: dict) -> bool:
    """A compaction workload's table and goals; whether every Spark result equals the local one."""
    ok = True
    g = r["generated"]
    print(f"\n== {r['workload']}: {r['partitions']} partition(s) x {r['partition_mb']:g} MB = "
          f"{g['bytes'] / MB:,.0f} MB, {g['records']:,} records of {VALUE_BYTES} B values, {g['keys']:,} keys, "
          f"{g['records_per_batch']} records/batch, {g['segments']} segments of <= {r['segment_mb']:g} MB "
          f"(generated in {r['generate_s']} s)")
    print(f"   result: {r['records_written']:,} of {r['records_read']:,} records kept, "
          f"{r['bytes_written'] / MB:,.0f} of {r['bytes_read'] / MB:,.0f} MB; local cleaner in {r['passes']} pass(es)")
    print(f"   best of {len(r['engines']['local']['all_job_s'])} run(s) per engine, each on a fresh copy:")
    print(f"   {'engine':<16}{'job s':>8}{'CPU s':>8}{'MB/s':>9}{'records/s':>12}{'vs local':>10}{'session s':>11}"
          f"{'warm-up s':>11}{'tiny job s':>12}  identical to local")
    for engine, e in r["engines"].items():
        label = "local cleaner" if engine == "local" else f"spark {engine}"
        extra = ""
        if engine != "local":
            ok &= e["identical"]
            same = (f"yes ({e['files_compared']} files cmp'd)" if e["identical"]
                    else f"NO ({e['files_compared']} files cmp'd): {e['differences'] or e['statuses']} "
                         f"{e['reasons'] or ''}")
            extra = f"{e['session_s']:>11.1f}{e['warmup_s']:>11.1f}{e['tiny_job_s']:>12.2f}  {same}"
        else:
            extra = f"{'-':>11}{'-':>11}{'-':>12}  (reference)"
        print(f"   {label:<16}{e['job_s']:>8.2f}{e['cpu_s']:>8.1f}{e['mb_s']:>9.1f}{e['records_s']:>12,}{e['vs_local']:>9.2f}x{extra}")
    print(f"   scaling 1 -> 2 cores: time(local[1]) / time(local[2]) = {r['scaling_1_to_2_cores']:.2f}x; "
          f"CPU s vs the local cleaner: " + ", ".join(
              f"{k} {e['cpu_s'] / max(r['engines']['local']['cpu_s'], 1e-9):.1f}x"
              for k, e in r["engines"].items() if k != "local"))
    if "local_two_processes_s" in r:
        print(f"   this machine's own two-core scaling: the local cleaner as two processes at once, each on half "
              f"the partitions, {r['local_two_processes_s']:.2f} s = {r['local_scaling_1_to_2_cores']:.2f}x "
              f"the one process")
    print("   every run (job s / CPU s): " + "; ".join(
        f"{k} {e['all_job_s']} / {e['all_cpu_s']}" for k, e in r["engines"].items()))
    print("   goals: " + "; ".join(goal_lines(r)))
    return ok


def print_retention(r: dict) -> bool:
    """The retention workload's lines; whether Spark's result equals the engine's."""
    local, spark = r["engines"]["local"], r["engines"]["local[2]"]
    print(f"\n== retention: {r['partitions']:,} partitions x 4 segments, 3 of each past retention.ms "
          f"(generated in {r['generate_s']} s); plan and apply in one job")
    print(f"   local engine (retention_plans + apply_retention): {local['job_s']:.2f} s, CPU {local['cpu_s']:.1f} s, "
          f"{local['deleted']:,} segments deleted")
    same = "yes" if spark["identical"] else f"NO: {spark['differences']}"
    print(f"   spark local[2] (retention_partitions): {spark['job_s']:.2f} s, CPU {spark['cpu_s']:.1f} s, "
          f"{spark['deleted']:,} deleted; session {spark['session_s']:.1f} s, first job {spark['warmup_s']:.1f} s, "
          f"a dry run on a warm session {spark['tiny_job_s']:.2f} s; identical to local: {same}")
    print("   goals: " + "; ".join(goal_lines(r)))
    return spark["identical"]


def goal_lines(r: dict) -> list[str]:
    """Each goal of the workload beside the measured ratio."""
    goals, engines = GOALS[r["workload"]], r["engines"]
    local, two = engines["local"], engines["local[2]"]
    measured = {"time": two["job_s"] / local["job_s"], "cpu": two["cpu_s"] / max(local["cpu_s"], 1e-9)}
    if "local[1]" in engines:
        measured["scaling"] = r["scaling_1_to_2_cores"]
    texts = {"time": ("spark local[2] / local time", "<="), "scaling": ("1 -> 2 cores", ">="),
             "cpu": ("spark local[2] / local CPU s", "<=")}
    out = []
    for name, goal in goals.items():
        label, op = texts[name]
        value = measured[name]
        met = value <= goal if op == "<=" else value >= goal
        beside = (f"; the local cleaner itself gets {r['local_scaling_1_to_2_cores']:.2f}x from two processes here"
                  if name == "scaling" and "local_scaling_1_to_2_cores" in r else "")
        out.append(f"{label} {value:.2f}x (goal {op} {goal:g}x: {'met' if met else 'NOT met'}{beside})")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: 64 MB (16 MB segments) and 8 x 8 MB")
    parser.add_argument("--size-mb", type=float, default=None, help="the one-partition log (default 1024)")
    parser.add_argument("--segment-mb", type=float, default=None, help="segment.bytes in MB (default 128)")
    parser.add_argument("--partitions", type=int, default=None, help="partitions of the many workload (default 64)")
    parser.add_argument("--partition-mb", type=float, default=None, help="size of each (default 16)")
    parser.add_argument("--workload", choices=["one", "many", "retention", "all"], default="all")
    parser.add_argument("--retention-partitions", type=int, default=None,
                        help="partitions of the retention workload (default 2000)")
    parser.add_argument("--io-buffer-kb", type=int, default=None,
                        help="log.cleaner.io.buffer.size for both engines (default: the engine's, 512 KB)")
    parser.add_argument("--dir", default=None, help="scratch directory (default: a temp dir, removed afterwards)")
    parser.add_argument("--keep", action="store_true", help="keep the logs")
    parser.add_argument("--repeat", type=int, default=2,
                        help="timed runs per engine, each on a fresh copy; the best is reported (default 2)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    quick = args.quick
    size_mb = args.size_mb or (64 if quick else 1024)
    segment_mb = args.segment_mb or (16 if quick else 128)
    nparts = args.partitions or (8 if quick else 64)
    part_mb = args.partition_mb or (8 if quick else 16)

    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-spark-"))
    base.mkdir(parents=True, exist_ok=True)
    props = {} if args.io_buffer_kb is None else {"log.cleaner.io.buffer.size": str(args.io_buffer_kb * 1024)}
    load_before = os.getloadavg()
    results = []
    ok = True

    def done(result: dict) -> None:
        nonlocal ok
        results.append(result)
        if not args.json:  # as each workload ends: a long run shows what it measured so far
            ok &= (print_retention if result["workload"] == "retention" else print_compaction)(result)
            sys.stdout.flush()

    if not args.json:
        print(f"{os.cpu_count()} CPUs; load average {load_before[0]:.1f} before")
    try:
        if args.workload in ("one", "all"):
            done(run_workload("one", 1, size_mb, segment_mb, base, args.keep, props, args.repeat))
        if args.workload in ("many", "all"):
            done(run_workload("many", nparts, part_mb, segment_mb, base, args.keep, props, args.repeat))
        if args.workload in ("retention", "all"):
            done(run_retention_workload(args.retention_partitions or (200 if quick else 2000), base, args.repeat))
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    load_after = os.getloadavg()
    if args.json:
        print(json.dumps({"results": results, "loadavg_before": load_before, "loadavg_after": load_after},
                         indent=2, default=str))
        return 0 if all(e.get("identical", True) for r in results for e in r["engines"].values()) else 1
    print(f"\nload average {load_after[0]:.1f} after")
    conf = next((e["conf"] for r in results for e in r["engines"].values() if "conf" in e), {})
    print(f"\nspark conf: {conf} (build_spark_session defaults); broker props: {props or 'engine defaults'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
