"""The segment table's uncertainty in the standard errors (docs/identify.md, "The segment
table"; bemore.identify.propagation).

The fit holds fixed what the table says of the segments the trial cannot weigh. Two checks that
do not take the code's word for what a table error does:

* against a refit: the response the propagation states for one table value moved by one
  standard uncertainty and what a polish does when that value really is moved, from the same
  optimum (the stated response is first order; the polish is the whole non-linear fit);
* against a body that is not the table: a synthetic trial of a gymnast whose segments are off
  the table (masses, centres of mass and inertias moved as much as bodies differ), written as a
  C3D and identified through the whole chain with the default search and polish. Before this
  term its fits said "good" while thigh.com was up to 4.0 standard errors off and
  shoulder.stiffness_pd 3.6, reported identifiable (noise seeds 2 and 6).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from bemore.identify.pipeline import build_problem
from bemore.identify.propagation import segment_table_changes, segment_table_members
from bemore.identify.space import ParameterSpace
from bemore.optimize.polish import polish_many
from bemore.paths import data_dir
from bemore.settings import load_gymnast, load_identification
from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial
from tests.identify.test_conventions import _other_body
from tests.identify.test_soft_tissue import covered_estimates, markers_on_the_bone_config

SAMPLE_BODY_MASS_KG = 41.1
QUARTER = 0.25  # of a standard uncertainty: the refit's move of a table value
# A body off the table, each within about 1.5 of the declared standard uncertainties
# (identification.toml [segment_table]: masses 10 %, centres of mass 5 %, radii of gyration
# 10 %, i.e. ρ² 20 %): factors on the table's values scaled to her.
OFF_TABLE = {"shank.mass": 1.15, "head.mass": 0.9, "upper_arm.mass": 1.1, "forearm.mass": 1.1,
             "shank.com": 1.1, "head.com": 0.9, "upper_arm.com": 1.08,
             "trunk.gyration_sq": 1.2, "thigh.gyration_sq": 0.85}


@pytest.mark.slow
def test_the_table_term_is_the_shift_a_wrong_table_value_makes() -> None:
    space = ParameterSpace.from_config(load_identification(), load_gymnast(),
                                       body_mass_kg=SAMPLE_BODY_MASS_KG)
    problem, _ = build_problem(data_dir() / "sample_trial.c3d", space,
                               body_mass_kg=SAMPLE_BODY_MASS_KG)
    truth = json.loads((data_dir() / "sample_trial.truth.json").read_text())["parameters"]
    start = np.r_[space.to_normalised(np.array([truth[n] for n in space.names])),
                  np.full(problem.dim - space.dim, 0.5)]
    x = polish_many(problem.residuals, start[None, :], problem.lower, problem.upper,
                    max_iterations=40, jacobian=problem.jacobian)[0].result.x
    names, moves = segment_table_members(problem)
    labels, changes = segment_table_changes(problem, x)
    assert labels == names and len(names) == 20  # 6 masses, 6 centres of mass, 8 gyrations
    J = problem.jacobian(x[None, :])[1][0]
    predicted = -(changes @ J) @ np.linalg.pinv(J.T @ J)  # (20, dim) per standard uncertainty
    # For each of these parameters the table value that moves it most, moved for real by a
    # quarter of its standard uncertainty (the stated response is first order: at a whole one
    # the trunk/thigh valley bends it, docs/identify.md "The segment table").
    for name in ("thigh.com", "trunk.mass", "shoulder.stiffness_pd"):
        i = list(space.names).index(name)
        worst = int(np.argmax(np.abs(predicted[:, i])))
        moved = QUARTER * moves[worst][None, :]

        def residuals(X, moved=moved):
            return problem.residuals(X, parameter_changes=np.repeat(moved, len(X), axis=0))

        refit = polish_many(residuals, x[None, :], problem.lower, problem.upper,
                            max_iterations=40)[0].result.x
        shift = refit[i] - x[i]
        # A shift far beyond where the polish stops (a thousandth of the box, against its
        # 1e-8 tolerances), as stated to within 15 %.
        assert abs(shift) > 1e-3, (name, names[worst], shift)
        assert QUARTER * predicted[worst, i] == pytest.approx(shift, rel=0.15), (
            name, names[worst], QUARTER * predicted[worst, i], shift)


@pytest.mark.slow
def test_a_body_off_the_table_is_within_its_standard_errors(tmp_path) -> None:
    # Noise seeds 2 and 6: before this term seed 6 had thigh.com 4.0 and shoulder.stiffness_pd
    # 3.6 standard errors off, seed 2 bar.damping_y 3.3 and shoulder.stiffness_pd 2.9, all
    # reported identifiable, the fits "good".
    parameters, starts, _ = _other_body()
    parameters = {**parameters, **{name: factor * parameters[name]
                                   for name, factor in OFF_TABLE.items()}}
    body_mass = (sum(parameters[f"{segment}.mass"] for segment in
                     ("hand", "forearm", "upper_arm", "head", "shank", "foot"))
                 + parameters["trunk_thighs.mass"])
    z_all = []
    for seed in (2, 6):
        spec = SyntheticSpec(duration_s=1.7, parameters=parameters, starts=starts,
                             noise_mm=1.0, seed=seed)
        path, _, truth = write_synthetic_trial(spec, tmp_path / f"off_table_{seed}.c3d")
        # The markers ride on the bone in these trials and are taken so: what covers the
        # off-table body is the table's part alone (the skin's slide would widen every error
        # further, docs/identify.md "Soft tissue"). The parameters the criteria name are
        # among the identifiable ones, and every one is covered.
        athlete, z = covered_estimates(
            path, tmp_path / f"out_{seed}", truth, body_mass,
            {"bar.stiffness_x", "bar.stiffness_y", "shoulder.stiffness_pd"},
            markers_on_the_bone_config(tmp_path))
        z_all += list(z.values())
        # thigh.com's error is mostly the table's: the part that says so is there.
        rows = {row["name"]: row for row in athlete["identifiability"]["parameters"]}
        thigh = rows["thigh.com"]
        assert thigh["standard_error_soft_tissue"] is None
        assert thigh["standard_error_segment_table"] ** 2 > 0.5 * thigh["standard_error"] ** 2
    # Pooled: at least 90 % within 2 standard errors (a normal error: 95 %).
    assert len(z_all) >= 16
    assert np.mean(np.abs(z_all) <= 2.0) >= 0.9, z_all
