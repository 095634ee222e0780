"""``logctl`` end to end: outputs, and errors that change nothing on disk."""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage_engine.tools.logctl import main
from tests.helpers.paths import REPO


def snapshot(root: Path) -> dict[str, bytes]:
    """Every data file's bytes (lock and session files excluded: they are not data)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".logplat-session" not in p.name and not p.name.endswith(".lock"):
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


class Cli:
    def __init__(self, root: Path, capsys, monkeypatch):
        self.root, self.capsys, self.monkeypatch = root, capsys, monkeypatch

    def __call__(self, *args: str, stdin: str = "") -> tuple[int, str, str]:
        self.monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
        code = main(["--log-dirs", str(self.root), *args])
        out, err = self.capsys.readouterr()
        return code, out, err

    def json(self, *args: str, stdin: str = ""):
        code, out, err = self(*args, stdin=stdin)
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def cli(tmp_path, capsys, monkeypatch):
    return Cli(tmp_path / "logs", capsys, monkeypatch)


def lines(*objs) -> str:
    return "".join(json.dumps(o) + "\n" for o in objs)


def test_topic_create_list_describe_alter(cli):
    created = cli.json("topic", "create", "orders", "--partitions", "3", "--config", "cleanup.policy=compact", "--json")
    assert created["partitions"] == 3 and created["configs"] == {"cleanup.policy": "compact"}
    assert cli.json("topic", "list", "--json") == ["orders"]
    described = cli.json("topic", "describe", "orders", "--json")
    assert [p["partition"] for p in described["partitions"]] == [0, 1, 2]
    assert described["cleanup_policy"] == "compact"
    altered = cli.json("topic", "alter", "orders", "--config", "retention.ms=1000", "--json")
    assert altered["configs"] == {"cleanup.policy": "compact", "retention.ms": "1000"}
    code, out, _ = cli("topic", "describe", "orders")
    assert "PartitionCount: 3" in out and "retention.ms=1000" in out


@pytest.mark.parametrize("args,message", [
    (["topic", "create", "bad/name", "--partitions", "1"], "bad/name"),
    (["topic", "create", "..", "--partitions", "1"], ".."),
    (["topic", "create", "ok", "--partitions", "0"], "larger than 0"),
    (["topic", "create", "ok", "--partitions", "1", "--config", "retention.ms=abc"], "retention.ms"),
    (["topic", "create", "ok", "--partitions", "1", "--config", "segment.bytes=5"], "at least 14"),
    (["topic", "create", "ok", "--partitions", "1", "--config", "no.such.key=1"], "no.such.key"),
    (["topic", "create", "ok", "--partitions", "1", "--config", "min.cleanable.dirty.ratio=1.2"], "1.2"),
    (["topic", "create", "ok", "--partitions", "1", "--config", "compaction.strategy=version"], "offset, timestamp, header"),
    (["topic", "create", "ok", "--partitions", "1", "--config", "compaction.strategy=header"],
     "needs compaction.strategy.header"),
])
def test_bad_topic_input_fails_and_creates_nothing(cli, args, message):
    cli("topic", "create", "existing", "--partitions", "1")
    before = snapshot(cli.root)
    code, out, err = cli(*args)
    assert code == 1 and message in err and out == ""
    assert snapshot(cli.root) == before


@pytest.mark.parametrize("name,message", [("t", "already exists"), ("t.x", "collides with existing topic: t_x")])
def test_a_refused_create_makes_no_new_log_dir(over_dirs, name, message):
    """A create given a log dir that does not exist yet makes it, as a broker does; one refused
    (the topic exists in another given dir, or a name collides) made it all the same, lock files
    and marker included. The name is checked over the dirs that exist first."""
    logctl, d1, d2 = over_dirs, over_dirs.d1, over_dirs.d2
    for topic in ("t", "t_x"):
        assert logctl(str(d1), "topic", "create", topic, "--partitions", "1")[0] == 0
    before = snapshot(d1)
    code, out, err = logctl(logctl.both, "topic", "create", name, "--partitions", "2")
    assert code == 1 and out == "" and message in err and err.count("\n") == 1
    assert not d2.exists() and snapshot(d1) == before
    assert logctl(logctl.both, "topic", "create", "u", "--partitions", "2")[0] == 0 and (d2 / "u-1").is_dir()


def test_alter_with_a_bad_value_leaves_the_config(cli):
    cli("topic", "create", "t", "--partitions", "1", "--config", "retention.ms=5")
    before = snapshot(cli.root)
    code, _, err = cli("topic", "alter", "t", "--config", "cleanup.policy=foobar")
    assert code == 1 and "cleanup.policy" in err and "foobar" in err
    assert snapshot(cli.root) == before
    assert cli("topic", "create", "t", "--partitions", "1")[2].count("already exists") == 1


def test_compaction_strategy_is_validated_on_alter_and_shown_by_describe(cli):
    """KIP-280's configs: describe shows the strategy in effect (``offset`` by default); an alter
    to ``header`` without naming the header is refused and changes nothing."""
    cli("topic", "create", "t", "--partitions", "1", "--config", "cleanup.policy=compact")
    described = cli.json("topic", "describe", "t", "--json")
    assert (described["compaction_strategy"], described["compaction_strategy_header"]) == ("offset", None)
    before = snapshot(cli.root)
    code, out, err = cli("topic", "alter", "t", "--config", "compaction.strategy=header")
    assert code == 1 and out == "" and "compaction.strategy.header" in err and len(err.strip().splitlines()) == 1
    assert snapshot(cli.root) == before
    cli("topic", "alter", "t", "--config", "compaction.strategy=header", "--config", "compaction.strategy.header=ver")
    code, out, _ = cli("topic", "describe", "t")
    assert code == 0 and "CompactionStrategy: header (ver)" in out
    assert cli.json("topic", "describe", "t", "--json")["configs"]["compaction.strategy.header"] == "ver"


def test_produce_and_consume_round_trip_with_both_encodings(cli):
    cli("topic", "create", "t", "--partitions", "2")
    recs = [{"key": "a", "value": "1", "timestamp": 1000, "headers": [["h", "x"], ["n", None]]},
            {"key": None, "value": "2", "timestamp": 1001},
            {"key": "c", "value": None, "timestamp": 1002}]
    res = cli.json("produce", "t", "--partition", "1", "--compression", "zstd", "--json", stdin=lines(*recs))
    assert (res["first_offset"], res["last_offset"], res["records"]) == (0, 2, 3)
    blob = bytes(range(256))
    b64 = base64.b64encode(blob).decode()
    cli("produce", "t", "--partition", "1", "--encoding", "base64", stdin=lines({"key": b64, "value": b64, "timestamp": 1003}))
    code, out, err = cli("consume", "t", "--partition", "1")
    got = [json.loads(x) for x in out.splitlines()]
    assert [g["offset"] for g in got] == [0, 1, 2, 3]
    assert got[0] == {"offset": 0, "timestamp": 1000, "key": "a", "value": "1", "headers": [["h", "x"], ["n", None]]}
    assert got[1]["key"] is None and got[2]["value"] is None
    code, out, _ = cli("consume", "t", "--partition", "1", "--from-offset", "3", "--encoding", "base64")
    assert base64.b64decode(json.loads(out)["value"]) == blob
    code, out, _ = cli("consume", "t", "--partition", "1", "--from-timestamp", "1001", "--max-records", "2")
    assert [json.loads(x)["offset"] for x in out.splitlines()] == [1, 2]


@pytest.mark.parametrize("stdin,message", [
    (lines({"key": "a", "value": "1"}) + "not json\n", "line 2"),
    (lines({"key": "a", "value": "1"}, {"key": "a", "value": 5}), "line 2: value"),
    (lines({"key": "a", "value": "1", "timestamp": -5}), "timestamp"),
    (lines({"key": "a", "value": "1", "extra": 1}), "unknown field"),
    ('{"key": "a", "value": "b", "key": "c"}\n', "line 1: field 'key' appears more than once"),
    ('{"key": "a", "value": "b", "timestamp": 1' + "0" * 5000 + "}\n",
     "line 1: a number of more than 4300 digits, which no field can hold"),
    (lines({"key": "a", "value": "1"}, {"key": None, "value": "x"}), "Compacted topic cannot accept message without key"),
])
def test_bad_produce_input_appends_nothing(cli, stdin, message):
    cli("topic", "create", "t", "--partitions", "1", "--config", "cleanup.policy=compact")
    for _ in range(2):  # two closes leave two producer snapshots, which a writable open would thin out
        cli("produce", "t", "--partition", "0", stdin=lines({"key": "seed", "value": "s"}))
    before = snapshot(cli.root)
    assert len([name for name in before if name.endswith(".snapshot")]) == 2
    code, _, err = cli("produce", "t", "--partition", "0", "--batch-size", "1", stdin=stdin)
    assert code == 1 and message in err
    assert snapshot(cli.root) == before


def test_a_batch_too_large_for_a_segment_suggests_a_smaller_batch_size(cli):
    cli("topic", "create", "t", "--partitions", "1", "--config", "segment.bytes=300")
    records = lines(*({"key": f"k{i}", "value": "v" * 40} for i in range(8)))
    code, _, err = cli("produce", "t", "--partition", "0", stdin=records)
    assert code == 1 and "exceeds the maximum configured segment size of 300" in err
    assert "A smaller --batch-size (now 1000)" in err and err.count("\n") == 1
    assert cli.json("produce", "t", "--partition", "0", "--batch-size", "2", "--json", stdin=records)["records"] == 8
    code, _, err = cli("produce", "t", "--partition", "0", stdin=lines({"key": "k", "value": "v" * 400}))
    assert code == 1 and "segment size of 300" in err and "--batch-size" not in err  # one record: no batch is smaller


def test_compact_dry_run_refuses_what_compact_refuses_and_says_why_nothing_is_due(cli):
    """A dry run said "no compacted partitions" (exit 0) where the run itself refused the
    partition; a log holding only an active segment was called "empty log"; a log start
    offset inside the active segment gave a backwards section [20, 0)."""
    cli("topic", "create", "c", "--partitions", "1", "--config", "cleanup.policy=compact")
    cli("topic", "create", "d", "--partitions", "1")
    for args, error in ((("--topic", "c", "--partition", "9"), "partition c-9 does not exist"),
                        (("--topic", "d", "--partition", "0"), "only compacted topics are cleaned")):
        for dry_run in ((), ("--dry-run",)):
            code, out, err = cli("compact", *args, *dry_run)
            assert (code, out) == (1, "") and error in err, (dry_run, err)
    cli("produce", "c", "--partition", "0", stdin=lines(*({"key": f"k{i}", "value": "v"} for i in range(30))))
    code, out, _ = cli("compact", "--dry-run")
    assert code == 0 and out == ("c-0: not due: nothing to clean: every record is in the active segment, which is "
                                 "never cleaned; dirty section [0, 0), 0 of 0 bytes\n")
    cli("delete-records", "c", "--partition", "0", "--before-offset", "20")
    code, out, _ = cli("compact", "--dry-run")
    assert code == 0 and "; dirty section [20, 20), 0 of " in out
    cli("topic", "create", "lag", "--partitions", "1", "--config", "cleanup.policy=compact", "--config",
        "segment.bytes=200", "--config", "min.compaction.lag.ms=86400000")
    for _i in range(5):
        cli("produce", "lag", "--partition", "0", "--now-ms", "1000", stdin=lines({"key": "k", "value": "v" * 80,
                                                                                   "timestamp": 1000}))
    code, out, _ = cli("compact", "--topic", "lag", "--dry-run", "--now-ms", "2000")
    assert code == 0 and out.startswith("lag-0: not due: nothing to clean yet: the cleanable section ends at offset 0 "
                                        "(min.compaction.lag.ms)"), out


def test_unknown_partition_and_out_of_range_reads_are_errors(cli):
    cli("topic", "create", "t", "--partitions", "1")
    assert "Partition 4" in cli("produce", "t", "--partition", "4", stdin=lines({"key": "a", "value": "b"}))[2]
    assert "does not exist" in cli("consume", "nope", "--partition", "0")[2]
    code, _, err = cli("consume", "t", "--partition", "0", "--from-offset", "7")
    assert code == 1 and "range 0 to 0" in err


def test_the_text_dump_shows_control_characters_escaped_and_names_a_leader_epoch_checkpoint(cli):
    """A record's newline forged a batch line of the dump and its escapes reached the terminal;
    a broker's leader-epoch-checkpoint was read as an offset checkpoint and called malformed."""
    cli("topic", "create", "e", "--partitions", "1")
    cli("produce", "e", "--partition", "0",
        stdin=lines({"key": "a\u001b[31mRED", "value": "x\nbaseOffset: 999 lastOffset: 999 FORGED"}))
    segment = cli.root / "e-0" / "00000000000000000000.log"
    code, out, _ = cli("dump", str(segment))
    assert code == 0 and "\x1b" not in out and "FORGED" in out
    record = [line for line in out.splitlines() if line.startswith("| offset: 0")]
    assert len(record) == 1 and "key: a\\x1b[31mRED payload: x\\nbaseOffset: 999 lastOffset: 999 FORGED" in record[0]
    assert not [line for line in out.splitlines() if line.startswith("baseOffset: 999")]
    exact = cli.json("dump", str(segment), "--json")
    assert exact[0]["batches"][0]["records"][0]["key"] == "a\u001b[31mRED"  # the JSON output is exact
    epochs = cli.root / "e-0" / "leader-epoch-checkpoint"
    epochs.write_text("0\n1\n0 0\n")
    code, out, err = cli("dump", str(epochs))
    assert (code, out) == (1, "") and err == (f"error: {epochs}: a leader epoch checkpoint (a broker's replication "
                                              "state, which this engine neither reads nor writes) is not dumped\n")


