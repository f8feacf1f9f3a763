"""``bemore replay``: what happened in a session, from its log alone.

The summary works on any log, including one cut short by a crash: timing is recomputed from
the setpoint records (slot ``k`` and host send time against the stream's ``t0``), tracking from
the telemetry (each frame names the ``time_ms`` of the setpoint in force, whose commanded
position is in the log).
"""

from __future__ import annotations

import importlib.util
import math
import shutil
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from controller.errors import ConfigError, DataError
from controller.log import SessionLog, read_log
from controller.modes import (
    POSITION_SCALE,
    TIME_SCALE,
    TORQUE_SCALE,
    ModeSettings,
    Plan,
    stop_setpoints,
    stream_times_ms,
)
from controller.outputs import check_output_folder, output_folder, write_file
from controller.protocol import load_spec
from controller.scheduler import timing_stats
from controller.series import interp
from controller.session import LIMIT_FLAG_BUDGETS, host_stall_text, sent_text
from controller.setpoints import Gesture

# A host silence this close to the watchdog (ms) may have tripped it: the firmware times the
# frames' arrivals on its 1 ms tick, and the link's transit can space them further apart than
# the host's writes (5.6 ms more seen on the simulated bench's pty under load; a USB serial
# adapter's latency timer adds up to its own setting). A judgement, stated in the summary.
WATCHDOG_EDGE_MS = 5.0


def streamed(summary: dict) -> bool:
    """Whether a session's summary (:meth:`Summary.to_dict`, ``bemore replay --json``) counts
    setpoints sent or telemetry heard: only such a session has tracking, torque, duration and
    timing figures; one that ended before arming (no HELLO reply, a latched fault, the
    firmware's limits, a Ctrl-C) has none, and its zeros are not measurements."""
    return bool(summary.get("setpoints_sent", 0) + summary.get("ramp_down_sent", 0)
                or summary.get("telemetry_frames", 0))


