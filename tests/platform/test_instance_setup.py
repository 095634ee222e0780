"""The Dagster instance is created once, before the webserver and daemon start, and a
half-initialised one is repaired when it holds nothing, or refused with what to do.

The broken state is the one the start-up race leaves (two processes stamping alembic's version
table of a new SQLite instance), made for real on real instances: a second row in
``alembic_version`` of ``history/runs.db``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import dagster as dg
import pytest

from platform_assets.tools.devserver import DevServer, DevServerError, GraphQL
from platform_assets.tools.instance_setup import SERVERS_LOCK_FILE, InstanceSetupError, diagnose, main, prepare_instance
from spark_jobs.runtime.connect_server import free_port
from storage_engine.logdir.manager import LogManager
from tests.helpers.paths import REPO

#: an older Dagster schema revision: what a second, racing initialiser can stamp
OTHER_REVISION = "7e2f3204cf8e"


def new_home(root: Path) -> Path:
    home = root / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
    return home


def version_rows(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        return [r[0] for r in conn.execute("SELECT version_num FROM alembic_version")]


def add_version_row(db: Path, revision: str) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute("INSERT INTO alembic_version (version_num) VALUES (?)", (revision,))


def runs_in(home: Path) -> int:
    with dg.DagsterInstance.from_config(str(home)) as instance:
        return len(instance.get_runs())


@pytest.fixture(autouse=True)
def dagster_home_env(monkeypatch, tmp_path):
    """dagster.yaml finds its storage through $DAGSTER_HOME, as in every real start."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster_home"))


