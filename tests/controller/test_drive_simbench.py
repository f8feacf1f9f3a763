"""Sessions against the simulated bench (the real firmware core behind a pty), not mocks.

Each fault ends with the bench disarmed (checked on a fresh connection), the log readable up to
the fault, and a clear message.
"""

from __future__ import annotations

import math
import threading

import pytest

from controller.drive import drive
from controller.errors import BenchError
from controller.link import Link
from controller.log import read_log
from controller.modes import ModeSettings
from controller.protocol import load_spec
from controller.replay import summarise
from controller.session import TELEMETRY_TIMEOUT_S
from controller.simbench import SimFaults, start_simulated_bench
from tests.waiting import eventually

SPEC = load_spec()

PROTOCOL_VERSION = load_spec().protocol_version


def bench_state(port: str, after_ticks: int = 0) -> tuple[str, str, float]:
    """(state, fault, |torque| N·m) of the bench, read over a fresh connection: from the latest
    telemetry frame once one has come, or, with ``after_ticks``, once one reports that many
    firmware ticks more than the first (the state that much later in the bench's own time: a
    wall-clock sleep is no bound on a loaded machine, where the bench may run late)."""
    frames = []
    link = Link(port, lambda message, _: frames.append(message))
    try:
        # generous: the waits end with the reply and the frames, however loaded the machine
        link.request("HELLO", "HELLO_REPLY", timeout_s=10.0, protocol_version=PROTOCOL_VERSION,
                     telemetry_period_ms=5)
        first = eventually(lambda: frames[:1], bool, "telemetry on a fresh connection")[0]
        last = eventually(lambda: frames[-1], lambda frame: frame.fields["mcu_ticks"]
                          >= first.fields["mcu_ticks"] + after_ticks,
                          f"a telemetry frame {after_ticks} firmware ticks after the first")
    finally:
        link.close()
    fields = last.fields
    return (SPEC.name_of("states", fields["state"]), SPEC.name_of("faults", fields["fault"]),
            abs(fields["torque_mNm"]) * 1e-3)


def _state_or_none(port: str) -> tuple[str, str, float] | None:
    """:func:`bench_state`, or None while the line still corrupts the replies."""
    try:
        return bench_state(port)
    except (BenchError, AssertionError):
        return None


def test_full_gesture_streams_and_tracks(setpoint_file, tmp_path, loaded_machine_bench):
    """The whole gesture, streamed with the slack of a loaded machine (250 Hz, 100 ms lead,
    500 ms watchdog): whether the session completes, and how well the bench tracks, must not
    depend on how the OS schedules the host and the bench. With the default 1 kHz, 20 ms lead
    and 50 ms watchdog, a host stall beyond the lead bursts late setpoints (the setpoint in
    force jumps: tracking error), one beyond the watchdog faults the bench, persistent ones stop
    on late setpoints: seen under heavy load only."""
    log_path = tmp_path / "session.jsonl"
    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, port=simulated.port, bench=loaded_machine_bench)
        state = bench_state(simulated.port)
    assert result.ok, result.message
    assert result.message == "gesture completed: ramped down and disarmed"
    assert state == ("DISARMED", "NONE", 0.0)
    log = read_log(log_path)
    summary = summarise(log)
    # 601 gesture setpoints + 75 of the final ramp, one per 4 ms, all sent
    assert result.sent + result.timing["skipped"] == 676
    assert summary.setpoints_sent == result.sent
    # 5 ms telemetry over the ~2.8 s the firmware's ticks take to play the stream (the session
    # ends once its last setpoint is in force): a count in the bench's time, not the wall's
    assert summary.telemetry_frames > 400
    # the bench follows the 160° gesture: small tracking error, reported in the summary
    assert 0.0 < summary.tracking_rms_deg < 2.0
    assert summary.tracking_max_deg < 5.0
    assert summary.faults == []
    assert summary.end == "completed: gesture completed: ramped down and disarmed"
    peak = max(log.telemetry["position_urad"]) * 1e-6
    assert math.degrees(peak) == pytest.approx(160.0, abs=3.0)
    assert [e["kind"] for e in log.events][:3] == ["connected", "armed", "streaming"]
    assert log.events[-1]["kind"] == "disarmed"


