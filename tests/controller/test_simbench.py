"""End-to-end: the firmware's C core as a simulated bench behind a pty, driven with pyserial."""

from __future__ import annotations

import functools
import re
import time

import pytest
import serial

from bemore.errors import BenchError, ConfigError
from controller.protocol import FrameDecoder, Message, decode_message, encode_message, load_spec
from controller.simbench import (
    FIRMWARE_DIR,
    HW_WATCHDOG_MS,
    SimFaults,
    load_sim_config,
    start_simulated_bench,
)
from tests.waiting import eventually

SPEC = load_spec()
ARMED, FAULT, DISARMED = SPEC.states["ARMED"], SPEC.states["FAULT"], SPEC.states["DISARMED"]
OK = SPEC.results["OK"]

PROTOCOL_VERSION = load_spec().protocol_version


class Client:
    """A minimal synchronous host: send messages, collect what the bench answers."""

    def __init__(self, port: str):
        self.serial = serial.Serial(port, baudrate=1_000_000, timeout=0.002)
        self.decoder = FrameDecoder()
        self.seq = 0
        self.received: list[Message] = []
        self.cursor = 0  # wait_for looks at received[cursor:]
        self.serial.write(b"\x00")  # resynchronise the firmware's decoder

    def send(self, name: str, **fields: int) -> int:
        seq = self.seq
        self.serial.write(encode_message(name, seq, **fields))
        self.seq = (self.seq + 1) % 256
        return seq

    def poll(self) -> list[Message]:
        data = self.serial.read(max(1, self.serial.in_waiting))
        messages = [decode_message(f) for f in self.decoder.feed(data)]
        self.received += messages
        return messages

    def drain(self, window_s: float = 0.05) -> None:
        """Read the backlog and whatever arrives during ``window_s`` (telemetry never stops)."""
        until = time.monotonic() + window_s
        self.poll()  # at least once, even if this process was descheduled past the window
        while time.monotonic() < until or self.serial.in_waiting:
            self.poll()

    def wait_for(self, predicate, timeout_s: float = 10.0) -> Message:
        """First message not yet looked at by wait_for that matches ``predicate`` (the wait
        ends with it: a generous timeout costs nothing)."""
        deadline = time.monotonic() + timeout_s
        while True:
            while self.cursor < len(self.received):
                message = self.received[self.cursor]
                self.cursor += 1
                if predicate(message):
                    return message
            if time.monotonic() > deadline:
                raise AssertionError(f"no matching message within {timeout_s} s")
            self.poll()

    def command(self, name: str, **fields: int) -> int:
        seq = self.send(name, **fields)
        ack = self.wait_for(lambda m: m.name == "ACK" and m.fields["acked_seq"] == seq)
        return ack.fields["result"]

    def telemetry(self) -> list[Message]:
        return [m for m in self.received if m.name == "TELEMETRY"]

    def close(self) -> None:
        self.serial.close()


@pytest.fixture
def simulated_bench():
    with start_simulated_bench() as running:
        yield running


def handshake_and_arm(client: Client, watchdog_ms: int = 50) -> Message:
    seq = client.send("HELLO", protocol_version=SPEC.protocol_version, telemetry_period_ms=1)
    reply = client.wait_for(lambda m: m.name == "HELLO_REPLY")
    client.wait_for(lambda m: m.name == "ACK" and m.fields["acked_seq"] == seq)
    assert client.command("ARM", watchdog_ms=watchdog_ms, lead_ms=1) == OK
    return reply


def ramp_rad(t_s: float) -> float:
    """The streamed ramp: rest for 0.2 s, then 1 rad/s up to 1 rad, then hold."""
    return min(max(t_s - 0.2, 0.0), 1.0)