def test_dump_log_index_timeindex_and_checkpoint(cli):
    cli("topic", "create", "t", "--partitions", "1", "--config", "index.interval.bytes=1")
    for i in range(3):
        cli("produce", "t", "--partition", "0", stdin=lines({"key": f"k{i}", "value": f"v{i}", "timestamp": 10 + i}))
    part = cli.root / "t-0"
    dumped = cli.json("dump", str(part / "00000000000000000000.log"), str(part / "00000000000000000000.index"),
                      str(part / "00000000000000000000.timeindex"), str(cli.root / "recovery-point-offset-checkpoint"),
                      "--json")
    log_dump, index_dump, time_dump, ckpt = dumped
    assert [b["baseOffset"] for b in log_dump["batches"]] == [0, 1, 2]
    assert all(b["isValid"] for b in log_dump["batches"])
    assert log_dump["batches"][2]["records"][0]["value"] == "v2"
    assert [e["offset"] for e in index_dump["entries"]] == [1, 2]
    # 10: the first produce's close wrote its largest timestamp as the final entry (Kafka's LogSegment.close)
    assert [e["timestamp"] for e in time_dump["entries"]] == [10, 11, 12]
    assert ckpt["entries"] == [{"topic": "t", "partition": 0, "offset": 3}]
    code, out, _ = cli("dump", str(part / "00000000000000000000.log"))
    assert "baseOffset: 2 lastOffset: 2 count: 1" in out and "isvalid: true" in out
    assert cli("dump", str(part / "nope.log"))[0] == 1