def test_port_closed_mid_stream(setpoint_file, tmp_path):
    """A pulled cable: the host loses the port; the firmware watchdog disarms the bench."""
    log_path = tmp_path / "session.jsonl"
    sessions = []

    def view(session):
        sessions.append(session)
        return InjectAt(session, 600, session.link.close)  # the port vanishes at 0.6 s

    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, port=simulated.port, view=view)
        # The watchdog (50 ms) trips, then the torque ramps down: asked until it has.
        state = eventually(lambda: bench_state(simulated.port),
                           lambda state: state == ("FAULT", "WATCHDOG", 0.0),
                           "the bench faulted by its watchdog, torque ramped to zero")
    assert result.reason == "link lost"
    assert "watchdog (50 ms) trips: fault WATCHDOG latched, the torque ramps to zero" in \
        result.message
    assert state == ("FAULT", "WATCHDOG", 0.0)
    log = read_log(log_path)
    # the log holds the stream up to the cut at 0.6 s (stream time of the last setpoint)
    assert 400 < max(log.setpoints["time_ms"]) < 800
    assert log.end["reason"] == "link lost"


def test_corrupted_bytes_stop_the_session(setpoint_file, tmp_path):
    log_path = tmp_path / "session.jsonl"
    faults = SimFaults(corrupt=0.001, direction="both", seed=7)
    with start_simulated_bench(faults=faults) as simulated:
        result = drive(setpoint_file, log_path, port=simulated.port)
        simulated.command("corrupt 0")  # in force when it returns; frames in flight may not be
        eventually(lambda: _state_or_none(simulated.port),
                   lambda state: state is not None and state[0] in ("DISARMED", "FAULT")
                   and state[2] == 0.0,
                   "the bench disarmed or faulted, torque zero, read over a clean line")
    assert result.reason == "link errors"
    assert "corrupted frames on the link" in result.message
    summary = summarise(read_log(log_path))
    assert summary.setpoints_sent > 0 and summary.end.startswith("link errors")


def assert_stopped_within_the_timeout(message: str) -> None:
    """The stop's "no telemetry for N ms": the 100 ms timeout plus a bounded margin (generous
    for a loaded machine; the link reads what the port holds before it judges the silence, which
    must not hold a silent bench's stop back)."""
    assert message.startswith("no telemetry for "), message
    silent_ms = int(message.removeprefix("no telemetry for ").split(" ms")[0])
    assert TELEMETRY_TIMEOUT_S * 1000 <= silent_ms < TELEMETRY_TIMEOUT_S * 1000 + 200, message


def test_silent_telemetry_stops_the_session(setpoint_file, tmp_path):
    """Delayed telemetry (the firmware stalls 110 ms: longer than the host's 100 ms telemetry
    timeout, shorter than the board's 120 ms hardware watchdog): the host stops, ramps down,
    disarms.

    The stalled firmware kept the last torque on the motor; when it wakes up, its velocity
    estimate spans the whole stall in one tick and may trip its own OVERSPEED fault, or the
    ~100 setpoints the host sent meanwhile (its clock stood still, so they are all still ahead
    of it) overflow its setpoint queue (QUEUE_OVERFLOW); either way the torque ramps to zero,
    the bench ends with zero torque and the message says what happened.
    """
    log_path = tmp_path / "session.jsonl"

    def view(session):
        return InjectAfter(session, 0.5, lambda: simulated.command("stall 110"))

    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, port=simulated.port, view=view)
        state = bench_state(simulated.port)
    assert result.reason == "telemetry timeout", result.message
    assert_stopped_within_the_timeout(result.message)
    if state[0] == "DISARMED":
        assert result.message.endswith("ramped down over 0.3 s and disarmed")
    else:
        assert state[0] == "FAULT" and state[1] in ("OVERSPEED", "QUEUE_OVERFLOW")
        assert result.message.endswith(f"bench state FAULT, fault {state[1]} (telemetry now)")
    assert state[2] == 0.0
    log = read_log(log_path)
    assert any(event["kind"] == "ramp down" for event in log.events)
    assert log.setpoints["rep"].count(-1) == 300  # the stop ramp was logged


def test_a_firmware_stall_beyond_the_hardware_watchdog_is_a_reset(setpoint_file, tmp_path):
    """The firmware stalls 200 ms: at 120 ms the board's hardware watchdog resets it (zero torque
    at once, disarmed), as on the AVR board; the host, silent for 100 ms, stops and reports the
    reset rather than a stall or a fault."""
    log_path = tmp_path / "session.jsonl"

    def view(session):
        return InjectAfter(session, 0.5, lambda: simulated.command("stall 200"))

    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, port=simulated.port, view=view)
        state = bench_state(simulated.port)
    assert result.reason == "firmware reset", result.message
    assert_stopped_within_the_timeout(result.message)
    assert "restarted disarmed (zero torque)" in result.message
    assert state == ("DISARMED", "NONE", 0.0)
    assert "1 hardware watchdog resets" in simulated.stats
    assert any(event["kind"] == "firmware reset" for event in read_log(log_path).events)


