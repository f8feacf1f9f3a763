"""Absolute-time scheduler: deadlines t0 + k·period, no drift, late bursts, misses; statistics.

A fake clock stands in for time so that the arithmetic is checked exactly (timing itself is
measured in bench/bench_streaming.py, never asserted).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from controller.scheduler import (
    MISS_MARGIN_NS,
    Scheduler,
    miss_threshold_ns,
    other_cpus,
    pinned,
    realtime_priority,
    streaming_cpu,
    timing_stats,
)


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
    scheduler = Scheduler(1_000_000, 19_000_000, clock=clock, sleep=clock.sleep)
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


def test_after_a_stall_the_owed_slots_go_in_a_burst_and_only_those_past_due_are_misses():
    """Lead 5 ms, margin 1 ms: a send more than 4 ms after its send deadline is a miss."""
    clock = FakeClock()
    scheduler = Scheduler(1_000_000, miss_threshold_ns(5_000_000), clock=clock,
                          sleep=clock.sleep)
    t0 = scheduler.t0_ns
    for _ in range(3):
        scheduler.record(scheduler.wait())
    clock.now = t0 + 9_400_000  # the host froze until 9.4 ms
    sent = []
    while scheduler.upcoming() <= 9:
        k = scheduler.wait()  # at once: the slots owed are not skipped
        scheduler.record(k)
        sent.append(k)
    assert sent == [3, 4, 5, 6, 7, 8, 9] and scheduler.skipped == 0
    # slots 3, 4, 5 went ≈ 6.4, 5.4, 4.4 ms after their deadlines (> 4 ms): misses; 6..9 not
    assert scheduler.misses == 3
    assert scheduler.late == 6  # late sends (> 1 period): slots 3..8
    stats = scheduler.stats()
    assert stats.deadline_misses == 3 and stats.skipped == 0 and stats.late_sends == 6


def test_skip_to_now_drops_the_slots_gone():
    clock = FakeClock()
    scheduler = Scheduler(1_000_000, 0, clock=clock, sleep=clock.sleep)
    clock.now = scheduler.t0_ns + 2_500_000
    assert scheduler.skip_to_now() == 3 and scheduler.skipped == 3
    assert scheduler.wait() == 3 and clock.now >= scheduler.t0_ns + 3_000_000


def test_timing_statistics_from_known_send_times():
    period = 1_000_000
    slots = np.arange(6)
    # lateness 0, 0.13, 0.36, 0.13, 2.5 and 0 ms
    sends = slots * period + np.array([0, 130_000, 360_000, 130_000, 2_500_000, 0])
    stats = timing_stats(sends, slots, 0, period, miss_threshold_ns=period)
    # intervals 1.13, 1.23, 0.77, 3.37, -1.5 ms → period errors 0.13, 0.23, 0.23, 2.37, 2.5 ms
    assert stats.period_error_max_ms == pytest.approx(2.5)
    assert stats.period_error_p50_ms == pytest.approx(0.23)
    assert stats.lateness_max_ms == pytest.approx(2.5)
    assert stats.deadline_misses == 1 and stats.late_sends == 1
    assert stats.histogram == {"<0.05": 0, "0.05-0.1": 0, "0.1-0.2": 1, "0.2-0.5": 2,
                               "0.5-1": 0, "1-2": 0, "2-5": 2, ">5": 0}
    # the same stream with a 5 ms lead (threshold 4 ms): late, but no miss
    ahead = timing_stats(sends, slots, 0, period, miss_threshold_ns=4 * period)
    assert ahead.deadline_misses == 0 and ahead.late_sends == 1
    # a skipped slot (after a flush) is not a period: 0 → 2 ms is no error
    skipped = timing_stats(np.array([0, 2 * period]), np.array([0, 2]), 0, period, period)
    assert skipped.period_error_max_ms == 0.0 and skipped.skipped == 1
    assert skipped.deadline_misses == 0


def test_the_miss_threshold_is_the_lead_minus_the_margin():
    assert MISS_MARGIN_NS == 1_000_000
    assert miss_threshold_ns(20_000_000) == 19_000_000
    assert miss_threshold_ns(500_000) == 0


def test_priority_and_affinity_fall_back_cleanly_when_refused():
    """Where the OS refuses (no privilege, no such CPU), the stream runs as it is."""
    affinity, policy = os.sched_getaffinity(0), os.sched_getscheduler(0)
    with pinned({4096}) as granted:  # no such CPU
        assert granted is False and os.sched_getaffinity(0) == affinity
    with pinned(None) as granted:
        assert granted is False and os.sched_getaffinity(0) == affinity
    with realtime_priority(priority=1000) as granted:  # outside SCHED_FIFO's range
        assert granted is False and os.sched_getscheduler(0) == policy
    cpu = streaming_cpu()
    if len(affinity) >= 2:
        assert cpu == max(affinity) and other_cpus() == affinity - {cpu}
        with pinned({cpu}) as granted:
            assert granted is True and os.sched_getaffinity(0) == {cpu}
        assert os.sched_getaffinity(0) == affinity
    else:
        assert cpu is None and other_cpus() is None


def test_misses_count_lateness_beyond_the_first_send_as_the_firmware_origin_does():
    """The firmware's origin is the first setpoint's arrival: a stream that started 3 ms late
    is judged from there (its sends 3 ms late are on time; 3 + 4.5 ms is a miss, lead 5 ms)."""
    period = 1_000_000
    slots = np.arange(4)
    sends = slots * period + np.array([3_000_000, 3_000_000, 7_500_000, 6_900_000])
    stats = timing_stats(sends, slots, 0, period, miss_threshold_ns=4 * period)
    assert stats.deadline_misses == 1
    clock = FakeClock()
    scheduler = Scheduler(period, 4 * period, clock=clock, sleep=clock.sleep)
    for slot, send in zip(slots, sends, strict=True):
        scheduler.record(int(slot), scheduler.t0_ns + int(send))
    assert scheduler.misses == 1
