"""Build and run the simulated bench: the firmware's C core on the host behind a pseudo-terminal.

The simulated bench (``firmware/build/simbench``) closes the loop on a plant model, prints its pty
path on its first stdout line and serves until its stdin closes. This module builds it with
``make -C firmware``, starts it with the plant of ``controller/configs/bench_sim.toml`` and
optional fault injection, and gives back a :class:`SimulatedBench` whose ``.port`` a serial
client opens::

    with start_simulated_bench(faults=SimFaults(corrupt=0.01, seed=3)) as bench:
        link = serial.Serial(bench.port, timeout=0.1)
        ...
        bench.command("estop on")      # run-time fault injection (see SimulatedBench.command)
"""

from __future__ import annotations

import math
import os
import random
import re
import selectors
import subprocess
import tempfile
import threading
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from controller.config import Section, load_toml_model
from controller.errors import BenchError, ConfigError
from controller.modes import Plan
from controller.settings import default_bench_config

# the firmware sources of the checkout this package sits in (the simulated bench is built there)
FIRMWARE_DIR = Path(__file__).resolve().parents[1] / "firmware"
HW_WATCHDOG_MS = 120  # the board's hardware watchdog (board/host/hal_host.h HOST_HW_WATCHDOG_MS)
_build_lock = threading.Lock()


class PlantSection(Section):
    """[plant] of bench_sim.toml: the simulated axis, SI units (degrees only where labelled)."""

    inertia_kg_m2: float = Field(1.0, gt=0, le=100)
    viscous_nm_s_per_rad: float = Field(1.0, ge=0, le=1000)
    coulomb_nm: float = Field(2.0, ge=0, le=100)
    torque_limit_nm: float = Field(150.0, gt=0, le=1000)
    gravity_moment_nm: float = Field(0.0, ge=0, le=1000)
    encoder_counts: int = Field(131072, ge=256, le=2**24)
    initial_position_deg: float = Field(0.0, ge=-30, le=185)


class ControllerSection(Section):
    """[controller] of bench_sim.toml: the firmware's gains for this plant."""

    kp_nm_per_rad: float = Field(987.0, gt=0, le=100000)
    kd_nm_s_per_rad: float = Field(62.8, ge=0, le=10000)


class AthleteSection(Section):
    """[athlete] of bench_sim.toml: the simulated athlete on the simulated bench.

    She gives her share of the torque the gesture needs (``controller.modes.shares``), times an
    effort that wanders around 1 (Gaussian, relative standard deviation ``effort_noise``,
    correlated over ``effort_time_s``) and drops by ``fatigue_per_rep`` at each repetition.
    """

    effort_noise: float = Field(0.05, ge=0, le=0.5)
    effort_time_s: float = Field(0.2, gt=0, le=10)
    fatigue_per_rep: float = Field(0.03, ge=0, le=0.5)
    seed: int = Field(0, ge=0)


class SimBenchConfig(Section):
    """Schema of ``controller/configs/bench_sim.toml``."""

    plant: PlantSection = PlantSection()
    controller: ControllerSection = ControllerSection()
    athlete: AthleteSection = AthleteSection()


def athlete_effort(plan: Plan, athlete: AthleteSection) -> array:
    """The simulated athlete's effort at every setpoint of ``plan`` (1 = exactly her share).

    (1 + noise) · (1 − fatigue_per_rep)^(repetition − 1); the noise is a first-order low-pass
    of white Gaussian noise (time constant ``effort_time_s``, drawn by ``random.Random`` seeded
    with ``seed``) scaled to ``effort_noise`` RMS. Rests and the final ramp keep the fatigue of
    the repetition before them. Returns an ``array('d')``, one value per setpoint.
    """
    rng = random.Random(athlete.seed)
    count = len(plan)
    alpha = math.exp(-1.0 / (athlete.effort_time_s * plan.rate_hz))
    scale = math.sqrt(1.0 - alpha**2)
    white = [rng.gauss(0.0, 1.0) * scale for _ in range(count)]
    level = rng.gauss(0.0, 1.0)
    effort = array("d", bytes(8 * count))
    rep = 1
    for k in range(count):
        level = alpha * level + white[k]
        rep = max(rep, plan.rep[k])
        effort[k] = ((1.0 + athlete.effort_noise * level)
                     * (1.0 - athlete.fatigue_per_rep) ** (rep - 1))
    return effort


