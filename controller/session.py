"""One bench session: connect → configure → arm → stream → disarm, and every way of stopping.

As ros2_control separates "communication up" from "power on", :meth:`Session.connect` only
talks (HELLO: protocol version, the firmware's limits, its state) and :meth:`Session.arm` is the
only step that lets the motor produce torque. :meth:`Session.stream` sends a :class:`Plan` at
absolute deadlines while the reader thread logs telemetry and runs the monitors.

Every end of a stream is one of these, each logged as an event and returned in a
:class:`SessionResult` with a clear message:

* ``completed`` — the plan (which ends with its own ramp-down) was sent, then DISARM;
* ``interrupted`` (Ctrl-C, SIGTERM, the live view's ``q``), ``tracking``, ``torque``,
  ``telemetry timeout``, ``host error`` — controlled stop: velocity and torque ramp to zero over
  ``ramp_down_s``, then DISARM (the telemetry's silence is judged once the link has read what
  the port holds: a host stall is logged as ``host stalled``, not taken for a silent bench;
  so is one a handshake wait forgave, naming the wait);
* ``estop`` (the live view's e-stop key) — ESTOP at once (the firmware cuts the torque);
* ``firmware reset`` — the firmware restarted (mcu_ticks went back, or HELLO after silent
  telemetry says so): it is disarmed, zero torque;
* ``fault`` — the firmware latched a fault: it ramps its torque to zero by itself, the host
  stops sending;
* ``link lost`` — nothing can be sent: the firmware watchdog trips within ``watchdog_ms``
  (fault WATCHDOG latched, the torque ramps to zero);
* ``log write failed`` — the session log cannot be written (a full disk, an I/O error): a
  session must be logged whole, so controlled stop (the log keeps what was written before);
* ``late setpoints``, ``sequence gaps``, ``limit flags`` — the firmware's counters (telemetry)
  passed their budget (:data:`LATE_FRACTION` of the setpoints due over :data:`LATE_WINDOW_S`,
  :data:`SEQ_GAP_BUDGET`, :data:`LIMIT_FLAG_BUDGETS`), or the host owes that fraction of a
  window's setpoints past their due time: controlled stop.

:meth:`Session.run` is the guard from ARM to the end: every exception, signal or early return
after ARM goes through the stop sequence (ramp if streaming, else DISARM) and the log's ``stop``
and ``end`` records. Every check that can be made before ARM (:func:`check_stream_settings`,
the pre-flight, the start position) is made before it.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import math
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

from controller.dump import DumpWriter
from controller.errors import BenchError, ConfigError, DataError
from controller.log import LogWriter
from controller.modes import (
    POSITION_SCALE,
    TIME_SCALE,
    TORQUE_SCALE,
    ModeSettings,
    Plan,
    setpoint_fields,
    stop_setpoints,
)
from controller.preflight import FirmwareLimits, safe_angle_range
from controller.profile import DEFAULT_PROFILE, AthleteProfile
from controller.protocol import SPEC_PATH, Message, load_spec
from controller.scheduler import (
    Scheduler,
    TimingStats,
    miss_threshold_ns,
    pinned,
    realtime_priority,
    streaming_cpu,
)
from controller.settings import Bench

TELEMETRY_PERIOD_MS = 5
# After the last setpoint's due time, how long the end of a stream waits for telemetry showing it
# in force before DISARM: three telemetry periods, and at most a third of the watchdog.
DRAIN_MARGIN_S = 0.015
TELEMETRY_TIMEOUT_S = 0.1  # no telemetry for this long while streaming stops the session
BAD_FRAME_BUDGET = 20  # frames lost on the link (either way) tolerated in one session
# The firmware's counters, over one session (telemetry): more than this stops it (controlled stop).
# Setpoints that reached the firmware after their due tick: more than this fraction of those sent
# over the last LATE_WINDOW_S is a link or host persistently slower than the lead (a 30 ms delay
# makes them all late); a single host stall (tens of late ones in a burst, then on time) is not.
LATE_WINDOW_S = 0.5
LATE_FRACTION = 0.5
SEQ_GAP_BUDGET = 20  # host frames that never reached the firmware (missing sequence numbers)
# Telemetry frames carrying a limit flag tolerated in one session: the refusal, clamp and cut-off
# flags mean the firmware overrode the plan (a pre-flighted plan never needs it). Not stop
# criteria: SLEW_LIMITED (the feedback's steps between setpoints, every period below 1 kHz, and
# fast transients meet the slew limit routinely; it delays the torque by a tick or two) and
# FEEDFORWARD_DROPPED (the host fell behind by more than the lead: the late-setpoint monitor
# judges that).
LIMIT_FLAG_BUDGETS = {"POSITION_REFUSED": 0, "VELOCITY_REFUSED": 0, "TORQUE_REFUSED": 0,
                      "TORQUE_CLAMPED": 0, "SPEED_LIMITED": 2, "RANGE_LIMITED": 2}
# The stop sequence: DISARM is sent again every watchdog_ms / DISARM_ATTEMPTS until an ACK (of any
# attempt) or telemetry shows the bench disarmed, with a HEARTBEAT every STOP_HEARTBEAT_S between.
DISARM_ATTEMPTS = 4
STOP_HEARTBEAT_S = 0.005
START_DELAY_NS = 5_000_000  # the first setpoint leaves this long after the stream starts
SWITCH_INTERVAL_S = 1e-4  # GIL hand-over while streaming, so the reader never waits 5 ms
COMMANDED_RING = 2048  # ms of commanded positions kept for the tracking monitor (> watchdog)
LOG_KICK_EVERY = 5  # sends between two wake-ups of the log writer (right after a send)
YOUNG_GC_EVERY = 250  # sends between two young-generation collections while streaming
YOUNG_GC_SLACK_NS = 500_000  # ... run only if the next deadline is at least this far


@dataclass
class SessionResult:
    """How a stream ended: ``reason`` (see the module docstring), message, timing, counts."""

    reason: str
    message: str
    sent: int
    telemetry: int
    timing: dict
    exit_code: int
    firmware: dict = field(default_factory=dict)
    firmware_late: int = -1  # setpoints that reached the firmware after their due tick (-1: ?)
    monitors: dict = field(default_factory=dict)  # the firmware's counters over the session
    host_stalls_ms: list = field(default_factory=list)  # host stalls past the telemetry timeout
    # ... and those a handshake wait forgave (HELLO, ARM, DISARM…: it waited on for the reader)
    handshake_stalls_ms: list = field(default_factory=list)
    ramp_sent: int = 0  # setpoints of the stop ramp sent after ``sent`` (those of the plan)

    @property
    def ok(self) -> bool:
        """True when the whole plan was sent and the bench disarmed normally."""
        return self.reason == "completed"

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)


@dataclass
class Status:
    """Snapshot for the live view (SI units; NaN before the first value).

    ``t_s``, the commanded columns, the measured ones and the tracking error are all for the
    instant of the latest telemetry frame (the setpoint in force then), not the latest sent.
    """

    t_s: float = 0.0
    commanded_rad: float = math.nan
    commanded_torque_nm: float = math.nan
    measured_rad: float = math.nan
    measured_torque_nm: float = math.nan
    tracking_error_rad: float = math.nan
    state: str = "DISCONNECTED"
    fault: str = "NONE"
    rep: int = 0
    sent: int = 0
    misses: int = 0
    late_sends: int = 0


class StopRequestedError(Exception):
    """Raised inside the stream loop to leave it with a reason."""


def check_stream_settings(rate_hz: float, bench: Bench) -> None:
    """Refuse (ConfigError) a rate that would starve the watchdog, or a lead at that rate that
    would overflow the firmware's setpoint queue; ``rate_hz`` in Hz. Needs no bench: called
    before anything is started."""
    spec = load_spec()
    watchdog_ms = float(bench.streaming.watchdog_ms)
    lead_ms = int(bench.streaming.lead_ms)
    period_ms = 1000.0 / rate_hz
    if period_ms > watchdog_ms / 2:
        raise ConfigError(f"rate {rate_hz:g} Hz: one setpoint every {period_ms:g} ms would "
                          f"starve the {watchdog_ms:g} ms watchdog (bench.toml [streaming] "
                          f"watchdog_ms); use at least {2000 / watchdog_ms:g} Hz")
    queued = math.ceil(lead_ms / period_ms) + 2  # in the firmware's queue at most
    depth = int(spec.limits["setpoint_queue"])
    if queued > depth:
        raise ConfigError(f"bench.toml [streaming] lead_ms = {lead_ms}: at {rate_hz:g} Hz up "
                          f"to {queued} setpoints would wait in the firmware's queue of "
                          f"{depth}; lower lead_ms or the rate")


class Session:
    """A session on one bench port (see the module docstring for the lifecycle).

    ``log`` may be None until :meth:`connect`: ``drive`` opens the port (:meth:`open_link`)
    before it creates the session log, then sets ``session.log``.
    """

    def __init__(self, port: str, bench: Bench, log: LogWriter | None, settings: ModeSettings,
                 telemetry_period_ms: int = TELEMETRY_PERIOD_MS,
                 telemetry_timeout_s: float = TELEMETRY_TIMEOUT_S, dump: DumpWriter | None = None,
                 athlete: AthleteProfile = DEFAULT_PROFILE, simulated: bool = False):
        self.port = port
        self.simulated = simulated  # the simulated bench of a dry run, which ends with it
        self.dump = dump
        self.athlete = athlete  # her range of motion bounds the stop ramp too
        self.bench = bench
        self.log = log
        self.settings = settings
        self.telemetry_period_ms = telemetry_period_ms
        self.telemetry_timeout_s = telemetry_timeout_s
        self.watchdog_ms = int(bench.streaming.watchdog_ms)
        self.lead_ms = int(bench.streaming.lead_ms)
        self.spec = load_spec()
        self.status = Status()
        self.firmware: FirmwareLimits | None = None
        self.firmware_info: dict = {}
        self.link = None
        self.scheduler: Scheduler | None = None
        self._stop = threading.Event()
        self._stop_reason = ("", "")
        self._latest: Message | None = None
        self._latest_perf = 0.0
        self._telemetry_count = 0
        self._ticks_seen = -1
        self._reset_seen = ""  # "mcu_ticks X after Y" once telemetry showed a restart
        self._hello_answered = False  # did the last reset probe get a HELLO_REPLY?
        self._fault_baseline: tuple[int, int, int] | None = None  # bad, late, seq gaps
        self._flag_counts: dict[str, int] = {}  # telemetry frames carrying each limit flag
        # (receive time s, firmware's late count, setpoints sent) per telemetry frame, for the
        # late-setpoint window
        self._late_window: collections.deque[tuple[float, int, int]] = collections.deque()
        self._streaming_slots = 0  # the plan's slots while its stream runs (0 outside it)
        self._signals_installed = False
        self._arm_sent = False  # ARM went out: the bench may be armed until DISARM is confirmed
        self._commanded_time = [-1] * COMMANDED_RING
        self._commanded_position = [0] * COMMANDED_RING
        self._commanded_torque = [0] * COMMANDED_RING
        self._sent_fields: list[dict[str, int]] = []  # setpoints sent, by slot, until the stop
        self._ramp_sent = 0  # of them, the stop ramp's (after the plan's, rep -1 in the log)
        self._last_send_ns = 0  # perf_counter_ns of the last SETPOINT written
        self._armed = False
        self._realtime: tuple[bool, bool] | None = None  # (priority granted, own CPU) inside
        self._host_stalls_ms: list[float] = []  # stalls that left telemetry unread (ms)
        self._handshake_stalls_ms: list[float] = []  # stalls a handshake wait forgave (ms)

    # ------------------------------------------------------------------ lifecycle
    def open_link(self) -> None:
        """Open the bench's port (BenchError when it cannot be opened); nothing is sent yet and
        nothing is logged: ``drive`` opens it before it creates the session log."""
        from controller.link import Link

        self.link = Link(self.port, self._on_telemetry, dump=self.dump,
                         on_held_up=self._note_held_up)

    def connect(self, clear_fault: bool = False) -> dict:
        """Open the link (unless :meth:`open_link` did), check the protocol version and read the
        firmware's limits and state."""
        if self.link is None:
            self.open_link()
        reply = self.link.request("HELLO", "HELLO_REPLY", timeout_s=1.0,
                                  protocol_version=self.spec.protocol_version,
                                  telemetry_period_ms=self.telemetry_period_ms)
        fields = reply.fields
        version = f"{fields['fw_major']}.{fields['fw_minor']}.{fields['fw_patch']}"
        if fields["protocol_version"] != self.spec.protocol_version:
            raise BenchError(f"{self.port}: firmware {version} speaks protocol "
                             f"{fields['protocol_version']}, this host speaks "
                             f"{self.spec.protocol_version}: update one of them")
        if "protocol_hash" not in fields:
            raise BenchError(f"{self.port}: firmware {version}'s HELLO_REPLY does not have the "
                             f"layout of protocol {self.spec.protocol_version}: rebuild the "
                             "firmware from this host's definition (make -C firmware)")
        if fields["protocol_hash"] != self.spec.protocol_hash:
            raise BenchError(f"{self.port}: firmware {version} was built from protocol definition "
                             f"{fields['protocol_hash']:08x}, this host reads definition "
                             f"{self.spec.protocol_hash:08x} ({SPEC_PATH}): rebuild the "
                             "firmware from this host's definition (make -C firmware) or install "
                             "the bench side that matches the firmware")
        self.firmware = FirmwareLimits(
            torque_max_nm=reply.si("torque_max_mNm"),
            velocity_max_rad_s=reply.si("velocity_max_urad_s"),
            position_min_rad=reply.si("position_min_urad"),
            position_max_rad=reply.si("position_max_urad"),
            slew_max_nm_s=reply.si("slew_max_mNm_per_tick") * fields["tick_hz"],
        )
        if not fields["watchdog_min_ms"] <= self.watchdog_ms <= fields["watchdog_max_ms"]:
            raise BenchError(f"bench.toml [streaming] watchdog_ms = {self.watchdog_ms}: the "
                             f"firmware accepts {fields['watchdog_min_ms']}.."
                             f"{fields['watchdog_max_ms']} ms")
        lead_max = min(int(self.spec.limits["lead_max_ms"]), self.watchdog_ms - 1)
        if not 1 <= self.lead_ms <= lead_max:
            raise BenchError(f"bench.toml [streaming] lead_ms = {self.lead_ms}: the firmware "
                             f"accepts 1..{lead_max} ms (below watchdog_ms = "
                             f"{self.watchdog_ms})")
        self.firmware_info = {"version": version, "tick_hz": fields["tick_hz"],
                              "protocol_hash": fields["protocol_hash"],
                              "limits": asdict(self.firmware)}
        self.log.event("connected", f"firmware {version} on {self.port}",
                       firmware=self.firmware_info)
        first = self._wait_telemetry(lambda m: True, 1.0, "a first telemetry frame")
        if first.fields["state"] == self.spec.states["FAULT"]:
            fault = self.spec.name_of("faults", first.fields["fault"])
            if not clear_fault:
                raise BenchError(f"{self.port}: the bench has fault {fault} latched; check the "
                                 "bench, then clear it with --clear-fault")
            self._expect_ack("CLEAR_FAULT")
            self.log.event("fault cleared", f"fault {fault} cleared by the operator")
        return self.firmware_info

    def check_start(self, plan: Plan) -> None:
        """Refuse to arm unless the bench sits near the plan's first position."""
        latest = self._latest
        if latest is None:
            raise BenchError(f"{self.port}: no telemetry from the bench")
        measured = latest.si("position_urad")
        start = float(plan.position_rad[0])
        tolerance = math.radians(self.bench.streaming.max_tracking_error_deg)
        if abs(measured - start) > tolerance:
            raise BenchError(f"{self.port}: the bench is at {math.degrees(measured):.1f} deg and "
                             f"the gesture starts at {math.degrees(start):.1f} deg (more than "
                             f"{math.degrees(tolerance):.1f} deg apart): move it to the start")

    def arm(self) -> None:
        """Arm the axis with the configured watchdog and lead; wait for telemetry showing ARMED."""
        self._arm_sent = True  # from here on, an unanswered ARM may have armed the bench
        self.link.watch_gaps()  # the firmware's watchdog counts the host's silences from ARM
        ack = self.link.request("ARM", "ACK", timeout_s=0.5, watchdog_ms=self.watchdog_ms,
                                lead_ms=self.lead_ms)
        result = self.spec.name_of("results", ack.fields["result"])
        if result != "OK":
            self._arm_sent = False  # refused: the bench stayed disarmed
            raise BenchError(f"{self.port}: the bench refused ARM: {result}")
        self._armed = True
        # not synced: an fsync on a busy disk can outlast the watchdog, and nothing is sent
        # meanwhile; the end record puts it on disk
        self.log.event("armed", f"watchdog {self.watchdog_ms} ms, lead {self.lead_ms} ms",
                       sync=False)
        armed = self.spec.states["ARMED"]
        self._wait_telemetry(lambda m: m.fields["state"] == armed, 0.5, "telemetry showing ARMED",
                             heartbeat=True)

    def disarm(self) -> None:
        """DISARM (zero torque at once), confirmed by the bench, within the watchdog period.

        DISARM is idempotent: it is sent again every ``watchdog_ms / DISARM_ATTEMPTS`` until an
        ACK of any attempt, or a telemetry frame received after the first one showing DISARMED,
        confirms it; a HEARTBEAT every :data:`STOP_HEARTBEAT_S` keeps the watchdog fed meanwhile.
        Raises BenchError when it is refused (a fault latched) or not confirmed in time.
        """
        from controller.link import Deadline

        disarm_id = self.spec.messages["DISARM"].id
        disarmed = self.spec.states["DISARMED"]
        retry_s = self.watchdog_ms / 1000 / DISARM_ATTEMPTS
        self.link.drop_replies()
        sent: set[int] = set()
        count = self._telemetry_count
        start = time.perf_counter()
        deadline = Deadline(self.link, DISARM_ATTEMPTS * retry_s, "DISARM's confirmation")
        end = deadline.at
        next_disarm = next_heartbeat = start
        confirmed = ""
        while not confirmed:
            now = time.perf_counter()
            # every attempt's time is over and the reader has handled what arrived until then
            # (a host stall does not lose a confirmation): checked before looking at the replies
            expired = len(sent) >= DISARM_ATTEMPTS and deadline.passed()
            if now >= next_disarm and len(sent) < DISARM_ATTEMPTS:
                sent.add(self.link.send("DISARM")[0])
                next_disarm, next_heartbeat = now + retry_s, now + STOP_HEARTBEAT_S
            elif now >= next_heartbeat and now < end:  # after it, the watchdog may run out
                self.link.send("HEARTBEAT")
                next_heartbeat = now + STOP_HEARTBEAT_S
            reply = self.link.next_reply(0.0 if expired else min(STOP_HEARTBEAT_S, 0.002))
            if (reply is not None and reply.name == "ACK" and reply.fields["acked_id"] == disarm_id
                    and reply.fields["acked_seq"] in sent):
                result = self.spec.name_of("results", reply.fields["result"])
                if result != "OK":
                    deadline.end()
                    raise BenchError(f"{self.port}: the bench refused DISARM: {result}")
                confirmed = "ACK"
            latest = self._latest
            if (not confirmed and self._telemetry_count > count and latest is not None
                    and latest.fields["state"] == disarmed):
                confirmed = "telemetry"
            if expired and reply is None:
                break
        deadline.end()
        if not confirmed:
            raise BenchError(f"{self.port}: DISARM sent {len(sent)} times over "
                             f"{(time.perf_counter() - start) * 1000:.0f} ms, never confirmed")
        self._armed = False
        self._arm_sent = False
        self.log.event("disarmed", "bench disarmed by the host", confirmed_by=confirmed,
                       attempts=len(sent))

    def close(self) -> None:
        """Close the link (the log is closed by its owner)."""
        if self.link is not None:
            self.link.close()

    # ------------------------------------------------------------------ the guard from ARM
    @contextlib.contextmanager
    def signals(self):
        """Ctrl-C (SIGINT) and SIGTERM request a controlled stop while inside (main thread only;
        nested uses are one)."""
        if self._signals_installed or threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum, frame):
            name = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            self.request_stop("interrupted", f"stopped by {name}")

        previous = (signal.signal(signal.SIGINT, handler), signal.signal(signal.SIGTERM, handler))
        self._signals_installed = True
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous[0])
            signal.signal(signal.SIGTERM, previous[1])
            self._signals_installed = False

    @contextlib.contextmanager
    def realtime(self):
        """The armed phase's conditions, from before ARM to the end of the stop sequence.

        From ARM on, the firmware faults (WATCHDOG) when nothing reaches it for ``watchdog_ms``
        (50 ms): the host's every pause counts, also between ARM and the first setpoint. Inside,
        the calling thread runs under SCHED_FIFO on its own CPU when the OS allows it (a normal
        thread on a busy machine can wait tens of ms for a CPU), the garbage collector is
        frozen and off (a collection of a large heap takes tens to hundreds of ms; young
        collections run in the stream's slack, see ``_collect_young``) and the interpreter hands
        over its lock every :data:`SWITCH_INTERVAL_S`. Everything is given back on exit. Nested
        uses are one (:meth:`run` enters it before ARM, :meth:`stream` for callers that arm
        themselves).
        """
        if self._realtime is not None:
            yield
            return
        with contextlib.ExitStack() as restore:
            previous_switch = sys.getswitchinterval()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
            restore.callback(sys.setswitchinterval, previous_switch)
            collecting = gc.isenabled()
            # Everything alive now moves to the permanent generation (O(1)) and the automatic
            # collector is off: inside, only the stream's young collections (_collect_young)
            # reclaim memory, in its slack.
            gc.freeze()
            gc.disable()
            restore.callback(gc.unfreeze)
            if collecting:
                restore.callback(gc.enable)
            granted = restore.enter_context(realtime_priority())
            cpu = streaming_cpu()
            own_cpu = restore.enter_context(pinned(None if cpu is None else {cpu}))
            self._realtime = (granted, own_cpu)
            restore.callback(setattr, self, "_realtime", None)
            yield

    def run(self, plan: Plan, scheduler: Scheduler | None = None) -> SessionResult:
        """ARM, stream ``plan``, end: every way out after ARM goes through the stop sequence.

        A stop asked for (signal, live view) before ARM returns without arming, and a log that
        could not be written is a DataError without arming; after it, an
        exception in :meth:`arm` or :meth:`stream` (or a stop asked for before the first
        setpoint) ends with DISARM (a ramp if setpoints were sent), the log's ``stop`` and
        ``end`` records, and a :class:`SessionResult` (exit code 3 for an error, 1 for a stop by
        the operator). Call :func:`check_stream_settings` and the pre-flight before.
        """
        unwritable = self._write_failure()
        if unwritable:  # a session is never run unlogged
            raise DataError(f"{unwritable}: refused before arming; the bench was not armed")
        with self.signals():
            if self._stop.is_set():
                reason, message = self._stop_reason
                message = f"{message} before arming; the bench was not armed"
                self.log.event("stop", message, reason=reason)
                self.log.end(reason, message=message, timing={}, sent=0,
                             telemetry=self._telemetry_count)
                return SessionResult(reason, message, 0, self._telemetry_count, {},
                                     _exit_code(reason), self.firmware_info,
                                     monitors=self._monitor_counts(),
                                     handshake_stalls_ms=list(self._handshake_stalls_ms))
            with self.realtime():  # from before ARM: the watchdog counts from there
                try:
                    self.arm()
                    return self.stream(plan, scheduler)
                except BaseException as error:
                    if not (self._armed or self._arm_sent):
                        raise
                    result = self._abort(error)
                    if not isinstance(error, Exception):
                        raise
                    return result

    def _abort(self, error: BaseException) -> SessionResult:
        """Stop sequence after an exception between ARM and the end of a stream."""
        with contextlib.suppress(Exception):
            self.link.poll_mode(False)
        reason = "link lost" if self.link.lost else "host error"
        if isinstance(error, BenchError):
            message = str(error)
        else:
            message = f"{type(error).__name__}: {error}".rstrip(": ")
        if self._stop.is_set() and self._stop_reason[0] == "interrupted":
            reason, message = self._stop_reason
        # before any setpoint, the host's silences since ARM are known only here
        silence = {} if self._sent_fields else self._silence_since_arm()
        self.log.event("stop", message, sync=False, reason=reason, **silence)
        last = self._sent_fields[-1] if self._sent_fields else None
        try:
            reason, message = self._finish(reason, message, self.scheduler, last)
        except Exception as again:  # the stop sequence itself failed: DISARM is the safe side
            try:
                self.disarm()
                message = f"{message}; stop sequence failed ({again}); disarmed"
            except Exception as last_error:  # nothing else can be tried
                message = (f"{message}; stop sequence failed ({again}; {last_error}); the "
                           f"firmware watchdog ({self.watchdog_ms} ms) trips; "
                           f"{self._bench_state_now()}")
        sent = len(self._sent_fields) - self._ramp_sent
        timing = self.scheduler.stats().to_dict() if self.scheduler is not None and sent else {}
        return self._ended(reason, message, sent, timing)

    def _ended(self, reason: str, message: str, sent: int, timing: dict) -> SessionResult:
        """The log's end record and the result of a session that armed: ``sent`` setpoints of
        the plan (the stop ramp's counted apart), ``timing`` the stream's statistics."""
        result = SessionResult(reason, message, sent, self._telemetry_count, timing,
                               _exit_code(reason), self.firmware_info, self._firmware_late(),
                               self._monitor_counts(), list(self._host_stalls_ms),
                               list(self._handshake_stalls_ms), self._ramp_sent)
        self.log.end(reason, message=message, timing=timing, sent=sent,
                     ramp_down_sent=self._ramp_sent, telemetry=self._telemetry_count,
                     monitors=result.monitors)
        return result

    # ------------------------------------------------------------------ streaming
    def request_stop(self, reason: str, message: str) -> None:
        """Ask the stream loop to stop (thread-safe; the first reason wins)."""
        if not self._stop.is_set():
            self._stop_reason = (reason, message)
            self._stop.set()

    @property
    def stop_requested(self) -> str:
        """The reason of the stop asked for ("" while none is): the live views show the ramp."""
        return self._stop_reason[0] if self._stop.is_set() else ""

    def stream(self, plan: Plan, scheduler: Scheduler | None = None) -> SessionResult:
        """Send ``plan`` at its rate, monitor, and end in a controlled way (see module doc).

        ``scheduler`` replaces the absolute-time :class:`Scheduler` (the benchmark passes a
        naive sleep loop with the same interface to measure it in the same conditions).
        """
        check_stream_settings(plan.rate_hz, self.bench)
        ramp_slots = math.ceil(self.settings.ramp_down_s * plan.rate_hz) + 1
        scheduler = scheduler or Scheduler(round(1e9 / plan.rate_hz),
                                           miss_threshold_ns(self.lead_ms * 1_000_000),
                                           capacity=len(plan) + ramp_slots)
        self.scheduler = scheduler
        self._latest_perf = time.perf_counter()
        last = setpoint_fields(plan, 0)
        self._sent_fields = []
        sent = 0
        with contextlib.ExitStack() as restore:
            restore.enter_context(self.signals())
            restore.enter_context(self.realtime())
            granted, own_cpu = self._realtime
            restore.callback(self.link.poll_mode, False)
            self.link.poll_mode(True)
            try:
                # start a little in the future, so that logging the start is not a late send
                scheduler.t0_ns = time.perf_counter_ns() + START_DELAY_NS
                self._streaming_slots = len(plan)
                self.log.event("streaming", f"{len(plan)} setpoints at {plan.rate_hz:g} Hz",
                               sync=False, rate_hz=plan.rate_hz, realtime=granted,
                               lead_ms=self.lead_ms,
                               own_cpu=own_cpu,
                               miss_threshold_ms=scheduler.miss_threshold_ns * 1e-6,
                               **self._silence_since_arm(),
                               t0_host_time=round(self.log.host_time(scheduler.t0_ns * 1e-9), 9))
                while True:
                    k = scheduler.upcoming()
                    if k >= len(plan):
                        break
                    self._check_health()
                    # everything but the write happens before the deadline
                    prepared = self.link.prepare("SETPOINT", **setpoint_fields(plan, k))
                    scheduler.wait_for(k)  # at once when late: the firmware's queue catches up
                    seq, send_ns = self.link.send_prepared(prepared)
                    scheduler.record(k, send_ns)
                    last = prepared.fields
                    self._sent_fields.append(last)
                    self._last_send_ns = send_ns
                    self._after_send(k, seq, send_ns, last, int(plan.rep[k]))
                    # telemetry received meanwhile: log, monitors
                    self._read_telemetry(scheduler.deadline(k) * 1e-9)
                    sent += 1
                    if sent % LOG_KICK_EVERY == 0:
                        self.log.kick()
                    if sent % YOUNG_GC_EVERY == 0:
                        self._collect_young(scheduler)
                reason, message = "completed", "gesture completed"
            except StopRequestedError:
                reason, message = self._stop_reason
            except BenchError as error:
                reason, message = ("link lost", str(error)) if self.link.lost else (
                    "host error", str(error))
            except Exception as error:  # any host bug still ends in a controlled stop
                reason, message = "host error", f"{type(error).__name__}: {error}"
            self._streaming_slots = 0  # the plan's stream is over: nothing more is owed
            self.link.poll_mode(False)  # the reader thread handles telemetry and replies again
            # not synced here: an fsync can take longer than the watchdog leaves before the
            # controlled stop below; the next synced event or the end record puts it on disk
            self.log.event("stop", message, sync=False, reason=reason)
            reason, message = self._finish(reason, message, scheduler, last)
        return self._ended(reason, message, sent, scheduler.stats().to_dict())

    def _silence_since_arm(self) -> dict:
        """The host's silences from ARM until now, for the log: ``silence_since_arm_ms`` (the
        longest time between two writes, ms) and ``last_write_host_time`` (s, log time; absent
        when nothing was written). The replay adds them to the stream's gaps
        (``controller.replay.host_silence_ms``): the firmware's watchdog counts them all."""
        if self.link is None or not self.link.last_write_ns:
            return {}
        return {"silence_since_arm_ms": round(self.link.longest_gap_ns * 1e-6, 3),
                "last_write_host_time": round(self.log.host_time(self.link.last_write_ns * 1e-9),
                                              6)}

    def _after_send(self, k: int, seq: int, send_ns: int, fields: dict[str, int],
                    rep: int) -> None:
        """Bookkeeping of a setpoint just sent: log, tracking reference, live status."""
        self.log.setpoint(send_ns * 1e-9, k=k, seq=seq, rep=rep, **fields)
        self._remember(fields)
        status = self.status  # the commanded columns follow the telemetry (_on_telemetry)
        status.rep = rep
        status.sent += 1
        status.misses = self.scheduler.misses
        status.late_sends = self.scheduler.late

    def _remember(self, fields: dict[str, int]) -> None:
        """Keep the commanded position of a setpoint for the tracking monitor (bounded ring)."""
        slot = fields["time_ms"] % COMMANDED_RING
        self._commanded_time[slot] = fields["time_ms"]
        self._commanded_position[slot] = fields["position_urad"]
        self._commanded_torque[slot] = fields.get("torque_mNm", 0)

    def _commanded(self, time_ms: int) -> int | None:
        """Commanded position (µrad) of the setpoint of stream time ``time_ms``, if recent."""
        slot = time_ms % COMMANDED_RING
        return self._commanded_position[slot] if self._commanded_time[slot] == time_ms else None

    @staticmethod
    def _collect_young(scheduler: Scheduler) -> None:
        """A young-generation collection, only when the next deadline leaves time for it."""
        if scheduler.deadline(scheduler.next_k) - time.perf_counter_ns() > YOUNG_GC_SLACK_NS:
            gc.collect(0)

    def _check_health(self) -> None:
        """Raise StopRequestedError when a monitor, the operator, the link or the log (it could
        not be written) asked to stop."""
        if self._stop.is_set():
            raise StopRequestedError
        unwritable = self._write_failure()  # the writers keep their errors for this check
        if unwritable:
            self.request_stop("log write failed", unwritable)
            raise StopRequestedError
        if self.link.lost:
            self.request_stop("link lost", f"link lost: {self.link.lost_reason}")
            raise StopRequestedError
        now = time.perf_counter()
        if now - self._latest_perf > self.telemetry_timeout_s:
            silent = self._bench_silence(now)
            if silent > self.telemetry_timeout_s:
                self.request_stop("telemetry timeout",
                                  f"no telemetry for {silent * 1000:.0f} ms (link stalled or "
                                  "firmware reset)")
            if self._stop.is_set():  # or the frames just read asked for it (a fault)
                raise StopRequestedError
        lost_frames = self.link.decoder.bad_frames
        if self._fault_baseline is not None and self._latest is not None:
            lost_frames += (self._latest.fields["bad_frames"] - self._fault_baseline[0]) & 0xFFFF
        if lost_frames > BAD_FRAME_BUDGET:
            self.request_stop("link errors",
                              f"{lost_frames} corrupted frames on the link (budget "
                              f"{BAD_FRAME_BUDGET}): link unreliable")
            raise StopRequestedError
        self._check_backlog(time.perf_counter_ns())
        if self._stop.is_set():
            raise StopRequestedError

    def _write_failure(self) -> str:
        """What the host could not write (the session log, else the byte dump): their
        ``failure_text``, '' while both are written."""
        return self.log.failure_text() or (self.dump.failure_text() if self.dump else "")

    def _bench_silence(self, now: float) -> float:
        """How long (s) the bench has sent no telemetry as of ``now`` (perf_counter s), once
        the link has read what is buffered: a host stall (the reader did not look at the port
        for longer than the telemetry timeout: load, a pause of the interpreter, a slow log
        write) leaves the bench's frames unread, not missing. Such a stall is logged ("host
        stalled N ms", :meth:`_note_unread`); if the bench's own watchdog fired meanwhile, the
        frames just read say so (a fault stop).

        In poll mode (streaming) the reader is this thread: it reads at once. A reader thread
        that has not caught up is given ``controller.link.CATCH_UP_S`` more before the silence
        is judged on the wall clock (a bench that really went silent always stops).
        """
        unread_since = self.link.read_up_to  # nobody looked at the port since (no plan)
        if self.link.catch_up(now):
            self._note_unread(now - unread_since)
        elif not self.link.past_deadline(self._latest_perf + self.telemetry_timeout_s):
            return 0.0  # the reader thread has not read that far yet: a later check judges
        return now - self._latest_perf

    def _read_telemetry(self, deadline_s: float) -> None:
        """Read what the bench sent meanwhile (poll mode): log, monitors. The port left unread
        beyond the planned wait for the send deadline ``deadline_s`` (perf_counter s) was a
        host stall (:meth:`_note_unread`)."""
        unread_since = max(self.link.read_up_to, deadline_s)
        self.link.poll()
        self._note_unread(self.link.read_up_to - unread_since)

    def _note_unread(self, unread_s: float) -> None:
        """Log and count a host stall when the port went unread for ``unread_s`` s beyond
        the plan, longer than the telemetry timeout (the stream and its monitors paused: the
        stall the timeout no longer takes for a silent bench; shorter ones show in the timing,
        late sends and deadline misses)."""
        if unread_s <= self.telemetry_timeout_s:
            return
        stalled_ms = round(unread_s * 1000, 1)
        self._host_stalls_ms.append(stalled_ms)
        self.log.event("host stalled", f"host stalled {stalled_ms:.0f} ms: the stream and the "
                       "telemetry monitor paused (the bench's frames waited unread)",
                       sync=False, stalled_ms=stalled_ms)

    def _note_held_up(self, unread_s: float, what: str) -> None:
        """Log and count a host stall a handshake wait forgave (``Link.on_held_up``): the port
        went unread ``unread_s`` s while the wait for ``what`` ran past its end, and the wait
        went on until the reader caught up (``controller.link.Deadline``). Logged as a stall
        of the stream is, when longer than the telemetry timeout; the event names the wait."""
        if unread_s <= self.telemetry_timeout_s:
            return
        stalled_ms = round(unread_s * 1000, 1)
        self._handshake_stalls_ms.append(stalled_ms)
        self.log.event("host stalled", f"host stalled {stalled_ms:.0f} ms in the wait for "
                       f"{what}: the bench's frames waited unread, the wait went on until the "
                       "host had read them", sync=False, stalled_ms=stalled_ms, wait=what)

    def _latched(self) -> str:
        """What becomes of a latched fault: a real bench keeps it until a drive clears it; a
        dry run's simulated bench stops with the session, so the next dry run has none."""
        if self.simulated:
            return ("fault latched on the simulated bench, which stops with this dry run: the "
                    "next one starts without it")
        return "fault latched, clear it with --clear-fault"

    def _finish(self, reason: str, message: str, scheduler: Scheduler,
                last: dict[str, int]) -> tuple[str, str]:
        """Bring the bench to a safe state after a stream ended for ``reason``.

        Returns the (possibly refined) reason and the full message.
        """
        watchdog = f"the firmware watchdog ({self.watchdog_ms} ms) trips: fault WATCHDOG " \
                   "latched, the torque ramps to zero"
        if reason == "link lost" or self.link.lost:
            return reason, f"{message}; {watchdog}"
        if reason == "firmware reset":
            self._armed = False
            return reason, f"{message}: the bench restarted disarmed (zero torque)"
        if reason == "fault":
            self._armed = False
            # the e-stop input and a driver fault cut the torque at once; other faults ramp it
            cut = self.status.fault in ("ESTOP_INPUT", "ESTOP_MESSAGE", "DRIVER")
            action = "cut its torque at once" if cut else "ramps its torque to zero"
            return reason, f"{message}; the firmware {action} ({self._latched()})"
        if reason == "estop":
            try:
                self._expect_ack("ESTOP")
            except BenchError as error:
                return reason, f"{message}; ESTOP not acknowledged ({error}); {watchdog}"
            self._armed = False
            return reason, (f"{message}; ESTOP sent: torque cut at once (fault ESTOP_MESSAGE "
                            "latched)")
        silent_count, silent_at = self._telemetry_count, time.perf_counter()
        if reason == "telemetry timeout":
            # a quick question, shorter than the watchdog, so a firmware that is only slow
            # still gets the ramp below in time
            restarted = self._probe_reset(timeout_s=self.watchdog_ms / 2000)
            if restarted:
                self._armed = False
                return "firmware reset", f"{message}: the firmware reset ({restarted}) and " \
                       "restarted disarmed (zero torque)"
        try:
            if reason != "completed" and self._sent_fields:
                self._ramp_down(scheduler, last)
            if self._sent_fields:
                self._wait_drained()
            self.disarm()
        except BenchError as error:
            return reason, (f"{message}; controlled stop failed ({error}); {watchdog}; "
                            f"{self._bench_state_now()}")
        if reason == "completed":
            return reason, f"{message}: ramped down and disarmed"
        if not self._sent_fields:
            return reason, f"{message}; disarmed (no setpoint had been sent)"
        if reason == "telemetry timeout":
            # the bench answers again: had it restarted while silent (its hardware watchdog resets
            # a firmware that stopped ticking)? Then the ramp went to a disarmed bench.
            restarted = self._probe_reset(timeout_s=0.2)
            waited_ms = (time.perf_counter() - silent_at) * 1e3
            if (not restarted and self._hello_answered and self._telemetry_count == silent_count
                    and waited_ms > 4 * self.telemetry_period_ms):
                # it answers HELLO yet sent no telemetry since it went silent: telemetry only
                # flows after a handshake, so the handshake was lost — the firmware restarted
                # (its uptime may already exceed the ticks seen before, so they cannot tell)
                restarted = f"no telemetry for {waited_ms:.0f} ms after the silence, handshake lost"
                self.log.event("firmware reset", restarted)
            if restarted:
                return "firmware reset", f"{message}: the firmware reset ({restarted}) and " \
                       "restarted disarmed (zero torque)"
        return reason, f"{message}; ramped down over {self.settings.ramp_down_s:g} s and disarmed"

    def _bench_state_now(self, timeout_s: float | None = None) -> str:
        """The bench's state from the first telemetry frame received from now on (waiting up to
        ``timeout_s``, default three telemetry periods), else the latest one with its age."""
        timeout_s = 3 * self.telemetry_period_ms / 1000 if timeout_s is None else timeout_s
        count, start = self._telemetry_count, time.perf_counter()
        while self._telemetry_count == count and time.perf_counter() - start < timeout_s:
            time.sleep(0.001)
        latest = self._latest
        if latest is None:
            return "bench state unknown (no telemetry)"
        state = self.spec.name_of("states", latest.fields["state"])
        fault = self.spec.name_of("faults", latest.fields["fault"])
        where = f"bench state {state}" + (f", fault {fault}" if fault != "NONE" else "")
        if self._telemetry_count > count:
            return f"{where} (telemetry now)"
        age_ms = (time.perf_counter() - self._latest_perf) * 1000
        return f"{where} (last telemetry, {age_ms:.0f} ms old)"

    def _probe_reset(self, timeout_s: float) -> str:
        """After silent telemetry: ask HELLO; a smaller mcu_ticks means the firmware restarted."""
        if self._reset_seen:
            return self._reset_seen
        try:
            reply = self.link.request("HELLO", "HELLO_REPLY", timeout_s=timeout_s,
                                      protocol_version=self.spec.protocol_version,
                                      telemetry_period_ms=self.telemetry_period_ms)
        except BenchError:
            self._hello_answered = False
            return self._reset_seen
        self._hello_answered = True
        if self._reset_seen:  # telemetry after the restart reached the reader first
            return self._reset_seen
        ticks = reply.fields["mcu_ticks"]
        # The firmware answers HELLO before it ticks, so a reply can carry one tick less than a
        # telemetry frame of the same tick that the reader thread handled first: not a reset.
        if ticks + 1 < self._ticks_seen:
            self.log.event("firmware reset", f"mcu_ticks {ticks} after {self._ticks_seen}")
            return f"mcu_ticks {ticks} after {self._ticks_seen}"
        return ""

    def _in_force(self, scheduler: Scheduler) -> dict[str, int]:
        """The setpoint in force at the firmware now (host estimate: the last slot whose due
        time, send deadline + lead, is past), or the first one sent if none is due yet."""
        due_k = (time.perf_counter_ns() - scheduler.t0_ns - self.lead_ms * 1_000_000) \
            // scheduler.period_ns
        return self._sent_fields[int(min(max(due_k, 0), len(self._sent_fields) - 1))]

    def _ramp_down(self, scheduler: Scheduler, last: dict[str, int]) -> None:
        """FLUSH the firmware's queue (it acts at once: the setpoints sent ahead never come in
        force, the one in force is held), then stream the stop ramp from the setpoint in force.

        FLUSH is not waited for (the link keeps frames in order); the ramp's ``time_ms`` go on
        after the last one sent, so the flushed times never reappear in the telemetry, and its
        first setpoint starts the firmware's new time origin (due ``lead`` after it arrives).
        """
        self.link.send("FLUSH")
        in_force = self._in_force(scheduler)
        in_force_s = in_force["time_ms"] * TIME_SCALE
        # the events of the stop are not synced: the bench is armed (see realtime)
        self.log.event("flush", f"queue flushed; in force t {in_force_s:.3f} s", sync=False,
                       in_force_ms=in_force["time_ms"], last_sent_ms=last["time_ms"])
        low, high = safe_angle_range(self.bench, self.firmware, self.athlete)
        ramp = stop_setpoints(in_force | {"time_ms": last["time_ms"]}, self.settings, low, high)
        self.log.event("ramp down", f"{len(ramp)} setpoints over "
                       f"{self.settings.ramp_down_s:g} s", sync=False)
        scheduler.skip_to_now()  # a new stream: no burst of slots gone during the stop
        for fields in ramp:
            k = scheduler.wait()
            seq, send_ns = self.link.send_prepared(self.link.prepare("SETPOINT", **fields))
            scheduler.record(k, send_ns)
            self.log.setpoint(send_ns * 1e-9, k=k, seq=seq, rep=-1, **fields)
            self._remember(fields)
            self._sent_fields.append(fields)
            self._ramp_sent += 1
            self._last_send_ns = send_ns

    def _wait_drained(self) -> None:
        """Wait until the last setpoint sent is in force (the queue drained), so that DISARM,
        which acts at once, does not cut the end of a ramp short. A bench that does not show
        it in time (silent, restarted) is disarmed anyway: DISARM is the safe side."""
        final = self._sent_fields[-1]["time_ms"]
        # The last setpoint is in force at the latest ``lead`` after it was written (due then,
        # or applied at once if late); from then on the firmware's dry-queue watchdog runs, so
        # DISARM must follow within DRAIN_MARGIN_S even when the confirming telemetry is slow.
        margin_s = min(DRAIN_MARGIN_S, self.watchdog_ms / 3000)
        remaining_s = (self._last_send_ns * 1e-9 + self.lead_ms / 1000 + margin_s
                       - time.perf_counter())
        try:
            self._wait_telemetry(lambda m: m.fields["setpoint_time_ms"] == final,
                                 max(remaining_s, margin_s),
                                 f"setpoint t {final * TIME_SCALE:.3f} s in force", heartbeat=True,
                                 wall_clock=True)  # the dry queue's watchdog runs: DISARM soon
        except BenchError as error:
            self.log.event("not drained", str(error), sync=False)  # still armed

    def _monitor_counts(self) -> dict:
        """The firmware's counters over the session and the telemetry frames per limit flag."""
        if self._fault_baseline is None or self._latest is None:
            return {}
        fields = self._latest.fields
        return {"late_setpoints": (fields["late_setpoints"] - self._fault_baseline[1]) & 0xFFFF,
                "seq_gaps": (fields["seq_gaps"] - self._fault_baseline[2]) & 0xFFFF,
                "bad_frames": (fields["bad_frames"] - self._fault_baseline[0]) & 0xFFFF,
                "limit_flag_frames": dict(self._flag_counts)}

    def counts(self) -> tuple[int, int]:
        """(telemetry frames received and logged, the firmware's late setpoints) so far; after
        :meth:`close` these are final and equal what ``bemore replay`` finds in the log."""
        return self._telemetry_count, self._firmware_late()

    def _firmware_late(self) -> int:
        """The firmware's late-setpoint count over the session (telemetry), -1 if unknown."""
        if self._fault_baseline is None or self._latest is None:
            return -1
        return (self._latest.fields["late_setpoints"] - self._fault_baseline[1]) & 0xFFFF

    # ------------------------------------------------------------------ telemetry and monitors
    def _on_telemetry(self, message: Message, perf_s: float) -> None:
        """Per telemetry frame (reader thread, or the streaming thread's poll): log, update the
        live status, run the monitors. A frame read before the log exists (between
        :meth:`open_link` and the log's creation: a previous connection's telemetry, before
        HELLO) is dropped."""
        if self.log is None:
            return
        fields = message.fields
        self.log.telemetry(perf_s, fields)
        self._telemetry_count += 1
        if self._ticks_seen >= 0 and fields["mcu_ticks"] < self._ticks_seen:
            # remembered: once the stop is under way, later telemetry (small ticks again) must
            # not hide that the firmware restarted
            self._reset_seen = f"mcu_ticks {fields['mcu_ticks']} after {self._ticks_seen}"
            self.request_stop("firmware reset", f"firmware reset (mcu_ticks went back from "
                              f"{self._ticks_seen} to {fields['mcu_ticks']})")
        self._ticks_seen = fields["mcu_ticks"]
        if self._fault_baseline is None:
            self._fault_baseline = (fields["bad_frames"], fields["late_setpoints"],
                                    fields["seq_gaps"])
        self._latest, self._latest_perf = message, perf_s
        status = self.status
        status.measured_rad = fields["position_urad"] * POSITION_SCALE
        status.measured_torque_nm = fields["torque_mNm"] * TORQUE_SCALE
        status.state = self.spec.name_of("states", fields["state"])
        status.fault = self.spec.name_of("faults", fields["fault"])
        if not self._armed:
            # nothing commanded now: no column of an earlier instant beside this measurement
            status.commanded_rad = status.commanded_torque_nm = math.nan
            status.tracking_error_rad = math.nan
            return
        if fields["state"] != self.spec.states["ARMED"]:
            what = f"fault {status.fault}" if status.fault != "NONE" else f"state {status.state}"
            self.request_stop("fault", f"the bench reports {what} at t "
                              f"{fields['setpoint_time_ms'] * TIME_SCALE:.3f} s")
            return
        commanded = self._commanded(fields["setpoint_time_ms"])
        if commanded is not None:
            # the live view's columns are all for this frame's instant: the setpoint in force
            slot = fields["setpoint_time_ms"] % COMMANDED_RING
            status.t_s = fields["setpoint_time_ms"] * TIME_SCALE
            status.commanded_rad = commanded * POSITION_SCALE
            status.commanded_torque_nm = self._commanded_torque[slot] * TORQUE_SCALE
            error = (fields["position_urad"] - commanded) * POSITION_SCALE
            status.tracking_error_rad = error
            limit = math.radians(self.bench.streaming.max_tracking_error_deg)
            if abs(error) > limit:
                self.request_stop("tracking", f"tracking error {math.degrees(error):.1f} deg "
                                  f"exceeds {math.degrees(limit):.1f} deg at t "
                                  f"{fields['setpoint_time_ms'] * TIME_SCALE:.3f} s")
        torque_limit = self.bench.limits.max_torque_nm
        if abs(status.measured_torque_nm) > torque_limit:
            self.request_stop("torque", f"measured torque {status.measured_torque_nm:.1f} N·m "
                              f"exceeds {torque_limit:g} N·m")
        self._check_counters(fields, perf_s)

    def _owed_in_window(self, perf_s: float, sent_recent: int) -> int:
        """The setpoints the stream owed over the LATE_WINDOW_S before ``perf_s`` (s, perf
        clock): those whose send deadlines fell in the window, sent or not. A host stall sends
        nothing for a while, then its slots in a burst; counting only the setpoints sent would
        shrink the window by the part of the burst not yet written, and one stall would read as
        persistent lateness. Outside the plan's stream (the handshake, the stop's ramp), the
        setpoints sent (``sent_recent``)."""
        scheduler, slots = self.scheduler, self._streaming_slots
        if scheduler is None or not slots:
            return sent_recent
        now_ns = round(perf_s * 1e9)
        owed = min(scheduler.slots_due_by(now_ns), slots) - min(
            scheduler.slots_due_by(now_ns - round(LATE_WINDOW_S * 1e9)), slots)
        return max(owed, sent_recent)

    def _check_backlog(self, now_ns: int) -> None:
        """Stop on late setpoints when the host itself owes more than LATE_FRACTION of a
        window's setpoints past their due time (send deadline + lead), not yet written: a host
        persistently too slow to send them (they would reach the firmware late, or never) or
        stalled longer than the lead plus that fraction of the window. Called by the streaming
        thread once it has read the telemetry, so that a fault the bench reported meanwhile
        (its watchdog during the stall) is the reason given."""
        scheduler, slots = self.scheduler, self._streaming_slots
        if scheduler is None or not slots:
            return
        overdue = min(scheduler.slots_due_by(now_ns - self.lead_ms * 1_000_000), slots) \
            - scheduler.next_k
        budget = LATE_FRACTION * LATE_WINDOW_S * 1e9 / scheduler.period_ns
        if overdue > budget:
            behind_ms = (now_ns - scheduler.deadline(scheduler.next_k)) * 1e-6
            self.request_stop("late setpoints", f"the host owes {overdue} setpoints past their "
                              f"due time (more than {budget:g}, half of {LATE_WINDOW_S:g} s; "
                              f"{behind_ms:.0f} ms behind its schedule): host persistently "
                              "slower than the lead")

    def _check_counters(self, fields: dict[str, int], perf_s: float) -> None:
        """The firmware's late setpoints, sequence gaps and limit flags against their budgets."""
        at = f"at t {fields['setpoint_time_ms'] * TIME_SCALE:.3f} s"
        late = (fields["late_setpoints"] - self._fault_baseline[1]) & 0xFFFF
        window = self._late_window
        window.append((perf_s, late, self.status.sent))
        while window[0][0] < perf_s - LATE_WINDOW_S:
            window.popleft()
        late_recent = late - window[0][1]
        owed_recent = self._owed_in_window(perf_s, self.status.sent - window[0][2])
        if late_recent > LATE_FRACTION * max(owed_recent, 1) and late_recent >= 10:
            self.request_stop("late setpoints", f"{late_recent} of the {owed_recent} setpoints "
                              f"due in the last {LATE_WINDOW_S:g} s reached the firmware after "
                              f"their due tick ({late} in the session) {at}: link or host "
                              "persistently slower than the lead")
        gaps = (fields["seq_gaps"] - self._fault_baseline[2]) & 0xFFFF
        if gaps > SEQ_GAP_BUDGET:
            self.request_stop("sequence gaps", f"{gaps} host frames never reached the firmware "
                              f"(budget {SEQ_GAP_BUDGET}) {at}: link unreliable")
        flags = fields["limit_flags"]
        if not flags:
            return
        for name, bit in self.spec.limit_flags.items():
            if flags & bit:
                count = self._flag_counts.get(name, 0) + 1
                self._flag_counts[name] = count
                if name in LIMIT_FLAG_BUDGETS and count > LIMIT_FLAG_BUDGETS[name]:
                    self.request_stop("limit flags", f"the firmware limited the output "
                                      f"({name}, in {count} telemetry frames; budget "
                                      f"{LIMIT_FLAG_BUDGETS[name]}) {at}")

    # ------------------------------------------------------------------ helpers
    def _expect_ack(self, name: str, **fields: int) -> None:
        ack = self.link.request(name, "ACK", timeout_s=0.5, **fields)
        result = self.spec.name_of("results", ack.fields["result"])
        if result != "OK":
            raise BenchError(f"{self.port}: the bench refused {name}: {result}")

    def _wait_telemetry(self, accept, timeout_s: float, what: str, heartbeat: bool = False,
                        wall_clock: bool = False):
        """Wait for a new telemetry frame that ``accept`` s (sending heartbeats meanwhile), up
        to ``timeout_s`` s not counting a host stall that held the reader up
        (:meth:`controller.link.Link.past_deadline`; the stall is logged,
        :meth:`_note_held_up`), or ``wall_clock``: ``timeout_s`` s of the wall clock, stall or
        not (where waiting longer is not the safe side)."""
        from controller.link import Deadline

        deadline = Deadline(self.link, timeout_s, what)
        count = self._telemetry_count
        try:
            while True:
                expired = (time.perf_counter() >= deadline.at if wall_clock
                           else deadline.passed())  # before looking: see past_deadline
                latest = self._latest
                if self._telemetry_count > count and latest is not None and accept(latest):
                    return latest
                if expired:
                    break
                if heartbeat:
                    self.link.send("HEARTBEAT")
                if self.link.lost:
                    break
                time.sleep(0.005)
        finally:
            deadline.end()
        raise BenchError(f"{self.port}: no {what} within {timeout_s} s"
                         + (f" (link lost: {self.link.lost_reason})" if self.link.lost else ""))


