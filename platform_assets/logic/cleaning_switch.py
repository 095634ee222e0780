"""The one switch that pauses cleaning: whether the run sensors and every sweep may request runs.

It lives in the Dagster instance (its key-value storage), not in the code location, so a pause
outlives reloads and restarts, and a topic created later (its sweep appears on the next reload)
honours it without anything to set: every evaluation reads the switch. Without a value in the
instance, ``LOGPLAT_CLEANING`` (``running`` or ``paused``) gives the default, as
``LOGPLAT_AUTOMATION`` gives the sensors' and schedules' default status.

``log_state_sensor`` and ``deleted_files_sensor`` do not pause: the first only observes, and the
second finishes deletions that committed runs scheduled (Kafka's ``file.delete.delay.ms``, which
its scheduler honours whether or not the cleaner runs); pausing it would only keep the disk full.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .units import iso_time

CLEANING_STATES = ("running", "paused")
SWITCH_KEY = "logplat/cleaning_switch"


class SwitchValueError(ValueError):
    """The stored switch is not one this code wrote."""


@dataclass(frozen=True)
class CleaningSwitch:
    paused: bool
    reason: str = ""
    at_ms: int | None = None  # when it was set; None for the environment's default

    def skip_reason(self) -> str:
        """What every tick that skips says."""
        why = (f"at {iso_time(self.at_ms)}: {self.reason}" if self.at_ms is not None
               else "by the code location's environment, LOGPLAT_CLEANING=paused")
        return f"cleaning paused {why} (launch resume_cleaning to resume)"

    def dump(self) -> str:
        return json.dumps({"paused": self.paused, "reason": self.reason, "at_ms": self.at_ms})

    @classmethod
    def parse(cls, text: str) -> CleaningSwitch:
        try:
            data = json.loads(text)
            return cls(bool(data["paused"]), str(data["reason"]), None if data["at_ms"] is None else int(data["at_ms"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise SwitchValueError(f"instance key {SWITCH_KEY} holds {text[:80]!r}, not a cleaning switch: "
                                   "launch pause_cleaning or resume_cleaning to set it again") from exc


def default_switch(cleaning: str) -> CleaningSwitch:
    """The switch when the instance holds none: ``LOGPLAT_CLEANING``."""
    return CleaningSwitch(paused=cleaning == "paused")