def test_dump_txnindex_as_kafka_dump_log_shows_it_a_torn_entry_included(cli):
    from storage_engine.logdir.manager import LogManager
    from tests.helpers.transactions import TxnWriter

    cli("topic", "create", "t", "--partitions", "1")
    with LogManager([cli.root]) as m:
        w = TxnWriter(m.get_log("t", 0))
        w.data(7, ("a", "1"))
        w.abort(7)
    txn = cli.root / "t-0" / "00000000000000000000.txnindex"
    code, out, _ = cli("dump", str(txn))
    assert code == 0 and out.splitlines()[1] == "version: 0 producerId: 7 firstOffset: 0 lastOffset: 1 lastStableOffset: 2"
    txn.write_bytes(txn.read_bytes() + b"\x00\x01")  # a torn second entry: shown, not refused
    [dumped] = cli.json("dump", str(txn), "--json")
    assert dumped["entries"] == [{"version": 0, "producerId": 7, "firstOffset": 0, "lastOffset": 1,
                                  "lastStableOffset": 2}]
    assert dumped["trailingBytes"] == 2


@pytest.mark.parametrize("damage", [b"\x00" * 4096, b"\xff" * 12 + b"\x00" * 50])
def test_dump_shows_the_batches_before_a_header_no_batch_can_have(cli, tmp_path, damage):
    """A zero-filled tail (what a crash leaves) or a negative length made ``dump`` refuse the
    whole file, showing none of the valid batches before it, unlike kafka-dump-log and its own
    promise to show a damaged file. An empty file dumps as no batches."""
    cli("topic", "create", "t", "--partitions", "1")
    cli("produce", "t", "--partition", "0", "--batch-size", "1", stdin=lines({"value": "a"}, {"value": "b"}))
    copy = tmp_path / "00000000000000000000.log"
    good = (cli.root / "t-0" / copy.name).read_bytes()
    copy.write_bytes(good + damage)
    dumped = cli.json("dump", str(copy), "--json")[0]["batches"]
    assert [b["baseOffset"] for b in dumped[:-1]] == [0, 1] and all(b["isValid"] for b in dumped[:-1])
    assert dumped[-1]["position"] == len(good) and dumped[-1]["trailingBytes"] == len(damage)
    code, out, _ = cli("dump", str(copy))
    assert code == 0 and f"Found {len(damage)} invalid bytes at the end of the file (position {len(good)}): " in out
    copy.write_bytes(b"")
    assert cli.json("dump", str(copy), "--json") == [{"file": str(copy), "batches": []}]