@dataclass
class Summary:
    """Summary of one session (degrees and N·m, labelled; times in s)."""

    log: str
    athlete: str
    gesture: str
    mode: str
    start_utc: str
    firmware: str
    duration_s: float
    setpoints_sent: int
    telemetry_frames: int
    tracking_rms_deg: float
    tracking_max_deg: float
    peak_commanded_torque_nm: float
    peak_measured_torque_nm: float
    deadline_misses: int  # by the host: sends later than due − 1 ms (controller.scheduler)
    late_sends: int
    skipped: int
    period_error_p50_ms: float
    period_error_p99_ms: float
    period_error_max_ms: float
    faults: list[str] = field(default_factory=list)
    # setpoints of the stop ramp (rep -1), sent after ``setpoints_sent`` (those of the plan)
    ramp_down_sent: int = 0
    limit_flags: list[str] = field(default_factory=list)
    limit_flag_frames: dict = field(default_factory=dict)  # telemetry frames carrying each flag
    firmware_counters: dict = field(default_factory=dict)
    end: str = ""
    truncated: bool = False
    firmware_deadline_misses: int = 0  # setpoints that reached the firmware after their due tick
    miss_threshold_ms: float = 0.0
    longest_send_gap_ms: float = 0.0  # the host's longest silence (see host_silence_ms)
    shares: dict = field(default_factory=dict)  # athlete's and bench's share of the torque
    simulated_athlete: dict = field(default_factory=dict)
    watchdog_ms: float = 0.0
    host_stalls_ms: list = field(default_factory=list)  # stalls that left telemetry unread
    handshake_stalls_ms: list = field(default_factory=list)  # stalls a handshake wait forgave

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return asdict(self)

    def lines(self) -> list[str]:
        """Human-readable report (the same counts, named the same way, as ``bemore drive``);
        a session that streamed nothing and heard no telemetry (e.g. ended before arming) has
        only its heading, counts and end: no tracking, timing or firmware figures to show."""
        heading = [
            f"session     {self.log}  ({self.start_utc}, firmware {self.firmware})",
            f"gesture     {self.gesture}  (athlete: {self.athlete}, mode: {self.mode})",
            f"duration    {self.duration_s:.3f} s  "
            f"({sent_text(self.setpoints_sent, self.ramp_down_sent)}, "
            f"{self.telemetry_frames} telemetry frames)",
        ]
        if not streamed(self.to_dict()):
            return [*heading, f"end         {self.end}"]
        return [
            *heading,
            f"tracking    RMS {self.tracking_rms_deg:.3f} deg, max {self.tracking_max_deg:.3f} deg",
            f"torque      peak commanded {self.peak_commanded_torque_nm:.1f} N·m, peak measured "
            f"{self.peak_measured_torque_nm:.1f} N·m",
            *self.torque_explanation(),
            f"timing      deadline misses: {self.firmware_deadline_misses} at the firmware (after "
            f"their due tick), {self.deadline_misses} by the host (sends > "
            f"{self.miss_threshold_ms:g} ms late); {self.late_sends} sends more than a period "
            f"late, {self.skipped} slots skipped; period error p50 "
            f"{self.period_error_p50_ms:.3f} ms, p99 {self.period_error_p99_ms:.3f} ms, max "
            f"{self.period_error_max_ms:.3f} ms; longest host silence "
            f"{self.longest_send_gap_ms:.1f} ms"
            + (f"; {host_stall_text(self.host_stalls_ms, self.handshake_stalls_ms)}"
               if self.host_stalls_ms or self.handshake_stalls_ms else ""),
            f"faults      {', '.join(self.faults) or 'none'}{self.fault_cause()}",
            f"limit flags {self.limit_flag_text()}",
            "firmware    " + ", ".join(f"{k} {v}" for k, v in self.firmware_counters.items()),
            f"end         {self.end}",
        ]

    def limit_flag_text(self) -> str:
        """The limit flags with the telemetry frames carrying each, and which of them are only
        counted ('SLEW_LIMITED in 3 frames (counted, not a stop criterion)'); 'none'."""
        if not self.limit_flags:
            return "none"
        parts = []
        for name in self.limit_flags:
            frames = self.limit_flag_frames.get(name)
            parts.append(name if frames is None else
                         f"{name} in {frames} frame{'s' if frames != 1 else ''}")
        counted = [name for name in self.limit_flags if name not in LIMIT_FLAG_BUDGETS]
        if counted:
            parts[-1] += (f" ({', '.join(counted)}: counted, not a stop criterion — the "
                          "firmware delayed or held the torque by a tick or two, docs/drive.md)")
        return ", ".join(parts)

    def torque_explanation(self) -> list[str]:
        """Why commanded and measured torques differ, from the mode's shares (and the simulated
        athlete's settings on a dry run)."""
        if not self.shares:
            return []
        athlete, bench = self.shares["athlete"], self.shares["bench"]
        text = (f"            commanded = the bench's share ({bench:.0%}) of the torque the "
                f"gesture needs, the athlete gives {athlete:.0%}; measured = the motor's "
                "torque: that feed-forward plus the position loop's correction, i.e. what the "
                "athlete gave less than her share and the axis' own inertia and friction")
        lines = [text]
        if self.simulated_athlete and athlete == 0.0:
            lines.append("            (simulated athlete: her share is 0 %, so she gives no "
                         "effort in this mode)")
        elif self.simulated_athlete:
            sim = self.simulated_athlete
            lines.append(f"            (simulated athlete: effort noise "
                         f"{sim.get('effort_noise', 0):.0%} RMS, fatigue "
                         f"{sim.get('fatigue_per_rep', 0):.0%} per repetition)")
        return lines

    def fault_cause(self) -> str:
        """' (the host sent nothing for 63 ms: …)' after a WATCHDOG fault
        (:func:`watchdog_cause`), else ''."""
        if "WATCHDOG" not in self.faults or not self.watchdog_ms:
            return ""
        return watchdog_cause(self.longest_send_gap_ms, self.watchdog_ms)


