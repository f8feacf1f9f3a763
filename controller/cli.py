"""The ``bemore drive`` and ``bemore replay`` commands (registered by ``bemore/cli.py`` and by
the bench side's own ``bemore-bench``).

This module is the scientific side's one door to the bench: besides the commands it exports the
foundation both sides share — the error family, the validated configuration layer, the athlete
profile's schema, the bench configuration's schema, the output folders' check, what a file
bemore wrote is (``filekinds``) and the setpoint file's format and writer (``setpoints``) (see
``__all__``).
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path

import click

from controller import filekinds, setpoints
from controller.config import Section, load_toml_model, read_toml, validate
from controller.console import forget_unhandled_interrupt
from controller.errors import BemoreError, BenchError, ConfigError, DataError, os_error_line
from controller.modes import DEFAULT_LOAD_PCT, DEFAULT_MODE, LOADED_MODES, MODES, ModeSettings
from controller.outputs import (
    PARTIAL_PREFIX,
    WRITE_PROBE_PREFIX,
    check_output_folder,
    ctrl_c_held,
    discard,
    interrupt_note,
    on_interrupt,
    output_folder,
    put_in_place,
    stage,
    write_file,
    write_together,
)
from controller.preflight import PreflightError, compiled_firmware_limits
from controller.profile import DEFAULT_PROFILE, AthleteProfile, ProfileFile, load_profile
from controller.settings import BENCH_CONFIG_FILES, Bench, default_bench_config, load_bench

__all__ = [
    "BENCH_CONFIG_FILES", "DEFAULT_PROFILE", "PARTIAL_PREFIX", "WRITE_PROBE_PREFIX",
    "AthleteProfile", "BemoreError", "Bench", "BenchError", "ConfigError", "DataError",
    "ProfileFile", "Section", "check_output_folder", "ctrl_c_held", "default_bench_config",
    "discard", "drive_command", "filekinds", "load_bench", "load_profile", "load_toml_model",
    "on_interrupt", "os_error_line", "output_folder", "plan_window", "put_in_place", "read_toml",
    "replay_command", "setpoints", "stage", "streamed", "validate", "write_file",
    "write_together",
]

MODE_HELP = (
    "Share of the gesture's torque (athlete / bench): passive 0/100 % (the bench does the "
    "gesture, she relaxes: learning the timing); guided 100/0 % (the bench only holds the "
    "path); assistive P: 100−P / P %; resistive P: 100+P / −P %."
)


def plan_window(setpoints: str | Path, bench: Bench | None = None,
                athlete: AthleteProfile | None = None, bench_source: str = "bench.toml",
                template: ModeSettings | None = None, text: str | None = None
                ) -> tuple[list, str]:
    """The feasible window of a setpoint file: (cells, printable table).

    The modes, loads and speeds that pass the pre-flight with ``bench`` (default
    the packaged bench.toml), ``athlete`` (default: the documented default profile) and the limits
    compiled into the firmware. ``bemore synthesize`` calls it on the gesture it writes, before
    it is written (``text``: the file's content, :func:`controller.setpoints.read_setpoints`).
    """
    from controller.setpoints import read_setpoints
    from controller.window import feasible_window, format_window

    gesture = read_setpoints(setpoints, text)
    athlete = athlete or DEFAULT_PROFILE
    cells = feasible_window(gesture, bench or load_bench(), athlete, compiled_firmware_limits(),
                            template)
    return cells, format_window(cells, gesture, athlete, bench_source)


def _print_result(result) -> None:
    from controller.session import host_stall_text, sent_text  # the drive imported it already

    timing = result.timing
    counts = (f"sent {sent_text(result.sent, result.ramp_sent)}, received {result.telemetry} "
              "telemetry frames")
    monitors = result.monitors
    link = (f"; the firmware's counters: {monitors['seq_gaps']} sequence gaps, "
            f"{monitors['bad_frames']} bad frames" if monitors else "")
    stalls = host_stall_text(result.host_stalls_ms, result.handshake_stalls_ms)
    link += f"; {stalls}" if stalls else ""
    if not timing:  # stopped before anything was streamed
        click.echo(counts + link)
        return
    click.echo(f"{counts}; "
               f"period error p50 {timing['period_error_p50_ms']:.3f} ms, p99 "
               f"{timing['period_error_p99_ms']:.3f} ms, max {timing['period_error_max_ms']:.3f} "
               f"ms; deadline misses: {result.firmware_late} at the firmware (after their due "
               f"tick), {timing['deadline_misses']} by the host (sends > "
               f"{timing['miss_threshold_ms']:g} ms late); {timing['late_sends']} sends more "
               f"than a period late{link}")


def _run(run, log: Path, refused=None) -> None:
    """Run a drive, print the outcome; a refused or failed session becomes a BemoreError.

    A refused session prints its violations, then (``refused(error)`` → (the feasible window,
    the error's line)) what would pass and the one line that ends it. A session stopped by the
    operator (Ctrl-C, ``q``, SIGTERM) is reported as a stop, not as an error, and exits 1.
    """
    try:
        result = run()
    except PreflightError as error:
        click.echo(error.table(), err=True)
        if refused is None:
            raise
        window, line = refused(error)
        click.echo(window, err=True)
        raise DataError(line) from None
    _print_result(result)
    click.echo(f"log: {log}")
    if result.reason == "interrupted":
        click.echo(result.message)
        raise SystemExit(result.exit_code)
    if not result.ok:
        # the bench is already in a safe state: report why the session ended; a firmware fault
        # is attributed from the log exactly as `bemore replay` does (e.g. a stalled host)
        message = result.message
        if result.reason == "fault" and Path(log).exists():
            from controller.replay import summarise_file

            message += summarise_file(log).fault_cause()
        error = BenchError(message)
        error.exit_code = result.exit_code
        raise error
    click.echo(result.message)


WEB_OPTION = click.option(
    "--web", default=None, metavar="[HOST:]PORT",
    help="Serve the live page on PORT (this machine only; another HOST needs --web-public; "
         "default: no page).")
WEB_PUBLIC_OPTION = click.option(
    "--web-public", is_flag=True,
    help="Allow --web on an interface other machines reach (e.g. 0.0.0.0:8080 for a tablet); "
         "the page still needs the session's token.")


@click.command("drive")
@click.argument("setpoints", type=click.Path(path_type=Path))
@click.option("--plan", "plan_only", is_flag=True,
              help="Print the feasible window (modes, loads, speeds that pass the pre-flight) "
                   "and exit, without connecting or arming.")
@click.option("--port", help="Serial device of the bench (default: start the simulated bench).")
@click.option("--mode", type=click.Choice(MODES), default=DEFAULT_MODE, show_default=True,
              help=MODE_HELP)
@click.option("--load", "load_pct", type=float, default=None,
              help=f"Load in % of the gesture's torque (assistive/resistive; default "
                   f"{DEFAULT_LOAD_PCT:g}).")
@click.option("--speed", type=float, default=1.0, show_default=True,
              help="Slow motion: fraction of the gesture's pace, 0.25..1; the torque is the "
                   "exemplary model's inverse dynamics at that pace.")
@click.option("--profile", "profile_path", type=click.Path(path_type=Path), default=None,
              help="Athlete profile TOML (her peak shoulder torque and range; default: the "
                   "documented default athlete, controller/profile.py).")
@click.option("--reps", type=int, default=1, show_default=True, help="Repetitions.")
@click.option("--rest", "rest_s", type=float, default=5.0, show_default=True,
              help="Rest between repetitions (s).")
@click.option("--rate", "rate_hz", type=float, default=None,
              help="Setpoint rate in Hz, up to 1000 (default: bench.toml [streaming] rate_hz).")
@click.option("--log", "log", type=click.Path(path_type=Path), default=None,
              help="Session log to write (JSON Lines); required unless --plan (no default).")
@click.option("--bench-config", type=click.Path(path_type=Path), default=None,
              help="Bench configuration (default: the packaged bench.toml).")
@click.option("--clear-fault", is_flag=True, help="Clear a fault latched on the bench first.")
@click.option("--no-view", is_flag=True, help="No live view (plain output).")
@click.option("--dump", type=click.Path(path_type=Path), default=None,
              help="Also record every byte on the link (decode: bemore replay DUMP; default: "
                   "none).")
@click.option("--sim-fault", "sim_fault", default=None, metavar="KEY=VALUE[,...]",
              help="Dry run: start the simulated bench with faults: drop, corrupt (probability "
                   "per byte, 0..1), direction (rx|tx|both), delay_ms, stall_at_ms + stall_ms, "
                   "reset_at_ms (whole ms >= 0), seed (default: none).")
@click.option("--sim-inject", "sim_inject", multiple=True, metavar="SECONDS:COMMAND",
              help="Dry run: inject a fault SECONDS after arming: 'estop on', 'driver on', "
                   "'stall MS', 'reset', 'drop P', 'corrupt P', 'delay MS', or 'freeze MS' (the "
                   "simulation's tick loop descheduled) (repeatable; default: none).")
@WEB_OPTION
@WEB_PUBLIC_OPTION
@click.option("--stop-if-page-lost", "page_lost_s", type=click.FloatRange(min=0.0, min_open=True),
              default=None, metavar="SECONDS",
              help="With --web: once a page has connected, a controlled stop when no page is "
                   "connected for SECONDS (off by default).")
def drive_command(setpoints: Path, plan_only: bool, port: str | None, mode: str,
                  load_pct: float | None, speed: float, profile_path: Path | None, reps: int,
                  rest_s: float, rate_hz: float | None, log: Path | None,
                  bench_config: Path | None, clear_fault: bool, no_view: bool,
                  dump: Path | None, sim_fault: str | None, sim_inject: tuple[str, ...],
                  web: str | None, web_public: bool, page_lost_s: float | None) -> None:
    """Stream a gesture to the bench, safely, and log the session.

    \b
    Reads:  SETPOINTS (setpoints.csv, docs/formats.md), the packaged bench.toml (the bench's limits,
            streaming), the athlete profile (--profile: her peak shoulder torque and range of
            motion), the firmware's limits (its HELLO reply).
    Writes: the session log (--log, JSON Lines, docs/drive.md); a summary on stdout.
    Modes (athlete's / bench's share of the gesture's torque): passive 0/100 %, guided
    100/0 %, assistive P 100−P/P %, resistive P 100+P/−P %; --speed X recomputes the torque at
    the slowed pace. The whole session is checked against the athlete's, the bench's and the
    firmware's limits before arming; a refusal prints the violations and the feasible window
    (what would pass), which --plan prints without arming.
    Ctrl-C or q: controlled stop (ramp down, disarm; exit 1); e or space: E-STOP.
    Without --port, the simulated bench is started (a dry run); --sim-fault and --sim-inject
    rehearse a fault on it, e.g. --sim-inject '0.8:driver on'.
    --web [HOST:]PORT serves the live page (angles, torques against the limits, repetition,
    state; STOP and E-STOP buttons; the replay summary at the end); its URL carries the
    session's token (printed, with a QR code). Needs the web extra.
    A session log (or --dump file) that cannot be written (a full disk) stops the session:
    ramp down, disarm, exit 3.
    Exit codes: 0 completed, 1 stopped by the operator, 2 refused (data/config), 3 bench fault
    (or a stop by a fault of the host).
    Examples:
        bemore drive out/gesture/setpoints.csv --plan
        bemore drive out/gesture/setpoints.csv --mode assistive --load 70 --reps 3 \\
            --log out/session.jsonl
    """
    # Until the session starts (it owns Ctrl-C then: a controlled stop), a Ctrl-C ends the
    # command with one line (BenchGroup).
    on_interrupt("the bench was not armed: nothing was sent")
    from controller.drive import drive
    from controller.simbench import SimFaults, parse_injection

    faults = SimFaults.parse(sim_fault) if sim_fault is not None else None
    injections = [parse_injection(text) for text in sim_inject]
    bench = load_bench(bench_config)
    athlete = load_profile(profile_path) if profile_path else DEFAULT_PROFILE
    source = str(bench_config) if bench_config else "bench.toml"
    template = ModeSettings(reps=reps, rest_s=rest_s,
                            rate_hz=bench.streaming.rate_hz if rate_hz is None else rate_hz,
                            ramp_down_s=bench.streaming.ramp_down_s)

    load_given = load_pct is not None
    if load_pct is None:
        load_pct = DEFAULT_LOAD_PCT if mode in LOADED_MODES else 0.0
    # checked with --plan too: an option drive would refuse is refused before the window
    settings = ModeSettings(mode=mode, load_pct=load_pct, speed=speed, reps=reps, rest_s=rest_s,
                            rate_hz=template.rate_hz, ramp_down_s=template.ramp_down_s)
    if plan_only:
        click.echo(plan_window(setpoints, bench, athlete, source, template)[1])
        return
    if log is None:
        raise click.UsageError("--log FILE is required (or --plan to only print the window)")

    def refused(error: PreflightError) -> tuple[str, str]:
        """The feasible window, and the refusal's line with what this mode needs."""
        from controller.setpoints import read_setpoints
        from controller.window import mode_cell

        cells, window = plan_window(setpoints, bench, athlete, source, template)
        if mode not in LOADED_MODES:
            return window, str(error)
        cell = next((cell for cell in cells if (cell.mode, cell.speed) == (mode, speed)),
                    None) or mode_cell(read_setpoints(setpoints), bench, athlete, mode, speed,
                                       compiled_firmware_limits(), template)
        return window, f"{error}; {_needed(cell, load_pct, load_given)}"
    if page_lost_s is not None and web is None:
        raise click.UsageError("--stop-if-page-lost needs --web")
    views = []
    if not no_view:
        from controller.liveview import live_view

        views.append(live_view)
    server, plan, source_or_gesture = None, None, setpoints
    if web is not None:
        from controller.modes import build_plan
        from controller.setpoints import read_setpoints
        from controller.webview import plan_payload

        server = _start_web(web, web_public, page_lost_s)
        source_or_gesture = read_setpoints(setpoints)
        plan = build_plan(source_or_gesture, settings)
        hello = plan_payload(plan, settings, bench, athlete, source_or_gesture.metadata)
        views.append(lambda session: server.attach(session, hello))
    try:
        _run(lambda: drive(source_or_gesture, log, settings, port=port, bench=bench,
                           clear_fault=clear_fault, view=_together(views), dump=dump,
                           athlete=athlete, sim_faults=faults, sim_inject=injections,
                           plan=plan), log, refused)
    finally:
        if server is not None:
            _finish_web(server, log)


def _needed(cell, load_pct: float, given: bool) -> str:
    """What a loaded mode needs at the session's speed (``cell``, a feasible-window cell), and
    the load it was refused at (``given``: by --load, else the default), e.g. 'assistive at
    speed 1 passes with --load 64 to 100 (this session: 50 %, the default load)'."""
    this = f"--load {load_pct:g}" if given else f"{load_pct:g} %, the default load"
    if cell.passes:
        low, high = cell.loads
        needs = f"passes with --load {low}" + (f" to {high}" if high != low else "")
    else:
        needs = "passes at no load"
    return f"{cell.mode} at speed {cell.speed:g} {needs} (this session: {this})"


def _together(views: list):
    """One view (drive's ``view``) that opens each of ``views`` on the session, or None."""
    if not views:
        return None

    @contextlib.contextmanager
    def view(session):
        with contextlib.ExitStack() as stack:
            for each in views:
                stack.enter_context(each(session))
            yield

    return view


def _start_web(address: str, public: bool, page_lost_s: float | None = None):
    """Start the page's server on ``address`` and print its URL and QR code (stderr)."""
    from controller.webview import WebServer, announce, parse_address

    host, port = parse_address(address, public)
    server = WebServer(host, port, stop_if_page_lost_s=page_lost_s)
    server.start()
    announce(server, lambda line: click.echo(line, err=True))
    return server


def _finish_web(server, log: Path) -> None:
    """After a session: show its replay summary on the pages (from the log), then stop."""
    from controller.log import read_log
    from controller.webview import FINISH_WAIT_S, session_payload

    try:
        if server.attached and Path(log).exists():
            server.show(session_payload(read_log(log)), wait_s=FINISH_WAIT_S)
    finally:
        server.close()


def streamed(summary: dict) -> bool:
    """Whether a session's ``bemore replay --json`` summary counts setpoints sent or telemetry
    heard, i.e. has measured figures (:func:`controller.replay.streamed`, imported on use)."""
    from controller.replay import streamed as streamed_in_replay

    return streamed_in_replay(summary)


@click.command("replay")
@click.argument("log", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--plot", "plot_dir", type=click.Path(path_type=Path), default=None,
              help="Write the plots, tracking.png (commanded vs measured) and summary.png, to "
                   "this folder (default: no plots).")
@click.option("--stream", is_flag=True, help="Send the logged stream to the bench again.")
@click.option("--port", help="Bench for --stream (default: start the simulated bench).")
@click.option("--log-out", type=click.Path(path_type=Path), default=None,
              help="Log of the --stream session (default: LOG with .replay.jsonl).")
@WEB_OPTION
@WEB_PUBLIC_OPTION
def replay_command(log: Path, as_json: bool, plot_dir: Path | None, stream: bool,
                   port: str | None, log_out: Path | None, web: str | None,
                   web_public: bool) -> None:
    """Summarise a session log; plot it; stream it again. Or decode a byte dump.

    \b
    Reads:  a session log written by `bemore drive` (a log cut short by a crash is fine), or a
            byte dump (`bemore drive --dump`), printed as one decoded message per line.
    Writes: the summary on stdout (text, or JSON with --json); with --plot DIR,
            DIR/tracking.png (commanded vs measured) and DIR/summary.png (the one-page summary);
            with --stream, a new session log (--log-out, never overwritten); with --web
            [HOST:]PORT, serves the session's page with a time slider until Ctrl-C.
    Summary: duration, tracking RMS and max, peak torque, deadline misses, period jitter
    p50/p99/max, faults, firmware counters, how the session ended.
    Example:
        bemore replay out/session.jsonl --plot out/plots
    """
    from controller.dump import MAGIC, decode_dump
    from controller.log import already_logged, read_log
    from controller.replay import check_plot, plot, replay_plan, summarise

    if plot_dir is not None:  # before the summary: a folder it cannot write is said at once
        check_plot(plot_dir)
    log_out = (log_out or log.with_suffix(".replay.jsonl")) if stream else None
    if log_out is not None and log_out.exists():  # drive refuses it too, naming --log
        raise DataError(already_logged(log_out, "--log-out"))

    # Not called `stream`: that name is the --stream flag, and shadowing it made every replay
    # drive the bench again.
    with contextlib.suppress(OSError), log.open("rb") as handle:
        if handle.read(len(MAGIC)) == MAGIC:
            messages, bad = decode_dump(log)
            origin = messages[0].host_time_ns if messages else 0
            for message in messages:
                click.echo(message.line(origin))
            click.echo(f"{len(messages)} messages; frames that did not decode: "
                       + ", ".join(f"{key} {value}" for key, value in bad.items()))
            return
    session_log = read_log(log)
    summary = summarise(session_log)
    if as_json:
        click.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        click.echo("\n".join(summary.lines()))
    if plot_dir is not None:
        for path in plot(session_log, plot_dir):
            click.echo(f"plot: {path}")
    if stream:
        from controller.drive import drive

        gesture, plan, settings = replay_plan(session_log)
        _run(lambda: drive(gesture, log_out, settings, port=port, plan=plan), log_out)
    if web is not None:
        from controller.webview import session_payload

        payload = session_payload(session_log)
        server = _start_web(web, web_public)
        server.show(payload)
        click.echo("serving the session's page; Ctrl-C to stop", err=True)
        try:
            while True:
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            server.close()


class BenchGroup(click.Group):
    """The bench side's own command group: every BemoreError becomes one line and its exit code
    (0 ok, 1 not completed, 2 usage/config/data, 3 bench or protocol fault), a traceback only
    with ``--debug``. ``program`` names the command in the line (``bemore`` subclasses it).

    A file the command could not read or write (a read-only or full disk, a folder where a
    file is expected) that no code below turned into a BemoreError is one line too, naming the
    file, with exit code 2: what was written before it stays written.

    A Ctrl-C that no command turned into its own ending (before the work starts, while a
    command reads its inputs) is one line too, saying what it left (what the command last said
    with :func:`controller.outputs.on_interrupt`, by default that nothing was written), with
    exit code 1: not click's bare "Aborted!"."""

    program = "bemore-bench"

    def invoke(self, ctx: click.Context) -> object:
        on_interrupt("nothing was written")
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            forget_unhandled_interrupt()  # exit code 1, not -2 (see there)
            click.echo(f"{self.program}: interrupted (Ctrl-C): {interrupt_note()}", err=True)
            raise SystemExit(1) from None
        except BemoreError as error:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"{self.program}: error: {error}", err=True)
            raise SystemExit(error.exit_code) from None
        except OSError as error:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"{self.program}: error: {os_error_line(error)}", err=True)
            raise SystemExit(2) from None



@click.group(cls=BenchGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.pass_context
def bench_cli(ctx: click.Context, debug: bool) -> None:
    """Drive the bemore training bench: stream a gesture safely, replay a session.

    The bench side alone (installed with 'pip install ./controller'): the same drive and
    replay as 'bemore drive' and 'bemore replay'.
    """
    ctx.obj = {"debug": debug}


bench_cli.add_command(drive_command)
bench_cli.add_command(replay_command)


def main() -> None:
    """Entry point of the ``bemore-bench`` command."""
    bench_cli()
