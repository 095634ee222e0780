"""The record core's switch: the compiled core or the pure-Python reference.

The engine's hot paths (decoding batches to records and to Arrow, encoding, the cleaner's key
map and keep/drop walk) exist twice: the readable pure-Python code of ``storage_engine.record``
and ``storage_engine.cleaner`` is the *reference*, and ``storage_engine.native._core``, built
from ``native/`` (Rust, PyO3) by ``pip install``, is the *compiled core*, with the same results
(the tests run the suite under both and compare them record by record and byte by byte). This
module picks one, as aiokafka's ``record`` package picks its C or Python codec:

* ``LOGPLAT_CORE`` = ``auto`` (the default: compiled when it is built, the reference otherwise,
  saying why), ``compiled`` (an error when it is not built: what CI sets) or ``reference``;
* :func:`use` switches at run time (the tests' fixture);
* :func:`status` says which is in use and why (``logctl core``, the Dagster materializations).

Callers of the hot paths ask :func:`compiled` for the core module (None: run the reference).
Bytes the compiled core rejects are re-read by the reference, whose exception is the one
raised (:func:`reference_error`), so every damaged input gives the same error class and
message under both.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import stat
import sys
import tempfile
import zipfile
import zipimport
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..errors import LogError

__all__ = [
    "ENV_VAR",
    "ABI",
    "CoreStatus",
    "CoreUnavailableError",
    "CoreDivergenceError",
    "compiled",
    "status",
    "use",
    "reference_error",
    "REJECTIONS",
    "usable_core_file",
]

#: The environment variable that chooses the implementation.
ENV_VAR = "LOGPLAT_CORE"
#: The interface version this Python code expects of ``_core`` (its ``ABI``).
ABI = 1
CHOICES = ("auto", "compiled", "reference")
_CRATE = Path(__file__).resolve().parents[2] / "native"  # the Rust crate, in a checkout
#: What ``native/build.rs`` hashes besides ``src/*.rs`` (the same list, in the same order).
_BUILD_FILES = ("Cargo.toml", "Cargo.lock", "build.rs")


class CoreUnavailableError(LogError):
    """``LOGPLAT_CORE=compiled`` (or ``use("compiled")``) where the compiled core is not built,
    is stale, or the value names no implementation."""


class CoreDivergenceError(LogError):
    """The compiled core rejected bytes the reference accepts: a bug in the core (the fuzzers
    look for exactly this), reported rather than hidden."""


@dataclass(frozen=True)
class CoreStatus:
    """Which implementation runs (``compiled`` or ``reference``), what was asked for, and why
    the reference runs when it does."""

    name: str
    requested: str
    reason: str = ""

    def describe(self) -> str:
        if self.name == "compiled":
            return "compiled (Rust, storage_engine.native._core)"
        if self.name == "unusable":
            return f"unusable ({self.reason})"
        return f"reference (pure Python: {self.reason})" if self.reason else "reference (pure Python)"


def _source_hash(crate: Path) -> str | None:
    """FNV-1a 64 over the crate's build inputs and ``src/*.rs`` as ``native/build.rs`` computes
    it; None outside a checkout (an installed wheel has no sources to compare)."""
    try:
        sources = sorted(f"src/{p.name}" for p in (crate / "src").iterdir() if p.suffix == ".rs")
        h = 0xCBF29CE484222325
        for name in (*_BUILD_FILES, *sources):
            for part in (name.encode(), b"\0", (crate / name).read_bytes(), b"\0"):
                for byte in part:
                    h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        return f"{h:016x}"
    except OSError:
        return None


class _NotLoaded(Exception):
    """Why the core inside the engine zip was not loaded (the reference then runs)."""


def _from_engine_zip() -> ModuleType | None:
    """The core inside the engine zip Spark ships to workers without our environment
    (``spark_jobs.runtime.session.engine_zip``), None when this package was not imported from
    one or the zip holds no core.

    Python cannot import an extension from a zip, so its bytes are written once per content
    (named by their digest) beside the zip, in the folder Spark keeps the session's files in
    (removed with the session), and loaded from there; only from a folder of this user that
    others cannot write, and an existing file only when it is a regular file with the same digest.
    """
    loader = __spec__.loader if __spec__ is not None else None
    if not isinstance(loader, zipimport.zipimporter) or loader.archive is None:
        return None
    inner = os.path.relpath(os.path.dirname(__file__), loader.archive).replace(os.sep, "/")
    try:
        with zipfile.ZipFile(loader.archive) as zf:
            names = [n for n in zf.namelist() if n.startswith(f"{inner}/_core.") and n.endswith(".so")]
            if not names:
                return None
            if len(names) > 1:
                raise _NotLoaded(f"the engine zip holds {len(names)} cores")
            data = zf.read(names[0])
        digest = hashlib.sha256(data).hexdigest()
        folder = Path(loader.archive).parent
        info = folder.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o022:
            raise _NotLoaded(f"its folder {folder} is not this user's alone (code others can write is never loaded)")
        target = folder / f"_core-{digest[:32]}.so"
        try:
            existing = target.lstat()
            fresh = not stat.S_ISREG(existing.st_mode) or hashlib.sha256(target.read_bytes()).hexdigest() != digest
        except FileNotFoundError:
            fresh = True
        if fresh:
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".so.tmp")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, target)
        name = f"{__name__}._core"
        spec = importlib.util.spec_from_file_location(name, target)
        if spec is None or spec.loader is None:
            raise _NotLoaded(f"{target} is not an extension module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except (OSError, ImportError, zipfile.BadZipFile) as exc:
        raise _NotLoaded(f"{type(exc).__name__}: {exc}") from None
    sys.modules[name] = module
    return module


def _not_built(exc: ImportError) -> str:
    """Why there is no core: no extension file at all (cargo was missing at install, or its build
    failed: pip said why), or one that does not load (its own error)."""
    if isinstance(exc, ModuleNotFoundError) or not any(Path(__file__).parent.glob("_core.*.so")):
        return ("compiled core is not built (no _core extension in storage_engine/native: the install had no "
                "cargo, or its Rust build failed); install Rust (rustup) and rerun the install")
    return f"compiled core does not load ({exc}); rerun the install to rebuild it"


def _load() -> tuple[ModuleType | None, str]:
    """The compiled module, or None and why it cannot be used."""
    try:
        from . import _core  # type: ignore[attr-defined]
    except ImportError as exc:
        try:
            shipped = _from_engine_zip()
        except _NotLoaded as why:
            return None, f"the compiled core shipped in the engine zip was not loaded ({why})"
        if shipped is None:
            return None, _not_built(exc)
        _core = shipped
    if getattr(_core, "ABI", None) != ABI:
        return None, f"compiled core has interface {getattr(_core, 'ABI', None)}, this code expects {ABI}: rebuild it"
    expected = _source_hash(_CRATE) if _CRATE.is_dir() else None
    if expected is not None and expected != _core.SOURCE_HASH:
        return None, "compiled core is stale (native/ changed since it was built): rerun the install"
    return _core, ""


_MODULE, _WHY = _load()
_active: ModuleType | None = None
_status = CoreStatus("reference", "auto", "not chosen yet")
_failure: CoreUnavailableError | None = None  # an unusable LOGPLAT_CORE, raised by the first hot path

#: What the compiled core raises for bytes it does not accept: its ``CorruptBatch`` (a
#: ValueError) and, for a bug that made it panic, PyO3's ``PanicException`` (a BaseException).
REJECTIONS: tuple[type[BaseException], ...] = (
    (_MODULE.CorruptBatch, _MODULE.PanicException) if _MODULE is not None else (ValueError,))


def use(kind: str | None = None) -> CoreStatus:
    """Choose the implementation: ``auto``, ``compiled`` or ``reference`` (default: the
    ``LOGPLAT_CORE`` environment variable, else ``auto``). Raises :class:`CoreUnavailableError`
    for ``compiled`` when it cannot be used, or for an unknown name."""
    global _active, _status, _failure
    requested = (os.environ.get(ENV_VAR) or "auto") if kind is None else kind
    requested = requested.strip().lower()
    if requested not in CHOICES:
        raise CoreUnavailableError(f"{ENV_VAR} must be one of {', '.join(CHOICES)}, not {requested!r}")
    if requested == "compiled" and _MODULE is None:
        raise CoreUnavailableError(f"{ENV_VAR}=compiled, but the {_WHY}")
    _failure = None
    if requested == "reference" or _MODULE is None:
        _active = None
        _status = CoreStatus("reference", requested, "chosen" if requested == "reference" else _WHY)
    else:
        _active = _MODULE
        _status = CoreStatus("compiled", requested)
    return _status


def usable_core_file() -> Path | None:
    """The file of the compiled core this process can use (loaded, of this interface, not
    stale), whichever core is chosen; None when there is none. What Spark ships to its workers."""
    return Path(_MODULE.__file__) if _MODULE is not None and _MODULE.__file__ else None


def status() -> CoreStatus:
    """The implementation in use."""
    return _status


def compiled() -> ModuleType | None:
    """The compiled core module when it is in use, else None (run the reference). Raises the
    :class:`CoreUnavailableError` of an unusable ``LOGPLAT_CORE`` found at import."""
    if _failure is not None:
        raise _failure
    return _active


def reference_error(run_reference, what: str) -> BaseException:
    """The exception for bytes the compiled core rejected: the reference's own (call
    ``run_reference()``, which must raise), or :class:`CoreDivergenceError` if it accepts them."""
    try:
        run_reference()
    except LogError as exc:
        return exc
    return CoreDivergenceError(f"the compiled core rejected {what} that the reference reads: set {ENV_VAR}=reference "
                               "and report it")


try:
    use()
except CoreUnavailableError as _exc:
    # An import cannot report it to the user: the first hot path raises it (``compiled``), and
    # ``logctl core`` names it.
    _failure = _exc
    _status = CoreStatus("unusable", (os.environ.get(ENV_VAR) or "auto"), str(_exc))