def watchdog_cause(longest_send_gap_ms: float, watchdog_ms: float) -> str:
    """Whether the host stalled, after a WATCHDOG fault: a stalled host when its longest
    silence (ms, between its writes) reached the watchdog (ms) or came within
    :data:`WATCHDOG_EDGE_MS` of it (the firmware times the frames' arrivals, which the link's
    transit can space further apart than the writes, on its 1 ms tick); else not.

    >>> watchdog_cause(63.0, 50.0)
    ' (the host sent nothing for 63 ms, longer than the 50 ms watchdog: a stalled host)'
    >>> edge = watchdog_cause(48.0, 50.0)
    >>> edge.startswith(" (the host sent nothing for 48 ms, within 5 ms of the 50 ms watchdog")
    True
    >>> edge.endswith(": a stalled host)")
    True
    >>> watchdog_cause(12.0, 50.0)
    " (the host's longest silence was 12 ms, within the 50 ms watchdog: not a stalled host)"
    """
    gap = longest_send_gap_ms
    if gap >= watchdog_ms:
        return (f" (the host sent nothing for {gap:.0f} ms, longer than the {watchdog_ms:g} ms "
                "watchdog: a stalled host)")
    if gap >= watchdog_ms - WATCHDOG_EDGE_MS:
        return (f" (the host sent nothing for {gap:.0f} ms, within {WATCHDOG_EDGE_MS:g} ms of "
                f"the {watchdog_ms:g} ms watchdog (the link's transit, the firmware's tick): a "
                "stalled host)")
    return (f" (the host's longest silence was {gap:.0f} ms, within the {watchdog_ms:g} ms "
            "watchdog: not a stalled host)")


def tracking_errors(log: SessionLog) -> tuple[array, array]:
    """(host_time s, measured − commanded position rad) of every telemetry frame while armed,
    two ``array('d')``."""
    sp, tm = log.setpoints, log.telemetry
    host_time, errors = array("d"), array("d")
    if not len(sp["time_ms"]) or not len(tm["host_time"]):
        return host_time, errors
    commanded = dict(zip((int(t) for t in sp["time_ms"]), sp["position_urad"], strict=True))
    armed = load_spec().states["ARMED"]
    for when, state, setpoint_ms, measured in zip(tm["host_time"], tm["state"],
                                                  tm["setpoint_time_ms"], tm["position_urad"],
                                                  strict=True):
        if state != armed or math.isnan(setpoint_ms):
            continue
        position = commanded.get(int(setpoint_ms))
        if position is not None:
            host_time.append(when)
            errors.append((measured - position) * POSITION_SCALE)
    return host_time, errors


def host_silence_ms(log: SessionLog) -> float:
    """The host's longest silence (ms) from ARM on, as the firmware's watchdog counts it: the
    longest time between two of its writes before the stream (ARM, heartbeats: the session logs
    it, ``silence_since_arm_ms``), from the last of them to the first setpoint, between two
    consecutive setpoints, or from the last write to the first telemetry frame that reports a
    firmware fault (a host frozen until the fault sends nothing more: that silence is the one
    the watchdog saw)."""
    sp, tm = log.setpoints, log.telemetry
    sends = list(sp["host_time"])
    longest = max((sends[i + 1] - sends[i] for i in range(len(sends) - 1)), default=0.0)
    armed = [event for event in log.events if "last_write_host_time" in event]
    for event in armed:  # the "streaming" event, or the "stop" of a session without setpoints
        last = float(event["last_write_host_time"])
        longest = max(longest, float(event["silence_since_arm_ms"]) * 1e-3)
        if sends and last <= sends[0]:
            longest = max(longest, sends[0] - last)
    sends = sorted(sends + [float(event["last_write_host_time"]) for event in armed])
    faulted = _first_fault(log)
    if faulted is not None and sends:
        at = tm["host_time"][faulted]
        before = [send for send in sends if send <= at]
        if before:
            longest = max(longest, at - before[-1])
    return longest * 1e3


