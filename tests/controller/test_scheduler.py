"""Absolute-time scheduler: deadlines t0 + k·period, no drift, skipped slots, misses; statistics.

A fake clock stands in for time so that the arithmetic is checked exactly (timing itself is
measured in bench/bench_streaming.py, never asserted).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from controller.protocol import load_spec
from controller.scheduler import (
    Scheduler,
    late_tolerance_ns,
    other_cpus,
    pinned,
    realtime_priority,
    stale_slot_misses,
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


def test_a_stall_skips_stale_slots_and_counts_those_stale_beyond_the_tolerance():
    clock = FakeClock()
    scheduler = Scheduler(1_000_000, miss_threshold_ns=5_000_000, clock=clock, sleep=clock.sleep)
    t0 = scheduler.t0_ns
    for _ in range(3):
        scheduler.record(scheduler.wait())
    clock.now = t0 + 7_400_000  # the host froze until 7.4 ms
    k = scheduler.wait()
    assert k == 7  # slots 3..6 are stale: sent late, they would be a burst of old setpoints
    assert scheduler.skipped == 4
    scheduler.record(k)
    # slot 3 was replaced by slot 7 at 7.4 ms, 4.4 ms after its deadline: within the tolerance
    assert scheduler.misses == 0 and scheduler.late == 0
    clock.now = t0 + 20_200_000  # frozen again, until 20.2 ms
    k = scheduler.wait()
    assert k == 20 and scheduler.skipped == 4 + 12
    scheduler.record(k)
    # slots 8..15 had deadlines more than 5 ms before 20.2 ms: 8 misses; 16..19 did not
    assert scheduler.misses == 8
    stats = scheduler.stats()
    assert stats.deadline_misses == 8 and stats.skipped == 16 and stats.late_sends == 0


def test_a_slot_prepared_then_woken_late_is_reported_stale():
    clock = FakeClock()
    scheduler = Scheduler(1_000_000, clock=clock, sleep=clock.sleep)
    t0 = scheduler.t0_ns
    assert scheduler.upcoming() == 0
    clock.now = t0 + 2_500_000  # preempted between preparing slot 0 and waiting for it
    assert scheduler.wait_for(0) is False
    assert scheduler.upcoming() == 2 and scheduler.skipped == 2


def test_stale_slot_misses_of_a_known_stream():
    period, threshold = 1_000_000, 5_000_000
    slots = np.array([0, 1, 2, 10, 11])
    # slots 10 and 11 are sent 6.5 and 6 ms late; the skipped slots 3..9 were stale until then
    sends = np.array([0, period, 2 * period, 16_500_000, 17_000_000])
    assert stale_slot_misses(slots, sends, 0, period, threshold) == 2 + 7
    # with slot 10 sent on time only the skipped slots 3, 4 (deadline < 10 − 5 ms) missed
    sends[3:] = [10 * period, 11 * period]
    assert stale_slot_misses(slots, sends, 0, period, threshold) == 2
    # the scheduler's running count agrees with the batch computation
    clock = FakeClock()
    scheduler = Scheduler(period, miss_threshold_ns=threshold, clock=clock, sleep=clock.sleep)
    for slot, send in zip(slots, sends, strict=True):
        scheduler.record(int(slot), scheduler.t0_ns + int(send))
    assert scheduler.misses == 2


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
    # the same stream judged with the firmware's 5 ms tolerance: late, but no miss
    tolerant = timing_stats(sends, slots, 0, period, miss_threshold_ns=5 * period)
    assert tolerant.deadline_misses == 0 and tolerant.late_sends == 1
    # a skipped slot is not a period: 0 → 2 ms is no error
    skipped = timing_stats(np.array([0, 2 * period]), np.array([0, 2]), 0, period, period)
    assert skipped.period_error_max_ms == 0.0 and skipped.skipped == 1
    assert skipped.deadline_misses == 0  # slot 1 was replaced 1 ms after its deadline


def test_the_default_miss_threshold_is_the_firmware_late_tolerance():
    assert late_tolerance_ns() == load_spec().limits["late_tolerance_ms"] * 1_000_000 == 5_000_000
    assert Scheduler(1_000_000).miss_threshold_ns == 5_000_000


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
