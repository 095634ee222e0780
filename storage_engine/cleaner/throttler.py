"""``log.cleaner.io.max.bytes.per.second`` (Kafka's ``Throttler``)."""

from __future__ import annotations

import time
from collections.abc import Callable


class Throttler:
    """``log.cleaner.io.max.bytes.per.second``: after each read or written chunk, if the rate over
    the last check interval (300 ms, as Kafka's) is above the target, sleep until it is not."""

    def __init__(
        self,
        bytes_per_second: float,
        *,
        check_interval_ms: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = bytes_per_second
        self.check_interval_s = check_interval_ms / 1000.0
        self.clock = clock
        self.sleep = sleep
        self._period_start = clock()
        self._observed = 0.0
        self.slept_s = 0.0

    def maybe_throttle(self, n_bytes: int) -> None:
        if self.rate == float("inf"):
            return
        self._observed += n_bytes
        now = self.clock()
        elapsed = now - self._period_start
        if elapsed < self.check_interval_s:
            return
        if self._observed / elapsed > self.rate:
            pause = self._observed / self.rate - elapsed
            if pause > 0:
                self.sleep(pause)
                self.slept_s += pause
        self._period_start = self.clock()
        self._observed = 0.0