def load_table(plan: Plan, athlete_share: float, athlete: AthleteSection) -> str:
    """The simulated bench's ``--load-file`` for ``plan``: one line per setpoint,
    ``time_ms ff_mNm position_urad external_nm``, external = athlete's torque − the need (N·m).

    The axis carries the torque the gesture needs (its body's dynamics, −need), the athlete
    gives ``athlete_share`` of it times :func:`athlete_effort`, the bench its feed-forward; its
    position loop makes up the athlete's shortfall. A plan without ``need_nm`` loads nothing.
    """
    if plan.need_nm is None:
        return ""
    effort = athlete_effort(plan, athlete)
    return "".join(
        f"{t} {ff} {position} {need * (athlete_share * share - 1.0):.6f}\n"
        for t, ff, position, need, share in zip(plan.time_ms, plan.torque_mNm,
                                                plan.position_urad, plan.need_nm, effort,
                                                strict=True)
    )


@dataclass(frozen=True)
class SimFaults:
    """Fault injection of the simulated bench (all off by default).

    ``drop``/``corrupt``: probability per byte of losing it / flipping one of its bits, on the
    ``direction`` "rx" (host → firmware), "tx" or "both"; ``delay_ms``: received bytes reach the
    firmware this late; ``stall_at_ms``/``stall_ms``: the firmware freezes (no tick, no input, the
    last torque stays on) for ``stall_ms`` from ``stall_at_ms`` after start — from
    :data:`HW_WATCHDOG_MS` on, the board's hardware watchdog resets it, as on the AVR board;
    ``reset_at_ms``: the firmware restarts then; ``seed``: of the injection's random draws;
    ``trace``: a file the simulated bench writes one line per tick to (monotonic ns, state,
    fault, motor torque mN·m).
    """

    drop: float = 0.0
    corrupt: float = 0.0
    direction: Literal["rx", "tx", "both"] = "rx"
    delay_ms: int = 0
    stall_at_ms: int | None = None
    stall_ms: int = 0
    reset_at_ms: int | None = None
    seed: int = 0
    trace: str | None = None

    @classmethod
    def parse(cls, text: str) -> SimFaults:
        """``"drop=0.01,direction=both"`` → SimFaults (the fields above); anything else (an
        unknown key, a value of the wrong kind or out of range) is one ConfigError line naming
        the item and what it takes."""
        values: dict[str, object] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            key, _, value = (part.strip() for part in item.partition("="))
            key = key.replace("-", "_")
            if key not in FAULT_VALUES or not value:
                raise ConfigError(f"--sim-fault {item!r}: expected KEY=VALUE with KEY one of "
                                  f"{', '.join(FAULT_VALUES)}")
            parsed = _fault_value(key, value)
            if parsed is None:
                raise ConfigError(f"--sim-fault {item!r}: {key} takes {FAULT_VALUES[key]}")
            values[key] = parsed
        faults = cls(**values)
        problem = faults.problem()
        if problem is not None:
            raise ConfigError(f"--sim-fault {text!r}: {problem}")
        return faults

    def problem(self) -> str | None:
        """What the simulated bench could not apply as asked (a probability outside [0, 1], a
        negative or fractional time, a stall's start without its length…), or None."""
        for key in ("drop", "corrupt"):
            if not 0.0 <= getattr(self, key) <= 1.0:  # NaN fails too
                return f"{key} takes {FAULT_VALUES[key]}, not {getattr(self, key)!r}"
        if self.direction not in ("rx", "tx", "both"):
            return f"direction takes {FAULT_VALUES['direction']}, not {self.direction!r}"
        for key in ("delay_ms", "stall_at_ms", "stall_ms", "reset_at_ms", "seed"):
            value = getattr(self, key)
            limit = MAX_SEED if key == "seed" else MAX_MS
            if value is not None and not (isinstance(value, int) and 0 <= value <= limit):
                return f"{key} takes {FAULT_VALUES[key]}, not {value!r}"
        if (self.stall_at_ms is None) != (self.stall_ms == 0):
            return ("stall_at_ms and stall_ms go together (when the firmware stalls, and for "
                    "how long)")
        return None

    def flags(self) -> list[str]:
        """Command-line flags of simbench for these faults (BenchError if :meth:`problem`)."""
        problem = self.problem()
        if problem is not None:
            raise BenchError(f"simulated bench: {problem}")
        out = ["--drop", repr(self.drop), "--corrupt", repr(self.corrupt),
               "--direction", self.direction, "--delay-ms", str(self.delay_ms),
               "--seed", str(self.seed)]
        if self.stall_at_ms is not None:
            out += ["--stall-at-ms", str(self.stall_at_ms), "--stall-ms", str(self.stall_ms)]
        if self.reset_at_ms is not None:
            out += ["--reset-at-ms", str(self.reset_at_ms)]
        if self.trace is not None:
            out += ["--trace", str(self.trace)]
        return out


