"""Absolute-time scheduling of the setpoint stream, and the statistics of its timing.

Deadlines are ``t0 + k · period`` on the monotonic nanosecond clock, never "previous + period",
so the stream cannot drift. The scheduler sleeps until shortly before a deadline (the OS wakes a
sleeper a few tens of µs late) and spins the rest of the way. A send later than
``miss_threshold_ns`` after its deadline is a *deadline miss*; when the host falls more than one
period behind, the stale slots are skipped (counted as misses) rather than sent in a burst.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass

import numpy as np

SPIN_NS = 300_000  # wake this long before a deadline and spin the rest (ns)
REALTIME_PRIORITY = 10  # SCHED_FIFO priority of the streaming thread, when the OS allows it


@contextlib.contextmanager
def realtime_priority(pid: int = 0, priority: int = REALTIME_PRIORITY) -> Iterator[bool]:
    """Run the calling thread (or process ``pid``) under SCHED_FIFO while in the block.

    Yields True when the OS granted it (root or CAP_SYS_NICE on Linux), False otherwise: on a
    shared, loaded machine this is the difference between a p99 period error of a few µs and
    of several ms (see bench/bench_streaming.py).
    """
    try:
        previous = os.sched_getscheduler(pid), os.sched_getparam(pid)
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(priority))
    except (AttributeError, OSError):
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            os.sched_setscheduler(pid, previous[0], previous[1])


@dataclass(frozen=True)
class TimingStats:
    """Timing of a stream: period error |Δsend − period| and lateness send − deadline (ms)."""

    sends: int
    period_ms: float
    period_error_p50_ms: float
    period_error_p99_ms: float
    period_error_max_ms: float
    lateness_p50_ms: float
    lateness_p99_ms: float
    lateness_max_ms: float
    deadline_misses: int
    skipped: int

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


def timing_stats(
    send_ns: np.ndarray, deadline_ns: np.ndarray, period_ns: int, miss_threshold_ns: int,
    skipped: int = 0,
) -> TimingStats:
    """Statistics of actual send times against their deadlines (both in ns, same clock).

    The period error is taken between consecutive sends of consecutive slots only (a skipped
    slot is not a period).
    """
    send_ns = np.asarray(send_ns, dtype=np.int64)
    deadline_ns = np.asarray(deadline_ns, dtype=np.int64)
    lateness = (send_ns - deadline_ns) * 1e-6
    consecutive = np.diff(deadline_ns) == period_ns
    period_error = np.abs(np.diff(send_ns)[consecutive] - period_ns) * 1e-6
    misses = int(np.count_nonzero(send_ns - deadline_ns > miss_threshold_ns)) + skipped

    def pct(values: np.ndarray, q: float) -> float:
        return float(np.percentile(values, q)) if values.size else 0.0

    return TimingStats(
        sends=int(send_ns.size),
        period_ms=period_ns * 1e-6,
        period_error_p50_ms=pct(period_error, 50),
        period_error_p99_ms=pct(period_error, 99),
        period_error_max_ms=float(period_error.max()) if period_error.size else 0.0,
        lateness_p50_ms=pct(lateness, 50),
        lateness_p99_ms=pct(lateness, 99),
        lateness_max_ms=float(lateness.max()) if lateness.size else 0.0,
        deadline_misses=misses,
        skipped=skipped,
    )


class Scheduler:
    """Hands out slots ``k`` at absolute deadlines ``t0 + k · period_ns``.

    ``clock`` (ns) and ``sleep`` (s) are injectable so that the arithmetic can be tested without
    real time; by default they are ``time.perf_counter_ns`` and ``time.sleep``.
    """

    def __init__(
        self,
        period_ns: int,
        miss_threshold_ns: int | None = None,
        spin_ns: int = SPIN_NS,
        clock: Callable[[], int] = time.perf_counter_ns,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.period_ns = int(period_ns)
        self.miss_threshold_ns = int(miss_threshold_ns if miss_threshold_ns is not None
                                     else period_ns)
        self.spin_ns = spin_ns
        self._clock = clock
        self._sleep = sleep
        self.t0_ns = clock()
        self.next_k = 0
        self.skipped = 0
        self.late = 0
        self.send_ns: list[int] = []
        self.deadline_ns: list[int] = []

    def deadline(self, k: int) -> int:
        """Absolute deadline of slot ``k`` (ns on the scheduler's clock)."""
        return self.t0_ns + k * self.period_ns

    def wait(self) -> int:
        """Block until the next slot's deadline and return its index ``k``.

        If the host is already past the following deadline, the stale slots are skipped.
        """
        k = self.next_k
        now = self._clock()
        behind = (now - self.deadline(k)) // self.period_ns
        if behind >= 1:
            self.skipped += int(behind)
            k += int(behind)
        target = self.deadline(k)
        remaining = target - now
        if remaining > self.spin_ns:
            self._sleep((remaining - self.spin_ns) * 1e-9)
        while self._clock() < target:
            pass
        self.next_k = k + 1
        return k

    def record(self, k: int, send_ns: int | None = None) -> None:
        """Record that slot ``k`` was sent at ``send_ns`` (default: now)."""
        send_ns = self._clock() if send_ns is None else send_ns
        self.send_ns.append(send_ns)
        self.deadline_ns.append(self.deadline(k))
        if send_ns - self.deadline(k) > self.miss_threshold_ns:
            self.late += 1

    @property
    def misses(self) -> int:
        """Deadline misses so far (late sends and skipped slots)."""
        return self.late + self.skipped

    def stats(self, last: int | None = None) -> TimingStats:
        """Timing statistics of the slots recorded so far (or of the ``last`` ones only)."""
        start = 0 if last is None else max(0, len(self.send_ns) - last)
        skipped = self.skipped if last is None else 0
        return timing_stats(np.array(self.send_ns[start:]), np.array(self.deadline_ns[start:]),
                            self.period_ns, self.miss_threshold_ns, skipped)