def _first_fault(log: SessionLog) -> int | None:
    """Index of the first telemetry frame that reports a fault, None if none does."""
    return next((i for i, fault in enumerate(log.telemetry["fault"]) if fault != 0), None)


FULL_DISK_BYTES = 65536  # less free space than this on a log's disk (bytes) counts as full


def _why_no_end(path: str) -> str:
    """Why a log has no end record: the disk holding it is full (as far as the space free on it
    now tells), or the host stopped abruptly."""
    try:
        free = shutil.disk_usage(Path(path).parent).free
    except OSError:
        free = None
    if free is not None and free < FULL_DISK_BYTES:
        return (f"the disk holding the log is full ({free} bytes free): its writing most "
                "likely stopped there (bemore drive then stops the session under control and "
                "says so), else the host stopped abruptly (killed or crashed)")
    return "the host stopped abruptly (killed or crashed)"


def _event(log: SessionLog, kind: str) -> dict | None:
    return next((event for event in log.events if event.get("kind") == kind), None)


def summarise(log: SessionLog) -> Summary:
    """The :class:`Summary` of a session log read with :func:`controller.log.read_log`."""
    spec = load_spec()
    sp, tm = log.setpoints, log.telemetry
    settings = log.header.get("settings", {})
    rate_hz = float(settings.get("rate_hz", 1000.0))
    period_ns = round(1e9 / rate_hz)
    streaming = _event(log, "streaming")
    timing = None
    if streaming is not None and len(sp["k"]):
        send_ns = [round(t * 1e9) for t in sp["host_time"]]
        t0_ns = round(streaming["t0_host_time"] * 1e9)
        # the same rule as the scheduler of the session: lead − margin, recorded at the start
        threshold_ns = round(float(streaming.get("miss_threshold_ms", 0.0)) * 1e6)
        timing = timing_stats(send_ns, [int(k) for k in sp["k"]], t0_ns, period_ns,
                              threshold_ns)
    _, errors = tracking_errors(log)
    faults = sorted({spec.name_of("faults", int(code)) for code in tm["fault"] if code})
    flags, frames_per_flag = 0, {}
    for value in tm["limit_flags"]:
        flags |= int(value)
        for name in spec.flag_names(int(value)):
            frames_per_flag[name] = frames_per_flag.get(name, 0) + 1
    counters = {}
    if len(tm["host_time"]):
        for key in ("bad_frames", "late_setpoints", "seq_gaps"):
            counters[key] = int(tm[key][-1] - tm[key][0]) & 0xFFFF
    firmware = _event(log, "connected") or {}
    if log.end is not None:
        end = f"{log.end.get('reason', '?')}: {log.end.get('message', '')}"
        if log.end.get("log_error"):
            end = (end.rstrip(": ") + f" ({log.end['log_error']}: the records between the "
                   "failure and this end are not in the log)")
    else:
        stop = _event(log, "stop")
        end = (f"no end record: {_why_no_end(log.path)}"
               + (f" after '{stop['message']}'" if stop else ""))
    silence_ms = host_silence_ms(log)
    bench = log.header.get("bench", {})
    ramp_down = sum(1 for rep in sp["rep"] if rep == -1) if "rep" in sp else 0
    return Summary(
        firmware_deadline_misses=counters.get("late_setpoints", 0),
        miss_threshold_ms=float(streaming.get("miss_threshold_ms", 0.0)) if streaming else 0.0,
        longest_send_gap_ms=silence_ms,
        host_stalls_ms=[float(event["stalled_ms"]) for event in log.events
                        if event.get("kind") == "host stalled" and "wait" not in event],
        handshake_stalls_ms=[float(event["stalled_ms"]) for event in log.events
                             if event.get("kind") == "host stalled" and "wait" in event],
        shares=dict(log.header.get("shares", {})),
        simulated_athlete=dict(log.header.get("simulated_athlete") or {}),
        watchdog_ms=float(bench.get("streaming", {}).get("watchdog_ms", 0.0)),
        log=log.path,
        athlete=str(log.header.get("athlete", "")),
        gesture=str(log.header.get("gesture", "")),
        mode=_mode_text(settings),
        start_utc=str(log.header.get("start_utc", "")),
        firmware=firmware.get("firmware", {}).get("version", "unknown"),
        duration_s=sp["host_time"][-1] - sp["host_time"][0] if len(sp["k"]) else 0.0,
        setpoints_sent=len(sp["k"]) - ramp_down,
        ramp_down_sent=ramp_down,
        telemetry_frames=len(tm["host_time"]),
        tracking_rms_deg=math.degrees(math.sqrt(math.fsum(e * e for e in errors) / len(errors)))
        if errors else 0.0,
        tracking_max_deg=math.degrees(_peak(errors)),
        peak_commanded_torque_nm=_peak(sp["torque_mNm"]) * TORQUE_SCALE,
        peak_measured_torque_nm=_peak(tm["torque_mNm"]) * TORQUE_SCALE,
        deadline_misses=timing.deadline_misses if timing else 0,
        late_sends=timing.late_sends if timing else 0,
        skipped=timing.skipped if timing else 0,
        period_error_p50_ms=timing.period_error_p50_ms if timing else 0.0,
        period_error_p99_ms=timing.period_error_p99_ms if timing else 0.0,
        period_error_max_ms=timing.period_error_max_ms if timing else 0.0,
        faults=faults,
        limit_flags=spec.flag_names(flags),
        limit_flag_frames=frames_per_flag,
        firmware_counters=counters,
        end=end,
        truncated=log.truncated,
    )


