"""``bemore drive`` as a library call: read, check, connect, arm, stream, disarm, log.

:func:`drive` is what the CLI runs; tests and scripts call it directly. With ``port=None`` it
starts the simulated bench (``controller.simbench``) and stops it afterwards: a dry run.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path

from controller.dump import DumpWriter
from controller.errors import BemoreError, BenchError, ConfigError, DataError
from controller.log import LogWriter, already_logged
from controller.modes import ModeSettings, Plan, build_plan
from controller.preflight import require_clear
from controller.profile import DEFAULT_PROFILE, AthleteProfile
from controller.scheduler import REALTIME_PRIORITY, other_cpus, pinned, realtime_priority
from controller.session import (
    Session,
    SessionResult,
    check_stream_settings,
    with_write_failure,
)
from controller.setpoints import Gesture, read_setpoints
from controller.settings import Bench, load_bench


@contextlib.contextmanager
def bench_port(port: str | None, load: tuple[Plan, float] | None = None,
               ramp_down_s: float = 0.3, faults=None) -> Iterator[tuple[str, object | None]]:
    """Yield (port, simulated bench or None): ``port`` itself, or a fresh simulated bench
    carrying ``load`` = (plan, athlete's share): the gesture's load and the simulated athlete,
    with the start-up fault injection ``faults`` (a :class:`controller.simbench.SimFaults`)."""
    if port is not None:
        yield port, None
        return
    from controller.simbench import start_simulated_bench

    # the simulated bench stands in for a microcontroller: give it real-time priority too
    with start_simulated_bench(load=load, ramp_down_s=ramp_down_s,
                               faults=faults) as simulated, realtime_priority(
            simulated.process.pid, REALTIME_PRIORITY + 1), pinned(other_cpus(),
                                                                  simulated.process.pid):
        yield simulated.port, simulated


def drive(
    setpoints: str | Path | Gesture,
    log_path: str | Path,
    settings: ModeSettings | None = None,
    port: str | None = None,
    bench: Bench | None = None,
    clear_fault: bool = False,
    view: Callable[[Session], contextlib.AbstractContextManager] | None = None,
    plan: Plan | None = None,
    dump: str | Path | None = None,
    sim_faults=None,
    sim_inject: Sequence[tuple[float, str]] = (),
    athlete: AthleteProfile | None = None,
) -> SessionResult:
    """Drive the bench through the gesture of ``setpoints``; the session is logged to ``log_path``.

    ``settings`` default to the passive mode, full speed, one repetition at the configured rate.
    ``athlete`` is her profile (her limits; default: the documented default athlete).
    ``view(session)`` is a context manager open from before arming to the end of the stream
    (the live view). ``plan`` replaces the plan built from the gesture (``replay --stream``).
    ``dump`` also records every byte on the link (``controller.dump``). A dry run (no ``port``)
    can rehearse a fault: ``sim_faults`` (:class:`controller.simbench.SimFaults`) from the start,
    ``sim_inject`` [(seconds after ARM, command)] at run time (``SimulatedBench.command``).
    Raises PreflightError (before connecting, or before arming once the firmware's limits are
    known), ConfigError (a rate or lead the watchdog or the firmware's queue cannot take, before
    connecting), BenchError when the bench cannot be reached or refuses to arm, and DataError
    when the log (or the dump) cannot be written before ARM (nothing armed). From ARM on
    nothing is raised: every end (signal, exception, stop) goes through the stop sequence and is
    returned as a :class:`SessionResult` (:meth:`Session.run`); Ctrl-C and SIGTERM request a
    controlled stop from the connection on.
    """
    bench = bench or load_bench()
    if port is not None and (sim_faults is not None or sim_inject):
        raise ConfigError("fault injection rehearses on the simulated bench: drop --port")
    if Path(log_path).exists():  # before any work; LogWriter refuses a race as well
        raise DataError(already_logged(log_path))
    athlete = athlete or DEFAULT_PROFILE
    gesture = setpoints if isinstance(setpoints, Gesture) else read_setpoints(setpoints)
    if settings is None:
        settings = ModeSettings(rate_hz=bench.streaming.rate_hz,
                                ramp_down_s=bench.streaming.ramp_down_s)
    plan = plan if plan is not None else build_plan(gesture, settings)
    check_stream_settings(plan.rate_hz, bench)
    require_clear(gesture, plan, bench, torque_gain=settings.torque_gain, athlete=athlete)
    with bench_port(port, (plan, settings.athlete_share), settings.ramp_down_s, sim_faults) as (
            device, simulated):
        header = session_header(gesture, settings, bench, device, simulated is not None)
        header["athlete_profile"] = athlete.to_dict()
        header["shares"] = {"athlete": settings.athlete_share, "bench": settings.torque_gain}
        if simulated is not None:
            header["simulated_athlete"] = simulated.config.athlete.model_dump()
        session = Session(device, bench, None, settings, athlete=athlete,
                          simulated=simulated is not None)
        with contextlib.ExitStack() as closing:
            closing.callback(session.close)
            # a port that cannot be opened is said before the log and the dump exist: nothing
            # is written (the log of a session that never reached the bench would only say
            # that); nothing is sent before HELLO, so the dump misses nothing of the session
            session.open_link()
            if dump is not None:
                session.dump = session.link.dump = DumpWriter(dump)
                closing.callback(session.dump.close)
            session.log = log = closing.enter_context(LogWriter(log_path, header))
            try:
                with session.signals():
                    session.connect(clear_fault=clear_fault)
                    require_clear(gesture, plan, bench, session.firmware,
                                  torque_gain=settings.torque_gain, athlete=athlete)
                    session.check_start(plan)
                    failed_injections: list[str] = []
                    with (view(session) if view is not None else contextlib.nullcontext(),
                          _injecting(simulated, sim_inject, log, failed_injections)):
                        result = session.run(plan)
                    for failure in failed_injections:  # the rehearsal lacked that fault
                        log.event("error", failure)
                        result.message += f" (rehearsal incomplete: {failure})"
            except BemoreError as error:  # before ARM (from ARM on, run returns the result)
                log.event("error", str(error))
                log.end("not armed", message=f"{error}; the bench was never armed")
                raise
            finally:
                session.close()
            # the link is closed: every frame is in the log, including those that came after
            # the stream ended (DISARM's confirmation), so the summary counts what replay counts
            result.telemetry, result.firmware_late = session.counts()
        # both closed: their last writes (the log's fsync, the dump's flush) are known
        return with_write_failure(result, log, session.dump)


@contextlib.contextmanager
def _injecting(simulated, injections: Sequence[tuple[float, str]], log: LogWriter,
               failures: list[str]) -> Iterator[None]:
    """Run each (seconds, command) fault injection on the simulated bench that long from now
    (just before ARM), logging each as it comes in force (an ``injection`` event); pending ones
    are cancelled at the end. An injection the simulated bench does not apply (it has stopped,
    does not answer or does not know it), or that the session ended before, adds its one-line
    message to ``failures``: the session went on without that fault, and its result says so."""
    started: set[int] = set()

    def inject(index: int, command: str) -> None:
        started.add(index)
        try:
            simulated.command(command)
        except BenchError as error:
            failures.append(str(error))
        else:
            log.event("injection", command, sync=False)

    timers = [threading.Timer(at_s, inject, (index, command))
              for index, (at_s, command) in enumerate(injections)]
    for timer in timers:
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        for timer in timers:
            timer.cancel()
        failures += [f"the injection '{command}' at {at_s:g} s came after the session's end"
                     for index, (at_s, command) in enumerate(injections) if index not in started]


def session_header(gesture: Gesture, settings: ModeSettings, bench: Bench, port: str,
                   simulated: bool) -> dict:
    """Metadata of the log's header record."""
    return {
        "start_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds"),
        "athlete": gesture.metadata.get("athlete", ""),
        "gesture": gesture.metadata.get("gesture", ""),
        "setpoints": gesture.path,
        "gesture_summary": gesture.summary(),
        "settings": asdict(settings),
        "bench": bench.model_dump(),
        "port": port,
        "simulated": simulated,
    }
