"""The searched box, its normalisation, and the identification cost on engine-made data."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.errors import ConfigError, DataError
from bemore.identify.problem import IdentificationProblem
from bemore.identify.space import ParameterSpace
from bemore.settings import load_gymnast, load_identification
from tests.identify.synthetic import synthetic_case

FRAMES = 300  # 0.3 s: enough for plumbing, fast


def seed_truth() -> dict[str, float]:
    return {item.name: item.seed_value for item in load_identification().parameters}


def test_box_uses_the_trunk_mass_budget_bound() -> None:
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    k = space.names.index("trunk.mass")
    # trunk 17.529 + thighs 2 × 4.952 = 27.433 kg, minus 2 kg kept for the thighs.
    assert space.upper[k] == pytest.approx(25.433)
    assert space.configured_upper[k] == 29.8
    assert space.dim == 13  # the seed's twelve and the neck convention
    assert np.allclose(space.to_physical(np.zeros(space.dim)), space.lower)
    assert np.allclose(space.to_physical(np.ones(space.dim)), space.upper)
    half = space.to_physical(np.full(space.dim, 0.5))
    assert half[space.names.index("bar.stiffness_x")] == pytest.approx(27_500.0)
    assert np.allclose(space.to_normalised(half), 0.5)


def test_trunk_mass_lower_bound_above_the_budget_is_a_config_error() -> None:
    identification = load_identification()
    data = identification.model_dump()
    data["mass_budget"]["min_thigh_pair_mass_kg"] = 23.0  # budget bound 4.433 < lower 5.259
    changed = type(identification).model_validate(data)
    with pytest.raises(ConfigError, match=r"my\.toml: trunk\.mass lower = 5\.259 kg"):
        ParameterSpace.from_config(changed, load_gymnast(), "my.toml")


def test_cost_at_the_truth_is_the_noise_and_residuals_agree_with_the_cost() -> None:
    case = synthetic_case(seed_truth(), noise_m=0.001, seed=1, frames=FRAMES)
    problem = case.problem
    truth = problem.space.to_normalised(np.array([case.truth[n] for n in problem.space.names]))
    cost = problem.evaluate(truth[None, :])[0]
    # 300 frames × 7 centres × 2 coordinates of N(0, 1 mm²): expected 4.2e-3 m², sd 1.2 %.
    assert cost == pytest.approx(FRAMES * 14 * 1e-6, rel=0.05)
    X = np.vstack([truth, np.random.default_rng(0).random((3, problem.space.dim))])
    costs = problem.evaluate(X)
    r = problem.residuals(X)
    assert r.shape == (4, FRAMES * 14)
    assert np.allclose(np.sum(r**2, axis=1), costs, rtol=1e-9)
    assert np.all(costs[1:] > 10 * costs[0])


def test_a_parameter_set_the_engine_cannot_simulate_gets_the_finite_penalty() -> None:
    case = synthetic_case(seed_truth(), noise_m=0.0, seed=1, frames=FRAMES)
    space = case.problem.space
    upper = space.upper.copy()
    upper[space.names.index("trunk.mass")] = 40.0  # beyond 27.433 kg the thighs' mass is < 0
    wide = ParameterSpace(
        space.names, space.units, space.descriptions, space.lower, upper, space.seed_values, upper
    )
    problem = IdentificationProblem(
        case.problem.model,
        wide,
        case.problem.motion,
        case.problem.free_q0,
        case.problem.free_qd0,
        case.problem.measured,
        case.problem.cost_points,
    )
    X = np.full((2, space.dim), 0.5)
    X[1, space.names.index("trunk.mass")] = 1.0
    costs = problem.evaluate(X)
    assert np.isfinite(costs[0]) and costs[0] < 1e3
    assert costs[1] == FRAMES * 7 * 10.0**2
    assert np.sum(problem.residuals(X)[1] ** 2) == pytest.approx(costs[1])


def _with_samples_per_step(case, samples_per_step: int, frames: int | None = None,
                           coarse_samples_per_step: int | None = None):
    """The case's problem again, its search cost stepping ``samples_per_step`` samples (and the
    polish's first stage ``coarse_samples_per_step``), on its first ``frames`` frames."""
    p = case.problem
    motion, measured = p.motion, p.measured
    if frames is not None:
        motion = type(motion)(t=motion.t[:frames], q=motion.q[:frames], qd=motion.qd[:frames],
                              qdd=motion.qdd[:frames])
        measured = measured[:frames]
    return IdentificationProblem(p.model, p.space, motion, p.free_q0, p.free_qd0, measured,
                                 p.cost_points, samples_per_step=samples_per_step,
                                 coarse_samples_per_step=coarse_samples_per_step)


