"""`bemore drive` and `bemore replay` from the command line, on the simulated bench."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from bemore.cli import cli
from controller.log import read_log
from controller.replay import summarise
from controller.setpoints import write_setpoints
from controller.simbench import start_simulated_bench
from tests.controller.gestures import make_gesture
from tests.controller.test_drive_simbench import bench_state
from tests.waiting import eventually

REPOSITORY = Path(__file__).resolve().parents[2]


def test_out_of_limits_file_is_refused_before_arming(tmp_path):
    path = tmp_path / "big.csv"
    write_setpoints(path, make_gesture(peak_deg=172.0))
    log = tmp_path / "session.jsonl"
    result = CliRunner().invoke(cli, ["drive", str(path), "--log", str(log), "--no-view"])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    # the table names every violation: where, when, quantity, value, limit, source
    assert lines[0].split()[:6] == ["where", "when", "(s)", "quantity", "value", "limit"]
    window = next(i for i, line in enumerate(lines) if line.startswith("feasible window"))
    rows = [line.split() for line in lines[1:window]]
    assert {(row[0], row[2], " ".join(row[-2:])) for row in rows} == {
        ("file", "angle", "athlete profile"), ("stream", "angle", "athlete profile")}
    # then what would pass: nothing, in any mode or speed (the angle is beyond her range)
    assert [line.split()[1:] for line in lines[window + 2: window + 6]] == [["—"] * 4] * 4
    assert all(row[3] == "172.00" and row[4] == "170.00" for row in rows)
    assert lines[-1].startswith(f"bemore: error: {path}: refused before arming: 2 limit")
    assert not log.exists()  # refused before anything was started or armed


def test_drive_then_replay_json_and_plot(setpoint_file, tmp_path):
    log = tmp_path / "session.jsonl"
    runner = CliRunner()
    result = runner.invoke(cli, ["drive", str(setpoint_file), "--log", str(log), "--no-view",
                                 "--mode", "assistive", "--load", "20", "--rate", "500"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "gesture completed: ramped down and disarmed"
    # both counts of deadline misses are printed (500 Hz, lead 20 ms: host threshold 19 ms)
    assert re.search(r"deadline misses: \d+ at the firmware \(after their due tick\), \d+ by "
                     r"the host \(sends > 19 ms late\)", result.stdout), result.stdout
    replay = runner.invoke(cli, ["replay", str(log), "--json", "--plot", str(tmp_path / "p")])
    assert replay.exit_code == 0, replay.output
    text = replay.stdout
    summary = json.loads(text[: text.rindex("}") + 1])
    assert summary["mode"] == "assistive 20 %, speed 1, reps 1"
    # 500 Hz: 1201 gesture setpoints + 150 of the final ramp, all sent (none skipped)
    assert summary["setpoints_sent"] == 1351 and summary["skipped"] == 0
    assert 0.0 < summary["tracking_rms_deg"] < 2.0
    # the feed-forward is 20 % of the gesture's 26.5 N·m peak
    assert abs(summary["peak_commanded_torque_nm"] - 0.2 * 26.47) < 0.1
    assert (tmp_path / "p" / "tracking.png").stat().st_size > 10_000
    assert (tmp_path / "p" / "summary.png").stat().st_size > 10_000  # the one-page summary
    # Without --stream, a replay only reads: nothing is sent to a bench, no new session log.
    assert not (tmp_path / "session.replay.jsonl").exists()


def test_replay_plot_refuses_a_folder_it_cannot_write_before_the_summary(setpoint_file,
                                                                           tmp_path):
    # as every command's output folder: refused in one line before any work (here, the
    # summary), nothing left behind; plots already in a folder are overwritten
    log = tmp_path / "session.jsonl"
    runner = CliRunner()
    assert runner.invoke(cli, ["drive", str(setpoint_file), "--log", str(log),
                               "--no-view"]).exit_code == 0
    a_file = tmp_path / "plots.png"  # a new user's --plot FILE
    a_file.write_bytes(b"not a folder")
    taken = tmp_path / "taken"
    (taken / "tracking.png").mkdir(parents=True)  # a folder where a plot goes
    before = sorted(path.name for path in tmp_path.rglob("*"))
    for folder, line in ((a_file, f"{a_file}: output folder exists and is not a folder"),
                         (taken, f"{taken / 'tracking.png'}: cannot write the output file "
                                 "(Is a directory)"),
                         (a_file / "deeper", f"{a_file / 'deeper'}: cannot create the output "
                                             "folder (Not a directory)")):
        replay = runner.invoke(cli, ["replay", str(log), "--plot", str(folder)])
        assert replay.exit_code == 2, replay.output
        assert replay.stdout == ""  # no summary before the refusal
        assert replay.stderr == f"bemore: error: {line}\n"
    assert sorted(path.name for path in tmp_path.rglob("*")) == before
    assert a_file.read_bytes() == b"not a folder"
    # a folder with plots from an earlier replay: written again
    plots = tmp_path / "plots"
    for _ in range(2):
        replay = runner.invoke(cli, ["replay", str(log), "--plot", str(plots)])
        assert replay.exit_code == 0, replay.output
        assert replay.stdout.splitlines()[-2:] == [f"plot: {plots / 'tracking.png'}",
                                                   f"plot: {plots / 'summary.png'}"]
    assert sorted(path.name for path in plots.iterdir()) == ["summary.png", "tracking.png"]


def test_replay_stream_sends_the_same_setpoints_again(setpoint_file, tmp_path):
    log = tmp_path / "session.jsonl"
    runner = CliRunner()
    assert runner.invoke(cli, ["drive", str(setpoint_file), "--log", str(log), "--no-view",
                               "--speed", "0.5"]).exit_code == 0
    again = tmp_path / "again.jsonl"
    result = runner.invoke(cli, ["replay", str(log), "--stream", "--log-out", str(again)])
    assert result.exit_code == 0, result.output
    first, second = read_log(log).setpoints, read_log(again).setpoints
    # the same positions, in the same order, at the same stream times
    common = min(len(first["k"]), len(second["k"]))
    assert common > 4000
    by_time = dict(zip(first["time_ms"].tolist(), first["position_urad"].tolist(), strict=True))
    matched = [by_time[t] == p for t, p in zip(second["time_ms"].tolist(),
                                               second["position_urad"].tolist(), strict=True)
               if t in by_time]
    assert len(matched) > 4000 and all(matched)


def test_sigkill_of_the_host_leaves_the_bench_to_its_watchdog(setpoint_file, tmp_path):
    log = tmp_path / "session.jsonl"
    with start_simulated_bench() as simulated:
        process = subprocess.Popen(
            [sys.executable, "-m", "bemore", "drive", str(setpoint_file), "--port",
             simulated.port, "--log", str(log), "--no-view"],
            cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(REPOSITORY)})
        deadline = time.monotonic() + 60.0  # `bemore` imports every command: slow under load
        while time.monotonic() < deadline:  # wait until ~0.8 s of the gesture was streamed
            if log.exists() and log.read_text().count('"type": "sp"') > 800:
                break
            # A drive that ended (or failed) before streaming that much says why.
            assert process.poll() is None, process.communicate()[1].decode()[-3000:]
            time.sleep(0.05)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        killed_at = log.read_text().count('"type": "sp"')
        # the watchdog (50 ms of the bench's ticks) trips, then the torque ramps to zero:
        # asked until it has (the bench may run late on a loaded machine)
        state = eventually(lambda: bench_state(simulated.port),
                           lambda state: state == ("FAULT", "WATCHDOG", 0.0),
                           "the bench faulted by its watchdog, torque ramped to zero")
    assert process.returncode == -signal.SIGKILL
    assert state == ("FAULT", "WATCHDOG", 0.0)
    session = read_log(log)  # readable, possibly with a truncated last line
    assert session.end is None
    assert len(session.setpoints["k"]) >= killed_at - 10  # at most a few ms were lost
    assert len(session.setpoints["k"]) > 800
    summary = summarise(session)
    assert summary.end.startswith("no end record: the host stopped abruptly")
    assert summary.tracking_rms_deg > 0.0


def test_ctrl_c_ramps_down_and_disarms(setpoint_file, tmp_path):
    log = tmp_path / "session.jsonl"
    with start_simulated_bench() as simulated:
        process = subprocess.Popen(
            [sys.executable, "-m", "bemore", "drive", str(setpoint_file), "--port",
             simulated.port, "--log", str(log), "--no-view"],
            cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPOSITORY)})
        deadline = time.monotonic() + 60.0  # `bemore` imports every command: slow under load
        while time.monotonic() < deadline:
            if log.exists() and log.read_text().count('"type": "sp"') > 500:
                break
            time.sleep(0.05)
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
        state = bench_state(simulated.port)
    assert process.returncode == 1
    # an operator stop is reported as a stop, not as an error
    assert "error" not in stderr
    assert stdout.strip().splitlines()[-1] == (
        "stopped by Ctrl-C; ramped down over 0.3 s and disarmed")
    assert state[0] == "DISARMED"
    session = read_log(log)
    assert session.end["reason"] == "interrupted"
    assert session.setpoints["rep"].count(-1) == 300  # the ramp down, logged
    # drive, the log's end record and replay count the setpoints alike: the gesture's, then the
    # ramp-down's (drive had said 300 fewer than the end record's timing and replay)
    gesture = len(session.setpoints["k"]) - 300
    assert (session.end["sent"], session.end["ramp_down_sent"]) == (gesture, 300)
    said = f"{gesture} setpoints of the gesture, then 300 of the ramp-down"
    assert f"sent {said}, received " in stdout, stdout
    replay = CliRunner().invoke(cli, ["replay", str(log)])
    assert f"  ({said}, " in replay.stdout.splitlines()[2], replay.stdout


def test_an_existing_session_log_is_never_overwritten(setpoint_file, tmp_path):
    """A coach who runs the same command twice keeps the first session: refused before
    connecting, in one line, the file untouched."""
    log = tmp_path / "session.jsonl"
    log.write_text('{"type": "header", "format": "yesterday"}\n')
    before = log.read_bytes()
    result = CliRunner().invoke(cli, ["drive", str(setpoint_file), "--log", str(log),
                                      "--no-view"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (f"bemore: error: {log}: a session log is already there (a "
                                     "log is never overwritten: give --log another name)")
    assert log.read_bytes() == before
    # replay --stream names its own option, before the summary (it had said --log)
    replay = CliRunner().invoke(cli, ["replay", str(log), "--stream", "--log-out", str(log)])
    assert replay.exit_code == 2 and replay.stdout == ""
    assert replay.stderr.strip() == (f"bemore: error: {log}: a session log is already there (a "
                                     "log is never overwritten: give --log-out another name)")
    assert log.read_bytes() == before


@pytest.mark.parametrize(("options", "line"), [
    (["--mode", "assistive", "--load", "150"], "load 150 %: must be within 0..100 %"),
    (["--speed", "0.1"], "speed 0.1: must be within 0.25..1.0"),
    (["--speed", "2"], "speed 2: must be within 0.25..1.0"),
    (["--load", "30"], "load: only the assistive and resistive modes take a load"),
])
def test_plan_refuses_the_options_drive_refuses(setpoint_file, tmp_path, options, line):
    # --plan checks the session's options as drive does: one line, exit 2, no window
    runner = CliRunner()
    for extra in (["--plan"], ["--log", str(tmp_path / "s.jsonl"), "--no-view"]):
        result = runner.invoke(cli, ["drive", str(setpoint_file), *options, *extra])
        assert result.exit_code == 2, (extra, result.output)
        assert result.stderr.splitlines() == [f"bemore: error: {line}"], extra
        assert "feasible window" not in result.stdout
    assert not (tmp_path / "s.jsonl").exists()


def test_a_port_that_cannot_be_opened_writes_no_log(setpoint_file, tmp_path):
    # found before the log is created: one line, nothing written, the same --log works again
    log = tmp_path / "p.jsonl"
    port = str(tmp_path / "no-such-port")
    result = CliRunner().invoke(cli, ["drive", str(setpoint_file), "--port", port, "--log",
                                      str(log), "--no-view", "--dump", str(tmp_path / "d.bin")])
    assert result.exit_code == 3, result.output
    assert result.stderr.splitlines() == [
        f"bemore: error: {port}: cannot open the bench's serial port ([Errno 2] could not open "
        f"port {port}: [Errno 2] No such file or directory: '{port}')"]
    assert not log.exists() and not (tmp_path / "d.bin").exists()


def test_a_session_that_ends_before_arming_has_an_end_record(setpoint_file, tmp_path):
    # a port that opens but never answers HELLO (a pseudo-terminal with no bench behind it):
    # the log says how it ended and that the bench was never armed; replay shows just that
    log = tmp_path / "p.jsonl"
    main, other = os.openpty()
    try:
        port = os.ttyname(other)
        result = CliRunner().invoke(cli, ["drive", str(setpoint_file), "--port", port, "--log",
                                          str(log), "--no-view"])
    finally:
        os.close(main)
        os.close(other)
    assert result.exit_code == 3, result.output
    line = f"{port}: no HELLO_REPLY to HELLO within 1.0 s"
    assert result.stderr.splitlines() == [f"bemore: error: {line}"]
    session = read_log(log)
    assert session.end == {"type": "end", "host_time": session.end["host_time"],
                           "reason": "not armed",
                           "message": f"{line}; the bench was never armed"}
    assert not any(session.setpoints.values()) and not any(session.telemetry.values())
    replay = CliRunner().invoke(cli, ["replay", str(log)])
    assert replay.exit_code == 0, replay.output
    lines = replay.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["session", "gesture", "duration", "end"]
    assert lines[2].endswith("(0 setpoints, 0 telemetry frames)")
    assert lines[3] == f"end         not armed: {line}; the bench was never armed"