def test_handshake_ramp_tracking_then_watchdog(simulated_bench):
    client = Client(simulated_bench.port)
    watchdog_ms = 150  # the default 50 ms would trip on a test process starved by a busy machine
    try:
        reply = handshake_and_arm(client, watchdog_ms)
        armed_at = client.cursor  # messages from here on were sent after the ARM's ACK
        assert reply.fields["protocol_version"] == SPEC.protocol_version
        assert reply.si("torque_max_mNm") == pytest.approx(
            load_spec().limits["torque_max_mNm"] * 1e-3)
        assert reply.fields["watchdog_default_ms"] == 50

        # Stream the ramp at ~500 Hz for 1.6 s (position mode, velocity feed-forward).
        start = time.perf_counter()
        last_seq = -1
        while (t := time.perf_counter() - start) < 1.6:
            velocity = 1.0 if 0.2 < t < 1.2 else 0.0
            last_seq = client.send("SETPOINT", time_ms=round(t * 1000), mode=0,
                                   position_urad=round(ramp_rad(t) * 1e6),
                                   velocity_urad_s=round(velocity * 1e6), torque_mNm=0)
            client.poll()
            time.sleep(0.002)
        streamed = [m for m in client.received[armed_at:] if m.name == "TELEMETRY"]
        assert all(m.fields["state"] == ARMED for m in streamed)
        # The measured position follows the ramp: compare each telemetry frame with the ramp at
        # the time of the setpoint in force.
        moving = [m for m in streamed if 300 <= m.fields["setpoint_time_ms"] <= 1150]
        assert len(moving) > 500
        errors = sorted(abs(m.si("position_urad") - ramp_rad(m.fields["setpoint_time_ms"] / 1000))
                        for m in moving)
        # rad: 2–4 mrad expected (friction / Kp, setpoint age); margins for the hiccups of a loaded,
        # shared machine (the simulated bench then runs late ticks back to back).
        assert errors[len(errors) // 2] < 0.01
        assert errors[int(0.95 * len(errors))] < 0.025
        assert errors[-1] < 0.06
        assert streamed[-1].si("position_urad") == pytest.approx(1.0, abs=0.01)
        cruising = [m.si("velocity_urad_s") for m in moving]
        assert sum(cruising) / len(cruising) == pytest.approx(1.0, abs=0.02)  # rad/s
        assert streamed[-1].fields["bad_frames"] == 0

        # Streaming stops: the watchdog trips 150 ms (firmware ticks) after the last setpoint.
        fault = client.wait_for(lambda m: m.name == "TELEMETRY" and m.fields["state"] == FAULT)
        assert fault.fields["fault"] == SPEC.faults["WATCHDOG"]
        # First telemetry echoing the last setpoint (sequence numbers wrap: walk back from the
        # fault over the frames that echo it).
        telemetry = client.telemetry()
        index = telemetry.index(fault)
        while telemetry[index - 1].fields["seq_echo"] == last_seq:
            index -= 1
        fed = telemetry[index]
        assert watchdog_ms <= fault.fields["mcu_ticks"] - fed.fields["mcu_ticks"] <= watchdog_ms + 1
        # The torque ramps to zero and the fault stays latched until cleared: every frame over
        # the next 200 of the firmware's ticks (not 0.2 s of wall time: the bench may run late)
        zero = client.wait_for(lambda m: m.name == "TELEMETRY" and m.fields["torque_mNm"] == 0)
        later = client.wait_for(lambda m: m.name == "TELEMETRY"
                                and m.fields["mcu_ticks"] >= zero.fields["mcu_ticks"] + 200)
        latched = client.received[client.received.index(zero):client.received.index(later) + 1]
        assert all(m.fields["state"] == FAULT for m in latched if m.name == "TELEMETRY")
        assert client.command("ARM", watchdog_ms=0, lead_ms=1) == SPEC.results["FAULT_LATCHED"]
        assert client.command("CLEAR_FAULT") == OK
        client.wait_for(lambda m: m.name == "TELEMETRY" and m.fields["state"] == DISARMED)
    finally:
        client.close()


def test_an_injection_is_in_force_when_it_returns_and_an_unknown_one_is_refused(
        simulated_bench):
    with pytest.raises(BenchError) as refused:
        simulated_bench.command("levitate 3")
    assert str(refused.value) == (f"{simulated_bench.port}: the simulated bench has no command "
                                  "'levitate 3'")
    client = Client(simulated_bench.port)
    try:
        client.send("HELLO", protocol_version=PROTOCOL_VERSION, telemetry_period_ms=5)
        client.wait_for(lambda m: m.name == "HELLO_REPLY")
        # No sleep between the injection and the command it delays: in force on return.
        simulated_bench.command("delay 300")
        started = time.monotonic()
        assert client.command("DISARM") == OK
        assert time.monotonic() - started > 0.25
    finally:
        client.close()


def test_estop_input_and_reset_injection(simulated_bench):
    client = Client(simulated_bench.port)
    try:
        handshake_and_arm(client, watchdog_ms=200)
        for k in range(50):
            client.send("SETPOINT", time_ms=k, mode=2, position_urad=0, velocity_urad_s=0,
                        torque_mNm=20000)
            client.poll()
            time.sleep(0.002)
        simulated_bench.command("estop on")
        fault = client.wait_for(lambda m: m.name == "TELEMETRY" and m.fields["state"] == FAULT)
        assert fault.fields["fault"] == SPEC.faults["ESTOP_INPUT"]
        assert client.command("CLEAR_FAULT") == SPEC.results["ESTOP_ACTIVE"]
        simulated_bench.command("estop off")  # applied within 10 ms: asked until it is
        eventually(lambda: client.command("CLEAR_FAULT"), lambda result: result == OK,
                   "CLEAR_FAULT accepted once the e-stop input is released")

        # A firmware reset loses the session: no telemetry until a new HELLO, ticks restart.
        before = client.wait_for(lambda m: m.name == "TELEMETRY" and m.fields["mcu_ticks"] > 1000
                                 ).fields["mcu_ticks"]  # > 1000 ticks into the session
        simulated_bench.command("reset")
        quiet = False
        for _ in range(20):  # within 2 s, a 100 ms window without any telemetry
            client.drain()
            count = len(client.telemetry())
            time.sleep(0.1)
            client.drain()
            if len(client.telemetry()) == count:
                quiet = True
                break
        assert quiet
        assert client.command("ARM", watchdog_ms=0, lead_ms=1) == SPEC.results["NO_HANDSHAKE"]
        reply = handshake_and_arm(client)
        assert reply.fields["mcu_ticks"] < before
    finally:
        client.close()


def test_corrupted_bytes_are_counted_and_never_applied():
    faults = SimFaults(corrupt=0.02, seed=7)
    with start_simulated_bench(faults=faults) as running:
        client = Client(running.port)
        try:
            # Commands may be garbled too: the handshake is sent again until telemetry shows it
            # got through (0.2 s for each answer; 10 s in all), then ARM likewise until a frame
            # shows the axis ARMED (arming is needed for setpoints to be applied).
            eventually(lambda: answered(client, "HELLO", lambda m: m.name == "TELEMETRY",
                                        protocol_version=PROTOCOL_VERSION,
                                        telemetry_period_ms=1),
                       bool, "telemetry after a HELLO through the corrupted line")
            eventually(lambda: answered(client, "ARM", lambda m: m.name == "TELEMETRY"
                                        and m.fields["state"] == ARMED, watchdog_ms=500,
                                        lead_ms=1),
                       bool, "an ARMED frame after an ARM through the corrupted line")
            for k in range(400):
                client.send("SETPOINT", time_ms=k, mode=0, position_urad=200000,
                            velocity_urad_s=0, torque_mNm=0)
                client.poll()
                time.sleep(0.001)

            def settled(m: Message) -> bool:
                """All of the assertions below hold, or the axis is no longer ARMED."""
                return m.name == "TELEMETRY" and (
                    m.fields["state"] != ARMED
                    or (m.fields["bad_frames"] >= 20 and m.fields["seq_gaps"] >= 20
                        and m.si("position_urad") == pytest.approx(0.2, abs=0.01)))

            # ≈ 2 % of ≈ 25-byte frames garbled: tens of bad frames, the rest tracked. The
            # counters and the position still change for a while after the last send (frames
            # in flight, the plant settling): the frame showing them all is waited for, armed
            # (the 500 ms watchdog after the last setpoint would end the wait otherwise).
            last = client.wait_for(settled)
            assert last.fields["bad_frames"] >= 20
            assert last.fields["seq_gaps"] >= 20
            assert last.fields["state"] == ARMED
            assert last.si("position_urad") == pytest.approx(0.2, abs=0.01)
            # The only setpoint ever applied is the one streamed (time 0..399 ms).
            assert {m.fields["setpoint_time_ms"] for m in client.telemetry()} <= set(range(400))
        finally:
            client.close()
    assert "corrupted" in running.stats


def answered(client: Client, name: str, accept, **fields: int) -> bool:
    """Send ``name`` and say whether a message for which ``accept`` holds comes within 0.2 s
    (one try of a command that the line may garble: the caller tries again)."""
    client.send(name, **fields)
    try:
        client.wait_for(accept, timeout_s=0.2)
    except AssertionError:
        return False
    return True


def test_bad_configuration_and_fault_flags_are_reported(tmp_path):
    config = tmp_path / "bench_sim.toml"
    config.write_text("[plant]\ninertia_kg_m2 = -1.0\n")
    with pytest.raises(ConfigError, match=r"\[plant\] inertia_kg_m2 = -1.0"):
        load_sim_config(config)
    with pytest.raises(BenchError, match=r"drop takes a probability in \[0, 1\], not 1.5"):
        start_simulated_bench(faults=SimFaults(drop=1.5))
    with pytest.raises(BenchError, match="delay_ms takes whole milliseconds"):
        start_simulated_bench(faults=SimFaults(delay_ms=-3))


def test_stall_drop_and_delay_injection():
    # Stall the firmware for 100 ms from 200 ms after start (less than the board's 120 ms
    # hardware watchdog): its clock falls behind the host's.
    with start_simulated_bench(faults=SimFaults(stall_at_ms=200, stall_ms=100)) as running:
        client = Client(running.port)
        try:
            started = time.monotonic()
            client.send("HELLO", protocol_version=PROTOCOL_VERSION, telemetry_period_ms=1)
            # a frame from well after the stall in the firmware's own time (its ticks stood
            # still 100 ms of the 500): the host's clock is then ahead of the firmware's
            frame = client.wait_for(lambda m: m.name == "TELEMETRY"
                                    and m.fields["mcu_ticks"] >= 400)
            host_ms = (time.monotonic() - started) * 1000
            firmware_ms = frame.fields["mcu_ticks"]
            assert host_ms - firmware_ms > 60  # ≈ 100 ms frozen (loose: the machine is shared)

            # Dropped bytes: frames lost (sequence gaps) or broken (bad frames), none invented.
            running.command("drop 0.05")  # returns once in force
            for k in range(300):
                client.send("HEARTBEAT")
                if k % 30 == 29:
                    time.sleep(0.01)  # bursts of 30 frames: ≈ 210 bytes, far below the pty buffer
            running.command("drop 0")
            # The firmware's counters, once it has read what was sent (≈ 5 % of 300 frames hit).
            client.wait_for(lambda m: m.name == "TELEMETRY"
                            and m.fields["bad_frames"] + m.fields["seq_gaps"] >= 30
                            and m.fields["seq_gaps"] >= 10)

            # Delayed bytes: a command is answered only after the delay.
            running.command("delay 400")
            seq = client.send("DISARM")
            with pytest.raises(AssertionError):
                client.wait_for(lambda m: m.name == "ACK" and m.fields["acked_seq"] == seq,
                                timeout_s=0.15)
            ack = client.wait_for(lambda m: m.name == "ACK" and m.fields["acked_seq"] == seq)
            assert ack.fields["result"] == OK
        finally:
            client.close()


def hello_ticks(client: Client) -> int:
    """The ``mcu_ticks`` of a HELLO's reply, -1 if none comes within 0.5 s (a stalled firmware
    reads nothing; its reply comes later, to a later call)."""
    client.send("HELLO", protocol_version=PROTOCOL_VERSION, telemetry_period_ms=5)
    try:
        return client.wait_for(lambda m: m.name == "HELLO_REPLY", timeout_s=0.5).fields[
            "mcu_ticks"]
    except AssertionError:
        return -1


def test_the_simulated_board_has_the_avr_board_hardware_watchdog():
    """The simulated bench resets a firmware stalled as long as the AVR board's watchdog would."""
    host = (FIRMWARE_DIR / "board" / "host" / "hal_host.h").read_text()
    avr = (FIRMWARE_DIR / "board" / "avr" / "board.h").read_text()
    assert re.search(r"#define HOST_HW_WATCHDOG_MS (\d+)u", host)[1] == str(HW_WATCHDOG_MS)
    assert re.search(r"#define BOARD_HW_WATCHDOG_MS (\d+)u", avr)[1] == str(HW_WATCHDOG_MS)
    timings = []
    for stall_ms in (HW_WATCHDOG_MS - 20, HW_WATCHDOG_MS + 20):
        with start_simulated_bench(faults=SimFaults(stall_at_ms=100, stall_ms=stall_ms)) as bench:
            # Until the bench is past the stall (not a guessed 0.4 s: a bench running late on a
            # loaded machine may not be there yet): a HELLO answered with more than 110 ticks
            # is, with or without the reset (the ticks stand at 100 while stalled; from 0 after
            # a reset, i.e. from 220 ms on).
            client = Client(bench.port)
            try:
                eventually(functools.partial(hello_ticks, client), lambda ticks: ticks > 110,
                           "a HELLO answered after the stall")
            finally:
                client.close()
        timings.append(bench.tick_timing())
    assert [timing["hw_watchdog_resets"] for timing in timings] == [0, 1]