def test_firmware_reset_mid_stream(setpoint_file, tmp_path):
    log_path = tmp_path / "session.jsonl"

    def view(session):
        return InjectAt(session, 500, lambda: simulated.command("reset"))

    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, port=simulated.port, view=view)
        state = bench_state(simulated.port)
    assert result.reason == "firmware reset"
    assert "restarted disarmed (zero torque)" in result.message
    assert state == ("DISARMED", "NONE", 0.0)
    assert len(read_log(log_path).setpoints["k"]) > 300


def test_firmware_fault_stops_the_session(setpoint_file, tmp_path):
    """The e-stop input of the bench latches a fault: the host stops and says so."""
    log_path = tmp_path / "session.jsonl"

    def view(session):
        return InjectAfter(session, 0.4, lambda: simulated.command("estop on"))

    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, port=simulated.port, view=view)
        state = bench_state(simulated.port)
    assert result.reason == "fault"
    assert "the bench reports fault ESTOP_INPUT" in result.message
    assert state[:2] == ("FAULT", "ESTOP_INPUT") and state[2] == 0.0
    assert summarise(read_log(log_path)).faults == ["ESTOP_INPUT"]


def test_controlled_stop_on_request(setpoint_file, tmp_path):
    """Ctrl-C or the q key: ramp down and disarm; slow motion and reps are honoured."""
    log_path = tmp_path / "session.jsonl"
    settings = ModeSettings(mode="assistive", load_pct=30.0, speed=0.5, reps=2, rest_s=0.5)

    def view(session):
        # at slot 400 (0.4 s of stream time), in the streaming thread, as a Ctrl-C's handler
        return InjectAt(session, 400, lambda: session.request_stop(
            "interrupted", "stopped by Ctrl-C"))

    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, settings, port=simulated.port, view=view)
        state = bench_state(simulated.port)
    assert result.reason == "interrupted" and result.exit_code == 1
    assert result.message == "stopped by Ctrl-C; ramped down over 0.3 s and disarmed"
    assert state == ("DISARMED", "NONE", 0.0)
    log = read_log(log_path)
    # the plan stopped when asked: its last setpoint is the slot the stop was asked at ...
    plan = [k for k, rep in enumerate(log.setpoints["rep"]) if rep >= 0]
    assert max(log.setpoints["k"][k] for k in plan) == 400
    planned_ms = max(log.setpoints["time_ms"][k] for k in plan)
    assert planned_ms == 400  # stream time, ms (1 kHz)
    # ... at half speed: gesture time = stream time / 2 (positions of the sin² gesture)
    k = plan[-1]
    tau = log.setpoints["time_ms"][k] / 1000 * 0.5
    expected = math.radians(160.0) * math.sin(math.pi * tau / 2.4) ** 2
    assert log.setpoints["position_urad"][k] * 1e-6 == pytest.approx(expected, abs=1e-5)
    assert log.header["settings"]["speed"] == 0.5


class InjectAt:
    """A 'view' that runs ``action`` in the streaming thread just after slot ``k`` was sent:
    at a point of the stream, whatever the machine's load (a timer's wall-clock delay,
    arming included, leaves the stream anywhere from its start to its end)."""

    def __init__(self, session, k, action):
        after_send = session._after_send

        def after_send_then_act(slot, *args):
            after_send(slot, *args)
            if slot == k:
                action()

        session._after_send = after_send_then_act

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class InjectAfter:
    """A 'view' that runs ``action`` ``delay_s`` after the stream starts."""

    def __init__(self, session, delay_s, action):
        self.timer = threading.Timer(delay_s, action)

    def __enter__(self):
        self.timer.start()
        return self

    def __exit__(self, *exc):
        self.timer.cancel()
        return False


def test_byte_dump_decodes_to_exactly_the_logged_stream(setpoint_file, tmp_path):
    from controller.dump import decode_dump

    log_path, dump_path = tmp_path / "session.jsonl", tmp_path / "session.dump"
    settings = ModeSettings(rate_hz=250.0)
    with start_simulated_bench() as simulated:
        result = drive(setpoint_file, log_path, settings, port=simulated.port, dump=dump_path)
    assert result.ok
    messages, bad = decode_dump(dump_path)
    assert bad == {"host→bench": 0, "bench→host": 0}
    sent = [m.message for m in messages if m.message.name == "SETPOINT"]
    log = read_log(log_path)
    assert [m.fields["position_urad"] for m in sent] == log.setpoints["position_urad"].tolist()
    assert [m.seq for m in sent] == log.setpoints["seq"].tolist()
    telemetry = [m for m in messages if m.message.name == "TELEMETRY"]
    assert len(telemetry) >= len(log.telemetry["host_time"])  # also those before the log's
    names = [m.message.name for m in messages if m.direction == "host→bench"]
    assert names[:2] == ["HELLO", "ARM"] and names[-1] == "DISARM"