def _peak(values: Sequence[float]) -> float:
    """Largest magnitude of ``values`` (their units), 0 when there are none."""
    return max(max(values), -min(values)) if len(values) else 0.0


def _mode_text(settings: dict) -> str:
    if not settings:
        return "unknown"
    text = settings.get("mode", "?")
    if settings.get("load_pct"):
        text += f" {settings['load_pct']:g} %"
    text += f", speed {settings.get('speed', 1):g}, reps {settings.get('reps', 1)}"
    return text


PLOTS = ("tracking.png", "summary.png")  # what :func:`plot` writes in its folder
NO_MATPLOTLIB = ("replay --plot needs matplotlib (the bench side alone: pip install "
                 "'./controller[plot]')")


def check_plot(folder: str | Path) -> None:
    """Before any work (the summary, the plots): that :func:`plot` can draw (matplotlib is
    installed) and write its :data:`PLOTS` in ``folder`` (made if needed; plots already there
    are overwritten), leaving the file system as it found it; else one ConfigError or
    DataError line (:func:`controller.outputs.check_output_folder`)."""
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError(NO_MATPLOTLIB)
    check_output_folder(folder, PLOTS)


def plot(log: SessionLog, folder: str | Path) -> list[Path]:
    """The session's plots in ``folder``: ``tracking.png`` (angles, both shares of the torque
    against their limits, tracking error; repetitions shaded, stop and faults marked; mode,
    load and speed in the title) and ``summary.png`` (one page: the replay summary and the
    torque plot). A plot already there is overwritten (as every command's outputs are)."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError(NO_MATPLOTLIB) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = output_folder(folder, PLOTS)
    summary = summarise(log)
    figure, axes = plt.subplots(3, 1, figsize=(10, 8.5), sharex=True)
    _angle_panel(axes[0], log)
    _torque_panel(axes[1], log, summary)
    host_time, errors = tracking_errors(log)
    axes[2].plot(host_time.tolist(), _degrees(errors, 1.0), color="tab:purple")
    axes[2].set_ylabel("tracking error (deg)")
    axes[2].set_xlabel("host time (s)")
    for axis in axes:
        _mark_session(axis, log)
        axis.grid(True, alpha=0.3)
    figure.suptitle(_title(log, summary))
    figure.tight_layout()
    tracking = folder / PLOTS[0]
    _save(figure, tracking)
    plt.close(figure)

    figure = plt.figure(figsize=(8.27, 11.69))  # one A4 page
    figure.suptitle(_title(log, summary), y=0.985, fontsize=10)
    text = "\n".join(_wrapped(summary.lines(), 100))
    figure.text(0.05, 0.945, text, family="monospace", fontsize=7, va="top")
    upper = figure.add_axes((0.1, 0.37, 0.85, 0.2))
    _angle_panel(upper, log)
    lower = figure.add_axes((0.1, 0.06, 0.85, 0.27), sharex=upper)
    _torque_panel(lower, log, summary)
    for axis in (upper, lower):
        _mark_session(axis, log)
        axis.grid(True, alpha=0.3)
    lower.set_xlabel("host time (s)")
    page = folder / PLOTS[1]
    _save(figure, page)
    plt.close(figure)
    return [tracking, page]


def _save(figure, path: Path) -> None:
    """Write a matplotlib ``figure`` at ``path`` (PNG or PDF by its suffix, 100 dpi)
    atomically (:func:`controller.outputs.write_file`)."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format=path.suffix.lstrip(".").lower(), dpi=100)
    write_file(path, buffer.getvalue())


