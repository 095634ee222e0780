"""Create and migrate the Dagster instance once, before any process that uses it starts.

A new SQLite instance is created by whichever process opens it first. When the webserver and
the daemon start together on a brand-new ``DAGSTER_HOME`` both create the tables and both stamp
alembic's version table, which then holds two rows; from then on every process fails with
"Version table 'alembic_version' has more than one head present", on every later start too.
So the main job, the end-to-end tests and ``scripts/ui.sh`` call :func:`prepare_instance` first:
under a file lock in ``DAGSTER_HOME`` it checks every SQLite database of the instance, repairs
what can be repaired without losing anything, creates (and migrates) the storage in this one
process, and only then are the webserver and daemon started.

What happens to a broken instance (several revisions in a version table, or tables without
one), decided by :func:`diagnose` (a pure reading of the files):

* when it holds no run, no event and no sensor or schedule state, its storage is moved aside to
  ``history.broken-<time>`` / ``schedules.broken-<time>`` and created afresh;
* when it holds any of those, nothing is changed and :class:`InstanceSetupError` says exactly
  what to do.

Command line: ``python -m platform_assets.tools.instance_setup [DAGSTER_HOME]`` (exit status 1 and one
line on stderr when the instance cannot be used).
"""

from __future__ import annotations

import fcntl
import io
import os
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path

from storage_engine.tools.usage import OneLineParser, UsageError

#: the platform's instance settings (SQLite storage, one run per topic, the daemons, run
#: monitoring and retries), written into a ``DAGSTER_HOME`` that has no ``dagster.yaml``
INSTANCE_YAML = Path(__file__).resolve().parents[2] / "dagster_home" / "dagster.yaml"
#: the folders a SQLite instance keeps its databases in (``storage: sqlite: base_dir``)
STORAGE_FOLDERS = ("history", "schedules")
LOCK_FILE = ".logplat-instance-setup.lock"
#: held by whatever runs the platform's servers on an instance, the main job or ``scripts/ui.sh``
#: (with ``flock``), for as long as they run: two daemons on one instance fight over its sensors
#: and schedules (Dagster warns "Another SENSOR daemon is still sending heartbeats"), two main
#: jobs replace each other's server output and count each other's runs
SERVERS_LOCK_FILE = ".logplat-servers.lock"
SERVERS_BUSY = ("the main job or scripts/ui.sh is already running on DAGSTER_HOME {home}: stop it first, or give "
                "this one a DAGSTER_HOME of its own")
_VERSION_TABLE = "alembic_version"
#: tables Dagster fills by itself when it opens or runs an instance; rows in any other table
#: (runs, events, sensor and schedule state, cursors, dynamic partitions, ...) are worth keeping
_BOOKKEEPING_TABLES = frozenset({_VERSION_TABLE, "secondary_indexes", "instance_info", "daemon_heartbeats"})


class InstanceSetupError(RuntimeError):
    """The instance under ``DAGSTER_HOME`` cannot be used as it is; the message says what to do."""


@dataclass(frozen=True)
class DatabaseState:
    """What one SQLite database of the instance holds, read without changing it."""

    path: Path
    revisions: tuple[str, ...]  # rows of the version table, in table order
    has_version_table: bool
    tables: tuple[str, ...]
    kept_rows: int  # rows in tables worth keeping
    missing: tuple[str, ...] = ()  # tables Dagster creates in this file that are not there

    @property
    def broken(self) -> bool:
        if not self.tables:
            return False  # an empty file: created and not yet initialised; the setup initialises it
        return not self.has_version_table or len(self.revisions) != 1 or bool(self.missing)

    def problem(self) -> str:
        if not self.has_version_table:
            return f"{self.path} has tables but no {_VERSION_TABLE}"
        if len(self.revisions) == 1:
            return f"{self.path} is stamped {self.revisions[0]} but lacks tables {', '.join(self.missing)}"
        return f"{self.path}: {_VERSION_TABLE} holds {len(self.revisions)} revisions ({', '.join(self.revisions)})"


