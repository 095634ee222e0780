"""Command-line usage shared by every entry point (``logctl``, the Spark Connect server, the
main job's tools): bad usage is one line on stderr and exit status 1, as every other bad input,
where argparse itself prints the usage and exits 2."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import NoReturn

from ..errors import LogError, shown_value


class UsageError(LogError):
    """Input the user typed (or piped) is malformed."""


class OneLineParser(argparse.ArgumentParser):
    """argparse whose usage errors are :class:`UsageError`, for the caller to print as one line."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


INTEGER = re.compile(r"-?[0-9]+")  # ASCII digits, as Kafka's tools parse them (logctl, the kafka-log source)
_MAX_DIGITS = 40  # more than any bound here has (a Java long: 19)


def bounded_int(what: str, low: int, high: int) -> Callable[[str], int]:
    """An argparse ``type`` for an integer within ``[low, high]``; the error names the range."""

    def parse(text: str) -> int:
        if not INTEGER.fullmatch(text):  # int() also took " 2", "+2", "1_0" and other scripts' digits
            raise argparse.ArgumentTypeError(f"{what} must be an integer, got {shown_value(text)}")
        if len(text) > _MAX_DIGITS:  # past every bound, and int() refuses 4300 digits with an unnamed error
            raise argparse.ArgumentTypeError(f"{what} must be between {low} and {high}, got a {len(text)}-digit number")
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{what} must be between {low} and {high}, got {value}")
        return value

    parse.__name__ = what
    return parse
