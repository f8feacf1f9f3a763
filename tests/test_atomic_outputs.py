"""Outputs written whole or not at all (controller.outputs): a full disk (ENOSPC injected at the
one low-level write every output goes through, ``controller.outputs._write_bytes``, for one
named file) or a Ctrl-C leaves the previous files as they were, never a cut or mixed set, and
is one line naming the file; ``identify`` prints its result before writing it, and an
interrupted run never replaces a complete athlete.json; a Ctrl-C before the work is one
bemore line, not click's bare "Aborted!"."""

from __future__ import annotations

import errno
import json
import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

import controller.outputs as outputs
from bemore.cli import cli
from bemore.errors import DataError
from bemore.paths import data_dir, write_file, write_together
from controller.outputs import ctrl_c_held
from tests.identify.test_cli import interrupt_on_third_batch
from tests.synthesis.test_synthesize import NEAR_OPTIMUM, _config

SAMPLE = data_dir() / "sample_trial.c3d"
SHORT_RUN = ("--no-polish", "--pack", "6", "--iterations", "2", "--seed", "3")
RESULT = ("gesture.json", "profiles.csv", "setpoints.csv")


def _disk_full_for(monkeypatch, name: str) -> list[str]:
    """Every write of an output whose temporary is for the file ``name`` fails as on a full
    disk (after part of it is written, as a real one does); returns the names refused."""
    original = outputs._write_bytes
    refused: list[str] = []

    def write(handle: int, data: bytes) -> None:
        if os.readlink(f"/proc/self/fd/{handle}").endswith(f"-{name}"):
            refused.append(name)
            os.write(handle, data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        original(handle, data)

    monkeypatch.setattr(outputs, "_write_bytes", write)
    return refused


def _leftovers(folder: Path) -> list[str]:
    """bemore's temporaries and staging folders left anywhere under ``folder``."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob(".bemore*"))


def _contents(folder: Path, names=RESULT) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in names}


def test_write_file_and_write_together_keep_the_previous_files_on_a_full_disk(
        tmp_path, monkeypatch) -> None:
    for name in ("a.json", "b.csv", "c.csv"):
        (tmp_path / name).write_text(f"old {name}\n")
    _disk_full_for(monkeypatch, "b.csv")
    with pytest.raises(DataError) as refused:
        write_together({tmp_path / name: f"new {name}\n" for name in ("a.json", "b.csv",
                                                                     "c.csv")})
    assert str(refused.value) == (f"{tmp_path}/b.csv: cannot write (No space left on device): "
                                  "a.json, b.csv, c.csv not replaced (the previous ones kept)")
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        name: f"old {name}\n" for name in ("a.json", "b.csv", "c.csv")}
    with pytest.raises(DataError, match=r"b\.csv: cannot write \(No space left on device\)$"):
        write_file(tmp_path / "b.csv", "new\n")
    assert (tmp_path / "b.csv").read_text() == "old b.csv\n"
    write_file(tmp_path / "a.json", "new\n")  # another file is written, whole
    assert (tmp_path / "a.json").read_text() == "new\n"
    assert _leftovers(tmp_path) == []


def test_a_refused_set_says_which_files_were_kept_and_which_were_never_written(
        tmp_path, monkeypatch) -> None:
    # Only a.json was there before: it is "not replaced", the two new files "not written".
    (tmp_path / "a.json").write_text("old\n")
    _disk_full_for(monkeypatch, "c.csv")
    with pytest.raises(DataError) as refused:
        write_together({tmp_path / name: "new\n" for name in ("a.json", "b.csv", "c.csv")})
    assert str(refused.value) == (f"{tmp_path}/c.csv: cannot write (No space left on device): "
                                  "a.json not replaced (the previous one kept); b.csv, c.csv "
                                  "not written")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]
    assert (tmp_path / "a.json").read_text() == "old\n"


def test_a_ctrl_c_while_held_waits_until_the_set_is_in_place(tmp_path) -> None:
    # A real SIGINT to this process while the renames run: they all happen, then Ctrl-C.
    reached = []
    with pytest.raises(KeyboardInterrupt), ctrl_c_held():
        os.kill(os.getpid(), signal.SIGINT)
        reached.append("after the signal")
        write_together({tmp_path / "x.csv": "x\n", tmp_path / "y.json": "{}\n"})
    assert reached == ["after the signal"]
    assert (tmp_path / "x.csv").read_text() == "x\n" and (tmp_path / "y.json").exists()


def _synthesize(config: Path, out: Path, *more: str):
    return CliRunner().invoke(cli, ["synthesize", "--synthesis-config", str(config),
                                    "--no-animation", *more, "--out", str(out)])


def _old_gesture(out: Path) -> None:
    """A previous gesture in ``out``: its three files, a plot and the animation."""
    (out / "plots").mkdir(parents=True)
    for name in (*RESULT, "plots/shoulder_angle.png", "gesture.gif"):
        (out / name).write_text(f"the previous {name}\n")


def test_synthesize_on_a_full_disk_keeps_the_previous_gesture_and_names_the_file(
        tmp_path, monkeypatch) -> None:
    config = _config(tmp_path, "near.toml", NEAR_OPTIMUM)
    out = tmp_path / "gesture"
    _old_gesture(out)
    before = _contents(out)
    refused = _disk_full_for(monkeypatch, "setpoints.csv")
    result = _synthesize(config, out)
    assert refused == ["setpoints.csv"] * len(refused) and refused, result.output
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == (f"bemore: error: {out}/setpoints.csv: cannot write (No space left on "
                    "device): gesture.json, profiles.csv, setpoints.csv not replaced (the "
                    "previous ones kept)")
    assert "Traceback" not in result.output
    # The result was on the screen before the files: the numbers are not lost.
    assert result.output.index("t_f (s)") < result.output.index("bench requirements") < \
        result.output.index(last)
    assert _contents(out) == before
    assert (out / "plots" / "shoulder_angle.png").read_text() == \
        "the previous plots/shoulder_angle.png\n"
    assert _leftovers(out) == []


def test_synthesize_figures_on_a_full_disk_leave_the_result_complete(tmp_path,
                                                                     monkeypatch) -> None:
    from controller.setpoints import read_setpoints

    config = _config(tmp_path, "near.toml", NEAR_OPTIMUM)
    out = tmp_path / "gesture"
    _old_gesture(out)
    _disk_full_for(monkeypatch, "gesture.gif")
    result = CliRunner().invoke(cli, ["synthesize", "--synthesis-config", str(config),
                                      "--out", str(out)])
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last == (f"bemore: error: the figures in {out} were not written: {out}/gesture.gif: "
                    "cannot write (No space left on device) (8 of 9 written); gesture.json, "
                    "profiles.csv and setpoints.csv there are complete")
    gesture = json.loads((out / "gesture.json").read_text())
    setpoints = read_setpoints(out / "setpoints.csv")  # complete: drive would play it
    assert gesture["setpoints_sha256"] == setpoints.metadata["sha256"]
    assert f"feasible window of {out}/setpoints.csv" in \
        gesture["bench_requirements"]["window_text"]
    assert not (out / "gesture.gif").exists()  # the previous one showed another gesture
    assert (out / "plots" / "shoulder_angle.png").read_bytes()[:4] == b"\x89PNG"
    assert _leftovers(out) == []


def test_ctrl_c_while_synthesize_writes_leaves_the_previous_gesture_whole(
        tmp_path, monkeypatch) -> None:
    # The user's case: Ctrl-C once the gesture is known, while its bench requirements are
    # worked out (setpoints.csv used to be written then, gesture.json not yet).
    import bemore.synthesis.requirements as requirements

    config = _config(tmp_path, "near.toml", NEAR_OPTIMUM)
    out = tmp_path / "gesture"
    _old_gesture(out)
    before = _contents(out)
    reached = []

    def interrupted(*args, **kwargs):
        reached.append(Path(args[1]).name)
        raise KeyboardInterrupt

    monkeypatch.setattr(requirements, "bench_requirements", interrupted)
    result = _synthesize(config, out)
    assert reached == ["setpoints.csv"]
    assert result.exit_code == 1, result.output
    assert "Aborted!" not in result.output and "Traceback" not in result.output
    assert result.output.strip().splitlines()[-1] == (
        f"bemore: interrupted (Ctrl-C): nothing was replaced in {out}")
    assert _contents(out) == before
    assert _leftovers(out) == []


def test_an_infeasible_gesture_leaves_no_setpoints_it_does_not_describe(tmp_path) -> None:
    from tests.synthesis.test_synthesize import IMPOSSIBLE

    config = _config(tmp_path, "impossible.toml", IMPOSSIBLE)
    out = tmp_path / "gesture"
    _old_gesture(out)
    result = _synthesize(config, out)
    assert result.exit_code == 1, result.output
    assert json.loads((out / "gesture.json").read_text())["feasible"] is False
    assert not (out / "setpoints.csv").exists()  # the previous one: not this gesture's
    assert _leftovers(out) == []


def _identify(out: Path, *more: str):
    return CliRunner().invoke(cli, ["identify", str(SAMPLE), *more, "--out", str(out)])


def test_identify_on_a_full_disk_prints_the_fit_and_names_the_file(tmp_path,
                                                                   monkeypatch) -> None:
    out = tmp_path / "out"
    _disk_full_for(monkeypatch, "athlete.json")
    result = _identify(out, *SHORT_RUN)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert lines[-1] == (f"bemore: error: {out}/athlete.json: cannot write (No space left on "
                         "device): convergence.csv, summary.txt, athlete.json not written")
    assert "Traceback" not in result.output
    # The parameter table is on the screen: the fit is not lost.
    assert any(line.startswith("bar.stiffness_x ") for line in lines[:-1])
    assert "RMS distance per joint centre" in result.output
    assert sorted(path.name for path in out.iterdir()) == []  # nothing cut, no plot alone


def test_an_interrupted_identify_never_replaces_a_complete_fit(tmp_path, monkeypatch) -> None:
    from bemore.errors import PoorFitError
    from bemore.identify.outputs import complete_fit
    from bemore.settings import load_identification
    from bemore.synthesis.athlete import load_athlete

    out = tmp_path / "out"
    first = _identify(out, *SHORT_RUN)
    assert first.exit_code == 1, first.output  # a poor fit, complete
    kept = _contents(out, ("athlete.json", "summary.txt", "convergence.csv",
                           "trajectories.png"))
    calls = interrupt_on_third_batch(monkeypatch)
    result = _identify(out, "--pack", "4", "--iterations", "20")
    assert result.exit_code == 1, result.output
    assert f"{out}/athlete.json holds a complete fit: kept; this interrupted run's result " \
        f"goes to {out}/interrupted/" in result.output
    assert _contents(out, kept) == kept
    beside = out / "interrupted"
    athlete = json.loads((beside / "athlete.json").read_text())
    assert athlete["interrupted"] is True and athlete["global_run"]["nit"] == 2
    assert {path.name for path in beside.iterdir()} == {
        "athlete.json", "convergence.csv", "summary.txt", "trajectories.png",
        "stick_figures.png", "convergence.png"}
    assert _leftovers(out) == []
    # synthesize still refuses it
    with pytest.raises(PoorFitError, match="interrupted"):
        load_athlete(beside / "athlete.json", load_identification(), False)
    # Interrupted again over an interrupted result: that one is replaced (no complete fit).
    calls["n"] = 0
    again = _identify(beside, "--pack", "4", "--iterations", "20")
    assert again.exit_code == 1 and "holds a complete fit" not in again.output, again.output
    assert not (beside / "interrupted").exists()
    # A complete run into the folder supersedes the interrupted result beside it: removed,
    # said in one line (a file bemore did not write there is left, and named).
    (beside / "notes.txt").write_text("the coach's notes\n")
    monkeypatch.undo()
    complete = _identify(out, *SHORT_RUN)
    assert complete.exit_code == 1 and "marked poor" in complete.output, complete.output
    assert (f"removed the interrupted run's result in {beside}/ (left there, not bemore's: "
            "notes.txt)") in complete.output.splitlines()
    assert [path.name for path in beside.iterdir()] == ["notes.txt"]
    assert complete_fit(out / "athlete.json")
    (beside / "notes.txt").unlink()
    interrupt_on_third_batch(monkeypatch)
    assert _identify(out, "--pack", "4", "--iterations", "20").exit_code == 1
    monkeypatch.undo()
    complete = _identify(out, *SHORT_RUN)
    assert f"removed the interrupted run's result in {beside}/" in complete.output.splitlines()
    assert not beside.exists() and _leftovers(out) == []
    # nothing to remove, nothing said
    assert "removed the interrupted" not in _identify(out, *SHORT_RUN).output


def test_ctrl_c_before_the_work_is_one_bemore_line(tmp_path, monkeypatch) -> None:
    import bemore.identify.pipeline as pipeline
    import controller.cli as bench_cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "build_problem", interrupted)  # reading the trial
    out = tmp_path / "out"
    result = _identify(out, *SHORT_RUN)
    assert result.exit_code == 1 and result.output == (
        f"bemore: interrupted (Ctrl-C): before the fit: nothing was written in {out}\n")
    assert not out.exists()
    monkeypatch.setattr(bench_cli, "load_bench", interrupted)  # drive's configuration
    result = CliRunner().invoke(cli, ["drive", str(tmp_path / "setpoints.csv"),
                                      "--log", str(tmp_path / "session.jsonl")])
    assert result.exit_code == 1 and result.output == (
        "bemore: interrupted (Ctrl-C): the bench was not armed: nothing was sent\n")


def test_trial_inspect_on_a_full_disk_keeps_the_previous_files(tmp_path, monkeypatch) -> None:
    out = tmp_path / "trial"
    out.mkdir()
    names = ("joint_centres.csv", "driven.csv", "trial.json")
    for name in names:
        (out / name).write_text(f"the previous {name}\n")
    _disk_full_for(monkeypatch, "driven.csv")
    result = CliRunner().invoke(cli, ["trial", "inspect", str(SAMPLE), "--no-plot",
                                      "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"bemore: error: {out}/driven.csv: cannot write (No space left on device): "
        "joint_centres.csv, driven.csv, trial.json not replaced (the previous ones kept)")
    assert all((out / name).read_text() == f"the previous {name}\n" for name in names)
    assert _leftovers(out) == []


def test_ctrl_c_during_the_lock_step_starts_ends_every_start(tmp_path, monkeypatch) -> None:
    # A real SIGINT, sent by a start's own thread at its first evaluation: the main thread,
    # waiting for the starts, gets it. Every start ends before the command does (none left to
    # fail on the engine's pool as the process exits: tracebacks after the one line).
    import threading

    from bemore.synthesis.problem import GestureProblem

    config = _config(tmp_path, "near4.toml", {**NEAR_OPTIMUM, "starts": 4})
    out = tmp_path / "gesture"
    original = GestureProblem.evaluate_batch
    sent = threading.Event()

    def evaluate(self, X, *args, **kwargs):
        if threading.current_thread() is not threading.main_thread() and not sent.is_set():
            sent.set()
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, X, *args, **kwargs)

    monkeypatch.setattr(GestureProblem, "evaluate_batch", evaluate)
    result = _synthesize(config, out)
    assert sent.is_set()
    starts = [thread for thread in threading.enumerate() if thread.name.endswith("(run)")]
    assert starts == [], starts
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1] == (
        f"bemore: interrupted (Ctrl-C): nothing was replaced in {out}")
    assert "Traceback" not in result.output