def test_verify_reports_corruption_with_exit_status_1(cli):
    cli("topic", "create", "t", "--partitions", "1")
    cli("produce", "t", "--partition", "0", "--batch-size", "1", stdin=lines(*({"key": "k", "value": "v" * 50} for _ in range(5))))
    assert cli.json("verify", "--json")["ok"] is True
    seg = cli.root / "t-0" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[len(data) // 2] ^= 0x55
    seg.write_bytes(bytes(data))
    code, out, _ = cli("verify", "--topic", "t", "--json")
    report = json.loads(out)
    assert code == 1 and report["ok"] is False
    assert any("position" in p and str(seg) in p for p in report["partitions"][0]["problems"])


def test_verify_of_every_topic_leaves_out_one_deleted_after_the_listing(cli, monkeypatch):
    """``verify`` lists the topics, then opens each partition: a ``topic delete`` landing in
    between made it report the deleted topic's partitions as unreadable ("Topic ... does not
    exist", or a bare "[Errno 2]" on the renamed directory), and exit 1."""
    from storage_engine.logdir.manager import LogManager

    for name in ("a", "b"):
        cli("topic", "create", name, "--partitions", "2")
    opening = LogManager.get_log

    def deleted_then_opened(manager, topic, partition):
        if topic == "a" and (cli.root / "a-0").exists():
            with LogManager([cli.root]) as other:  # another process's delete, just before the open
                other.admin.delete_topic("a")
        return opening(manager, topic, partition)

    monkeypatch.setattr(LogManager, "get_log", deleted_then_opened)
    report = cli.json("verify", "--json")
    assert report["ok"] is True and [p["topic"] for p in report["partitions"]] == ["b", "b"]


def test_verify_waits_for_a_topic_create_in_flight(tmp_path):
    """A ``topic create`` writes the topic's metadata, then its partition directories one by
    one; ``verify`` listing in between reported the directories not made yet as unreadable
    partitions (and an ``alter --partitions`` in flight, its new ones as strays), and exited 1.
    It lists under the topics lock, shared: here it waits for a create stopped half way
    (SIGSTOP), and passes once it has finished."""
    root = tmp_path / "logs"
    run = [sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(root)]
    assert subprocess.run([*run, "topic", "create", "base", "--partitions", "1"], cwd=REPO).returncode == 0
    creator = subprocess.Popen([*run, "topic", "create", "x", "--partitions", "400"], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while not (root / "x-5").exists() and creator.poll() is None:
            time.sleep(0.001)
        os.kill(creator.pid, signal.SIGSTOP)
        made = len(list(root.glob("x-*")))
        assert 5 <= made < 400, "the create finished before it could be stopped half way"
        verifier = subprocess.Popen([*run, "verify", "--json"], cwd=REPO, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
        with pytest.raises(subprocess.TimeoutExpired):
            verifier.wait(timeout=3)  # waiting for the create
    finally:
        os.kill(creator.pid, signal.SIGCONT)
    assert creator.wait(timeout=120) == 0, creator.stderr.read()
    out, err = verifier.communicate(timeout=120)
    report = json.loads(out)
    assert verifier.returncode == 0 and report["ok"] is True, err
    assert len([p for p in report["partitions"] if p["topic"] == "x"]) == 400


def test_delete_records(cli):
    cli("topic", "create", "t", "--partitions", "1")
    cli("produce", "t", "--partition", "0", stdin=lines(*({"key": "k", "value": str(i)} for i in range(10))))
    assert cli.json("delete-records", "t", "--partition", "0", "--before-offset", "4", "--json")["low_watermark"] == 4
    code, out, _ = cli("consume", "t", "--partition", "0")
    assert json.loads(out.splitlines()[0])["offset"] == 4
    before = snapshot(cli.root)
    code, _, err = cli("delete-records", "t", "--partition", "0", "--before-offset", "11")
    assert code == 1 and "high watermark 10" in err
    assert snapshot(cli.root) == before


def test_the_installed_console_script_and_env_log_dirs(tmp_path):
    logctl = Path(sys.executable).parent / "logctl"
    if not logctl.exists():
        pytest.skip("the logctl console script is not installed in this environment (pip install -e . adds it)")
    env = dict(os.environ, LOGPLAT_LOG_DIRS=f"{tmp_path}/a,{tmp_path}/b")
    run = lambda *a, stdin=None: subprocess.run([str(logctl), *a], input=stdin, capture_output=True, text=True, env=env)  # noqa: E731
    assert run("topic", "create", "t", "--partitions", "4").returncode == 0
    # Partitions spread over both log dirs: each new one goes to the dir with the fewest.
    assert sorted(p.name for p in (tmp_path / "a").iterdir() if p.name.startswith("t-")) == ["t-0", "t-2"]
    assert sorted(p.name for p in (tmp_path / "b").iterdir() if p.name.startswith("t-")) == ["t-1", "t-3"]
    bad = run("topic", "create", "t", "--partitions", "1")
    assert bad.returncode == 1 and bad.stderr.startswith("error:")
    assert run("produce", "t", "--partition", "3", stdin=lines({"key": "k", "value": "v"})).returncode == 0
    out = run("consume", "t", "--partition", "3").stdout
    assert json.loads(out)["value"] == "v"


def test_compact_goes_on_past_a_partition_it_cannot_read(cli):
    """Two due partitions, one with a batch failing its CRC in its dirty section: the run used to
    stop there with a one-line error, after it had cleaned the other one, whose report it never
    printed. Now the damaged one is reported failed (exit 1, its error the one line on stderr)
    and the other cleaned and reported."""
    from tests.helpers.engine import flip_last_byte

    for topic in ("a", "b"):
        cli("topic", "create", topic, "--partitions", "1", "--config", "cleanup.policy=compact",
            "--config", "segment.bytes=200", "--config", "min.cleanable.dirty.ratio=0.01")
        for i in range(10):
            cli("produce", topic, "--partition", "0", stdin=lines({"key": f"k{i % 2}", "value": f"v{i}"}))
    flip_last_byte(cli.root / "a-0" / "00000000000000000000.log", 0)
    code, out, err = cli("compact")
    assert code == 1 and err.startswith("error: a-0: CorruptRecordError: Record is corrupt") and err.count("\n") == 1
    assert "a-0: failed: CorruptRecordError" in out and "b-0: cleaned in" in out


@pytest.mark.parametrize("command", [["consume", "t", "--partition", "0"], ["dump", "t-0/00000000000000000000.log"]])
def test_output_into_a_closed_pipe_stops_quietly(tmp_path, command):
    """``logctl consume | head -1``: the reader closes the pipe after one line, and the command
    printed "error: [Errno 32] Broken pipe" and exited 1. It stops quietly now, with the status
    of a tool SIGPIPE stopped."""
    root = tmp_path / "logs"
    run = [sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(root)]
    command = [str(root / c) if c.startswith("t-0/") else c for c in command]
    assert subprocess.run([*run, "topic", "create", "t", "--partitions", "1"], cwd=REPO).returncode == 0
    records = lines(*({"key": f"k{i}", "value": "v" * 100} for i in range(5000)))
    assert subprocess.run([*run, "produce", "t", "--partition", "0"], input=records, text=True, cwd=REPO,
                          capture_output=True).returncode == 0
    reader = subprocess.Popen(["head", "-1"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)
    result = subprocess.run([*run, *command], stdout=reader.stdin, stderr=subprocess.PIPE, text=True, cwd=REPO)
    reader.stdin.close()
    reader.wait()
    assert result.stderr == "" and result.returncode == 128 + signal.SIGPIPE


def test_verify_of_a_named_topic_deleted_before_its_open_fails(cli, monkeypatch):
    """``verify --topic a``, with ``a`` deleted between the listing and the open: only ``verify``
    of every topic leaves a deleted topic out; a named one must not pass with nothing verified."""
    from storage_engine.logdir.manager import LogManager

    cli("topic", "create", "a", "--partitions", "1")
    opening = LogManager.get_log

    def deleted_then_opened(manager, topic, partition):
        if (cli.root / "a-0").exists():
            with LogManager([cli.root]) as other:
                other.admin.delete_topic("a")
        return opening(manager, topic, partition)

    monkeypatch.setattr(LogManager, "get_log", deleted_then_opened)
    code, out, _ = cli("verify", "--topic", "a")
    assert code == 1 and "a-0: 1 problem(s)" in out


@pytest.fixture
def over_dirs(tmp_path, monkeypatch, capsys):
    """``logctl`` in-process over the log dirs each call names; ``d1`` and ``d2`` are two log
    dirs and ``both`` names them together."""
    from tests.helpers.cli import run_logctl

    def call(dirs: str, *args: str, stdin: str = "") -> tuple[int, str, str]:
        return run_logctl(dirs, monkeypatch, capsys, *args, stdin=stdin)

    call.d1, call.d2 = tmp_path / "d1", tmp_path / "d2"  # type: ignore[attr-defined]
    call.both = f"{call.d1},{call.d2}"  # type: ignore[attr-defined]
    return call


def _two_partitions_over_both(logctl, topic: str, *configs: str) -> None:
    """A topic of two partitions over both log dirs (one in each), 20 records in each."""
    settings = [arg for c in ("segment.bytes=200", *configs) for arg in ("--config", c)]
    assert logctl(logctl.both, "topic", "create", topic, "--partitions", "2", *settings)[0] == 0
    for p in (0, 1):
        assert logctl(logctl.both, "produce", topic, "--partition", str(p), "--batch-size", "1", "--now-ms", "5000",
                      stdin=lines(*({"key": f"k{i % 3}", "value": "v" * 40, "timestamp": 1000}
                                    for i in range(20))))[0] == 0
    assert (logctl.d2 / f"{topic}-1").is_dir()


def test_retention_and_compaction_over_some_log_dirs_say_what_they_left(over_dirs):
    """Given some of the log dirs, ``retention`` and ``compact`` over every topic passed over the
    partitions in the others without a word. They clean what is here and name each partition
    they left, with where it may be, in the text and the JSON."""
    logctl, d1, d2 = over_dirs, over_dirs.d1, over_dirs.d2
    _two_partitions_over_both(logctl, "c", "cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01")
    _two_partitions_over_both(logctl, "r", "retention.ms=1")
    code, out, _ = logctl(str(d1), "compact")
    assert code == 0 and out.startswith("c-0: cleaned") and "r-" not in out
    assert f"c-1: not in these log dirs: topic c was placed over log dirs not among those given ({d1}): {d2} (id " in out
    code, out, _ = logctl(str(d1), "retention", "--now-ms", "10000", "--json")
    report = json.loads(out)
    assert code == 0 and [(p["topic"], p["partition"]) for p in report["partitions"]] == [("c", 0), ("r", 0)]
    assert [(p["topic"], p["partition"]) for p in report["not_given"]] == [("c", 1), ("r", 1)]
    assert "may be in a log dir not given" in report["not_given"][1]["reason"]
    code, out, _ = logctl(logctl.both, "retention", "--now-ms", "10000", "--json")  # every log dir: nothing left
    assert code == 0 and json.loads(out)["not_given"] == [] and len(json.loads(out)["partitions"]) == 4
    described = json.loads(logctl(logctl.both, "topic", "describe", "c", "--json")[1])  # what the refusals go by
    assert [o["path"] for o in described["placed_over"]] == [str(d1), str(d2)]
    assert f"PlacedOver: {d1} ({described['placed_over'][0]['id']}),{d2} (" in \
        logctl(logctl.both, "topic", "describe", "c")[1]


def test_the_erasure_report_over_some_log_dirs_proves_what_is_there_and_names_the_rest(over_dirs):
    """``erasure-report`` given some of the log dirs failed outright on the first partition held
    elsewhere. It reports the partitions here, names each one left as ``compact`` does, and
    exits 1: a partition it did not read is not proven."""
    logctl, d1 = over_dirs, over_dirs.d1
    _two_partitions_over_both(logctl, "c", "cleanup.policy=compact", "max.compaction.lag.ms=1000")
    for args in ((), ("--topic", "c")):
        code, out, err = logctl(str(d1), "erasure-report", "--now-ms", "10000", *args)
        assert code == 1 and out.startswith("c-0: NOT ERASED") and "\nc-1: not in these log dirs: topic c was" in out, err
    report = json.loads(logctl(str(d1), "erasure-report", "--now-ms", "10000", "--json")[1])
    assert [p["partition"] for p in report["partitions"]] == [0] and not report["ok"]
    assert [(p["topic"], p["partition"]) for p in report["not_given"]] == [("c", 1)]
    report = json.loads(logctl(logctl.both, "erasure-report", "--now-ms", "10000", "--json")[1])  # every log dir
    assert [p["partition"] for p in report["partitions"]] == [0, 1] and report["not_given"] == []


def test_a_run_over_some_log_dirs_is_not_failed_after_its_work_by_another_topics_file(over_dirs):
    """The partitions left were looked up after the work, through every topic's metadata: one
    topic's malformed file, with no directory here, failed ``retention`` after it had deleted
    segments, with no report. They are looked up first, passing over a topic that cannot be
    read (named after the report, exit 1); a named partition in a log dir not given is refused
    by a dry run as by the run."""
    logctl, d1 = over_dirs, over_dirs.d1
    _two_partitions_over_both(logctl, "r", "retention.ms=1", "cleanup.policy=compact,delete")
    (d1 / ".logplat-topics" / "x.json").write_text("{not json")
    code, out, err = logctl(str(d1), "retention", "--now-ms", "10000")
    assert code == 1 and out.startswith("r-0: deleted") and "r-1: not in these log dirs: topic r was placed" in out
    assert err.startswith("error: topic x passed over: topic metadata file") and err.count("\n") == 1
    code, _, err = logctl(str(d1), "compact", "--topic", "r", "--partition", "1", "--dry-run")
    assert code == 1 and err.startswith("error: topic r was placed over log dirs not among those given") and \
        err.count("\n") == 1


@pytest.mark.parametrize("args,closed,said", [
    (["produce", "t", "--partition", "0"], "<&-", "error: standard input is closed: produce reads its records from it"),
    (["consume", "t", "--partition", "0"], ">&-", "error: standard output is closed: logctl writes its report there"),
])
def test_a_closed_standard_stream_is_one_line_not_a_traceback(tmp_path, args, closed, said):
    """Started with stdin or stdout closed, ``produce`` and ``consume`` ended in a traceback
    (``'NoneType' object is not iterable``); nothing is written then either."""
    root = tmp_path / "logs"
    assert main(["--log-dirs", str(root), "topic", "create", "t", "--partitions", "1"]) == 0
    before = snapshot(root)
    command = " ".join([sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(root), *args, closed])
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 1 and done.stderr == said + "\n"
    assert snapshot(root) == before


def test_delete_records_completes_an_interrupted_swap_as_before_its_precheck(cli):
    """The read-only precheck of ``delete-records`` cannot show a partition left mid-swap; it
    refused the command, which the writable open completes and then runs."""
    cli("topic", "create", "t", "--partitions", "1", "--config", "segment.bytes=200")
    cli("produce", "t", "--partition", "0", "--batch-size", "1", stdin=lines(*({"key": f"k{i}", "value": "v"}
                                                                             for i in range(8))))
    segment = cli.root / "t-0" / "00000000000000000000.log"
    segment.with_name(segment.name + ".swap").write_bytes(segment.read_bytes())
    code, out, err = cli("delete-records", "t", "--partition", "0", "--before-offset", "2")
    assert code == 0 and "low_watermark: 2" in out, err
    assert not list((cli.root / "t-0").glob("*.swap"))
