"""``bemore identify --inertial``: every segment's inertial parameters from the bar force, end to
end on a synthetic trial of another body (7 % longer, 20 % heavier, three segment masses off the
table) with bar forces (1 mm marker noise, 2 % force noise) read back through the trial chain."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.identify import inertial
from bemore.identify.inertial_mode import effective_samples
from bemore.model import load_model
from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial
from tests.identify.test_conventions import _other_body

# Segment masses the table does not have (relative to the scaled table's): the prior is wrong.
OFF_TABLE = {"shank.mass": 1.15, "head.mass": 0.9, "upper_arm.mass": 1.1}


def _spec(bar_forces: bool) -> tuple[SyntheticSpec, float]:
    parameters, starts, body_mass = _other_body()
    parameters = {**parameters, **{name: factor * parameters[name]
                                   for name, factor in OFF_TABLE.items()}}
    return SyntheticSpec(duration_s=1.7, parameters=parameters, starts=starts, noise_mm=1.0,
                         seed=1, bar_forces=bar_forces, force_noise_pct=2.0), body_mass


@pytest.fixture(scope="module")
def identified(tmp_path_factory):
    """The CLI with --inertial on the trial (a short search + the polish), its athlete.json,
    summary.txt and the truth's π."""
    folder = tmp_path_factory.mktemp("inertial")
    spec, body_mass = _spec(bar_forces=True)
    path, _, truth = write_synthetic_trial(spec, folder / "t.c3d")
    out = folder / "out"
    result = CliRunner().invoke(cli, ["identify", str(path), "--inertial", "--body-mass",
                                      f"{body_mass:.4f}", "--pack", "30", "--iterations", "8",
                                      "--seed", "1", "--out", str(out)])
    model = load_model("real_gymnast")
    pi = inertial.table_parameters(model, model.parameter_matrix([truth.parameters])[0])
    return result, json.loads((out / "athlete.json").read_text()), (
        out / "summary.txt").read_text(), pi


def test_the_cli_writes_every_segment_consistent(identified) -> None:
    result, athlete, summary, _ = identified
    assert result.exit_code == 0, result.output
    found = athlete["inertial_parameters"]
    bodies = [row["body"] for row in found["segments"]]
    assert bodies == ["bar", "hand", "forearm", "upper_arm", "trunk", "head", "thigh", "shank",
                      "foot"]
    assert athlete["config"]["identification_settings"]["inertial"]["identify"] is False
    for row in found["segments"]:
        assert row["j_min_eigenvalue"] > 0.0, row["body"]  # J ≻ 0 for every segment
        assert row["mass_kg"] > 0.0 and row["inertia_com_kgm2"] > 0.0
        assert row["mass_difference_kg"] == pytest.approx(row["mass_kg"] - row["table_mass_kg"])
        assert row["mass_se_kg"] > 0.0 and all(se > 0.0 for se in row["com_se_m"])
    assert len(found["parameters"]) == 36 and found["consistent_status"] > 0
    assert "inertial parameters from the bar force" in summary
    assert "total mass" in summary and "thigh" in summary
    assert "share of the table's uncertainty the bar force removed" in summary
    assert "masses the bar force determines together" in summary


def test_the_total_mass_is_measured(identified) -> None:
    _, athlete, _, truth = identified
    found = athlete["inertial_parameters"]
    total = truth[0::4].sum()  # 50.29 kg; the scaled table says 49.98 kg
    error = found["total_mass_kg"] - total
    # Measured: 50.307 ± 0.083 kg (error +0.017 kg).
    assert abs(error) < 3.0 * found["total_mass_se_kg"]
    assert abs(error) < 0.005 * total
    assert found["total_mass_se_kg"] < 0.005 * total
    # The identified parameters explain the bar force far better than the table's (measured
    # 2.5 / 5.0 N against 46 / 46 N).
    rms, table_rms = found["force_residual_rms_n"], found["table_force_residual_rms_n"]
    assert rms[0] < 0.5 * table_rms[0] and rms[1] < 0.5 * table_rms[1]


def test_what_the_bar_force_determines_is_right_and_the_rest_is_flagged(identified) -> None:
    _, athlete, _, truth = identified
    found = athlete["inertial_parameters"]
    shares = {row["name"]: row["data_share"] for row in found["parameters"]}
    # The force rows do not contain I_o at all: no inertia is measured, every one is flagged.
    for row in found["segments"]:
        assert not row["inertia_determined"] and f"{row['body']}.inertia" in found["undetermined"]
        assert shares[f"{row['body']}.inertia_origin"] < 1e-6
    # A mass acts on the bar like the same mass at its joint on the parent: no single segment's
    # mass is determined, each is flagged; the bar force hardly narrows the bar's, the hands'
    # and the head's (measured shares 0.03, 0.07, 0.04) or the shanks' (0.13).
    for row in found["segments"]:
        assert not row["mass_determined"] and f"{row['body']}.mass" in found["undetermined"]
    for body in ("bar", "hand", "head"):
        assert shares[f"{body}.mass"] < 0.1, body
    assert shares["shank.mass"] < 0.2
    # Together they are: the whole system, everything beyond the bar, beyond the wrists, and
    # the trunk with the head and legs (measured 50.31 ± 0.08, 49.63 ± 0.16, 48.66 ± 0.23,
    # 42.35 ± 0.29 kg); each determined group within 3 SE of the truth.
    names = [row["body"] for row in found["segments"]]
    determined = {}
    for group in found["groups"]:
        if group["determined"]:
            mass = sum(truth[4 * names.index(body)] for body in group["bodies"])
            assert abs(group["mass_kg"] - mass) < 3.0 * group["se_kg"], group["bodies"]
            determined["+".join(group["bodies"])] = group
    assert {"+".join(names), "+".join(names[1:]), "+".join(names[2:]),
            "trunk+head+thigh+shank+foot"} <= set(determined)
    assert determined["+".join(names)]["mass_kg"] == pytest.approx(found["total_mass_kg"])
    assert 0 < found["determined_combinations"] < 36


def test_a_trial_without_bar_forces_is_one_line(tmp_path) -> None:
    spec, _ = _spec(bar_forces=False)
    path, _, _ = write_synthetic_trial(spec, tmp_path / "t.c3d")
    result = CliRunner().invoke(cli, ["identify", str(path), "--inertial", "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.output
    assert lines[0] == (f"bemore: error: {path}: the inertial mode needs the bar's force channels "
                        "(configs/trial.toml [forces]) and identification.toml [forces] use = "
                        "true; this trial has no bar forces")
    assert not (tmp_path / "out" / "athlete.json").exists()  # refused before the fit


def test_effective_samples_count_correlated_residuals_once() -> None:
    rng = np.random.default_rng(0)
    white = rng.normal(size=(4000, 2))
    assert effective_samples(white) == pytest.approx(8000, rel=0.1)
    # A 50-sample moving average: neighbouring samples repeat the same noise.
    kernel = np.ones(50) / 50
    smooth = np.stack([np.convolve(white[:, k], kernel, mode="valid") for k in range(2)], 1)
    assert effective_samples(smooth) < 0.1 * smooth.size