@dataclass(frozen=True)
class Diagnosis:
    """The state of every database of an instance and what :func:`prepare_instance` will do."""

    databases: tuple[DatabaseState, ...] = field(default_factory=tuple)

    @property
    def broken(self) -> tuple[DatabaseState, ...]:
        return tuple(db for db in self.databases if db.broken)

    @property
    def kept_rows(self) -> int:
        return sum(db.kept_rows for db in self.databases)

    @property
    def action(self) -> str:
        """``ok``, ``reset`` (broken, nothing worth keeping) or ``refuse`` (broken, holding runs)."""
        if not self.broken:
            return "ok"
        return "reset" if self.kept_rows == 0 else "refuse"


def _read_database(path: Path) -> DatabaseState:
    uri = f"file:{path}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
        tables = tuple(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        revisions: tuple[str, ...] = ()
        if _VERSION_TABLE in tables:
            revisions = tuple(r[0] for r in conn.execute(f"SELECT version_num FROM {_VERSION_TABLE}"))
        kept = sum(conn.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables
                   if t not in _BOOKKEEPING_TABLES)
    missing = tuple(sorted(_expected_tables(path) - set(tables))) if tables else ()
    return DatabaseState(path, revisions, _VERSION_TABLE in tables, tables, kept, missing)


def _expected_tables(path: Path) -> frozenset[str]:
    """The tables Dagster's SQLite storage creates in this file: ``history/runs.db``,
    ``schedules/schedules.db``, or an event log shard (``history/runs/index.db``, one per run)."""
    from dagster._core.storage.event_log.schema import SqlEventLogStorageMetadata
    from dagster._core.storage.runs.schema import RunStorageSqlMetadata
    from dagster._core.storage.schedules.schema import ScheduleStorageSqlMetadata

    metadata = {("history", "runs.db"): RunStorageSqlMetadata,
                ("schedules", "schedules.db"): ScheduleStorageSqlMetadata}.get((path.parent.name, path.name),
                                                                                SqlEventLogStorageMetadata)
    return frozenset(metadata.tables)


def _database_files(dagster_home: Path) -> list[Path]:
    return sorted(p for folder in STORAGE_FOLDERS for p in (dagster_home / folder).rglob("*.db") if p.is_file())


def diagnose(dagster_home: Path) -> Diagnosis:
    """Read every SQLite database of the instance (nothing is changed)."""
    try:
        return Diagnosis(tuple(_read_database(p) for p in _database_files(dagster_home)))
    except sqlite3.DatabaseError as exc:
        raise InstanceSetupError(f"cannot read the Dagster storage under {dagster_home}: {exc}") from None


@contextmanager
def home_lock(dagster_home: Path, name: str, *, busy: str | None = None) -> Iterator[None]:
    """An exclusive ``flock`` on ``dagster_home/name`` for the block. With ``busy``, a lock
    another process holds is refused at once with that message instead of waited for.

    Raises :class:`InstanceSetupError` when the lock cannot be opened (a read-only folder, a
    symbolic link where the lock belongs) or is busy."""
    path = dagster_home / name
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise InstanceSetupError(f"cannot open the instance's lock {path}: {exc.strerror}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (fcntl.LOCK_NB if busy else 0))
        except BlockingIOError:
            raise InstanceSetupError(busy) from None
        yield
    finally:
        os.close(fd)


def _move_storage_aside(dagster_home: Path) -> list[Path]:
    stamp = time.strftime("%Y%m%dT%H%M%S")
    moved = []
    for folder in STORAGE_FOLDERS:
        src = dagster_home / folder
        if src.exists():
            dst = dagster_home / f"{folder}.broken-{stamp}"
            try:
                os.rename(src, dst)
            except OSError as exc:
                raise InstanceSetupError(f"cannot move the half-initialised {src} aside: {exc.strerror}") from None
            moved.append(dst)
    return moved


def _refusal(dagster_home: Path, diagnosis: Diagnosis) -> InstanceSetupError:
    problems = "; ".join(db.problem() for db in diagnosis.broken)
    folders = " ".join(str(dagster_home / f) for f in STORAGE_FOLDERS)
    return InstanceSetupError(
        f"the Dagster instance in {dagster_home} is half-initialised ({problems}) and holds "
        f"{diagnosis.kept_rows} rows of runs, events or sensor state, so it is not reset automatically: "
        f"stop every Dagster process using it, then either move its storage aside to start afresh "
        f"(mv each of {folders} to a backup name) or keep it by leaving one row in {_VERSION_TABLE} "
        f"(sqlite3 <db> \"DELETE FROM {_VERSION_TABLE} WHERE version_num != '<the newest revision>'\")"
    )


def _create_and_migrate(dagster_home: Path) -> None:
    from dagster import DagsterInstance  # Dagster's import is slow: only when the instance is touched

    # dagster.yaml names its storage folder through the environment (``base_dir: env: DAGSTER_HOME``)
    saved = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    try:
        instance = DagsterInstance.from_config(str(dagster_home))
        try:
            with redirect_stdout(io.StringIO()):  # its progress lines are not ours to print
                instance.upgrade(print_fn=lambda _msg: None)
        finally:
            instance.dispose()
    finally:
        if saved is None:
            del os.environ["DAGSTER_HOME"]
        else:
            os.environ["DAGSTER_HOME"] = saved


def _write_instance_yaml(dagster_home: Path) -> bool:
    """Give a ``DAGSTER_HOME`` without a ``dagster.yaml`` the platform's (``INSTANCE_YAML``):
    without one Dagster runs with its defaults, so runs of one topic could overlap and a dead
    run worker would hang its run. An existing file (or symlink) is the user's and is kept. The
    file appears whole or not at all (written aside, then renamed into place under the setup
    lock; a rename, not a hard link, which some mounted filesystems lack)."""
    target = dagster_home / "dagster.yaml"
    if target.exists() or target.is_symlink():
        return False
    aside = dagster_home / f".dagster.yaml.{os.getpid()}.tmp"
    try:
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(INSTANCE_YAML.read_bytes())
            f.flush()
            os.fsync(f.fileno())
        os.rename(aside, target)
    except OSError as exc:
        raise InstanceSetupError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        aside.unlink(missing_ok=True)
    return True


def prepare_instance(dagster_home: Path) -> list[str]:
    """Make ``dagster_home`` an instance every process can open, with the platform's settings
    when it has none of its own; returns what was done.

    Raises :class:`InstanceSetupError` when it is broken and holds data (nothing changed then).
    """
    dagster_home = Path(dagster_home).resolve()
    if not dagster_home.is_dir():
        raise InstanceSetupError(f"DAGSTER_HOME {dagster_home} is not a directory")
    done: list[str] = []
    with home_lock(dagster_home, LOCK_FILE):
        diagnosis = diagnose(dagster_home)
        action = diagnosis.action
        if action == "refuse":
            raise _refusal(dagster_home, diagnosis)
        if _write_instance_yaml(dagster_home):
            done.append(f"wrote the platform's instance settings to {dagster_home / 'dagster.yaml'}")
        if action == "reset":
            problems = "; ".join(db.problem() for db in diagnosis.broken)
            for moved in _move_storage_aside(dagster_home):
                done.append(f"moved the half-initialised storage ({problems}; no runs) aside to {moved}")
        try:
            _create_and_migrate(dagster_home)
        except Exception as exc:  # a storage error from Dagster or alembic, reported in one line
            raise InstanceSetupError(
                f"the Dagster instance in {dagster_home} could not be created or migrated: "
                f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            ) from None
    return done


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m platform_assets.tools.instance_setup",
                           description="Create, check and migrate the Dagster instance before it is used.")
    parser.add_argument("dagster_home", nargs="?", default=os.environ.get("DAGSTER_HOME"),
                        help="the instance folder (default: $DAGSTER_HOME)")
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not args.dagster_home:
        print("error: no DAGSTER_HOME: set it or pass the instance folder", file=sys.stderr)
        return 1
    try:
        for line in prepare_instance(Path(args.dagster_home)):
            print(line)
    except InstanceSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
