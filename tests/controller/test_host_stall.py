"""A host that stalls is not a bench that went silent: on the simulated bench (the real firmware
core behind a pty), the host is held up on purpose while the bench keeps sending.

The telemetry timeout (100 ms) judges the bench's silence only once the link has read what is
buffered; the handshake's waits (HELLO, ARM) likewise do not count a stall of the reader against
the bench. A bench that really goes silent still stops the session within the timeout: the
tests of the silent firmware in ``test_drive_simbench.py`` (``stall 110``, ``stall 200``).
"""

from __future__ import annotations

import threading
import time

import pytest

from controller.errors import BenchError
from controller.link import Deadline, Link
from controller.log import LogWriter, read_log
from controller.modes import ModeSettings, build_plan
from controller.protocol import Message, load_spec
from controller.replay import summarise
from controller.scheduler import Scheduler, miss_threshold_ns
from controller.session import TELEMETRY_TIMEOUT_S, Session
from controller.simbench import start_simulated_bench
from tests.controller.gestures import make_gesture

STALL_S = 2.5 * TELEMETRY_TIMEOUT_S
STALL_SLOT = 200  # 0.8 s into the stream at 250 Hz


class StallingScheduler(Scheduler):
    """The real scheduler; the streaming thread is held up ``STALL_S`` once at slot
    STALL_SLOT, ``where``: "check" as it asks for the slot (after it read the telemetry of the
    slot before, before it checks the telemetry's age: where a GC pause, a slow log write or
    the OS would hold it up), "wait" right after the slot's send deadline (before the send)."""

    def __init__(self, *args, where: str = "check", **kwargs):
        super().__init__(*args, **kwargs)
        self.where = where
        self.stalled = False

    def _stall(self, k: int, where: str) -> None:
        if k == STALL_SLOT and where == self.where and not self.stalled:
            self.stalled = True
            time.sleep(STALL_S)  # the stall itself: the host does nothing for that long

    def upcoming(self) -> int:
        k = super().upcoming()
        self._stall(k, "check")
        return k

    def wait_for(self, k: int) -> bool:
        on_time = super().wait_for(k)
        self._stall(k, "wait")
        return on_time


def stream_with_host_stall(tmp_path, bench, where: str = "check"):
    """Connect, arm and stream a gentle 2 s gesture (10°) at 250 Hz on the simulated bench,
    the streaming thread held up once (:class:`StallingScheduler`); the result and the log."""
    settings = ModeSettings(rate_hz=250.0, ramp_down_s=0.3)
    plan = build_plan(make_gesture(duration_s=2.0, peak_deg=10.0, rate_hz=250.0), settings)
    lead_ns = bench.streaming.lead_ms * 1_000_000
    scheduler = StallingScheduler(4_000_000, miss_threshold_ns(lead_ns), capacity=1024,
                                  where=where)
    log_path = tmp_path / "session.jsonl"
    header = {"bench": bench.model_dump()}  # as the drive's: the summary reads the watchdog
    with start_simulated_bench() as simulated, LogWriter(log_path, header) as log:
        session = Session(simulated.port, bench, log, settings)
        try:
            session.connect()
            result = session.run(plan, scheduler)
        finally:
            session.close()
    assert scheduler.stalled
    return result, read_log(log_path)


def assert_stall_reported(result, log) -> None:
    """One host stall of at least STALL_S, the same in the result, the log and the summary."""
    assert len(result.host_stalls_ms) == 1 and result.host_stalls_ms[0] >= STALL_S * 1000
    stalls = [event for event in log.events if event["kind"] == "host stalled"]
    assert [event["stalled_ms"] for event in stalls] == result.host_stalls_ms
    assert stalls[0]["message"].startswith(f"host stalled {result.host_stalls_ms[0]:.0f} ms")
    summary = summarise(log)
    assert summary.host_stalls_ms == result.host_stalls_ms
    assert f"host stalled {result.host_stalls_ms[0]:.0f} ms: the stream was late" in \
        "\n".join(summary.lines())


@pytest.mark.parametrize("where", ["check", "wait"])
def test_a_host_stall_while_the_bench_sends_is_reported_not_a_telemetry_timeout(
        tmp_path, loaded_machine_bench, where):
    """The streaming thread stalls 250 ms (2.5× the telemetry timeout) while the bench sends its
    telemetry every 5 ms: the frames wait in the port's buffer. The session reads them before
    it judges the bench silent, goes on and completes; the log, the result and the summary say
    "host stalled N ms", wherever in the loop it stalled. (Before, a stall before the check
    stopped it on "no telemetry for 250 ms"; one in the wait went unreported.) The bench's
    500 ms watchdog and 100 ms lead (the loaded-machine settings) outlast the stall, and the
    gentle gesture keeps the catch-up burst within the tracking limit, so that only the
    telemetry timeout could stop it."""
    result, log = stream_with_host_stall(tmp_path, loaded_machine_bench, where)
    assert result.ok, result.message
    assert_stall_reported(result, log)
    assert summarise(log).end == "completed: gesture completed: ramped down and disarmed"