MAX_MS = 2**31 - 1  # the largest time (ms) every field of the simulated bench holds
MAX_SEED = 2**64 - 1  # its random generator's seed is an unsigned 64-bit number
WHOLE_MS = "whole milliseconds (0, 1, …)"
PROBABILITY = "a probability in [0, 1]"
# What each --sim-fault key takes (the simulated bench reads whole milliseconds into unsigned
# or sentinel fields: 0.5 would be 0 ms, a delay of -3 ms no delay at all, a stall at -5 ms none).
FAULT_VALUES = {"drop": PROBABILITY, "corrupt": PROBABILITY, "direction": "rx, tx or both",
                "delay_ms": WHOLE_MS, "stall_at_ms": WHOLE_MS, "stall_ms": WHOLE_MS,
                "reset_at_ms": WHOLE_MS, "seed": "a whole number (0, 1, …)"}


def _whole(text: str, limit: int = MAX_MS) -> int | None:
    """``text`` as a whole number in [0, ``limit``] (digits only), or None."""
    return int(text) if text.isascii() and text.isdigit() and int(text) <= limit else None


def _probability(text: str) -> float | None:
    """``text`` as a probability in [0, 1], or None."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if 0.0 <= value <= 1.0 else None


def _fault_value(key: str, text: str) -> object | None:
    """The value of ``key=text`` of --sim-fault, or None when it is not what the key takes."""
    if key in ("drop", "corrupt"):
        return _probability(text)
    if key == "direction":
        return text if text in ("rx", "tx", "both") else None
    return _whole(text, MAX_SEED if key == "seed" else MAX_MS)


# Run-time fault injection commands of the simulated bench (SimulatedBench.command), with the
# number of arguments each takes.
RUNTIME_COMMANDS = {"estop": ("on", "off"), "driver": ("on", "off"), "stall": "MS", "reset": None,
                    "drop": "P", "corrupt": "P", "delay": "MS", "freeze": "MS"}


def parse_injection(text: str) -> tuple[float, str]:
    """``"0.5:estop on"`` → (0.5 s after ARM, "estop on"); ConfigError naming what is wrong."""
    when, _, command = text.partition(":")
    words = command.split()
    try:
        at_s = float(when)
    except ValueError:
        at_s = -1.0
    if not at_s >= 0 or not words or words[0] not in RUNTIME_COMMANDS:
        raise ConfigError(f"--sim-inject {text!r}: expected SECONDS:COMMAND with COMMAND one of "
                          "estop on|off, driver on|off, stall MS, reset, drop P, corrupt P, "
                          "delay MS, freeze MS")
    allowed = RUNTIME_COMMANDS[words[0]]
    argument = words[1] if len(words) == 2 else None
    if allowed is None:
        ok, wanted = len(words) == 1, "no argument"
    elif isinstance(allowed, tuple):
        ok, wanted = argument in allowed, " or ".join(allowed)
    elif allowed == "MS":  # the simulated bench reads whole milliseconds
        ok, wanted = argument is not None and _whole(argument) is not None, WHOLE_MS
    else:  # "P": a probability per byte, as --sim-fault takes it
        ok, wanted = argument is not None and _probability(argument) is not None, PROBABILITY
    if not ok:
        raise ConfigError(f"--sim-inject {text!r}: {words[0]} takes {wanted}")
    return at_s, " ".join(words)


def load_sim_config(path: Path | None = None) -> SimBenchConfig:
    """Read and validate ``bench_sim.toml`` (default: the bundled one)."""
    return load_toml_model(path or default_bench_config("bench_sim.toml"), SimBenchConfig)


def plant_flags(config: SimBenchConfig) -> list[str]:
    """Command-line flags of simbench for a plant configuration (degrees converted to rad)."""
    p, c = config.plant, config.controller
    return [
        "--inertia", repr(p.inertia_kg_m2), "--viscous", repr(p.viscous_nm_s_per_rad),
        "--coulomb", repr(p.coulomb_nm), "--torque-limit", repr(p.torque_limit_nm),
        "--gravity-moment", repr(p.gravity_moment_nm), "--encoder-counts", str(p.encoder_counts),
        "--initial-position-rad", repr(math.radians(p.initial_position_deg)),
        "--kp", repr(c.kp_nm_per_rad), "--kd", repr(c.kd_nm_s_per_rad),
    ]


def firmware_dir() -> Path:
    """The firmware sources the simulated bench is built from: ``BEMORE_FIRMWARE`` if set, else
    the ``firmware/`` folder of the checkout this package sits in. An installed bench side
    (``pip install ./controller``) has no checkout beside it: a dry run then needs
    ``BEMORE_FIRMWARE``; a drive of the real bench (``--port``) needs neither."""
    override = os.environ.get("BEMORE_FIRMWARE")
    folder = Path(override) if override else FIRMWARE_DIR
    if not (folder / "Makefile").is_file():
        raise ConfigError(f"{folder}: no firmware sources here to build the simulated bench "
                          "from; set BEMORE_FIRMWARE to the firmware/ folder of a bemore "
                          "checkout, or drive a real bench with --port")
    return folder


def build_simbench() -> Path:
    """Build (or bring up to date) the simulated bench with ``make -C firmware``; its path."""
    folder = firmware_dir()
    binary = folder / "build" / "simbench"
    with _build_lock:
        try:
            result = subprocess.run(["make", "-C", str(folder), "build/simbench"],
                                    capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BenchError(f"{folder}: cannot build the simulated bench ({exc})") from None
    if result.returncode != 0 or not binary.is_file():
        last = (result.stderr.strip().splitlines() or ["make failed"])[-1]
        raise BenchError(f"{folder}: building the simulated bench failed: {last}")
    return binary


class SimulatedBench:
    """A running simulated bench; open ``port`` with pyserial. Use as a context manager."""

    def __init__(self, process: subprocess.Popen, port: str,
                 config: SimBenchConfig | None = None):
        self.process = process
        self.port = port
        self.stats = ""
        self.config = config or SimBenchConfig()
        self._command_lock = threading.Lock()  # one command and its answer at a time
        self._answers = b""  # stdout bytes read past the last answer line

    def command(self, line: str, timeout_s: float = 5.0) -> None:
        """Run-time fault injection: ``"estop on|off"``, ``"driver on|off"``, ``"stall MS"``,
        ``"reset"``, ``"drop P"``, ``"corrupt P"``, ``"delay MS"``, and ``"freeze MS"``: not a
        fault of the board but of the simulation's host, the simulated bench's tick loop
        descheduled for MS ms (its receiver thread still stamps the bytes' arrival, so the
        firmware sees them at the ticks they arrived in).

        Returns once the simulated bench has applied the command (it answers each one on its
        stdout; a freeze, once it has begun), so that what follows sees it in force. Raises
        BenchError for a command it does not know, or no answer within ``timeout_s`` s."""
        with self._command_lock:
            if self.process.poll() is not None or self.process.stdin is None:
                raise BenchError(f"{self.port}: the simulated bench is not running")
            try:
                self.process.stdin.write((line.strip() + "\n").encode())
                self.process.stdin.flush()
            except OSError:
                raise BenchError(f"{self.port}: the simulated bench is not running") from None
            answer = self._answer(timeout_s)
        if answer.startswith("unknown "):
            raise BenchError(f"{self.port}: the simulated bench has no command {line.strip()!r}")
        if not answer.startswith("applied "):
            raise BenchError(f"{self.port}: the simulated bench did not apply {line.strip()!r} "
                             f"within {timeout_s} s")

    def _answer(self, timeout_s: float) -> str:
        """The next line of the simulated bench's stdout ("" at its end or after timeout_s)."""
        end = time.monotonic() + timeout_s
        descriptor = self.process.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(descriptor, selectors.EVENT_READ)
            while b"\n" not in self._answers:
                if not selector.select(max(end - time.monotonic(), 0.0)):
                    return ""
                data = os.read(descriptor, 4096)
                if not data:
                    return ""
                self._answers += data
        line, _, self._answers = self._answers.partition(b"\n")
        return line.decode(errors="replace").strip()

    def stop(self, timeout_s: float = 2.0) -> str:
        """Stop the process (closing its stdin, killing it if needed); its statistics line."""
        if self.process.poll() is None:
            try:
                _, err = self.process.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                _, err = self.process.communicate()
            self.stats = err.decode(errors="replace").strip()
        return self.stats

    def tick_timing(self) -> dict[str, float]:
        """After :meth:`stop`: how late the simulated bench's own 1 kHz ticks started.

        ``overruns`` (ticks that ended after the next one was due), ``late_ticks_1ms`` (ticks
        started more than 1 ms late) and ``max_tick_lag_ms``: the machine's floor, measured by a
        C real-time process in the same run as the stream; ``hw_watchdog_resets``. Empty if the
        line is missing.
        """
        found = re.search(r"(\d+) overruns.*?(\d+) hardware watchdog resets.*?(\d+) ticks > 1 "
                          r"ms late, max tick lag ([\d.]+) ms", self.stats)
        if found is None:
            return {}
        return {"overruns": int(found[1]), "hw_watchdog_resets": int(found[2]),
                "late_ticks_1ms": int(found[3]), "max_tick_lag_ms": float(found[4])}

    def __enter__(self) -> SimulatedBench:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def start_simulated_bench(config: Path | SimBenchConfig | None = None,
                          faults: SimFaults | None = None, build: bool = True,
                          realtime: bool = True, timeout_s: float = 5.0,
                          load: tuple[Plan, float] | None = None,
                          ramp_down_s: float = 0.3) -> SimulatedBench:
    """Build (if ``build``) and start the simulated bench; returns once its pty exists.

    ``config`` is a bench_sim.toml path or an already loaded :class:`SimBenchConfig` (default:
    the bundled one); ``faults`` the fault injection; ``realtime`` lets it ask for a real-time
    scheduling priority (when the system grants it) so that its 1 kHz tick stays on time on a
    busy machine; ``load`` = (plan, athlete's share): the gesture's load and the simulated
    athlete on the axis (:func:`load_table`), unloaded over ``ramp_down_s`` when a stop leaves
    the plan. The process runs in its own session: a terminal's Ctrl-C reaches only the host,
    which stops the session under control. Raises BenchError if it does not start.
    """
    binary = build_simbench() if build else firmware_dir() / "build" / "simbench"
    if not isinstance(config, SimBenchConfig):
        config = load_sim_config(config)
    argv = [str(binary), *plant_flags(config), *(faults or SimFaults()).flags()]
    if not realtime:
        argv.append("--no-realtime")
    table = load_table(load[0], load[1], config.athlete) if load is not None else ""
    load_file = None
    if table:
        # closed (and deleted) once simbench has read it, below: not a with-block
        load_file = tempfile.NamedTemporaryFile("w", prefix="bemore-load-", suffix=".txt")  # noqa: SIM115
        load_file.write(table)
        load_file.flush()
        argv += ["--load-file", load_file.name, "--load-ramp-ms", str(round(ramp_down_s * 1000))]
    try:
        process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        if load_file is not None:
            load_file.close()
        raise BenchError(f"{binary}: cannot start the simulated bench ({exc})") from None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    ready = selector.select(timeout_s)
    selector.close()
    line = process.stdout.readline().decode().strip() if ready else ""
    if load_file is not None:
        load_file.close()  # simbench read it while parsing its arguments, before its first line
    if not line.startswith("/dev/"):
        process.kill()
        _, err = process.communicate()
        why = err.decode(errors="replace").strip() or f"no pty path within {timeout_s} s"
        raise BenchError(f"{binary}: the simulated bench did not start: {why}")
    return SimulatedBench(process, line, config)
