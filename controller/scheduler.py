"""Absolute-time scheduling of the setpoint stream, and the statistics of its timing.

Send deadlines are ``t0 + k · period`` on the monotonic nanosecond clock, never "previous +
period", so the stream cannot drift. The scheduler sleeps until shortly before a deadline (the
OS wakes a sleeper some tens of µs late) and spins the rest of the way; the caller prepares
(encodes) the next frame *before* waiting, so that only the write is left after the deadline.

Klipper's timing model: each setpoint is sent ``lead`` (``controller/configs/bench.toml [streaming]
lead_ms``) before it is **due**, and the firmware queues it and applies it at its due tick
(``firmware/PROTOCOL.md`` §8). A host stall shorter than the lead therefore costs nothing: after
it the host sends the slots it owes in a burst (it never skips a slot), and they are still in
time. Two counts:

* a **late send** is a setpoint written more than one period after its send deadline: timing
  jitter the firmware's queue absorbs;
* a **deadline miss** is a setpoint that reached the firmware after its due tick. The firmware
  counts them (telemetry ``late_setpoints``); the host counts the sends later than
  ``due − margin`` = ``deadline + lead − margin`` (:data:`MISS_MARGIN_NS`, for the 1 ms tick
  quantisation and the transmission), so that it never counts fewer than the firmware. As the
  firmware's time origin is the arrival of the stream's first setpoint, the host measures the
  lateness of each send beyond that of the first one.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from controller.series import percentile

SPIN_NS = 300_000  # wake this long before a deadline and spin the rest (ns)
MISS_MARGIN_NS = 1_000_000  # the host counts a miss this long before the setpoint's due time
REALTIME_PRIORITY = 10  # SCHED_FIFO priority of the streaming thread, when the OS allows it
# Upper edges (ms) of the period-error histogram printed by the benchmark and the replay.
HISTOGRAM_EDGES_MS = (0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0)


def miss_threshold_ns(lead_ns: int, margin_ns: int = MISS_MARGIN_NS) -> int:
    """Lateness of a send (ns after its send deadline) beyond which the host counts a deadline
    miss: the lead minus the margin (never below one period's worth of nothing: ≥ 0)."""
    return max(0, int(lead_ns) - int(margin_ns))


@contextlib.contextmanager
def _temporarily(read: Callable[[], Any], write: Callable[[Any], None],
                 value: Callable[[], Any]) -> Iterator[bool]:
    """``write(value())`` while in the block, then ``write`` back what ``read()`` gave. Yields
    False (and changes nothing) when the OS refuses or lacks the call."""
    try:
        previous = read()
        write(value())
    except (AttributeError, OSError):
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            write(previous)


def realtime_priority(pid: int = 0, priority: int = REALTIME_PRIORITY
                      ) -> contextlib.AbstractContextManager[bool]:
    """Run the calling thread (or process ``pid``) under SCHED_FIFO while in the block.

    Yields True when the OS granted it (root or CAP_SYS_NICE on Linux), False otherwise (the
    stream then runs at normal priority, more exposed to other jobs on the machine).
    """
    return _temporarily(lambda: (os.sched_getscheduler(pid), os.sched_getparam(pid)),
                        lambda policy: os.sched_setscheduler(pid, *policy),
                        lambda: (os.SCHED_FIFO, os.sched_param(priority)))


def streaming_cpu() -> int | None:
    """The CPU reserved for the streaming thread: the last one this process may use, or None
    on a single-CPU machine (or where affinity is not supported)."""
    try:
        allowed = os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return None
    return max(allowed) if len(allowed) >= 2 else None


def other_cpus() -> set[int] | None:
    """The CPUs left to every other thread and process of a session (None: no pinning)."""
    cpu = streaming_cpu()
    return None if cpu is None else os.sched_getaffinity(0) - {cpu}


def pinned(cpus: set[int] | None, pid: int = 0) -> contextlib.AbstractContextManager[bool]:
    """Run the calling thread (or process ``pid``) on ``cpus`` only while in the block.

    On two cores the streaming thread gets one to itself and the link reader, the log writer
    and the simulated bench share the other: none of them then preempts the stream at a
    deadline. Yields False (and changes nothing) when ``cpus`` is None or the OS refuses.
    """
    def wanted() -> set[int]:
        if cpus is None:
            raise OSError("no CPUs to pin to")
        return cpus

    return _temporarily(lambda: os.sched_getaffinity(pid),
                        lambda allowed: os.sched_setaffinity(pid, allowed), wanted)


@dataclass(frozen=True)
class TimingStats:
    """Timing of a stream (ms): period error |Δsend − period| between consecutive slots,
    lateness send − send deadline; late sends (> 1 period late), skipped slots (only where a
    stop flushed the queue) and deadline misses (sends later than ``miss_threshold_ms`` =
    lead − margin, see the module docstring)."""

    sends: int
    period_ms: float
    miss_threshold_ms: float
    period_error_p50_ms: float
    period_error_p90_ms: float
    period_error_p99_ms: float
    period_error_p999_ms: float
    period_error_max_ms: float
    lateness_p50_ms: float
    lateness_p99_ms: float
    lateness_max_ms: float
    late_sends: int
    skipped: int
    deadline_misses: int
    histogram: dict[str, int]

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


def period_error_histogram(period_error_ms: Sequence[float]) -> dict[str, int]:
    """Counts of period errors (ms, ≥ 0) per bin of :data:`HISTOGRAM_EDGES_MS` (labels in ms).

    Bins are [low, high), from 0 to the first edge, between edges, from the last edge on; an
    error equal to an edge counts in the bin it starts. Negative errors are not counted.
    """
    counts = [0] * (len(HISTOGRAM_EDGES_MS) + 1)
    for value in period_error_ms:
        if value >= 0.0:
            counts[bisect_right(HISTOGRAM_EDGES_MS, value)] += 1
    labels = [f"<{HISTOGRAM_EDGES_MS[0]:g}"]
    labels += [f"{low:g}-{high:g}" for low, high in itertools.pairwise(HISTOGRAM_EDGES_MS)]
    labels.append(f">{HISTOGRAM_EDGES_MS[-1]:g}")
    return dict(zip(labels, counts, strict=True))


def timing_stats(send_ns: Sequence[int], slot: Sequence[int], t0_ns: int, period_ns: int,
                 miss_threshold_ns: int) -> TimingStats:
    """Statistics of the send times (ns) of stream slots ``slot`` (deadlines ``t0 + k·period``).

    The period error is taken between consecutive sends of consecutive slots only (a skipped
    slot is not a period); skipped slots are the slots before the last one that were not sent.
    A deadline miss is a send more than ``miss_threshold_ns`` later (after its deadline) than
    the first send was (the firmware's time origin). Percentiles as
    :func:`controller.series.percentile` (numpy's default, linear between order statistics).
    """
    send_ns = [int(value) for value in send_ns]
    slot = [int(value) for value in slot]
    late_ns = [send - (t0_ns + k * period_ns) for send, k in zip(send_ns, slot, strict=True)]
    lateness = [value * 1e-6 for value in late_ns]
    period_error = [abs(send_ns[i + 1] - send_ns[i] - period_ns) * 1e-6
                    for i in range(len(slot) - 1) if slot[i + 1] - slot[i] == 1]
    first_late_ns = late_ns[0] if late_ns else 0

    def pct(values: list[float], q: float) -> float:
        return percentile(values, q) if values else 0.0

    return TimingStats(
        sends=len(send_ns),
        period_ms=period_ns * 1e-6,
        miss_threshold_ms=miss_threshold_ns * 1e-6,
        period_error_p50_ms=pct(period_error, 50),
        period_error_p90_ms=pct(period_error, 90),
        period_error_p99_ms=pct(period_error, 99),
        period_error_p999_ms=pct(period_error, 99.9),
        period_error_max_ms=max(period_error, default=0.0),
        lateness_p50_ms=pct(lateness, 50),
        lateness_p99_ms=pct(lateness, 99),
        lateness_max_ms=max(lateness, default=0.0),
        late_sends=sum(1 for value in late_ns if value > period_ns),
        skipped=slot[-1] + 1 - len(slot) if slot else 0,
        deadline_misses=sum(1 for value in late_ns if value - first_late_ns > miss_threshold_ns),
        histogram=period_error_histogram(period_error),
    )


class Scheduler:
    """Hands out slots ``k`` at absolute send deadlines ``t0 + k · period_ns``.

    Use :meth:`upcoming` (the slot to prepare), then :meth:`wait_for` (its deadline), then
    :meth:`record` the send; :meth:`wait` does the first two at once. Slots are never skipped
    (a late slot is sent at once: the firmware's queue still takes it in time, or counts it
    late); :meth:`skip_to_now` drops the slots already gone, for a stream restarted after a
    flush. ``capacity`` slots of send times are preallocated (no allocation while streaming;
    grown if exceeded). ``clock`` (ns) and ``sleep`` (s) are injectable so that the arithmetic
    can be tested without real time; by default ``time.perf_counter_ns`` and ``time.sleep``.
    """

    def __init__(
        self,
        period_ns: int,
        miss_threshold_ns: int,
        spin_ns: int = SPIN_NS,
        clock: Callable[[], int] = time.perf_counter_ns,
        sleep: Callable[[float], None] = time.sleep,
        capacity: int = 16_384,
    ):
        self.period_ns = int(period_ns)
        self.miss_threshold_ns = int(miss_threshold_ns)
        self.spin_ns = spin_ns
        self._clock = clock
        self._sleep = sleep
        self.t0_ns = clock()
        self.next_k = 0
        self.skipped = 0
        self.late = 0  # late sends (more than one period after the deadline)
        self.misses = 0  # deadline misses so far (see the module docstring)
        self._slot = array("q", bytes(8 * capacity))
        self._send = array("q", bytes(8 * capacity))
        self._count = 0
        self._first_lateness = 0  # lateness of the first send: the firmware's time origin

    def deadline(self, k: int) -> int:
        """Absolute send deadline of slot ``k`` (ns on the scheduler's clock)."""
        return self.t0_ns + k * self.period_ns

    def slots_due_by(self, t_ns: int) -> int:
        """How many slots' send deadlines are at or before ``t_ns`` (ns on the scheduler's
        clock): the setpoints the stream owes by then, sent or not.

        >>> Scheduler(4_000_000, 0, clock=lambda: 0).slots_due_by(10_000_000)  # 0, 4 and 8 ms
        3
        """
        return max(0, (int(t_ns) - self.t0_ns) // self.period_ns + 1)

    def upcoming(self) -> int:
        """The next slot to send (slots are not skipped, see the class docstring)."""
        return self.next_k

    def skip_to_now(self) -> int:
        """Drop the slots whose deadline is past (counted in ``skipped``); the next slot."""
        behind = (self._clock() - self.deadline(self.next_k)) // self.period_ns + 1
        if behind >= 1:
            self.skipped += int(behind)
            self.next_k += int(behind)
        return self.next_k

    def wait_for(self, k: int) -> bool:
        """Block until slot ``k``'s deadline (at once if it is past); True."""
        target = self.deadline(k)
        remaining = target - self._clock()
        if remaining > self.spin_ns:
            self._sleep((remaining - self.spin_ns) * 1e-9)
        while self._clock() < target:
            pass
        self.next_k = k + 1
        return True

    def wait(self) -> int:
        """Block until the next slot's deadline and return its index ``k``."""
        k = self.upcoming()
        self.wait_for(k)
        return k

    def record(self, k: int, send_ns: int | None = None) -> None:
        """Record that slot ``k`` was sent at ``send_ns`` (default: now)."""
        send_ns = self._clock() if send_ns is None else send_ns
        if self._count == len(self._slot):
            self._slot.frombytes(bytes(8 * len(self._slot)))
            self._send.frombytes(bytes(8 * len(self._send)))
        self._slot[self._count] = k
        self._send[self._count] = send_ns
        self._count += 1
        lateness = send_ns - self.deadline(k)
        if self._count == 1:
            self._first_lateness = lateness
        if lateness > self.period_ns:
            self.late += 1
        if lateness - self._first_lateness > self.miss_threshold_ns:
            self.misses += 1

    @property
    def send_ns(self) -> array:
        """Send times recorded so far (ns; a copy, ``array('q')``)."""
        return self._send[:self._count]

    @property
    def slots(self) -> array:
        """Slots recorded so far, in send order (a copy, ``array('q')``)."""
        return self._slot[:self._count]

    def stats(self) -> TimingStats:
        """Timing statistics of the slots recorded so far."""
        return timing_stats(self.send_ns, self.slots, self.t0_ns, self.period_ns,
                            self.miss_threshold_ns)