def sent_text(sent: int, ramp_sent: int) -> str:
    """The setpoints a session sent, as ``bemore drive`` and ``bemore replay`` both say it:
    '1351 setpoints' (the plan, whose own final ramp is part of it), or after a stop '1167
    setpoints of the gesture, then 300 of the ramp-down' (``ramp_sent``: the stop ramp's)."""
    if not ramp_sent:
        return f"{sent} setpoints"
    return f"{sent} setpoints of the gesture, then {ramp_sent} of the ramp-down"


def host_stall_text(stalls_ms: list[float], handshake_ms: list[float] = ()) -> str:
    """'host stalled 312 ms: the stream was late' (the longest, with how many when more than
    one) for the host stalls (ms) that left the bench's telemetry unread past the telemetry
    timeout while streaming, then the same of those a handshake wait forgave (``handshake_ms``,
    ms); '' if none.

    >>> print(*host_stall_text([312.0, 150.2], [1020.4]).split("; "), sep="\\n")
    host stalled 312 ms (the longest of 2): the stream was late
    host stalled 1020 ms in a handshake wait (not counted against the bench)
    """
    def longest(stalls_ms: list[float]) -> str:
        more = f" (the longest of {len(stalls_ms)})" if len(stalls_ms) > 1 else ""
        return f"host stalled {max(stalls_ms):.0f} ms{more}"

    parts = [f"{longest(stalls_ms)}: the stream was late"] if stalls_ms else []
    if handshake_ms:
        parts.append(f"{longest(handshake_ms)} in a handshake wait (not counted against the "
                     "bench)")
    return "; ".join(parts)


def with_write_failure(result: SessionResult, log: LogWriter,
                       dump: DumpWriter | None = None) -> SessionResult:
    """``result`` once ``log`` (and ``dump``) are closed: when one could not be written to its
    end (a write error after the stream's last health check: in the stop, the end record, the
    final fsync), its message says so and a completed or interrupted session becomes ``log
    write failed`` (exit code 3): the session log must be whole."""
    failures = [text for text in (log.failure_text(), dump.failure_text() if dump else "")
                if text and text not in result.message]
    if not failures:
        return result
    result.message += "".join(f"; {text}" for text in failures)
    if result.reason in ("completed", "interrupted"):
        result.reason = "log write failed"
        result.exit_code = _exit_code(result.reason)
    return result


def _exit_code(reason: str) -> int:
    """0 completed, 1 stopped by the operator, 3 any fault of the bench, link or host (a log
    that could not be written included)."""
    return {"completed": 0, "interrupted": 1}.get(reason, 3)


__all__ = ["Session", "SessionResult", "Status", "TimingStats", "check_stream_settings",
           "host_stall_text", "with_write_failure"]
