"""The bar-force term of the identification cost: its residuals, its weighting, and what the
forces add on a synthetic trial with bar forces read back through the whole trial chain."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.errors import DataError
from bemore.identify.problem import IdentificationProblem, force_scales
from bemore.identify.space import ParameterSpace
from bemore.model import COST_POINTS, load_model, simulate
from bemore.model.profiles import HANDSTAND_HAND_ROTATION, clear_hip_circle_profile
from bemore.settings import load_gymnast, load_identification

FRAMES = 301
MARKER_NOISE_M = 0.001
FORCE_NOISE_N = 15.0


def _case(seed: int = 2):
    """Markers-only and with-forces problems of one engine-made trial at the seed's values:
    joint centres + 1 mm noise, bar force (−k·(q − rest) − c·q̇, written out here) + 15 N."""
    model = load_model("real_gymnast")
    motion = clear_hip_circle_profile(duration_s=(FRAMES - 1) / 1000.0, rate_hz=1000.0)
    P = model.parameter_matrix([{}])
    free = np.zeros(model.n_free)
    rotation = model.free_coordinates.index("hand_rotation")
    free[rotation] = HANDSTAND_HAND_ROTATION
    q0 = model.equilibrium(P, motion.q[0], free_q=free)[0]
    qd0 = np.zeros(model.n_free)
    qd0[rotation] = 1.4
    sim = simulate(model, P, motion, q0, qd0)
    rng = np.random.default_rng(seed)
    index = [model.point_names.index(name) for name in COST_POINTS]
    measured = sim.points[0][:, index] + rng.normal(0.0, MARKER_NOISE_M, (FRAMES, 7, 2))
    values = model.default_parameters()
    force = np.stack([
        -values[f"bar.stiffness_{a}"] * (sim.free_q[0, :, j] - values[f"bar.rest_{a}"])
        - values[f"bar.damping_{a}"] * sim.free_qd[0, :, j] for j, a in enumerate("xy")],
        axis=1)
    noise = rng.normal(0.0, FORCE_NOISE_N, force.shape)
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    scales = force_scales(MARKER_NOISE_M, 1000.0, np.full(2, FORCE_NOISE_N), 1000.0,
                          force, 1.0)
    markers_only = IdentificationProblem(model, space, motion, q0, qd0, measured,
                                         tuple(COST_POINTS))
    with_forces = IdentificationProblem(model, space, motion, q0, qd0, measured,
                                        tuple(COST_POINTS), bar_force=force + noise,
                                        force_scale=scales)
    truth = space.to_normalised(np.array([values[name] for name in space.names]))
    return markers_only, with_forces, truth, noise, scales


def test_force_scales_normalise_by_noise_density() -> None:
    # 1 mm at 100 Hz against 20 N at 2 kHz: 1 N weighs like (1e-3/√100)/(20/√2000) m.
    scale = force_scales(0.001, 100.0, np.array([20.0, 10.0]), 2000.0, np.ones((4, 2)), 4.0)
    np.testing.assert_allclose(scale, 2.0 * 1e-4 / (np.array([20.0, 10.0]) / np.sqrt(2000.0)))
    with pytest.raises(DataError, match="marker noise of the trial is unknown"):
        force_scales(float("nan"), 100.0, np.array([20.0, 10.0]), 2000.0, np.ones((4, 2)), 1.0)


def test_residuals_stack_joint_centres_then_forces_and_agree_with_the_cost() -> None:
    markers_only, with_forces, truth, noise, scales = _case()
    X = np.vstack([truth, np.random.default_rng(0).random((2, with_forces.dim))])
    r = with_forces.residuals(X)
    assert r.shape == (3, FRAMES * 16) and with_forces.columns_per_frame == 16
    np.testing.assert_allclose(with_forces.joint_centre_part(r), markers_only.residuals(X),
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.sum(r**2, axis=1), with_forces.exact_cost(X), rtol=1e-9)
    # At the truth the force residual is the noise added (simulated − measured = −noise).
    np.testing.assert_allclose(with_forces.force_part(r)[0], -noise, atol=1e-6)
    # Σ (s·noise)² at the truth: 2·F terms of (s·15 N)², each axis' scale.
    force_cost = np.sum((r.reshape(3, FRAMES, 16)[0, :, 14:]) ** 2)
    assert force_cost == pytest.approx(FRAMES * np.sum((scales * FORCE_NOISE_N) ** 2),
                                       rel=0.15)
    # Elsewhere in the box the forces add cost.
    assert np.all(with_forces.exact_cost(X[1:]) > markers_only.exact_cost(X[1:]))


def test_without_forces_nothing_changes() -> None:
    markers_only, _, truth, _, _ = _case()
    assert not markers_only.has_forces and markers_only.columns_per_frame == 14
    r = markers_only.residuals(truth[None, :])
    assert markers_only.joint_centre_part(r) is r and markers_only.force_part(r) is None


@pytest.fixture(scope="module")
def identified_with_forces(tmp_path_factory):
    """The seed protocol + polish on a synthetic C3D with bar forces (1 mm, 2 %), read back
    through the whole trial chain."""
    from bemore.identify.run import RunSettings, identify
    from bemore.settings import ForceTerm
    from bemore.trial import prepare_trial
    from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial

    spec = SyntheticSpec(duration_s=1.6, bar_forces=True, force_noise_pct=2.0, seed=1)
    path, _, truth = write_synthetic_trial(spec, tmp_path_factory.mktemp("f") / "t.c3d")
    trial = prepare_trial(path)
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(trial, space, samples_per_step=2,
                                               forces=ForceTerm())
    outcome = identify(problem, RunSettings(seed=1))
    return problem, outcome, truth.parameters, trial


def test_forces_make_the_bar_mass_estimable(identified_with_forces) -> None:
    problem, outcome, truth, _ = identified_with_forces
    assert problem.has_forces
    names = list(problem.space.names)
    k = names.index("bar.mass")
    with_forces = outcome.identifiability.parameters[k]
    alone = outcome.identifiability_markers_only.parameters[k]
    # The markers alone (the same Jacobian's joint-centre rows) cannot tell the bar's mass
    # (a relative error of at least twice the 25 % that flags a parameter):
    assert alone.relative_standard_error > 0.5
    # with the forces its standard error is under 25 % and covers the error.
    assert with_forces.relative_standard_error < 0.25
    error = outcome.values[k] - truth["bar.mass"]
    assert abs(error) < 3.0 * with_forces.standard_error
    assert 0.1 < outcome.values[k] < 1.0  # off the box's bounds
    # The fit follows the markers as well as without forces would (1 mm noise).
    assert outcome.verdict is not None and not outcome.verdict.poor
    rms = outcome.metrics["bar_force_rms_n"]
    assert rms["x"] < 10.0 and rms["y"] < 15.0  # N, against a 2.26 kN vertical peak


def test_the_report_says_what_the_forces_narrow(identified_with_forces) -> None:
    from bemore.identify.outputs import athlete_record
    from bemore.identify.report import summary_text
    from bemore.identify.run import RunSettings

    problem, outcome, _, trial = identified_with_forces
    record = athlete_record(outcome, problem, RunSettings(seed=1), trial.summary(), {})
    forces = record["bar_forces"]
    alone, both = forces["relative_standard_errors"]["bar.mass"]
    assert alone > 0.5 and both < 0.25
    text = summary_text(record)
    assert "bar forces in the cost: RMS residual x" in text
    assert "narrowed by the forces" in text and "bar.mass" in text