def test_a_host_stall_past_the_bench_watchdog_stops_on_the_watchdog_fault(tmp_path, bench):
    """The same 250 ms stall with the bundled 50 ms watchdog and 20 ms lead: the bench faults
    WATCHDOG during the stall (its queue ran dry, nothing new came). The frames read after the
    stall say so, and the session stops on that fault, attributed to the stalled host, not on
    a telemetry timeout (before: "no telemetry for 250 ms")."""
    result, log = stream_with_host_stall(tmp_path, bench)
    assert result.reason == "fault", result.message
    assert result.message.startswith("the bench reports fault WATCHDOG at t ")
    assert_stall_reported(result, log)
    summary = summarise(log)
    assert summary.faults == ["WATCHDOG"]
    assert summary.fault_cause().endswith("watchdog: a stalled host)")


def test_a_reply_the_reader_was_held_up_on_still_answers_the_handshake():
    """The host stalls with the bench's HELLO_REPLY read from the port but not yet handled,
    until after the request's deadline: the request waits for the reader to catch up and gets
    the reply (before, it gave up at the deadline: "no HELLO_REPLY to HELLO within 0.5 s")."""
    timeout_s = 0.5
    asked = []

    with start_simulated_bench() as simulated:
        link = Link(simulated.port, lambda message, perf_s: None)
        handle = link._handle

        def stalled_handle(now, data):
            # the reader holds the bytes until past the request's deadline: a host stall
            time.sleep(max(0.0, asked[0] + timeout_s + 0.1 - time.perf_counter()))
            handle(now, data)

        link._handle = stalled_handle
        outcome = []

        def ask():
            asked.append(time.perf_counter())
            try:
                outcome.append(link.request("HELLO", "HELLO_REPLY", timeout_s=timeout_s,
                                            protocol_version=load_spec().protocol_version,
                                            telemetry_period_ms=5))
            except BenchError as error:
                outcome.append(error)

        try:
            thread = threading.Thread(target=ask)
            thread.start()
            thread.join(timeout=60)
        finally:
            link.close()
    assert isinstance(outcome[0], Message), outcome[0]
    assert outcome[0].name == "HELLO_REPLY"


def drive_with_reader_held_in(tmp_path, bench, monkeypatch, wait: str):
    """Connect, arm and stream the gentle 10° gesture on the simulated bench with the link's
    reader held up once, in the handshake ``wait`` ("HELLO": the first wait of the connection;
    "DISARM": the confirmation at the end of the gesture): from the first bytes it reads there
    until that wait, past its end, has found the reader behind (an event, no sleep). The
    result, the log and what was held."""
    behind = threading.Event()
    state = {"holding": wait == "HELLO", "held": ""}
    passed, handle = Deadline.passed, Link._handle

    def watched_passed(deadline):
        result = passed(deadline)
        if deadline.unread_since is not None and state["holding"]:
            state["held"] = deadline.what
            behind.set()
        return result

    def held_handle(link, now, data):
        if state["holding"]:
            assert behind.wait(timeout=60)  # the host stall: the bytes wait unread
            state["holding"] = False
        handle(link, now, data)

    disarm = Session.disarm

    def disarm_held(session):
        state["holding"] = not state["held"]
        disarm(session)

    monkeypatch.setattr(Deadline, "passed", watched_passed)
    monkeypatch.setattr(Link, "_handle", held_handle)
    monkeypatch.setattr(Session, "disarm", disarm_held)
    settings = ModeSettings(rate_hz=250.0, ramp_down_s=0.3)
    plan = build_plan(make_gesture(duration_s=2.0, peak_deg=10.0, rate_hz=250.0), settings)
    lead_ns = bench.streaming.lead_ms * 1_000_000
    log_path = tmp_path / "session.jsonl"
    with start_simulated_bench() as simulated, LogWriter(log_path, {"bench": bench.model_dump()}
                                                         ) as log:
        session = Session(simulated.port, bench, log, settings)
        try:
            session.connect()
            result = session.run(plan, Scheduler(4_000_000, miss_threshold_ns(lead_ns),
                                                 capacity=1024))
        finally:
            session.close()
    return result, read_log(log_path), state["held"]


@pytest.mark.parametrize(("wait", "what"), [("HELLO", "the HELLO_REPLY to HELLO"),
                                            ("DISARM", "DISARM's confirmation")])
def test_a_host_stall_a_handshake_wait_forgave_is_logged_and_counted(
        tmp_path, loaded_machine_bench, monkeypatch, wait, what):
    """The reader is held up in the HELLO of the connection, or in DISARM's confirmation,
    until that wait has passed its end: the wait goes on for the reader (as above) and the
    session completes. The log says "host stalled N ms in the wait for …" (before: nothing),
    the result and the replay summary count it apart from the stream's stalls (the stream was
    not late) and say so."""
    result, log, held = drive_with_reader_held_in(tmp_path, loaded_machine_bench, monkeypatch,
                                                  wait)
    assert held == what
    assert result.ok, result.message
    stalls = [event for event in log.events if event["kind"] == "host stalled"]
    assert [event["wait"] for event in stalls] == [what]
    stalled_ms = stalls[0]["stalled_ms"]
    assert stalled_ms > TELEMETRY_TIMEOUT_S * 1000  # as a stall of the stream is logged
    assert stalls[0]["message"].startswith(
        f"host stalled {stalled_ms:.0f} ms in the wait for {what}: ")
    assert result.handshake_stalls_ms == [stalled_ms] and result.host_stalls_ms == []
    summary = summarise(log)
    assert summary.handshake_stalls_ms == [stalled_ms] and summary.host_stalls_ms == []
    text = "\n".join(summary.lines())
    assert f"host stalled {stalled_ms:.0f} ms in a handshake wait (not counted against the " \
        "bench)" in text
    assert "the stream was late" not in text