def test_search_cost_with_two_samples_per_step_is_close_and_the_exact_cost_is_exact() -> None:
    case = synthetic_case(seed_truth(), noise_m=0.0, seed=1, frames=FRAMES + 1)  # 300 intervals
    exact, coarse = _with_samples_per_step(case, 1), _with_samples_per_step(case, 2)
    assert coarse.samples_per_step == 2 and coarse.notes == ()
    dim = case.problem.space.dim
    X = np.vstack([np.full(dim, 0.5), np.random.default_rng(2).random((3, dim))])
    reference = exact.evaluate(X)
    searched = coarse.evaluate(X)
    # Different integrations (not the same numbers), within a fraction of a percent of costs of
    # 0.1–10 m² (millimetres on centres centimetres to decimetres away).
    assert np.all(searched != reference)
    assert np.allclose(searched, reference, rtol=0.02)
    np.testing.assert_array_equal(coarse.exact_cost(X), reference)
    np.testing.assert_array_equal(coarse.residuals(X), exact.residuals(X))


def test_the_search_steps_as_its_own_setting_and_the_polish_first_stage_as_its_own() -> None:
    from bemore.model import joint_centre_cost

    case = synthetic_case(seed_truth(), noise_m=0.0, seed=1, frames=FRAMES + 1)  # 300 intervals
    four = _with_samples_per_step(case, 4, coarse_samples_per_step=2)
    assert (four.samples_per_step, four.coarse_samples_per_step) == (4, 2)
    assert four.notes == () and four.coarse_notes == ()
    dim = case.problem.space.dim
    X = np.vstack([np.full(dim, 0.5), np.random.default_rng(3).random((3, dim))])
    # The search's cost is the engine's at 4 samples per integrator step, not at 2 nor 1.
    P, q0, qd0 = four.members(X)
    engine = {k: joint_centre_cost(four.model, P, four.motion, q0, qd0, four.measured,
                                   names=four.cost_points, samples_per_step=k)
              for k in (1, 2, 4)}
    searched = four.evaluate(X)
    np.testing.assert_array_equal(searched, engine[4])
    assert np.all(searched != engine[2]) and np.all(searched != engine[1])
    assert np.allclose(searched, engine[1], rtol=0.05)
    # What is reported stays exact.
    np.testing.assert_array_equal(four.exact_cost(X), engine[1])
    # Without its own value the first stage takes the search's.
    assert _with_samples_per_step(case, 4).coarse_samples_per_step == 4


def test_samples_per_step_not_dividing_the_intervals_is_halved_and_said() -> None:
    case = synthetic_case(seed_truth(), noise_m=0.0, seed=1, frames=FRAMES + 1)
    odd = _with_samples_per_step(case, 2, frames=FRAMES)  # 299 intervals
    assert odd.samples_per_step == 1 and odd.requested_samples_per_step == 2
    assert odd.notes == ("search_samples_per_step 2: 299 sample intervals are not a multiple "
                         "of 2; 1 sample per integrator step used instead",)
    X = np.full((1, case.problem.space.dim), 0.5)
    np.testing.assert_array_equal(odd.evaluate(X), _with_samples_per_step(case, 1, FRAMES)
                                  .evaluate(X))
    # 298 intervals: 4 does not divide them, 2 does; the first stage's own value likewise.
    even = _with_samples_per_step(case, 4, frames=FRAMES - 1, coarse_samples_per_step=4)
    assert (even.samples_per_step, even.coarse_samples_per_step) == (2, 2)
    assert even.notes == ("search_samples_per_step 4: 298 sample intervals are not a multiple "
                          "of 4; 2 samples per integrator step used instead",)
    assert even.coarse_notes == ("polish_coarse_samples_per_step 4: 298 sample intervals are "
                                 "not a multiple of 4; 2 samples per integrator step used "
                                 "instead",)
    # 300 intervals: 3 divides them and is used.
    assert _with_samples_per_step(case, 3).samples_per_step == 3


