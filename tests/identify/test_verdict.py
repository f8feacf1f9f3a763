"""Fits that say when they fail: a trial the model cannot follow is named, exits non-zero, and
its athlete is refused by ``bemore synthesize`` unless accepted explicitly.

The defective trial is a synthetic clear hip circle whose hip (trochanter) markers carry a
constant 40 mm offset in the LABORATORY frame, as a loose marker cluster hanging under gravity
would: the offset turns with respect to the body during the circle, so no rigid model can follow
the hip. The test checks that the verdict names the hip and not the joint centres that follow.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.identify.verdict import judge_fit
from bemore.trial.c3d import write_c3d
from bemore.trial.synthetic import SyntheticSpec, synthesize


@pytest.fixture(scope="module")
def identified_poor_trial(tmp_path_factory) -> tuple[Path, Path, object]:
    """(folder of the identification, trial path, CLI result) of the defective trial."""
    folder = tmp_path_factory.mktemp("poor")
    markers, _ = synthesize(SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=11, gaps=0))
    positions = markers.positions.copy()
    for k, label in enumerate(markers.labels):
        if label.endswith("TROCHANTER"):
            positions[:, k, 0] += 0.040  # lab X: horizontal, in the study plane
    trial = folder / "loose_hip.c3d"
    write_c3d(trial, markers.with_positions(positions, "hip markers 40 mm off in the lab"))
    out = folder / "identify"
    result = CliRunner().invoke(cli, ["identify", str(trial), "--pack", "60", "--iterations",
                                      "20", "--out", str(out)])
    return out, trial, result


def test_a_trial_the_model_cannot_follow_exits_1_naming_the_joint_centre(
        identified_poor_trial) -> None:
    out, trial, result = identified_poor_trial
    assert result.exit_code == 1, result.output
    last = result.output.strip().splitlines()[-1]
    assert last.startswith(f"bemore: error: {trial}: fit poor:")
    assert "worst: hip" in last and "likely: the trunk" in last
    athlete = json.loads((out / "athlete.json").read_text())  # written before the verdict
    verdict = athlete["fit_verdict"]
    assert verdict["status"] == "poor"
    assert "hip" in verdict["not_following"]
    # The loose hip markers also bend the trunk and hip angles the model is driven with, so
    # the whole chain is off; the hip is the worst and carries a systematic offset.
    rows = {row["name"]: row for row in verdict["joint_centres"]}
    assert max(rows, key=lambda name: rows[name]["rms_mm"]) == "hip"
    assert rows["hip"]["rms_mm"] > 4 * verdict["noise_used_mm"] and rows["hip"]["systematic"]
    # The noise was estimated from the markers (1 mm added): the limits scale with it.
    assert 0.9 < athlete["trial"]["marker_noise_mm"] < 1.3
    # Every parameter is untrusted: the errors bound the noise, not this model error.
    assert all(not row["identifiable"] for row in athlete["parameters"].values())
    assert (out / "summary.txt").read_text().count("fit poor") == 1


def test_synthesize_refuses_a_poor_athlete_unless_accepted(identified_poor_trial,
                                                           tmp_path) -> None:
    out, _, _ = identified_poor_trial
    athlete = out / "athlete.json"
    refused = CliRunner().invoke(cli, ["synthesize", str(athlete), "--out", str(tmp_path / "g")])
    assert refused.exit_code == 1
    lines = [line for line in refused.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in refused.output
    assert lines[0].startswith(f"bemore: error: {athlete}: fit poor:")
    assert "--accept-poor-fit" in lines[0]
    assert not (tmp_path / "g" / "setpoints.csv").exists()
    accepted = CliRunner().invoke(cli, ["synthesize", str(athlete), "--accept-poor-fit",
                                        "--no-animation", "--starts", "2",
                                        "--out", str(tmp_path / "g")])
    gesture = json.loads((tmp_path / "g" / "gesture.json").read_text())
    fit = gesture["inputs"]["athlete_fit"]
    assert fit["status"] == "poor" and fit["accepted_by_flag"] is True, accepted.output


def test_synthesize_refuses_an_interrupted_identification(tmp_path) -> None:
    from bemore.identify.problem import IdentificationProblem

    original = IdentificationProblem._evaluate
    calls = {"n": 0}

    def interrupted(self, X):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return original(self, X)

    IdentificationProblem._evaluate = interrupted
    try:
        from bemore.paths import data_dir

        CliRunner().invoke(cli, ["identify", str(data_dir() / "sample_trial.c3d"), "--pack",
                                 "4", "--iterations", "5", "--out", str(tmp_path / "i")])
    finally:
        IdentificationProblem._evaluate = original
    assert json.loads((tmp_path / "i" / "athlete.json").read_text())["interrupted"] is True
    refused = CliRunner().invoke(cli, ["synthesize", str(tmp_path / "i" / "athlete.json"),
                                       "--out", str(tmp_path / "g")])
    assert refused.exit_code == 1
    assert "identification was interrupted" in refused.output


def test_a_right_model_on_noisy_data_is_judged_good_at_any_noise_level() -> None:
    # Joint centres averaged from markers of noise σ and filtered: residuals ~0.5 σ per
    # coordinate. The verdict must scale with σ, not with a fixed number of millimetres.
    rng = np.random.default_rng(3)
    truth = rng.normal(0.0, 0.5, (1500, 7, 2))
    names = ["bar", "wrist", "elbow", "neck", "hip", "knee", "ankle"]
    for sigma in (0.0002, 0.001, 0.003):
        measured = truth + rng.normal(0.0, 0.5 * sigma, truth.shape)
        assert judge_fit(measured, truth, names, sigma).status == "good"
        shifted = truth.copy()
        shifted[:, 3] += 3.0 * sigma  # the neck 3σ off along x and y: a convention, not noise
        verdict = judge_fit(measured, shifted, names, sigma)
        assert verdict.not_following == ["neck"] and verdict.joint_centres[3].systematic


def test_acromions_on_the_trunk_side_give_a_poor_fit_that_names_them(tmp_path) -> None:
    # Another convention than the chain assumes: the acromion markers on the trunk's side of
    # the shoulder spring-dampers. The chain then counts the springs' deflection twice; the
    # fit must not pass for good, and the verdict must point at the acromions.
    from bemore.identify.problem import IdentificationProblem
    from bemore.identify.run import RunSettings, identify
    from bemore.identify.space import ParameterSpace
    from bemore.settings import load_gymnast, load_identification
    from bemore.trial import prepare_trial
    from bemore.trial.synthetic import write_synthetic_trial

    path, _, _ = write_synthetic_trial(
        SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=4, acromion_side="trunk"),
        tmp_path / "trunk_side.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(prepare_trial(path), space, samples_per_step=2)
    outcome = identify(problem, RunSettings(seed=4))
    assert outcome.verdict.status == "poor"
    assert "acromion markers ride on the trunk's side" in outcome.verdict.message
    flagged = outcome.identifiability.flagged
    assert all(name in flagged for name in space.names if name.startswith("shoulder."))
