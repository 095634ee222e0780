"""Topic administration that no legal name or number can wedge: internal file names vs topic
names, the partition bound, 247-249 character names, ``topic delete`` (killed at every step),
and concurrent metadata changes from real processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from storage_engine.errors import InvalidTopicError, LogError
from storage_engine.log.append_validation import ProducerRecord
from storage_engine.logdir.dir_id import DIR_ID_FILE, read_dir_id
from storage_engine.logdir.manager import LogManager
from storage_engine.record import decode_batch
from tests.helpers.cli import run_logctl
from tests.helpers.crash import crash_env
from tests.helpers.paths import REPO
from tests.scenarios.hostile.test_adversarial_cli import snapshot

RECORD = json.dumps({"key": "k", "value": "v"}) + "\n"




def spawn(root: Path | str, *args: str, env: dict | None = None, stdin: str | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", str(root), *args],
                            cwd=REPO, env=env, text=True, stdin=subprocess.PIPE if stdin is not None else None,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def every_name(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*"))]


# ---------------------------------------------------------------------- internal names


@pytest.mark.parametrize("topic", [".logplat-session", ".logplat-session.1", ".logplat-session.1.2",
                                   ".logplat-topics", ".logplat-checkpoints", "recovery-point-offset-checkpoint",
                                   ".kafka_cleanshutdown", ".logplat-session.lock", ".logplat-recovery.lock"])
def test_topic_named_like_an_internal_file_does_not_wedge_the_log_dir(logctl, topic):
    assert logctl("topic", "create", "other", "--partitions", "1")[0] == 0
    code, _, err = logctl("topic", "create", topic, "--partitions", "2")
    assert code == 0, err
    for t in (topic, "other"):
        for _ in range(2):  # a second run sees the first one's session leftovers, if any
            code, out, err = logctl("produce", t, "--partition", "0", stdin=RECORD)
            assert code == 0, err
    assert logctl("consume", topic, "--partition", "0")[1].count("\n") == 2
    assert logctl("verify")[0] == 0
    assert sorted(json.loads(logctl("topic", "list", "--json")[1])) == sorted([topic, "other"])


# ---------------------------------------------------------------------- partition bound


@pytest.mark.parametrize("count", ["2147483648", "1001", "0", "-1", "99999999999999999999"])
def test_partition_count_is_bounded_before_anything_is_written(logctl, count):
    assert logctl("topic", "create", "first", "--partitions", "1")[0] == 0
    before = every_name(logctl.root)
    code, _, err = logctl("topic", "create", "p", "--partitions", count)
    assert code == 1 and err.count("\n") == 1 and "partitions" in err.lower(), err
    assert every_name(logctl.root) == before


def test_partition_bound_is_configurable(logctl, tmp_path, monkeypatch):
    props = tmp_path / "server.properties"
    props.write_text("logplat.max.partitions.per.topic=3\n")
    monkeypatch.setenv("LOGPLAT_SERVER_PROPERTIES", str(props))
    code, _, err = logctl("topic", "create", "p", "--partitions", "4")
    assert code == 1 and "logplat.max.partitions.per.topic" in err and "3" in err
    assert logctl("topic", "create", "p", "--partitions", "3")[0] == 0
    props.write_text("logplat.max.partitions.per.topic=0\n")
    code, _, err = logctl("topic", "create", "q", "--partitions", "1")
    assert code == 1 and "logplat.max.partitions.per.topic" in err


# ---------------------------------------------------------------------- long names


@pytest.mark.parametrize("length", [247, 248, 249])
def test_every_legal_topic_length_works(logctl, length):
    topic = ("t" * length)[:length]
    assert logctl("topic", "create", topic, "--partitions", "2", "--config", "cleanup.policy=compact")[0] == 0
    assert logctl("produce", topic, "--partition", "1", stdin=RECORD * 3)[0] == 0
    code, _, err = logctl("topic", "alter", topic, "--config", "retention.ms=60000")
    assert code == 0, err
    assert logctl("compact", "--topic", topic, "--partition", "1", "--now-ms", "1000000")[0] == 0
    assert logctl("consume", topic, "--partition", "1")[1].count("\n") >= 1
    assert all(len(Path(n).name) <= 255 for n in every_name(logctl.root))
    code, _, err = logctl("topic", "delete", topic)
    assert code == 0, err
    assert not [n for n in every_name(logctl.root) if topic in n]


# ---------------------------------------------------------------------- topic delete


def test_topic_delete_removes_everything_and_a_new_topic_starts_empty(logctl):
    assert logctl("topic", "create", "t", "--partitions", "3")[0] == 0
    assert logctl("topic", "create", "keep", "--partitions", "1")[0] == 0
    for p in range(3):
        assert logctl("produce", "t", "--partition", str(p), stdin=RECORD * 5)[0] == 0
    assert logctl("produce", "keep", "--partition", "0", stdin=RECORD)[0] == 0
    assert logctl("delete-records", "t", "--partition", "0", "--before-offset", "3")[0] == 0
    code, out, err = logctl("topic", "delete", "t")
    assert (code, out) == (0, "Deleted topic t.\n"), err
    assert [n for n in every_name(logctl.root) if n.startswith("t-") or "delete" in n or n.endswith("/t.json")] == []
    for cp in ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        path = logctl.root / cp
        assert not path.exists() or " t " not in f" {path.read_text()}"
    code, _, err = logctl("topic", "delete", "t")
    assert code == 1 and "does not exist" in err
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    assert logctl("consume", "t", "--partition", "0")[1] == ""
    assert json.loads(logctl("topic", "describe", "t", "--json")[1])["partitions"][0]["log_start_offset"] == 0
    assert logctl("consume", "keep", "--partition", "0")[1].count("\n") == 1


def test_a_directory_beyond_the_topics_partition_count_is_a_stray_no_command_opens(logctl):
    """``t-7`` beside a two-partition topic (a copy, a leftover) became partition 7: ``describe``
    counted three partitions, ``produce``/``consume`` used it and ``verify`` passed. A KRaft
    broker deletes such a stray log; here every command leaves it alone, ``verify`` names it,
    and ``topic delete`` removes it with the topic."""
    import shutil

    assert logctl("topic", "create", "t", "--partitions", "2", "--config", "cleanup.policy=compact")[0] == 0
    assert logctl("produce", "t", "--partition", "1", stdin=RECORD * 3)[0] == 0
    stray = logctl.root / "t-7"
    shutil.copytree(logctl.root / "t-1", stray)
    before = {p.name: p.read_bytes() for p in stray.iterdir()}
    code, out, _ = logctl("verify")
    assert code == 1 and f"{stray}: named like a partition beyond its topic's 2 partition(s)" in out, out
    assert json.loads(logctl("verify", "--topic", "t", "--json")[1])["stray_dirs"] == [str(stray)]
    assert [p["partition"] for p in json.loads(logctl("topic", "describe", "t", "--json")[1])["partitions"]] == [0, 1]
    for command in (["produce", "t", "--partition", "7"], ["consume", "t", "--partition", "7"]):
        code, _, err = logctl(*command, stdin=RECORD)
        assert code == 1 and err == "error: Partition 7 of topic t does not exist (partitions: [0, 1])\n", err
    assert logctl("compact", "--topic", "t")[0] == 0 and logctl("retention")[0] == 0
    with LogManager([logctl.root], read_only=True) as m:
        assert sorted(m.partition_locations()) == [("t", 0), ("t", 1)]
        assert sorted(s.partition for s in m.partition_stats("t")) == [0, 1]
    assert {p.name: p.read_bytes() for p in stray.iterdir()} == before
    assert logctl("topic", "delete", "t")[0] == 0
    assert not stray.exists()


def test_alter_partitions_raises_the_count_and_refuses_anything_else_unchanged(logctl):
    """``topic alter --partitions`` (Kafka's ``createPartitions``): the new partitions exist at
    once, a count that does not grow is refused with the disk unchanged, and a stray directory
    of a new partition (a broker's log copied in) is adopted with its records."""
    import shutil

    assert logctl("topic", "create", "t", "--partitions", "2")[0] == 0
    assert logctl("produce", "t", "--partition", "1", stdin=RECORD * 3)[0] == 0
    shutil.copytree(logctl.root / "t-1", logctl.root / "t-3")  # a stray until the count reaches it
    before = every_name(logctl.root)
    for args, error in ((["--partitions", "2"], "Topic t already has 2 partitions."),
                        (["--partitions", "1"], "Topic t currently has 2 partitions, which is higher than the "
                                                "requested 1: a partition count never goes down."),
                        (["--partitions", "9", "--config", "retention.ms=5"],
                         "topic alter takes --partitions or --config/--delete-config, not both"),
                        (["--partitions", "100000"], "Number of partitions 100000 for topic t must be 1 to 1000")):
        code, _, err = logctl("topic", "alter", "t", *args)
        assert code == 1 and err.startswith(f"error: {error}") and err.count("\n") == 1, err
        assert every_name(logctl.root) == before
    code, out, _ = logctl("topic", "alter", "t", "--partitions", "4")
    assert (code, out) == (0, "Topic t now has 4 partitions.\n")
    described = json.loads(logctl("topic", "describe", "t", "--json")[1])["partitions"]
    assert [(p["partition"], p["log_end_offset"]) for p in described] == [(0, 0), (1, 3), (2, 0), (3, 3)]
    assert logctl("verify")[0] == 0


def test_a_failed_alter_partitions_leaves_no_new_partition_open(tmp_path):
    """A copied-in directory that does not load (two segments claiming the same offsets) fails
    the alter before its commit point; the partitions it had opened on the way stayed open and
    writable in the process, and closing wrote their recovery points, though no other process
    saw them."""
    from storage_engine.errors import LogError, UnknownTopicOrPartitionError
    from storage_engine.log.append_validation import ProducerRecord

    root = tmp_path / "logs"
    with LogManager([root]) as manager:
        manager.admin.create_topic("t", 2)
        manager.admin.create_topic("src", 1)
        manager.get_log("src", 0).append([ProducerRecord(b"k", b"v", 1_000)] * 3)
    (root / "t-3").mkdir()
    for base in ("00000000000000000000", "00000000000000000001"):
        (root / "t-3" / f"{base}.log").write_bytes((root / "src-0" / "00000000000000000000.log").read_bytes())
    logs_before = {p.name: p.read_bytes() for p in (root / "t-3").glob("*.log")}
    with LogManager([root]) as manager:
        with pytest.raises(LogError, match="t-3"):
            manager.admin.add_partitions("t", 4)
        assert not (root / "t-2").exists()  # t-3 is tried first: t-2 was never made
        assert {p.name: p.read_bytes() for p in (root / "t-3").glob("*.log")} == logs_before
        with pytest.raises(UnknownTopicOrPartitionError):
            manager.get_log("t", 2)
    assert "t 2 " not in (root / "recovery-point-offset-checkpoint").read_text()


def test_alter_partitions_of_a_topic_without_metadata_fills_its_gaps(logctl):
    """A topic copied in without metadata, partitions 0 and 2: its count was taken as 3 and an
    alter to 5 made 3 and 4 and reported success with partition 1 still missing."""
    import shutil

    assert logctl("topic", "create", "src", "--partitions", "1")[0] == 0
    assert logctl("produce", "src", "--partition", "0", stdin=RECORD)[0] == 0
    for p in (0, 2):
        shutil.copytree(logctl.root / "src-0", logctl.root / f"copied-{p}")
    assert logctl("topic", "alter", "copied", "--partitions", "5") == (0, "Topic copied now has 5 partitions.\n", "")
    assert logctl("verify", "--topic", "copied")[0] == 0
    assert [p["partition"] for p in json.loads(logctl("topic", "describe", "copied", "--json")[1])["partitions"]] == \
        [0, 1, 2, 3, 4]


@pytest.mark.parametrize("change,point", [(("topic", "create", "t", "--partitions", "3"), "topic-create-partway"),
                                          (("topic", "alter", "t", "--partitions", "3"),
                                           "topic-add-partitions-partway")])
def test_a_create_or_alter_killed_after_its_commit_point_is_rolled_forward_by_the_next_writable_open(
        tmp_path, change, point):
    """Killed after its metadata (the commit point) and before its last partition directory, a
    ``topic create`` or ``alter --partitions`` left a topic that ``verify``, ``describe`` and
    ``consume`` refused until someone deleted it. The next writable open, of any command, makes
    the missing directories, as it finishes a delete."""
    root = tmp_path / "logs"
    for name in ["keep", *(["t"] if change[1] == "alter" else [])]:
        proc = spawn(root, "topic", "create", name, "--partitions", "1")
        assert proc.communicate()[0] and proc.returncode == 0
    proc = spawn(root, *change, env=crash_env(point))
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert (root / "t-0").is_dir() and not (root / "t-2").exists()
    opener = spawn(root, "produce", "keep", "--partition", "0", stdin=RECORD)
    assert opener.communicate(RECORD)[0] and opener.returncode == 0
    for args in (("verify",), ("topic", "describe", "t"), ("consume", "t", "--partition", "2")):
        check = spawn(root, *args)
        out, err = check.communicate()
        assert check.returncode == 0 and err == "", (args, err)
    assert "PartitionCount: 3" in spawn(root, "topic", "describe", "t").communicate()[0]


@pytest.mark.parametrize("checkpoint", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                        "cleaner-offset-checkpoint"])
def test_a_malformed_checkpoint_refuses_a_create_or_an_alter_with_nothing_written(logctl, checkpoint):
    """A create wrote its metadata (its commit point), then failed opening its first partition on
    the malformed checkpoint: the topic existed after the error and a retry said "already
    exists". The checkpoints are parsed before anything is written now."""
    assert logctl("topic", "create", "a", "--partitions", "1")[0] == 0
    (logctl.root / checkpoint).write_text("0\n1\na 0 x\n")
    before = every_name(logctl.root)
    for args in (["create", "zz", "--partitions", "1"], ["alter", "a", "--partitions", "2"]):
        code, _, err = logctl("topic", *args)
        assert code == 1 and err == f"error: Malformed line 3 in checkpoint file {logctl.root / checkpoint}: 'a 0 x'\n"
        assert every_name(logctl.root) == before
    (logctl.root / checkpoint).write_text("0\n0\n")  # repaired: the retry works
    assert logctl("topic", "create", "zz", "--partitions", "1")[0] == 0


@pytest.mark.parametrize("checkpoint", ["recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                                        "cleaner-offset-checkpoint"])
def test_a_malformed_checkpoint_refuses_consume_and_topic_alter_alike(logctl, checkpoint):
    """The log dir is offline (Kafka's rule): ``consume`` of a topic the bad line is not about
    was refused, while ``topic alter --config`` of it went ahead and rewrote its metadata."""
    assert logctl("topic", "create", "a", "--partitions", "1")[0] == 0
    assert logctl("produce", "a", "--partition", "0", stdin='{"key": "k", "value": "v"}\n')[0] == 0
    (logctl.root / checkpoint).write_text("0\n1\nzz 0 x\n")
    before = snapshot(logctl.root)
    for args in (["consume", "a", "--partition", "0"], ["topic", "alter", "a", "--config", "retention.ms=5"],
                 ["topic", "alter", "a", "--delete-config", "retention.ms"]):
        code, out, err = logctl(*args)
        assert (code, out) == (1, ""), args
        assert err == f"error: Malformed line 3 in checkpoint file {logctl.root / checkpoint}: 'zz 0 x'\n", args
    assert snapshot(logctl.root) == before
    (logctl.root / checkpoint).write_text("0\n0\n")  # repaired: both work again
    assert logctl("consume", "a", "--partition", "0")[0] == 0
    assert logctl("topic", "alter", "a", "--config", "retention.ms=5")[0] == 0


def test_only_a_deleted_partitions_directory_is_removed_at_a_writable_open(logctl):
    """Every writable open removed any directory of the log dir whose name ended in ``-delete``
    (``reports-delete`` and what it held, with ``--log-dirs /tmp`` given by mistake); only the
    names a topic delete gives (``<topic>-<n>.<32 hex digits>-delete``) are removed now."""
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    mine = [logctl.root / "reports-delete", logctl.root / "t-0.notauuid-delete", logctl.root / "x-1.ABCD-delete"]
    for path in mine:
        path.mkdir()
        (path / "q3.csv").write_text("keep\n")
    left = logctl.root / f"t-0.{'0123456789abcdef' * 2}-delete"  # a delete killed before it removed the dir
    left.mkdir()
    (left / "00000000000000000000.log").write_bytes(b"")
    assert logctl("produce", "t", "--partition", "0", stdin=RECORD)[0] == 0
    assert not left.exists()
    assert all((path / "q3.csv").read_text() == "keep\n" for path in mine)


@pytest.mark.parametrize("dirs", [1, 2], ids=["one-log-dir", "two-log-dirs"])
@pytest.mark.parametrize("point", ["topic-delete-marked", "topic-delete-renamed", "topic-delete-unlisted"])
def test_topic_delete_killed_at_every_step_is_finished_by_the_next_open(tmp_path, point, dirs):
    """Over two log dirs, recovery loads the half-deleted topic's partitions in the second one
    before the open finishes the delete; their config was refused there ("the metadata of topic
    t is in log dir ..., which is not among the log dirs given", naming a dir that was given),
    so every writable command of every topic failed, for good."""
    logs = [tmp_path / f"logs{i}" for i in range(dirs)]
    root = ",".join(map(str, logs))
    for args, stdin in ((("topic", "create", "t", "--partitions", "3"), None),
                        (("topic", "create", "keep", "--partitions", "1"), None),
                        (("produce", "t", "--partition", "1"), RECORD * 4),
                        (("produce", "keep", "--partition", "0"), RECORD * 2)):
        proc = spawn(root, *args, stdin=stdin)
        out, err = proc.communicate(stdin)
        assert proc.returncode == 0, err
    proc = spawn(root, "topic", "delete", "t", env=crash_env(point))
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    listing = spawn(root, "topic", "list", "--json")
    assert json.loads(listing.communicate()[0]) == ["keep"]  # past the commit point: already gone to readers
    opener = spawn(root, "produce", "keep", "--partition", "0", stdin=RECORD)
    assert opener.communicate(RECORD)[0] and opener.returncode == 0
    left = [n for d in logs for n in every_name(d) if n.startswith("t-") or "-delete" in n or "/t." in n]
    assert left == []
    consume = spawn(root, "consume", "keep", "--partition", "0")
    assert consume.communicate()[0].count("\n") == 3


def test_a_topic_create_killed_part_way_says_how_to_finish_or_remove_it(tmp_path):
    """Killed after its metadata (the commit point) and its first partition directory, a create
    leaves a topic that every whole-topic command refuses. The refusal said "a writable command
    recreates it", which none but a produce to that partition did; it now says what does."""
    root = tmp_path / "logs"
    proc = spawn(root, "topic", "create", "t", "--partitions", "5", env=crash_env("topic-create-partway"))
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("t-")) == ["t-0"]
    verify = spawn(root, "verify")
    out, err = verify.communicate()
    assert verify.returncode == 1 and "t-1 of partition 1 of topic t is missing" in out + err
    assert "a produce to it recreates it empty, and a topic delete removes the topic" in out + err
    for p in range(1, 5):
        produce = spawn(root, "produce", "t", "--partition", str(p), stdin=RECORD)
        assert produce.communicate(RECORD)[1] == "" and produce.returncode == 0
    for args in (("verify",), ("topic", "describe", "t")):
        check = spawn(root, *args)
        assert check.communicate()[1] == "" and check.returncode == 0, args
    proc = spawn(root, "topic", "create", "u", "--partitions", "3", env=crash_env("topic-create-partway"))
    proc.communicate()
    delete = spawn(root, "topic", "delete", "u")
    assert delete.communicate()[1] == "" and delete.returncode == 0
    assert not [p for p in root.iterdir() if p.name.startswith("u-")]


def test_a_users_logctl_is_not_killed_by_a_crash_point_name_in_its_environment(tmp_path):
    """The crash points are the kill tests' (``tests.helpers.crash``): ``LOGPLAT_CRASH_AT`` set
    in a user's shell SIGKILLed their command part way."""
    root = tmp_path / "logs"
    proc = spawn(root, "topic", "create", "t", "--partitions", "5",
                 env=dict(os.environ, LOGPLAT_CRASH_AT="topic-create-partway"))
    assert proc.communicate()[1] == "" and proc.returncode == 0
    assert sorted(p.name for p in root.iterdir() if p.name.startswith("t-")) == [f"t-{p}" for p in range(5)]


def test_topic_delete_killed_at_a_random_moment_leaves_it_whole_or_gone(tmp_path):
    """A SIGKILL from outside while deletes run: every round ends with the topic whole or gone."""
    root = tmp_path / "logs"
    for round_ in range(4):
        topic = f"t{round_}"
        create = spawn(root, "topic", "create", topic, "--partitions", "20")
        assert create.communicate()[1] == "" and create.returncode == 0
        proc = spawn(root, "topic", "delete", topic)
        time.sleep(0.25 + 0.1 * round_)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        opener = spawn(root, "topic", "create", f"after{round_}", "--partitions", "1")
        assert opener.communicate()[1] == ""
        listed = json.loads(spawn(root, "topic", "list", "--json").communicate()[0])
        dirs = [p.name for p in root.iterdir() if p.name.startswith(f"{topic}-")]
        if topic in listed:
            assert len(dirs) == 20
        else:
            assert dirs == []


# ---------------------------------------------------------------------- concurrency


def test_concurrent_alters_never_lose_an_update(tmp_path):
    root = tmp_path / "logs"
    assert spawn(root, "topic", "create", "t", "--partitions", "1").wait() == 0
    keys = ["retention.ms", "retention.bytes", "segment.ms", "delete.retention.ms"]
    for round_ in range(6):
        procs = [spawn(root, "topic", "alter", "t", "--config", f"{key}={1000 + round_}") for key in keys]
        results = [p.communicate() for p in procs]
        assert [p.returncode for p in procs] == [0] * len(keys), results
        configs = json.loads(spawn(root, "topic", "describe", "t", "--json").communicate()[0])["configs"]
        assert configs == {key: str(1000 + round_) for key in keys}


def test_concurrent_creates_of_one_name_give_the_losers_already_exists(tmp_path):
    root = tmp_path / "logs"
    for round_ in range(4):
        procs = [spawn(root, "topic", "create", f"t{round_}", "--partitions", "2") for _ in range(3)]
        results = [(p.wait(), p.communicate()[1]) for p in procs]
        assert sorted(code for code, _ in results) == [0, 1, 1], results
        for code, err in results:
            if code:
                assert err == f"error: Topic 't{round_}' already exists.\n"


def test_a_killed_metadata_write_leaves_no_temporary_file_behind(logctl):
    """A writer killed between writing its temporary file and the rename leaves it; the next
    metadata change (under the lock, so nobody else is writing) removes it."""
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    topics = logctl.root / ".logplat-topics"
    (topics / ".0123456789abcdef.tmp").write_bytes(b"{half")
    (topics / "t.json.tmp").write_bytes(b"{half")
    assert logctl("topic", "alter", "t", "--config", "retention.ms=5")[0] == 0
    assert sorted(p.name for p in topics.iterdir()) == ["t.json"]


def test_a_stored_config_the_engine_does_not_know_can_be_deleted(logctl):
    """A refused stored config names ``topic alter --delete-config`` as its correction; for a
    name no topic config has (a hand edit), that alter refused the name it was told to remove."""
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    meta = logctl.root / ".logplat-topics" / "t.json"
    meta.write_text(meta.read_text().replace('"configs": {}', '"configs": {"foo.bar": "1"}'))
    code, _, err = logctl("consume", "t", "--partition", "0")
    assert code == 1 and "foo.bar" in err and "logctl topic alter t" in err
    assert logctl("topic", "alter", "t", "--delete-config", "foo.bar") == (0, "Updated config for topic t.\n", "")
    assert logctl("consume", "t", "--partition", "0")[0] == 0


def test_deleting_a_config_kafka_does_not_know_is_an_error(logctl):
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    before = (logctl.root / ".logplat-topics" / "t.json").read_bytes()
    code, _, err = logctl("topic", "alter", "t", "--config", "retention.ms=5", "--delete-config", "nope")
    assert code == 1 and err.startswith("error: Cannot delete config nope: no topic config has that name. Valid "
                                        "names: ") and err.count("\n") == 1, err
    assert (logctl.root / ".logplat-topics" / "t.json").read_bytes() == before


@pytest.mark.parametrize("args, error", [
    (["--config", "segment.ms=1000", "--config", "segment.ms=2000"],
     "--config segment.ms is given twice ('1000' and '2000'): give it once"),
    (["--delete-config", "cleanup.policy", "--config", "cleanup.policy=delete"],
     "cleanup.policy is given to both --config and --delete-config: give it to one"),
    (["--config", "retention.ms=1" + "0" * 5000],
     "Invalid value '1" + "0" * 58 + "... (5001 characters) for configuration retention.ms: Not a number of type LONG"),
], ids=["twice", "set-and-delete", "5001-digits"])
def test_conflicting_or_absurd_config_flags_are_one_line_errors(logctl, args, error):
    """Both flags were taken silently, the last one winning; a 5001-digit number got Python's
    own message about its integer limit, and an error line as long as the value."""
    assert logctl("topic", "create", "t", "--partitions", "1")[0] == 0
    before = (logctl.root / ".logplat-topics" / "t.json").read_bytes()
    code, _, err = logctl("topic", "alter", "t", *args)
    assert (code, err) == (1, f"error: {error}\n")
    assert (logctl.root / ".logplat-topics" / "t.json").read_bytes() == before


@pytest.mark.parametrize("internal", ["__consumer_offsets", "__transaction_state"])
def test_kafkas_internal_topics_are_created_compacted(tmp_path, internal):
    """Kafka's broker creates its internal topics with cleanup.policy=compact; so does topic create."""
    with LogManager([tmp_path]) as m:
        m.admin.create_topic(internal, 1)
        assert m.topic_config(internal).compact and not m.topic_config(internal).delete
        m.admin.create_topic("plain", 1)
        assert m.topic_config("plain").delete and not m.topic_config("plain").compact


def test_an_internal_topics_policy_can_still_be_set_explicitly(tmp_path):
    with LogManager([tmp_path]) as m:
        m.admin.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact,delete"})
        assert m.topic_config("__consumer_offsets").compact and m.topic_config("__consumer_offsets").delete


def test_a_topic_name_colliding_with_an_existing_one_is_refused(tmp_path):
    """Kafka refuses a topic whose name equals an existing one's once '.' reads as '_' (their
    metric names would be the same); both were created."""
    with LogManager([tmp_path / "logs"]) as m:
        m.admin.create_topic("a.b", 1)
        with pytest.raises(InvalidTopicError, match="Topic 'a_b' collides with existing topic: a.b"):
            m.admin.create_topic("a_b", 1)
        assert m.topics() == ["a.b"] and not (tmp_path / "logs" / "a_b-0").exists()
        m.admin.create_topic("a-b", 1)  # '-' is no '.' or '_'


def test_a_log_dir_given_without_the_one_holding_its_topics_metadata_refuses_the_topic(tmp_path):
    """A topic's metadata is in the first log dir, its partitions in any. Given the second log
    dir alone, a compacted topic's partition there read as a topic without metadata, under the
    broker defaults (cleanup.policy=delete, 7 days): describe showed them and retention deleted
    its latest values. The log dir now records where the metadata of the partitions placed in
    it is, and every command refuses the topic, naming that log dir, until it is given."""
    from storage_engine.logdir.topic_store import placed_path

    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with LogManager([d1, d2]) as m:
        m.admin.create_topic("c", 2, {"cleanup.policy": "compact"})
        m.get_log("c", 1).append([ProducerRecord(b"k", b"latest", 1_000)], now=1_000)
    assert (d2 / "c-1").is_dir() and placed_path(d2, "c").is_file() and not placed_path(d1, "c").exists()
    before = sorted(p.name for p in (d2 / "c-1").iterdir())
    with LogManager([d2]) as m:
        for use in (lambda: m.topic_config("c"), lambda: m.retention.plans(now_ms=10**12),
                    lambda: m.get_log("c", 1)):
            with pytest.raises(LogError, match=f"the metadata of topic c is in log dir {d1}, which is not among"):
                use()
    assert sorted(p.name for p in (d2 / "c-1").iterdir()) == before
    with LogManager([d1, d2]) as m:
        assert m.topic_config("c").compact
        m.admin.delete_topic("c")
    assert not placed_path(d2, "c").exists() and not list(tmp_path.glob("d*/c-*"))


def test_a_subset_of_the_log_dirs_never_makes_a_partition_directory_another_may_hold(tmp_path):
    """Given only the metadata's log dir, ``alter --partitions`` and a produce made an empty copy
    of a partition that lives in the other log dir: its acknowledged records read as nothing,
    and given both dirs every command then refused them ("Duplicate log directories"). The
    metadata records the ids of the log dirs the topic was placed over; a writable command not
    given one of them makes no partition directory, and a reader says where the partition may be."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with LogManager([d1, d2]) as m:
        m.admin.create_topic("c", 2)
        m.get_log("c", 1).append([ProducerRecord(b"k", b"acked", 1_000)], now=1_000)
    d2_id = read_dir_id(d2)
    assert (d2 / "c-1").is_dir() and json.loads((d1 / ".logplat-topics" / "c.json").read_text())["placed_over"] == {
        read_dir_id(d1): str(d1), d2_id: str(d2)}
    before = every_name(d1)
    with LogManager([d1]) as m:
        for change in (lambda: m.admin.add_partitions("c", 3), lambda: m.get_log("c", 1)):
            with pytest.raises(LogError, match=rf"topic c was placed over log dirs not among those given \({d1}\): "
                                               rf"{d2} \(id {d2_id}\): .*give every log dir"):
                change()
        m.admin.alter_topic("c", {"retention.ms": "1000"})  # a config change makes no directory: allowed
    with LogManager([d1], read_only=True) as m:
        with pytest.raises(LogError, match="partition 1, missing from these, may be in a log dir not given"):
            m.get_log("c", 1)
    assert [n for n in every_name(d1) if n not in before] == []
    with LogManager([d1, d2]) as m:
        assert len(m.admin.add_partitions("c", 3).placed_over) == 2 and m.topic_config("c").retention_ms == 1000
        assert [r.value for b in m.get_log("c", 1).iter_batches() for r in decode_batch(b)] == [b"acked"]
    # a topic made over one log dir whose missing directory a produce over two makes in the
    # second: from then on it counts as placed over both
    with LogManager([d1]) as m:
        m.admin.create_topic("t", 2)
    shutil.rmtree(d1 / "t-1")  # as a create killed part way leaves it
    with LogManager([d1, d2]) as m:
        m.get_log("t", 1).append([ProducerRecord(b"k", b"acked", 1_000)], now=1_000)
        assert set(m.metadata.topic("t").placed_over) == {read_dir_id(d1), d2_id} and (d2 / "t-1").is_dir()
    with LogManager([d1]) as m:
        with pytest.raises(LogError, match=f"topic t was placed over log dirs not among those given .*{d2_id}"):
            m.get_log("t", 1)
    assert not (d1 / "t-1").exists()


def test_a_wrong_log_dir_of_the_right_count_makes_no_partition_directory(tmp_path):
    """A count of log dirs let ``d1,d3`` pass for a topic placed over ``d1,d2``: a produce made
    an empty copy, in d3, of a partition that lives in d2. The log dirs are told apart by id."""
    d1, d2, d3 = (tmp_path / n for n in ("d1", "d2", "d3"))
    with LogManager([d1, d2]) as m:
        m.admin.create_topic("c", 2)
        m.get_log("c", 1).append([ProducerRecord(b"k", b"acked", 1_000)], now=1_000)
    assert (d2 / "c-1").is_dir()
    with LogManager([d1, d3]) as m:
        with pytest.raises(LogError, match=f"log dirs not among those given .*: {d2} \\(id {read_dir_id(d2)}\\)"):
            m.get_log("c", 1).append([ProducerRecord(b"k", b"lost", 2_000)], now=2_000)
        with pytest.raises(LogError, match="log dirs not among those given"):
            m.admin.add_partitions("c", 3)
    assert not (d3 / "c-1").exists() and not (d1 / "c-1").exists()
    with LogManager([d3, d2, d1]) as m:  # every log dir, in any order and at any path
        assert [r.value for b in m.get_log("c", 1).iter_batches() for r in decode_batch(b)] == [b"acked"]


def test_metadata_from_before_the_ids_keeps_its_count(tmp_path):
    """A topic whose metadata counts its log dirs (written before the ids) is still refused
    given fewer; once a change over all of them records their ids, it is told apart by id."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with LogManager([d1, d2]) as m:
        m.admin.create_topic("c", 2)
    path = d1 / ".logplat-topics" / "c.json"
    body = json.loads(path.read_text())
    del body["placed_over"]
    path.write_text(json.dumps({**body, "log_dirs": 2}))
    shutil.rmtree(d2 / "c-1")
    with LogManager([d1]) as m:
        with pytest.raises(LogError, match="topic c was placed over 2 log dirs and 1 is given"):
            m.get_log("c", 1)
    with LogManager([d1, d2]) as m:
        m.get_log("c", 1)
        assert m.metadata.topic("c").log_dirs == 2 and len(m.metadata.topic("c").placed_over) == 2


def test_a_copied_log_dir_is_refused_by_its_id(tmp_path):
    """A copy of a log dir beside its original has the original's id: Kafka refuses duplicate
    directory ids, and a topic recorded as placed over the one would pass given the other."""
    d1 = tmp_path / "d1"
    with LogManager([d1]) as m:
        m.admin.create_topic("c", 1)
    shutil.copytree(d1, tmp_path / "copy")
    shutil.rmtree(tmp_path / "copy" / "c-0")
    shutil.rmtree(tmp_path / "copy" / ".logplat-topics")
    before = every_name(tmp_path)
    with pytest.raises(LogError, match=f"log dirs {d1} and {tmp_path / 'copy'} have the same id {read_dir_id(d1)}"):
        LogManager([d1, tmp_path / "copy"])
    assert every_name(tmp_path) == before


def test_two_copies_of_a_brokers_log_dir_get_ids_of_their_own(tmp_path):
    """Two snapshots of one broker's log dir carry one ``directory.id`` in ``meta.properties``:
    taking it over made both the same log dir to the engine, a create then recorded one of
    them, and every later open refused the pair. Each gets an id of its own; the broker's file
    is left as it was."""
    props = "#\ncluster.id=abc\ndirectory.id=MQHhtGhc9j1ncLM2pvl16w\nnode.id=1\nversion=1\n"
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "meta.properties").write_text(props)
    with LogManager([a, b]) as m:
        m.admin.create_topic("t", 4)
        assert set(m.metadata.topic("t").placed_over) == {read_dir_id(a), read_dir_id(b)}
    assert read_dir_id(a) != read_dir_id(b) and (b / "meta.properties").read_text() == props
    with LogManager([a, b]) as m:
        assert m.partitions("t") == [0, 1, 2, 3]


def test_any_path_the_system_takes_is_recorded_and_quoted_where_shown(tmp_path):
    """A log dir path with a tab (or a byte that is not UTF-8) was recorded in ``placed_over``,
    then refused when read back: every command on the topic failed, its records unreadable.
    Any path is recorded; a message quotes one that is not printable, on one line."""
    d1, odd = tmp_path / "d1", tmp_path / "d\tx\udcff"
    with LogManager([odd, d1]) as m:  # the odd one holds the metadata: d1's placement mark names it
        m.admin.create_topic("home", 2)
    with LogManager([d1]) as m:
        with pytest.raises(LogError, match=f"the metadata of topic home is in log dir {re.escape(ascii(str(odd)))}"):
            m.topic_config("home")
    with LogManager([d1, odd]) as m:
        m.admin.create_topic("t", 2)
        m.get_log("t", 1).append([ProducerRecord(b"k", b"kept", 1_000)], now=1_000)
    assert (odd / "t-1").is_dir()
    with LogManager([d1, odd]) as m:
        assert [r.value for b in m.get_log("t", 1).iter_batches() for r in decode_batch(b)] == [b"kept"]
    with LogManager([d1]) as m:
        with pytest.raises(LogError) as info:
            m.get_log("t", 1)
    assert "\n" not in str(info.value) and "\t" not in str(info.value) and ascii(str(odd)) in str(info.value)


def test_a_partition_moved_to_another_log_dir_is_recorded_there(tmp_path):
    """An operator moved a partition to a new log dir: given both, a produce wrote there, but
    the metadata still named only the first, so given it alone a produce made an empty copy
    (its offsets taken again) and every later command refused the pair. A writable open given
    both records the log dir the partition is in."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with LogManager([d1]) as m:
        m.admin.create_topic("t", 2)
        m.get_log("t", 1).append([ProducerRecord(b"k", b"a", 1_000)], now=1_000)
    d2.mkdir()
    (d1 / "t-1").rename(d2 / "t-1")
    with LogManager([d1, d2]) as m:
        assert read_dir_id(d2) in m.metadata.topic("t").placed_over
        m.get_log("t", 1).append([ProducerRecord(b"k", b"b", 2_000)], now=2_000)
    with LogManager([d1]) as m:
        with pytest.raises(LogError, match=f"log dirs not among those given .*{d2}"):
            m.get_log("t", 1)
    assert not (d1 / "t-1").exists()


def test_a_brokers_topic_given_metadata_records_the_log_dirs_holding_it(tmp_path):
    """A broker's topic got metadata from an alter with no log dirs recorded: given the log
    dir holding its metadata alone, a produce made an empty copy of a partition living in the
    other. The alter records the log dirs holding its partitions."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with LogManager([d1, d2]) as m:
        m.admin.create_topic("src", 2)
        m.get_log("src", 1).append([ProducerRecord(b"k", b"acked", 1_000)], now=1_000)
    for d in (d1, d2):  # as a broker's partitions: directories only, no metadata, no marks
        for p in (0, 1):
            if (d / f"src-{p}").is_dir():
                (d / f"src-{p}").rename(d / f"brk-{p}")
    shutil.rmtree(d1 / ".logplat-topics")
    shutil.rmtree(d2 / ".logplat-topics")
    with LogManager([d1, d2]) as m:
        m.admin.alter_topic("brk", {"retention.ms": "-1"})
        assert set(m.metadata.topic("brk").placed_over) == {read_dir_id(d1), read_dir_id(d2)}
    with LogManager([d1]) as m:
        with pytest.raises(LogError, match="log dirs not among those given"):
            m.get_log("brk", 1)
    assert not (d1 / "brk-1").exists()


def test_a_replaced_log_dir_is_named_as_replaced(tmp_path):
    """A log dir recreated at the same path has a new id: the refusal said that path was not
    given, though it was. It now says the log dir there has another id, and how to restore it."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with LogManager([d1, d2]) as m:
        m.admin.create_topic("t", 2)
    old = read_dir_id(d2)
    shutil.rmtree(d2)
    d2.mkdir()
    with LogManager([d1, d2]) as m:
        with pytest.raises(LogError, match=f"{d2} \\(id {old}; the log dir given at that path has no id: it was "
                                           f"replaced, or its {DIR_ID_FILE} lost"):
            m.get_log("t", 1)
    assert not (d1 / "t-1").exists() and not (d2 / "t-1").exists()


def test_alter_partitions_records_a_log_dir_before_it_makes_a_directory_there(tmp_path):
    """``alter --partitions`` recorded the log dirs at its commit point, after making the
    directories: killed in between, it left a partition (a gap below the count) in a log dir
    the metadata did not name, and a later run given the others made a second copy of it."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with LogManager([d1]) as m:
        m.admin.create_topic("t", 2)
    shutil.rmtree(d1 / "t-1")  # a gap, as a create killed part way leaves it
    d2.mkdir()
    proc = spawn(f"{d1},{d2}", "topic", "alter", "t", "--partitions", "3",
                 env=crash_env("topic-add-partitions-partway"))
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL and (d2 / "t-1").is_dir()
    with LogManager([d1]) as m:
        with pytest.raises(LogError, match=f"log dirs not among those given .*{d2}"):
            m.get_log("t", 1)
    assert not (d1 / "t-1").exists()


@pytest.mark.parametrize("content", ["", "not an id\n", "AAAAAAAAAAAAAAAAAAAAAA\n", "MQHhtGhc9j1ncLM2pvl16x"])
def test_a_bad_log_dir_id_file_refuses_the_open(tmp_path, content):
    """The id file is read as strictly as command-line input: an empty, garbled or reserved id
    (Kafka's UNASSIGNED), or one with spare bits set, is refused, naming the file, with nothing
    written; a symlink in its place too."""
    d1 = tmp_path / "d1"
    with LogManager([d1]) as m:
        m.admin.create_topic("c", 1)
    (d1 / DIR_ID_FILE).write_text(content)
    before = every_name(tmp_path)
    with pytest.raises(LogError, match=f"{d1 / DIR_ID_FILE} holds no log dir id"):
        LogManager([d1])
    assert every_name(tmp_path) == before
    (d1 / DIR_ID_FILE).unlink()
    (d1 / DIR_ID_FILE).symlink_to(tmp_path / "elsewhere")
    with pytest.raises(LogError, match="symbolic link"):
        LogManager([d1])


def test_a_placement_mark_that_is_not_a_file_refuses_the_delete_before_its_commit_point(tmp_path):
    """The delete removed the marks after its commit point: a mark that was a directory failed
    it there ("[Errno 21] Is a directory"), the topic half deleted, and every later create of
    the name failed the same way. The marks are read before the commit point now."""
    from storage_engine.logdir.topic_store import placed_path

    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with LogManager([d1, d2]) as m:
        m.admin.create_topic("a", 2)
    mark = placed_path(d2, "a")
    mark.unlink()
    mark.mkdir()
    before = every_name(tmp_path)
    with LogManager([d1, d2]) as m:
        with pytest.raises(LogError, match=f"{mark} is a directory, where a regular file belongs"):
            m.admin.delete_topic("a")
        assert m.metadata.topic("a") is not None and not m.metadata.topic("a").deleting
    assert every_name(tmp_path) == before
    mark.rmdir()
    with LogManager([d1, d2]) as m:
        m.admin.delete_topic("a")
        assert m.topics() == []


def test_a_manager_of_one_log_dir_given_every_topic_s_config_recovers_it(tmp_path):
    """What a Spark task does: it opens only its partitions' log dir, with the configs the driver
    resolved over every log dir. When that dir is unclean the task's open recovers every
    partition in it, of any topic, so it needs them all (``topic_configs()``): given only its
    own topic's, the open failed on the other topic placed there from the first log dir. Its
    partitions are recovered now (recovery's rules do not depend on a topic's settings), and
    the topic is still refused there for any use."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    with LogManager([d1, d2]) as m:
        for topic in ("c", "d"):
            m.admin.create_topic(topic, 2, {"cleanup.policy": "compact"})
    (d2 / ".kafka_cleanshutdown").unlink()
    with LogManager([d1, d2], read_only=True) as m:
        configs = m.topic_configs()
    assert sorted(configs) == ["c", "d"] and configs["c"].compact
    with LogManager([d2], topic_configs={"c": configs["c"]}) as m:
        with pytest.raises(LogError, match="the metadata of topic d is in log dir"):
            m.get_log("d", 1)
    (d2 / ".kafka_cleanshutdown").unlink()
    with LogManager([d2], topic_configs=configs) as m:
        assert m.get_log("c", 1).config.compact and m.get_log("d", 1).config.compact
    assert (d2 / ".kafka_cleanshutdown").exists()


def test_a_segment_index_size_below_one_time_index_entry_is_refused_for_new_settings_only(tmp_path):
    """segment.index.bytes 4..11 passes Kafka's validator, and then no segment can be made: a
    topic created so broke every writable command of its log dir. A create or an alter to such
    a value is refused (the broker's log.index.size.max.bytes too); a topic that already holds
    one (written by an older version) is refused by name, and can still be altered back and
    deleted."""
    root = tmp_path / "logs"
    with LogManager([root]) as m:
        with pytest.raises(LogError, match="segment.index.bytes.*at least 12"):
            m.admin.create_topic("y", 1, {"segment.index.bytes": "8"})
        m.admin.create_topic("t", 1)
        with pytest.raises(LogError, match="segment.index.bytes.*at least 12"):
            m.admin.alter_topic("t", {"segment.index.bytes": "11"})
        assert m.topics() == ["t"] and not (root / "y-0").exists()
    with LogManager([root], {"log.index.size.max.bytes": "4"}) as m:
        with pytest.raises(LogError, match="segment.index.bytes.*at least 12"):
            m.admin.create_topic("z", 1)
    meta = root / ".logplat-topics" / "t.json"
    meta.write_text(meta.read_text().replace('"configs": {}', '"configs": {"segment.index.bytes": "8"}'))
    with LogManager([root]) as m:
        with pytest.raises(LogError, match=f"the config of topic t in {meta} is refused: .*at least 12"):
            m.get_log("t", 0)  # named, not a bare "Invalid max index size: 8"
        m.admin.alter_topic("t", {}, ["segment.index.bytes"])
        assert m.topic_config("t").segment_index_bytes == 10485760
        m.admin.delete_topic("t")


def test_partitions_in_another_log_dir_are_marked_however_they_came_there(tmp_path):
    """Only a create marked the partitions it placed outside its metadata's log dir: a directory
    adopted by ``alter --partitions``, and a topic made before the marks existed, still read
    under the broker defaults from that log dir alone. An alter and any writable open given
    every log dir now mark them."""
    from storage_engine.logdir.topic_store import placed_path

    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b]) as m:
        m.admin.create_topic("t", 1, {"cleanup.policy": "compact"})
    assert (a / "t-0").is_dir()
    (b / "t-1").mkdir()  # a broker's partition copied in: a stray until adopted
    with LogManager([a, b]) as m:
        m.admin.add_partitions("t", 2)
    assert placed_path(b, "t").is_file()
    placed_path(b, "t").unlink()  # as a topic made by an older version
    with LogManager([a, b], read_only=True):
        assert not placed_path(b, "t").exists()  # a reader writes nothing
    with LogManager([a, b]):
        pass
    with LogManager([b]) as m:
        with pytest.raises(LogError, match=f"the metadata of topic t is in log dir {a}"):
            m.topic_config("t")


def test_a_produce_beside_a_topic_create_in_flight_waits_for_its_directory(tmp_path):
    """A create writes the metadata, then the partition directories one by one, under the
    topics lock. A produce in between found a partition listed without a directory and made
    one, in the less loaded log dir, while the create then made it in the other: "Duplicate
    log directories", and every later command refused the log dirs. The produce now waits for
    the create (here stopped half way, SIGSTOP) and opens the directory it made."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    run = [sys.executable, "-m", "storage_engine.tools.logctl", "--log-dirs", ",".join(map(str, dirs))]
    assert subprocess.run([*run, "topic", "create", "base", "--partitions", "1"], cwd=REPO).returncode == 0
    creator = subprocess.Popen([*run, "topic", "create", "c", "--partitions", "400"], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        while not any((d / "c-5").exists() for d in dirs) and creator.poll() is None:
            time.sleep(0.001)
        os.kill(creator.pid, signal.SIGSTOP)
        assert sum(1 for d in dirs for _ in d.glob("c-*")) < 399, "the create finished before it could be stopped"
        producer = subprocess.Popen([*run, "produce", "c", "--partition", "399"], cwd=REPO, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        producer.stdin.write(RECORD)
        producer.stdin.close()
        with pytest.raises(subprocess.TimeoutExpired):
            producer.wait(timeout=3)  # waiting for the create
    finally:
        os.kill(creator.pid, signal.SIGCONT)
    assert creator.wait(timeout=120) == 0, creator.stderr.read()
    assert producer.wait(timeout=120) == 0, producer.stderr.read()
    assert [d.name for d in dirs if (d / "c-399").exists()] in (["a"], ["b"])
    assert subprocess.run([*run, "verify"], cwd=REPO, capture_output=True).returncode == 0


def test_an_alter_that_cannot_mark_its_placement_commits_nothing(tmp_path):
    """``alter --partitions`` adopting a directory in another log dir marks there where the
    metadata is. The mark was written after the commit, so a log dir refusing it (here its
    metadata folder immutable, ``chattr +i``) failed a change already made: the count was 2, a
    retry said "already has 2 partitions". The mark is written before the commit point now,
    and a refusal leaves the topic as it was."""
    from storage_engine.logdir.topic_store import placed_path

    a, b = tmp_path / "a", tmp_path / "b"
    with LogManager([a, b]) as m:
        m.admin.create_topic("t", 1, {"cleanup.policy": "compact"})
    (b / "t-1").mkdir()
    folder = b / ".logplat-topics"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on this filesystem: the test needs an immutable directory")
    try:
        with LogManager([a, b]) as m:
            with pytest.raises(PermissionError):
                m.admin.add_partitions("t", 2)
            assert m.partitions("t") == [0]
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)
    with LogManager([a, b]) as m:
        assert m.metadata.topic("t").partitions == 1
        m.admin.add_partitions("t", 2)
        assert m.partitions("t") == [0, 1]
    assert placed_path(b, "t").is_file()


def test_the_deleted_files_sweep_leaves_a_topic_whose_delete_a_kill_left_unfinished(tmp_path):
    """Past its delete's commit point a topic is no topic to any reader; the sweeper, a reader,
    swept its files and reported them (the next writable open removes them with the topic)."""
    from dataclasses import replace

    from storage_engine.logdir.topic_store import read_metadata, write_metadata

    root = tmp_path / "logs"
    with LogManager([root]) as m:
        for topic in ("t", "u"):
            m.admin.create_topic(topic, 1, {"file.delete.delay.ms": "0"})
    for topic in ("t", "u"):
        (root / f"{topic}-0" / "00000000000000000000.log.deleted").write_bytes(b"x")
    write_metadata(replace(read_metadata(root, "t"), deleting=True), root)
    with LogManager([root], read_only=True) as m:
        assert sorted(m.retention.delete_expired_files(unreadable={})) == [("u", 0)]
    assert (root / "t-0" / "00000000000000000000.log.deleted").exists()


# ---------------------------------------------------------------------- a delete given some log dirs


def _over(monkeypatch, capsys, *dirs: Path):
    """``logctl`` in-process over the log dirs ``dirs``."""
    return lambda *args, stdin="": run_logctl(",".join(map(str, dirs)), monkeypatch, capsys, *args, stdin=stdin)


def test_a_topic_delete_not_given_every_log_dir_it_was_placed_over_is_refused(tmp_path, monkeypatch, capsys):
    """Given ``d1`` alone, a delete of a topic placed over ``d1,d2`` removed the metadata and
    ``d1``'s partitions and left ``d2``'s and its mark, which wedged every command over both.
    It is refused, as ``alter --partitions`` is, with nothing changed."""
    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    both, first = _over(monkeypatch, capsys, d1, d2), _over(monkeypatch, capsys, d1)
    assert both("topic", "create", "x", "--partitions", "2")[0] == 0
    assert (d2 / "x-1").is_dir()
    before = every_name(tmp_path)
    code, out, err = first("topic", "delete", "x")
    assert (code, out, err.count("\n")) == (1, "", 1)
    assert re.search(rf"topic x was placed over log dirs not among those given \({d1}\): {d2} \(id .*give every", err)
    assert every_name(tmp_path) == before
    assert both("topic", "delete", "x")[0] == 0 and not list(tmp_path.glob("d*/x-*"))


def test_an_orphan_blocks_nothing_verify_names_it_and_topic_delete_removes_it(tmp_path, monkeypatch, capsys):
    """A topic's marks and partitions left in a log dir whose metadata is gone from its home
    log dir, given too (what a delete given some of the log dirs left): no topic, so other
    topics' commands go on, named by ``verify``, refused by name, and removed by ``topic delete``."""
    from storage_engine.logdir.topic_store import metadata_path, placed_path

    d1, d2 = tmp_path / "d1", tmp_path / "d2"
    both = _over(monkeypatch, capsys, d1, d2)
    for topic in ("x", "y"):
        assert both("topic", "create", topic, "--partitions", "2", "--config", "cleanup.policy=compact")[0] == 0
    assert both("produce", "y", "--partition", "1", stdin=RECORD)[0] == 0
    metadata_path(d1, "x").unlink()  # as such a delete left it
    shutil.rmtree(d1 / "x-0")
    for args in (("topic", "list"), ("retention",), ("compact",), ("erasure-report",)):
        code, out, err = both(*args)
        assert code == 0 and err == "", (args, err)
    assert both("topic", "list")[1].split() == ["y"]
    code, out, _ = both("verify")
    assert code == 1 and "y-1: OK" in out
    assert f"Topic x does not exist: its metadata is gone from log dir {d1}, yet {d2 / 'x-1'}, " \
           f"{placed_path(d2, 'x')} are left of it" in out
    for args in (("verify", "--topic", "x"), ("consume", "x", "--partition", "1"),
                 ("topic", "create", "x", "--partitions", "1")):  # a create would adopt its directory
        code, out, err = both(*args)
        assert code == 1 and err.startswith("error: Topic x does not exist: its metadata is gone"), (args, err)
    assert both("topic", "delete", "x")[0] == 0
    assert not list(tmp_path.glob("d*/x-*")) and not placed_path(d2, "x").exists()
    assert both("verify")[0] == 0
    assert both("topic", "create", "x", "--partitions", "2")[0] == 0
