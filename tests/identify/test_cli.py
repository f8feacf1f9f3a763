"""``bemore identify`` on the bundled sample trial and on bad input (one clear line each)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.identify.problem import IdentificationProblem
from bemore.paths import WRITE_PROBE_PREFIX, data_dir, default_config

SAMPLE = data_dir() / "sample_trial.c3d"
REALDATA = Path(__file__).resolve().parents[1] / "data"  # tests/data (see its README.md)
REAL_NON_BAR_TRIAL = REALDATA / "pyomeca_markers.trc"


def run(*args: str):
    return CliRunner().invoke(cli, ["identify", *args])


def one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def test_short_run_on_the_sample_trial_writes_athlete_json(tmp_path) -> None:
    out = tmp_path / "out"
    result = run(str(SAMPLE), "--no-polish", "--pack", "6", "--iterations", "2", "--seed", "3",
                 "--out", str(out))
    # 12 simulations cannot fit the trial: everything is written, then the verdict fails the run.
    assert result.exit_code == 1, result.output
    athlete = json.loads((out / "athlete.json").read_text())
    verdict = athlete["fit_verdict"]
    assert verdict["status"] == "poor" and athlete["polish"] is False
    assert verdict["mean_distance_mm"] > verdict["limit_mm"] == pytest.approx(
        2 * athlete["trial"]["marker_noise_mm"])
    assert result.output.strip().splitlines()[-1].startswith(f"bemore: error: {SAMPLE}: fit poor")
    assert (out / "trajectories.png").is_file()
    assert list(athlete["parameters"]) == [item["name"] for item in athlete["config"]["box"]]
    assert len(athlete["parameters"]) == 13  # the seed's twelve and the neck convention
    assert athlete["pack"] == 6 and athlete["iterations"] == 2 and athlete["seed"] == 3
    assert athlete["inertial_parameters"] is None  # the inertial mode is off by default
    assert athlete["evaluations"] == 13  # 2 × 6 and the re-evaluated best
    assert athlete["trial"]["source"].endswith("sample_trial.c3d")
    assert athlete["config"]["trunk_mass_upper_bound_kg"] == pytest.approx(25.433)
    # The initial-state unknowns are reported apart from the athlete's parameters.
    unknowns = athlete["initial_state"]["unknowns"]
    assert list(unknowns) == [item["name"] for item in athlete["config"]["initial_state_box"]]
    assert list(unknowns) == ["initial.rotation_rate", "initial.rotation_angle",
                              "bar.rest_offset_x", "bar.rest_offset_y"]
    rate = unknowns["initial.rotation_rate"]
    assert rate["upper"] - rate["lower"] == pytest.approx(0.6)  # prepared ± 0.3 rad/s
    assert "initial state (trial nuisance" in result.output
    assert athlete["elapsed_s"] > 0 and athlete["interrupted"] is False
    # The output folder was shown writable by a file written and removed: none is left.
    assert list(out.glob(f"{WRITE_PROBE_PREFIX}*")) == []
    # The search stepped 2 samples at a time (1600 intervals); the reported cost is exact.
    assert athlete["search_samples_per_step"] == 2 and athlete["search_notes"] == []
    assert athlete["cost_m2"] != athlete["global_run"]["fun"]
    assert athlete["cost_m2"] == pytest.approx(athlete["global_run"]["fun"], rel=0.02)
    # The summary table is printed: every parameter with its position in the box.
    assert re.search(r"bar\.stiffness_x\s+[\d.]+\s+N/m", result.output)
    assert "RMS distance per joint centre" in result.output
    # Off a terminal the progress bar is one line, printed once the phases are over (before
    # the results are written and plotted): it says what ran, not a phase still under way.
    bar = [line for line in result.output.splitlines() if " it best " in line]
    assert len(bar) == 1 and bar[0].startswith("gwo 6×2 search, analysis: done "), bar
    # its figures are the result's (summary.txt's), not the search's best before the polish
    assert bar[0].endswith(f" it best {athlete['cost_m2']:.4g} m² distance mean "
                           f"{athlete['mean_distance_mm']:.3g} mm (the fit) 0:00:00"), bar
    assert result.output.index(bar[0]) < result.output.index("wrote ")


def interrupt_on_third_batch(monkeypatch) -> dict[str, int]:
    """A Ctrl-C (KeyboardInterrupt) as the identification evaluates its third batch; the
    batches' count (``["n"]``: set it to 0 to interrupt the next run on its third too)."""
    calls = {"n": 0}
    original = IdentificationProblem._evaluate

    def interrupted_on_third_batch(self, X):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return original(self, X)

    monkeypatch.setattr(IdentificationProblem, "_evaluate", interrupted_on_third_batch)
    return calls


