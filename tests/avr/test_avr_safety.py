"""Safety on the emulated ATmega2560: the host going silent trips the firmware watchdog, the
e-stop pin cuts the motor in its interrupt and the core latches the fault within one tick, and a
main loop starved by an interrupt storm is reset by the hardware watchdog.

Every duration is measured in EMULATED time (mcu_ticks, CPU cycles), never on the wall clock:
the emulation may run slower than real time on a loaded machine, and the firmware only ever
sees its own clock.
"""

from __future__ import annotations

import time

from tests.avr.emulated import SPEC
from tests.waiting import eventually

OK = SPEC.results["OK"]
ARMED, FAULT, DISARMED = SPEC.states["ARMED"], SPEC.states["FAULT"], SPEC.states["DISARMED"]
TICK_CYCLES = 16_000
WATCHDOG_MS = 200
TORQUE_STEP_MS = 4  # 25 setpoints in the queue with a 100 ms lead (it holds 32)


def stream_paced(client, count: int, start_ms: int = 0, step_ms: int = 2, until=None,
                 **fields: int) -> int:
    """Send ``count`` setpoints (``fields``) of times ``start_ms + step_ms · k`` ms, paced on
    the firmware's own clock: setpoint k goes once a telemetry frame shows the firmware
    ``step_ms · k`` ticks past the first one's; it stops early at a telemetry frame for which
    ``until`` holds. Paced on the wall clock, an emulation slower than real time (a loaded
    machine) would receive them faster than their times and its queue of 32 overflow (fault
    QUEUE_OVERFLOW where the test expects WATCHDOG: seen at load 3 without real-time
    priority). Returns the last one's seq."""
    seq, k, origin, seen = -1, 0, None, len(client.received)
    deadline = time.monotonic() + 60.0  # generous: the waits end with the firmware's ticks
    while k < count:
        assert time.monotonic() < deadline, f"the firmware's ticks stopped after {k} setpoints"
        client.poll()
        frames = [m for m in client.received[seen:] if m.name == "TELEMETRY"]
        seen = len(client.received)
        if not frames:
            continue
        if until is not None and any(until(m) for m in frames):
            break
        ticks = frames[-1].fields["mcu_ticks"]
        origin = ticks if origin is None else origin
        while k < count and origin + step_ms * k <= ticks:
            seq = client.send("SETPOINT", time_ms=start_ms + step_ms * k, **fields)
            k += 1
    return seq


def stream_hold(client, position_urad: int, count: int) -> int:
    """Send ``count`` position setpoints holding ``position_urad`` (paced as
    :func:`stream_paced`); the last one's seq."""
    return stream_paced(client, count, mode=SPEC.modes["POSITION"], position_urad=position_urad,
                        velocity_urad_s=0, torque_mNm=0)


def stream_torque(client, count: int, start_ms: int = 0, until=None) -> None:
    """Torque-mode setpoints of a constant 5 N·m, one per 4 ms of gesture time (paced as
    :func:`stream_paced`, up to ``until``): the motor carries that torque (friction holds the
    speed near 3 rad/s within the few tenths of a second this lasts)."""
    stream_paced(client, count, start_ms, TORQUE_STEP_MS, until, mode=SPEC.modes["TORQUE"],
                 position_urad=0, velocity_urad_s=0, torque_mNm=5_000)


def telemetry(client) -> list:
    return [m for m in client.received if m.name == "TELEMETRY"]


def test_stopping_the_host_trips_the_watchdog_within_its_timeout(board, client):
    client.handshake(telemetry_period_ms=1)
    # 200 ms: a test process starved by a loaded machine must not trip it while it streams
    assert client.ack("ARM", watchdog_ms=WATCHDOG_MS, lead_ms=1) == OK
    last_seq = stream_hold(client, 50_000, 150)  # 0.05 rad: a gentle move, no limit reached
    # The host stops. The firmware must trip between 200 and 201 ticks after the last setpoint.
    fault = client.wait_for(lambda m: m.name == "TELEMETRY" and m.fields["state"] == FAULT)
    assert fault.fields["fault"] == SPEC.faults["WATCHDOG"]
    frames = telemetry(client)
    echoed = [i for i, m in enumerate(frames) if m.fields["seq_echo"] == last_seq]
    first = echoed[0]
    assert first > 0 and frames[first - 1].fields["state"] == ARMED
    # telemetry every tick: the last setpoint arrived after the previous frame's tick and by
    # this frame's tick
    arrived_after = frames[first - 1].fields["mcu_ticks"]
    arrived_by = frames[first].fields["mcu_ticks"]
    assert arrived_by - arrived_after == 1
    # The frame was handled between those two ticks, so the core fed the watchdog at tick
    # `arrived_after`; it trips at the first tick more than 200 ticks later (PROTOCOL.md §8).
    trip_tick = fault.fields["mcu_ticks"]
    assert WATCHDOG_MS < trip_tick - arrived_after <= WATCHDOG_MS + 2
    # The torque then ramps to zero (1000 mN·m per tick) and the fault stays latched.
    last = client.wait_for(lambda m: m.name == "TELEMETRY" and m.fields["torque_mNm"] == 0)
    assert last.fields["state"] == FAULT and last.fields["fault"] == SPEC.faults["WATCHDOG"]
    assert client.ack("ARM", watchdog_ms=WATCHDOG_MS, lead_ms=1) == SPEC.results["FAULT_LATCHED"]


