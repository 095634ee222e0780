"""The argument types and options several ``logctl`` commands share, and how keys and values
are written on the command line and in JSON lines (``--encoding``)."""

from __future__ import annotations

import argparse
import base64
from collections.abc import Callable, Sequence

from ...config.values import INT_MAX, LONG_MAX, MAX_TIMESTAMP_MS
from ...files.naming import MAX_PARTITION
from ..usage import UsageError, bounded_int

CLOCK = bounded_int("a time in ms since the epoch", 0, MAX_TIMESTAMP_MS)
PARTITION = bounded_int("a partition number", 0, MAX_PARTITION)
OFFSET = bounded_int("an offset", 0, LONG_MAX)
COUNT = bounded_int("a count", 1, INT_MAX)
VERSION = bounded_int("a remote version number", 1, LONG_MAX)
ENCODINGS = ("utf8", "base64")


def add_json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def add_encoding(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--encoding", default="utf8", choices=ENCODINGS, help=help_text)


def add_as_of_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--as-of-version", type=VERSION, metavar="N",
                        help="read the remote tier as version N holds it (while N is retained), not the latest "
                             "and not the local log")


def add_clock(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("--now-ms", type=CLOCK, default=None, help=help_text)


def decoder(encoding: str) -> Callable[[str | None, str], bytes | None]:
    """Bytes of a key or value written in ``encoding``; ``what`` names it in the error."""

    def decode(text: str | None, what: str) -> bytes | None:
        if text is None:
            return None
        if not isinstance(text, str):
            raise UsageError(f"{what} must be a string or null, got {type(text).__name__}")
        if encoding == "base64":
            try:
                return base64.b64decode(text, validate=True)
            except ValueError as exc:
                raise UsageError(f"{what} is not valid base64: {exc}") from exc
        return utf8(text, what)

    return decode


def utf8(text: str, what: str) -> bytes:
    """UTF-8 bytes of ``text``; JSON can carry lone surrogates (``"\\ud800"``) that UTF-8 cannot."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UsageError(f"{what} is not valid Unicode: {exc.reason} at character {exc.start}") from None


def encoder(encoding: str) -> Callable[[bytes | None], str | None]:
    """A key or value written in ``encoding`` for output (undecodable UTF-8 replaced)."""

    def encode(data: bytes | None) -> str | None:
        if data is None:
            return None
        if encoding == "base64":
            return base64.b64encode(data).decode("ascii")
        return data.decode("utf-8", errors="replace")

    return encode


def config_pairs(pairs: Sequence[str] | None, deleted: Sequence[str] = ()) -> dict[str, str]:
    """``--config KEY=VALUE`` pairs; a key given twice, or also given to ``--delete-config``, is
    a usage error rather than a silent "last one wins". The value is passed on as typed: the
    config's own parsing trims it as ``ConfigDef`` does, or refuses what trimming would change
    (a header name)."""
    out: dict[str, str] = {}
    for pair in pairs or ():
        if "=" not in pair:
            raise UsageError(f"--config expects KEY=VALUE, got {pair!r}")
        key, value = pair.split("=", 1)
        key = key.strip()
        if key in out:
            raise UsageError(f"--config {key} is given twice ({out[key]!r} and {value!r}): give it once")
        if key in deleted:
            raise UsageError(f"{key} is given to both --config and --delete-config: give it to one")
        out[key] = value
    return out