def test_ctrl_c_writes_the_best_so_far_marked_interrupted(tmp_path, monkeypatch) -> None:
    interrupt_on_third_batch(monkeypatch)
    out = tmp_path / "out"
    result = run(str(SAMPLE), "--pack", "4", "--iterations", "20", "--out", str(out))
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not a crash
    athlete = json.loads((out / "athlete.json").read_text())
    assert athlete["interrupted"] is True
    assert athlete["global_run"]["nit"] == 2
    assert athlete["identifiability"] is None
    assert "INTERRUPTED" in result.output
    assert re.search(r"^gwo 4×20 search: interrupted ", result.output, re.MULTILINE)


def test_ctrl_c_during_the_analysis_writes_the_fit_marked_interrupted(tmp_path,
                                                                     monkeypatch) -> None:
    import bemore.identify.run as run_module

    reached = {"analysis": False}

    def interrupted(*args, **kwargs):  # the marker noise's propagation, mid-analysis
        reached["analysis"] = True
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "propagated_noise", interrupted)
    out = tmp_path / "out"
    result = run(str(SAMPLE), "--pack", "8", "--iterations", "3", "--no-polish",
                 "--out", str(out))
    assert reached["analysis"]
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not "Aborted!"
    athlete = json.loads((out / "athlete.json").read_text())
    assert athlete["interrupted"] is True and athlete["analysis_interrupted"] is True
    assert athlete["identifiability"] is None and athlete["global_run"]["nit"] == 3
    assert athlete["parameters"]["bar.stiffness_x"]["value"] > 0.0  # the fit is there
    assert "INTERRUPTED during the analysis" in result.output
    assert re.search(r"^gwo 8×3 search, analysis: interrupted ", result.output, re.MULTILINE)
    assert (out / "trajectories.png").exists()


@pytest.mark.parametrize("where", ["chain noise", "starts set up"])
def test_ctrl_c_before_the_polish_starts_run_writes_the_search_best_unpolished(
        tmp_path, monkeypatch, where: str) -> None:
    # chain noise: a trial with bar forces, whose chain-noise weighting runs the trial chain
    # on noisy copies of the markers before the polish (bemore.identify.chain_noise).
    # starts set up: between the search's end and the starts' own threads (which stop at their
    # best themselves), as a real terminal's Ctrl-C can land there.
    import bemore.identify.propagation as propagation
    import bemore.identify.run as run_module
    from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial

    trial = SAMPLE
    owner, name = run_module, "distinct_starts"
    if where == "chain noise":
        trial, _, _ = write_synthetic_trial(
            SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=3, bar_forces=True,
                          force_noise_pct=2.0), tmp_path / "forces.c3d")
        owner, name = propagation, "simulate_copies"
    reached = []

    def interrupted(*args, **kwargs):
        reached.append(name)
        raise KeyboardInterrupt

    monkeypatch.setattr(owner, name, interrupted)
    out = tmp_path / "out"
    result = run(str(trial), "--pack", "6", "--iterations", "2", "--out", str(out))
    assert reached == [name]
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)  # a clean exit, not "Aborted!"
    athlete = json.loads((out / "athlete.json").read_text())
    assert athlete["interrupted"] is True and athlete["polish_interrupted"] is True
    assert athlete["polish_starts"] == [] and athlete["identifiability"] is None
    assert athlete["global_run"]["nit"] == 2 and athlete["polish_run"] is None
    assert athlete["parameters"]["bar.stiffness_x"]["value"] > 0.0  # the search's best
    assert "INTERRUPTED before the polish" in result.output
    assert (out / "trajectories.png").is_file()