def tree_digest(home: Path) -> dict[str, str]:
    """Every file's bytes, but SQLite's -wal/-shm companions (a reader may create them) and our lock."""
    return {str(p.relative_to(home)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(home.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm", ".logplat-instance-setup.lock"))}


def test_a_new_instance_is_created_and_healthy(tmp_path):
    home = new_home(tmp_path)
    assert prepare_instance(home) == []
    assert diagnose(home).action == "ok" and diagnose(home).databases
    assert runs_in(home) == 0


def test_a_dagster_home_without_settings_gets_the_platforms(tmp_path):
    """A brand-new ``DAGSTER_HOME`` (the README's first run) had no dagster.yaml, so Dagster ran
    with its defaults: no limit of one run per topic, no run monitoring, no retries."""
    home = tmp_path / "brand-new"
    home.mkdir()
    assert prepare_instance(home) == [f"wrote the platform's instance settings to {home / 'dagster.yaml'}"]
    assert (home / "dagster.yaml").read_bytes() == (REPO / "dagster_home" / "dagster.yaml").read_bytes()
    assert diagnose(home).action == "ok" and (home / "history").is_dir()
    assert prepare_instance(home) == []
    own = tmp_path / "own"
    own.mkdir()
    (own / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    assert prepare_instance(own) == []
    assert (own / "dagster.yaml").read_text() == "telemetry:\n  enabled: false\n"
    assert sorted(p.name for p in home.iterdir() if p.name.endswith(".tmp")) == []


def test_a_broken_instance_that_holds_no_runs_is_set_aside_and_created_afresh(tmp_path):
    home = new_home(tmp_path)
    prepare_instance(home)
    add_version_row(home / "history" / "runs.db", OTHER_REVISION)
    with pytest.raises(Exception, match="more than one head"):
        runs_in(home)  # what every later start met before the fix

    actions = prepare_instance(home)

    assert len(actions) == 2 and all("moved the half-initialised storage" in a for a in actions)
    assert sorted(p.name.split(".broken-")[0] for p in home.glob("*.broken-*")) == ["history", "schedules"]
    assert diagnose(home).action == "ok"
    assert runs_in(home) == 0


def test_a_stamped_database_missing_tables_is_broken_and_set_aside_when_empty(tmp_path):
    home = new_home(tmp_path)
    prepare_instance(home)
    with closing(sqlite3.connect(home / "schedules" / "schedules.db")) as conn, conn:
        conn.execute("DROP TABLE jobs")  # stamped at head, a table gone: Dagster does not recreate it
    assert diagnose(home).action == "reset"

    actions = prepare_instance(home)

    assert "lacks tables jobs" in actions[0]
    assert diagnose(home).action == "ok"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.all_instigator_state() == []


def test_a_broken_instance_with_runs_is_refused_with_what_to_do_and_left_unchanged(tmp_path, capsys):
    home = new_home(tmp_path)
    prepare_instance(home)

    @dg.asset
    def one() -> int:
        return 1

    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert dg.materialize([one], instance=instance).success
    add_version_row(home / "history" / "runs.db", OTHER_REVISION)
    before = tree_digest(home)

    with pytest.raises(InstanceSetupError, match="holds .* rows of runs") as exc:
        prepare_instance(home)
    assert "move its storage aside" in str(exc.value) and "alembic_version" in str(exc.value)
    capsys.readouterr()
    assert main([str(home)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert tree_digest(home) == before


def test_initialisers_racing_on_a_new_instance_leave_it_healthy(tmp_path):
    """Six processes prepare one brand-new instance at the same moment (the race, for real)."""
    home = new_home(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "platform_assets.tools.instance_setup", str(home)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert all(rc == 0 for rc, _ in results), results
    assert diagnose(home).action == "ok"
    assert all(len(version_rows(db.path)) == 1 for db in diagnose(home).databases)
    assert runs_in(home) == 0


@pytest.mark.slow
def test_the_webserver_and_daemon_start_on_five_brand_new_instances_in_a_row(tmp_path):
    """What `bash scripts/main.sh` does on a fresh clone, five times: every start loads the code
    location and leaves a healthy instance."""
    for attempt in range(5):
        (tmp_path / f"run{attempt}").mkdir()
        home = new_home(tmp_path / f"run{attempt}")
        env = {"LOGPLAT_LOG_DIRS": str(tmp_path / f"run{attempt}" / "logs"), "LOGPLAT_AUTOMATION": "stopped"}
        with DevServer(home, REPO / "workspace.yaml", tmp_path / f"run{attempt}" / "server-logs", env) as server:
            assert server.client().location_errors() == ["ok"]
            assert server.client().daemons_healthy()  # start() waited for the daemon's heartbeat
        assert diagnose(home).action == "ok", attempt


@pytest.mark.parametrize("module, args, error", [
    ("platform_assets.tools.instance_setup", ["a", "b"], "unrecognized arguments: b"),
    ("platform_assets.tools.demo", ["--scale", "abc"], "argument --scale: invalid float value: 'abc'"),
])
def test_bad_usage_of_the_tools_is_one_line(tmp_path, module, args, error):
    proc = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: python -m {module}: {error}"]
    assert list(tmp_path.iterdir()) == []


def test_a_symbolic_link_at_the_lock_is_refused_in_one_line(tmp_path, capsys):
    home = new_home(tmp_path)
    outside = tmp_path / "outside"
    outside.write_text("not ours")
    (home / ".logplat-instance-setup.lock").symlink_to(outside)
    assert main([str(home)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: cannot open the instance's lock {home / '.logplat-instance-setup.lock'}: Too many levels of "
        "symbolic links"]
    assert outside.read_text() == "not ours" and sorted(p.name for p in home.iterdir()) == [
        ".logplat-instance-setup.lock", "dagster.yaml"]


@pytest.mark.parametrize("env, error", [
    ({"LOGPLAT_AUTOMATION": "sometimes"}, "LOGPLAT_AUTOMATION='sometimes': expected one of running, stopped"),
    ({"LOGPLAT_SPARK_MASTER": "bogus"}, "LOGPLAT_SPARK_MASTER=bogus: not a Spark master: 'bogus'"),
    ({"LOGPLAT_SPARK_MASTER": "k8s://x.invalid"}, "LOGPLAT_SPARK_MASTER=k8s://x.invalid: no Kubernetes API server "
                                                  "answers at k8s://x.invalid"),
    ({"LOGPLAT_SPARK_MASTER": "local-cluster[2,1,512]"}, "LOGPLAT_SPARK_MASTER=local-cluster[2,1,512]: not a Spark "
                                                         "master"),
    ({"LOGPLAT_SPARK_LOG_LEVEL": "bogus"}, "LOGPLAT_SPARK_LOG_LEVEL=bogus: not a Spark log level"),
    ({"LOGPLAT_LOG_DIRS": "{tmp}/nope/logs"}, "LOGPLAT_LOG_DIRS: {tmp}/nope/logs is not a directory"),
    ({"LOGPLAT_LOG_DIRS": "{tmp}/logs/orders-0"}, "LOGPLAT_LOG_DIRS='{tmp}/logs/orders-0': {tmp}/logs/orders-0 holds "
                                                  "segment files (00000000000000000000.log): it is a partition "
                                                  "directory, not a log dir"),
    ({"LOGPLAT_LOG_DIRS": "{tmp}/logs,{tmp}/logs/"}, "LOGPLAT_LOG_DIRS='{tmp}/logs,{tmp}/logs/': duplicate entries "
                                                     "in log.dirs"),
], ids=["automation", "master", "k8s-unanswered", "local-cluster-memory", "spark-log-level", "log-dirs",
        "partition-dir", "dir-twice"])
def test_the_ui_refuses_a_bad_environment_in_one_line_before_it_starts(tmp_path, env, error):
    """ui.sh started the servers whatever the environment held: a LOGPLAT_AUTOMATION typo became
    a code location that failed to load, a bad master failed every run, a mistyped log dir
    showed a platform without topics and made the daemon drop their schedules' state. Each
    value is refused by the rule the engine or Spark applies to it, naming the variable and
    the value."""
    (tmp_path / "logs").mkdir()
    with LogManager([tmp_path / "logs"]) as manager:
        manager.admin.create_topic("orders", 1)
    env = {k: v.replace("{tmp}", str(tmp_path)) for k, v in env.items()}
    proc = subprocess.run([sys.executable, "-m", "platform_assets.tools.preflight"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO),
                                                          "LOGPLAT_LOG_DIRS": str(tmp_path / "logs"), **env})
    assert proc.returncode == 1 and proc.stdout == ""
    line, = proc.stderr.splitlines()
    assert line.startswith(f"error: {error.replace('{tmp}', str(tmp_path))}"), line
    ok = subprocess.run([sys.executable, "-m", "platform_assets.tools.preflight"], capture_output=True, text=True,
                        cwd=tmp_path, timeout=120, env={**{k: v for k, v in os.environ.items() if not k.startswith("LOGPLAT_")},
                                                        "PYTHONPATH": str(REPO), "LOGPLAT_LOG_DIRS": str(tmp_path / "logs")})
    assert (ok.returncode, ok.stderr) == (0, "")


def test_the_main_job_refuses_a_spark_master_it_cannot_use_before_anything_is_written(tmp_path):
    """LOGPLAT_SPARK_MASTER=bogus wrote the workload, started the servers and waited twenty
    minutes for runs that all failed."""
    (tmp_path / "home").mkdir()
    proc = subprocess.run([sys.executable, "-m", "platform_assets.tools.demo"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={**_without_log_dirs(), "PYTHONPATH": str(REPO),
                                                          "LOGPLAT_SPARK_MASTER": "bogus",
                                                          "DAGSTER_HOME": str(tmp_path / "home")})
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines()[0].startswith("error: LOGPLAT_SPARK_MASTER=bogus: not a Spark master: 'bogus'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"] and list((tmp_path / "home").iterdir()) == []


def _without_log_dirs() -> dict[str, str]:
    """The environment with LOGPLAT_LOG_DIRS unset: the main job's default, ./data/logs."""
    return {k: v for k, v in os.environ.items() if k != "LOGPLAT_LOG_DIRS"}


def test_the_main_job_refuses_log_dirs_it_was_given_that_are_not_there(tmp_path):
    """A typo in LOGPLAT_LOG_DIRS started a new data set there, which a UI pointed at the real
    log dirs never showed; only the default, ./data/logs, is made on first use."""
    (tmp_path / "home").mkdir()
    proc = subprocess.run([sys.executable, "-m", "platform_assets.tools.demo"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO),
                                                          "LOGPLAT_LOG_DIRS": str(tmp_path / "typo" / "logs"),
                                                          "DAGSTER_HOME": str(tmp_path / "home")})
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines()[0].startswith(f"error: LOGPLAT_LOG_DIRS: {tmp_path / 'typo' / 'logs'} is not a "
                                                  "directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home"] and list((tmp_path / "home").iterdir()) == []


@pytest.mark.parametrize("command", [[sys.executable, "-m", "platform_assets.tools.demo"],
                                     ["bash", str(REPO / "scripts" / "ui.sh")]], ids=["main-job", "ui.sh"])
def test_a_second_platform_on_one_instance_is_refused_before_anything_is_written(tmp_path, command):
    """A main job or ui.sh next to another on one DAGSTER_HOME started a second daemon (Dagster:
    "Another SENSOR daemon is still sending heartbeats"), a second Spark server and, for two
    main jobs, replaced each other's server output and counted each other's runs."""
    home = new_home(tmp_path)  # not yet prepared: the second one must not prepare (or reset) a running instance
    before = sorted(p.name for p in home.iterdir())
    fd = os.open(home / SERVERS_LOCK_FILE, os.O_RDWR | os.O_CREAT)  # a running main job or ui.sh holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=120,
                              env={**_without_log_dirs(), "PYTHONPATH": str(REPO), "DAGSTER_HOME": str(home)})
    finally:
        os.close(fd)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [f"error: the main job or scripts/ui.sh is already running on DAGSTER_HOME "
                                        f"{home}: stop it first, or give this one a DAGSTER_HOME of its own"]
    assert not (tmp_path / "data").exists() and sorted(p.name for p in home.iterdir()) == sorted(
        before + [SERVERS_LOCK_FILE])


def test_the_main_job_says_in_one_line_what_it_cannot_use(tmp_path):
    """No log directory in LOGPLAT_LOG_DIRS: an error line, nothing created; a webserver that
    stopped answering is an error the job reports, not a traceback."""
    proc = subprocess.run([sys.executable, "-m", "platform_assets.tools.demo"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO),
                                                          "LOGPLAT_LOG_DIRS": " , ",
                                                          "DAGSTER_HOME": str(tmp_path / "home")})
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["error: LOGPLAT_LOG_DIRS=' , ': no log directory in ' , '"]
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(DevServerError, match=r"^GraphQL request to http://127.0.0.1:\d+ failed: URLError: "):
        GraphQL(f"http://127.0.0.1:{free_port()}").query("{ version }")