def _wrapped(lines: list[str], width: int) -> list[str]:
    """``lines`` folded at ``width`` characters (continuations indented like the values)."""
    import textwrap

    out = []
    for line in lines:
        out += textwrap.wrap(line, width, subsequent_indent=" " * 12) or [""]
    return out


def _title(log: SessionLog, summary: Summary) -> str:
    """'gesture — mode assistive 60 %, speed 1, reps 2 — log name'."""
    return f"{log.header.get('gesture', '')}\nmode {summary.mode} — {Path(log.path).name}"


def _angle_panel(axis, log: SessionLog) -> None:
    sp, tm = log.setpoints, log.telemetry
    axis.plot(sp["host_time"].tolist(), _degrees(sp["position_urad"], POSITION_SCALE),
              label="commanded")
    axis.plot(tm["host_time"].tolist(), _degrees(tm["position_urad"], POSITION_SCALE),
              label="measured")
    axis.set_ylabel("shoulder angle (deg)")
    axis.legend(loc="upper right", fontsize=8)


def _torque_panel(axis, log: SessionLog, summary: Summary) -> None:
    """The bench's share (commanded feed-forward) and the athlete's, each against its limit,
    and the measured motor torque."""
    sp, tm = log.setpoints, log.telemetry
    commanded = [value * TORQUE_SCALE for value in sp["torque_mNm"]]
    axis.plot(sp["host_time"].tolist(), commanded, color="tab:blue",
              label="bench's share (commanded)")
    axis.plot(tm["host_time"].tolist(), [value * TORQUE_SCALE for value in tm["torque_mNm"]],
              color="tab:orange", linewidth=1, label="measured (motor)")
    bench = log.header.get("bench", {}).get("limits", {}).get("max_torque_nm")
    if bench:
        for sign in (1, -1):
            axis.axhline(sign * bench, color="tab:blue", linestyle="--", linewidth=1,
                         label="bench limit" if sign > 0 else None)
    shares = summary.shares
    if shares and shares.get("bench"):
        ratio = shares["athlete"] / shares["bench"]
        athlete = [value * ratio for value in commanded]
        axis.plot(sp["host_time"].tolist(), athlete, color="tab:green",
                  label=f"athlete's share ({shares['athlete']:.0%})")
    profile = log.header.get("athlete_profile", {})
    if profile.get("shoulder_torque_limit_Nm") and shares.get("athlete", 0) > 0:
        limit = profile["shoulder_torque_limit_Nm"]
        for sign in (1, -1):
            axis.axhline(sign * limit, color="tab:green", linestyle="--", linewidth=1,
                         label="athlete's limit" if sign > 0 else None)
    axis.set_ylabel("torque per shoulder (N·m)")
    axis.legend(loc="upper right", fontsize=7, ncol=2)