def test_a_poor_fit_short_of_a_minimum_names_the_fit_not_a_body_part(tmp_path) -> None:
    # 12 evaluations and no polish cannot fit the trial: every joint centre is off, the worst
    # one (the ankle, at the chain's end) is no clue. The likely cause is the unfinished fit,
    # said plainly; a body part is named for a fit that reached a minimum (tests/identify/
    # test_verdict.py: the loose hip, the acromions on the trunk's side).
    from bemore.identify.verdict import LIKELY_CAUSES
    from bemore.settings import SEGMENT_NAMES, load_identification

    optimiser = load_identification().optimiser
    default = optimiser.pack * optimiser.iterations
    out = tmp_path / "out"
    result = run(str(SAMPLE), "--iterations", "1", "--pack", "12", "--no-polish",
                 "--out", str(out))
    assert result.exit_code == 1, result.output
    athlete = json.loads((out / "athlete.json").read_text())
    verdict = athlete["fit_verdict"]
    assert verdict["status"] == "poor" and athlete["evaluations"] == 13  # 12 and the best again
    cause = verdict["likely_cause"]
    thousands = f"{default:,}".replace(",", " ")  # 10 000
    assert cause == (f"the fit stopped short of a minimum (the polish off: the search's best "
                     f"point, after 13 search evaluations of the default {thousands}): run "
                     f"with the default search ({optimiser.pack} × {optimiser.iterations}) and "
                     "the polish (without --no-polish)")
    for name in (*SEGMENT_NAMES, *LIKELY_CAUSES, "acromion", "marker"):
        assert name not in cause, name
    assert verdict["message"].endswith(f"likely: {cause}")
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"bemore: error: {SAMPLE}: fit poor") and f"likely: {cause}" in last
    assert f"likely: {cause}" in (out / "summary.txt").read_text()


@pytest.mark.parametrize("case", ["folder", "unwritable folder", "file", "broken link"])
def test_an_output_the_system_refuses_is_one_line_before_the_trial_is_read(
        tmp_path, monkeypatch, request, case: str) -> None:
    # folder: a file where a folder is expected on the way, the folder cannot be made;
    # unwritable folder: the fixture unwritable_folder, a folder that exists and that
    # not even root can write a file in; file: a folder in the place of athlete.json, the
    # system refuses the file; broken link: athlete.json a link into a folder that does not
    # exist, which no file can be written through.
    # Each is said at once, one line, exit code 2: the trial is never read, the search never
    # started.
    import bemore.identify.run
    import bemore.trial

    searches, reads = [], []
    monkeypatch.setattr(bemore.identify.run, "identify",
                        lambda *args, **kwargs: searches.append(args) or pytest.fail("fitted"))
    monkeypatch.setattr(bemore.trial, "prepare_trial",
                        lambda *args, **kwargs: reads.append(args) or pytest.fail("read"))
    (tmp_path / "a-file").write_text("not a folder")
    out = (request.getfixturevalue("unwritable_folder") if case == "unwritable folder"
           else tmp_path / "a-file" / "out" if case == "folder" else tmp_path / "out")
    if case == "file":
        (out / "athlete.json").mkdir(parents=True)
    if case == "broken link":
        out.mkdir()
        (out / "athlete.json").symlink_to(tmp_path / "nowhere" / "athlete.json")
    expected = {
        "folder": f"{out}: cannot create the output folder (Not a directory)",
        "unwritable folder": f"{out}: cannot write in the output folder (",
        "file": f"{out}/athlete.json: cannot write the output file (Is a directory)",
        "broken link": f"{out}/athlete.json: cannot write the output file (a link to "
                       f"{tmp_path / 'nowhere' / 'athlete.json'}, whose folder does not exist)",
    }[case]
    result = run(str(SAMPLE), "--no-polish", "--pack", "6", "--iterations", "2",
                 "--out", str(out))
    assert result.exit_code == 2, result.output
    assert one_error_line(result).startswith(f"bemore: error: {expected}")
    assert searches == [] and reads == []
    if case != "unwritable folder":
        assert sorted(path.name for path in tmp_path.rglob("*")) == (
            ["a-file"] + (["athlete.json", "out"] if case in ("file", "broken link") else [])
        )  # no probe left


