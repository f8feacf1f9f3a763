"""Absolute-time scheduler: deadlines t0 + k·period, no drift, skipped slots; timing statistics.

A fake clock stands in for time so that the arithmetic is checked exactly (timing itself is
measured in bench/bench_streaming.py, never asserted).
"""

from __future__ import annotations

import numpy as np
import pytest

from controller.scheduler import Scheduler, timing_stats


class FakeClock:
    """A nanosecond clock that advances only when slept on or told to."""

    def __init__(self) -> None:
        self.now = 1_000_000_000

    def __call__(self) -> int:
        self.now += 1_000  # every reading costs 1 µs, as a spin loop would
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += round(seconds * 1e9)


def test_deadlines_are_absolute_and_do_not_drift():
    clock = FakeClock()
    scheduler = Scheduler(1_000_000, clock=clock, sleep=clock.sleep)
    t0 = scheduler.t0_ns
    for expected_k in range(2000):
        k = scheduler.wait()
        assert k == expected_k
        assert clock.now >= t0 + k * 1_000_000
        scheduler.record(k)
        clock.now += 123_000  # 123 µs of work per slot never accumulates
    # after 2000 periods the last send is still within a few µs of its own deadline
    assert clock.now - 123_000 - (t0 + 1999 * 1_000_000) < 5_000
    stats = scheduler.stats()
    assert stats.sends == 2000 and stats.deadline_misses == 0 and stats.skipped == 0
    assert stats.lateness_max_ms < 0.005


def test_a_stall_skips_stale_slots_and_counts_them_as_misses():
    clock = FakeClock()
    scheduler = Scheduler(1_000_000, clock=clock, sleep=clock.sleep)
    t0 = scheduler.t0_ns
    for _ in range(3):
        scheduler.record(scheduler.wait())
    clock.now = t0 + 7_400_000  # the host froze until 7.4 ms
    k = scheduler.wait()
    assert k == 7  # slots 3..6 are stale: sent late, they would be a burst of old setpoints
    assert scheduler.skipped == 4
    scheduler.record(k)
    assert scheduler.misses == 4  # slot 7 itself is 0.4 ms late: within one period


def test_timing_statistics_from_known_send_times():
    period = 1_000_000
    deadlines = np.arange(6) * period
    # lateness 0, 0.1, 0.3, 0.1, 2.5 and 0 ms
    sends = deadlines + np.array([0, 100_000, 300_000, 100_000, 2_500_000, 0])
    stats = timing_stats(sends, deadlines, period, miss_threshold_ns=period)
    # intervals 1.1, 1.2, 0.8, 3.4, -1.5 ms → period errors 0.1, 0.2, 0.2, 2.4, 2.5 ms
    assert stats.period_error_max_ms == pytest.approx(2.5)
    assert stats.period_error_p50_ms == pytest.approx(0.2)
    assert stats.lateness_max_ms == pytest.approx(2.5)
    assert stats.deadline_misses == 1
    # a skipped slot is not a period: 0 → 2 ms is no error
    skipped = timing_stats(np.array([0, 2 * period]), np.array([0, 2 * period]), period, period,
                           skipped=1)
    assert skipped.period_error_max_ms == 0.0 and skipped.deadline_misses == 1