@pytest.mark.parametrize("bad", [0, -2, 2.5, True])
def test_samples_per_step_that_is_not_a_whole_number_from_1_is_refused(bad) -> None:
    case = synthetic_case(seed_truth(), noise_m=0.0, seed=1, frames=FRAMES + 1)
    with pytest.raises(DataError, match=rf"^search_samples_per_step {bad!r}: must be a whole "
                                        r"number of samples, 1 or more$"):
        _with_samples_per_step(case, bad)
    with pytest.raises(DataError, match=r"^polish_coarse_samples_per_step"):
        _with_samples_per_step(case, 1, coarse_samples_per_step=bad)


def test_the_driven_motion_is_matched_to_the_model_by_coordinate_name() -> None:
    from dataclasses import replace

    from bemore.model import DrivenMotion
    from bemore.paths import data_dir
    from bemore.trial import prepare_trial

    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    reference = IdentificationProblem.from_trial(trial, space)
    order = list(reversed(range(len(trial.driven_names))))  # another column order
    motion = trial.driven
    shuffled = replace(
        trial, driven_names=tuple(trial.driven_names[k] for k in order),
        driven=DrivenMotion(motion.t, motion.q[:, order], motion.qd[:, order],
                            motion.qdd[:, order]))
    problem = IdentificationProblem.from_trial(shuffled, space)
    X = np.full((1, problem.dim), 0.5)
    np.testing.assert_array_equal(problem.evaluate(X), reference.evaluate(X))
    missing = replace(shuffled, driven_names=("wrist_angle", *shuffled.driven_names[1:]))
    with pytest.raises(DataError, match=r"drives .* which the trial does not give"):
        IdentificationProblem.from_trial(missing, space)


def test_residuals_are_the_simulated_minus_measured_cost_points_zero_where_not_seen() -> None:
    case = synthetic_case(seed_truth(), noise_m=0.001, seed=3, frames=FRAMES)
    p = case.problem
    measured = p.measured.copy()
    measured[10:40, 2] = np.nan  # a joint centre not seen for 30 frames
    measured[5, 0, 1] = np.nan
    problem = IdentificationProblem(p.model, p.space, p.motion, p.free_q0, p.free_qd0,
                                    measured, p.cost_points)
    X = np.random.default_rng(4).uniform(0.3, 0.7, (3, problem.dim))
    r = problem.residuals(X)
    points = problem.simulated_points(X)
    for member in range(3):
        for frame in (0, 5, 20, FRAMES - 1):
            for k, name in enumerate(problem.cost_points):
                simulated = points[member, frame, problem.model.point_names.index(name)]
                for axis in range(2):
                    value = r[member, (frame * len(problem.cost_points) + k) * 2 + axis]
                    if np.isnan(measured[frame, k, axis]):
                        assert value == 0.0
                    else:
                        assert value == simulated[axis] - measured[frame, k, axis]
    # The engine's cost leaves out a joint centre with either coordinate missing; the
    # residuals zero only the missing coordinate (frame 5, bar x here).
    kept = r[:, (5 * len(problem.cost_points) + 0) * 2]
    assert np.allclose(np.sum(r**2, axis=1) - kept**2, problem.exact_cost(X), rtol=1e-12)