@pytest.mark.parametrize("name", ["bad.c3d", "missing.c3d"])
def test_a_malformed_or_missing_trial_is_one_line_and_leaves_no_output_folder(
        tmp_path, name: str) -> None:
    # The output folder is shown writable before the trial is read (made, written in, then
    # removed again with the parents it made): a bad trial leaves nothing behind.
    if name == "bad.c3d":
        (tmp_path / name).write_bytes(b"not a c3d file at all")
    result = run(str(tmp_path / name), "--out", str(tmp_path / "new" / "out"))
    assert result.exit_code == 2
    assert name in one_error_line(result)
    assert sorted(path.name for path in tmp_path.rglob("*")) == (
        ["bad.c3d"] if name == "bad.c3d" else [])


def test_a_real_trial_without_the_bar_markers_is_refused_naming_them(tmp_path) -> None:
    assert REAL_NON_BAR_TRIAL.is_file(), f"real laboratory file missing: {REAL_NON_BAR_TRIAL}"
    result = run(str(REAL_NON_BAR_TRIAL), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    assert "BAR_01" in one_error_line(result)


def test_unknown_algorithm_is_a_usage_error(tmp_path) -> None:
    result = run(str(SAMPLE), "--algorithm", "annealing", "--out", str(tmp_path))
    assert result.exit_code == 2
    assert "'annealing' is not one of 'gwo', 'pso', 'de', 'cmaes'" in result.output


def test_a_pack_of_one_is_refused(tmp_path) -> None:
    result = run(str(SAMPLE), "--pack", "1", "--out", str(tmp_path))
    assert result.exit_code == 2
    assert one_error_line(result) == (
        "bemore: error: --pack 1: a population needs at least 2 members"
    )


def test_the_search_samples_per_step_setting_is_honoured_and_a_bad_one_is_one_line(
        tmp_path) -> None:
    text = default_config("identification.toml").read_text()
    assert text.count("\nsearch_samples_per_step = ") == 1
    configured = re.search(r"\nsearch_samples_per_step = (\d+)", text).group(1)
    config = tmp_path / "identification.toml"
    config.write_text(text.replace(f"search_samples_per_step = {configured}",
                                   "search_samples_per_step = 5"))
    out = tmp_path / "out"
    result = run(str(SAMPLE), "--identification-config", str(config), "--pack", "4",
                 "--iterations", "1", "--no-polish", "--out", str(out))
    assert result.exit_code == 1, result.output  # a poor fit: 4 simulations
    athlete = json.loads((out / "athlete.json").read_text())
    # 1600 intervals: 5 divides them and the search stepped 5 samples at a time (its cost is
    # not the exact one the report gives).
    assert athlete["trial"]["frames"] == 1601
    assert athlete["search_samples_per_step"] == 5 and athlete["search_notes"] == []
    assert athlete["cost_m2"] != athlete["global_run"]["fun"]
    config.write_text(text.replace(f"search_samples_per_step = {configured}",
                                   "search_samples_per_step = 0"))
    result = run(str(SAMPLE), "--identification-config", str(config), "--out", str(out))
    assert result.exit_code == 2
    assert "search_samples_per_step" in one_error_line(result)


def test_bounds_with_lower_not_below_upper_name_file_and_parameter(tmp_path) -> None:
    text = default_config("identification.toml").read_text()
    broken = text.replace("lower = 0.1\nupper = 1.0", "lower = 1.0\nupper = 0.1")
    assert broken != text
    config = tmp_path / "identification.toml"
    config.write_text(broken)
    result = run(str(SAMPLE), "--identification-config", str(config),
                 "--out", str(tmp_path / "out"))
    assert result.exit_code == 2
    line = one_error_line(result)
    assert str(config) in line and "bar.mass: lower (1.0) must be below upper (0.1)" in line


def test_odd_sample_intervals_are_searched_exactly_and_the_summary_says_so(tmp_path) -> None:
    config = tmp_path / "trial.toml"
    text = default_config("trial.toml").read_text()
    assert "end_s = 0.0" in text and "rate_hz = 1000.0" in text
    # 0.59 s resampled at 999 Hz: 590 frames, 589 intervals (at 1 kHz a 100 Hz file always has
    # an even number).
    config.write_text(text.replace("end_s = 0.0", "end_s = 0.59")
                      .replace("rate_hz = 1000.0", "rate_hz = 999.0"))
    out = tmp_path / "out"
    result = run(str(SAMPLE), "--trial-config", str(config), "--pack", "4", "--iterations", "1",
                 "--no-polish", "--out", str(out))
    assert result.exit_code == 1, result.output  # a poor fit: 4 simulations
    athlete = json.loads((out / "athlete.json").read_text())
    assert athlete["trial"]["frames"] == 590
    assert athlete["search_samples_per_step"] == 1
    note = ("search_samples_per_step 2: 589 sample intervals are not a multiple of 2; 1 "
            "sample per integrator step used instead")
    assert athlete["search_notes"] == [note]
    assert f"search: {note}" in result.output
    # Searched with the exact cost: the re-evaluated best is the reported cost.
    assert athlete["cost_m2"] == pytest.approx(athlete["global_run"]["fun"], rel=1e-9)


def test_ctrl_c_during_the_lock_step_polish_stops_every_start_and_exits_1(tmp_path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    marks = tmp_path / "phases.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-m", "bemore", "identify", str(SAMPLE), "--pack", "20",
         "--iterations", "3", "--out", str(tmp_path / "out")],
        env=dict(os.environ, BEMORE_PHASE_TIMES=str(marks)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    # The search's end is marked as the polish begins (several seconds of polish follow);
    # then the starts' own threads start (one per start, lock step): Ctrl-C once they run.
    # (Before them, a Ctrl-C writes the search's best unpolished: the test above.)
    # Threads are told apart by their ids: those started after the search's mark are the
    # polish's (a thread of the search, e.g. the one building kernels ahead, may end meanwhile).
    tasks = Path(f"/proc/{child.pid}/task")
    deadline = time.monotonic() + 120.0
    while True:
        searching = set(tasks.iterdir())  # listed before the mark is looked for
        if marks.exists() and '"search"' in marks.read_text():
            break
        assert child.poll() is None and time.monotonic() < deadline, "no search mark"
        time.sleep(0.005)
    while len(set(tasks.iterdir()) - searching) < 2:
        assert child.poll() is None and time.monotonic() < deadline, "no polish threads"
        time.sleep(0.005)
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=120.0)
    assert child.returncode == 1, err
    assert "Traceback" not in err and "INTERRUPTED" in out
    athlete = json.loads((tmp_path / "out" / "athlete.json").read_text())
    assert athlete["interrupted"] is True
    starts = athlete["polish_starts"]
    assert len(starts) >= 2 and all(start["status"] == 1 for start in starts)
    assert sum(start["won"] for start in starts) == 1