def _mark_session(axis, log: SessionLog) -> None:
    """Repetitions shaded, the stop and the first frame of each fault marked."""
    sp, tm = log.setpoints, log.telemetry
    rep = sp["rep"]
    for value in sorted(set(rep) - {0, -1}):
        times = [t for t, r in zip(sp["host_time"], rep, strict=True) if r == value]
        if times and value % 2 == 1:
            axis.axvspan(times[0], times[-1], color="grey", alpha=0.08)
    stop = _event(log, "stop")
    if stop is not None and stop.get("reason") != "completed" and "host_time" in stop:
        axis.axvline(stop["host_time"], color="tab:red", linestyle="-.", linewidth=1)
    faulted = _first_fault(log)
    if faulted is not None:
        axis.axvline(tm["host_time"][faulted], color="black", linestyle=":", linewidth=1.5)


def _degrees(values: Sequence[float], scale: float) -> list[float]:
    """``values · scale`` (rad) in degrees, a list for matplotlib."""
    return [math.degrees(value * scale) for value in values]


def summarise_file(path: str | Path) -> Summary:
    """Read and summarise the log at ``path``."""
    return summarise(read_log(path))


def replay_plan(log: SessionLog) -> tuple[Gesture, Plan, ModeSettings]:
    """The stream of a logged session, ready to be sent again.

    The setpoints of the plan (not those of a stop ramp) are taken as they were sent, on their
    recorded stream times; slots the scheduler skipped in the original session are filled by
    linear interpolation between their neighbours. If the session was cut short, a
    controlled-stop ramp is appended. The returned
    :class:`Gesture` is that stream, for the pre-flight's athlete check; the plan's ``need_nm``
    (her share's base) is the feed-forward over the bench's share, unknown in guided mode.
    """
    sp = log.setpoints
    keep = [i for i, rep in enumerate(sp["rep"]) if rep >= 0]
    if not keep:
        raise DataError(f"{log.path}: no setpoint to stream again")
    fields = log.header.get("settings", {})
    settings = ModeSettings(**fields) if fields else ModeSettings()
    period_ms = 1.0 / settings.rate_hz / TIME_SCALE
    recorded_ms = [sp["time_ms"][i] for i in keep]
    grid_ms = [i * period_ms for i in range(math.ceil((recorded_ms[-1] + period_ms / 2)
                                                      / period_ms))]
    columns = {key: [math.trunc(value) for value in
                     interp(grid_ms, recorded_ms, [sp[key][i] for i in keep])]
               for key in ("position_urad", "velocity_urad_s", "torque_mNm")}
    columns["rep"] = [round(value) for value in
                      interp(grid_ms, recorded_ms, [sp["rep"][i] for i in keep])]
    completed = log.end is not None and log.end.get("reason") == "completed"
    if not completed:
        last = {key: int(columns[key][-1]) for key in
                ("position_urad", "velocity_urad_s", "torque_mNm")}
        last["time_ms"] = 0
        ramp = stop_setpoints(last, settings, -math.inf, math.inf)
        for key in ("position_urad", "velocity_urad_s", "torque_mNm"):
            columns[key] += [r[key] for r in ramp]
        columns["rep"] += [0] * len(ramp)
    count = len(columns["rep"])
    period_s = 1.0 / settings.rate_hz
    # the torque the gesture needed, where the bench's share tells it (not in guided mode)
    gain = settings.torque_gain
    need = [value * TORQUE_SCALE / gain for value in columns["torque_mNm"]] if gain else None
    time_ms = stream_times_ms(count, period_s)
    plan = Plan(settings.rate_hz, time_ms,
                columns["position_urad"], columns["velocity_urad_s"], columns["torque_mNm"],
                [math.nan] * count, columns["rep"], need, settings.ramp_down_s)
    gesture = Gesture(log.path, settings.rate_hz, [k * period_s for k in range(count)],
                      plan.position_rad, plan.velocity_rad_s, plan.torque_nm,
                      metadata={"athlete": str(log.header.get("athlete", "")),
                                "gesture": f"replay of {Path(log.path).name}"})
    return gesture, plan, settings