def test_estop_pin_cuts_the_motor_in_the_interrupt_and_faults_within_one_tick(board, client):
    client.handshake(telemetry_period_ms=1)
    # a 100 ms lead (25 setpoints queued): the firmware's queue absorbs the jitter of a test
    # process on a loaded machine, so no setpoint is overdue (an overdue one drops the
    # feed-forward: 0 N·m) when the pin is pulled
    assert client.ack("ARM", watchdog_ms=200, lead_ms=100) == OK
    stream_torque(client, 60)
    board.command("estop on")
    # the host keeps streaming until the fault shows: the pin alone stops the motor
    stream_torque(client, 1000, start_ms=60 * TORQUE_STEP_MS,
                  until=lambda m: m.fields["state"] == FAULT)
    event = board.wait_event(r"estop pulled at mcu tick (\d+) with (-?[\d.]+) N\.m on the "
                             r"motor: motor output zero after (\d+) cycles")
    pulled_tick, torque_nm, cycles = (int(event.group(1)), float(event.group(2)),
                                      int(event.group(3)))
    assert 4.5 < torque_nm < 5.5  # the motor was really pushing when the pin was pulled
    assert cycles < 1000  # the interrupt cut it within microseconds (16 cycles per µs) ...
    fault = client.wait_for(lambda m: m.name == "TELEMETRY" and m.fields["state"] == FAULT)
    assert fault.fields["fault"] == SPEC.faults["ESTOP_INPUT"]
    # ... and the core latched the fault at the tick running or the next one
    assert pulled_tick <= fault.fields["mcu_ticks"] <= pulled_tick + 1
    assert fault.fields["torque_mNm"] == 0
    # Nothing clears it while the pin is pulled; once released, CLEAR_FAULT then ARM work.
    assert client.ack("CLEAR_FAULT") == SPEC.results["ESTOP_ACTIVE"]
    board.command("estop off")  # the emulation may lag: asked until the release is seen
    eventually(lambda: client.ack("CLEAR_FAULT"), lambda result: result == OK,
               "CLEAR_FAULT accepted once the e-stop pin is released")
    assert client.ack("ARM", watchdog_ms=200, lead_ms=1) == OK


def test_a_starved_main_loop_is_reset_by_the_hardware_watchdog(board, client):
    client.handshake(telemetry_period_ms=5)
    assert client.ack("ARM", watchdog_ms=200, lead_ms=1) == OK
    stream_hold(client, 50_000, 40)
    # An edge on encoder pin A every 40 cycles: the encoder interrupt leaves the main loop one
    # instruction per interrupt, no tick completes, nothing feeds the hardware watchdog.
    board.command("noise 400")
    board.wait_event(r"MCU reset \(hardware watchdog\) at emulated ([\d.]+) s")
    # The reset lost the session: the outputs float (zero torque) and ARM needs a new HELLO.
    # (Nothing to wait for before asking: the harness holds the bytes until the rebooted
    # firmware enables its receiver, and the firmware's first byte, a delimiter, ends any frame
    # the reset cut; the ACK is the event waited for.)
    assert client.ack("ARM", watchdog_ms=200, lead_ms=1) == SPEC.results["NO_HANDSHAKE"]
    reply = client.handshake(telemetry_period_ms=5)
    state = client.wait_for(lambda m: m.name == "TELEMETRY")
    assert state.fields["state"] == DISARMED and state.fields["fault"] == SPEC.faults["NONE"]
    assert state.fields["torque_mNm"] == 0
    stats = board.stop()
    assert stats["resets"] == 1
    # mcu_ticks restarted from 0 at the reset: fewer ticks than the harness counted in total
    assert reply.fields["mcu_ticks"] < stats["ticks"] - 100


def test_driver_fault_pin_stops_the_motor(board, client):
    client.handshake(telemetry_period_ms=1)
    assert client.ack("ARM", watchdog_ms=200, lead_ms=1) == OK
    stream_torque(client, 40)
    board.command("driver on")  # the driver pulls its fault line low
    # the host keeps streaming until the fault shows (silent, it would trip the watchdog
    # first if the emulation took the command more than 200 ms later: a loaded machine)
    stream_torque(client, 1000, start_ms=40 * TORQUE_STEP_MS,
                  until=lambda m: m.fields["state"] == FAULT)
    fault = client.wait_for(lambda m: m.name == "TELEMETRY" and m.fields["state"] == FAULT)
    assert fault.fields["fault"] == SPEC.faults["DRIVER"]
    assert fault.fields["torque_mNm"] == 0  # zero at once, not ramped
    board.command("driver off")  # the emulation may lag: asked until the release is seen
    eventually(lambda: client.ack("CLEAR_FAULT"), lambda result: result == OK,
               "CLEAR_FAULT accepted once the driver's fault line is released")
