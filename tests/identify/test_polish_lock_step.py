"""The identification's polish starts in lock step (one engine call for the requests of every
start still running) reach the points the starts reach one after the other, bit for bit: a
member's simulation does not depend on the batch it is in."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from bemore.identify.problem import IdentificationProblem
from bemore.optimize.polish import polish, polish_many
from bemore.settings import load_identification
from tests.identify.synthetic import synthetic_case


def _same_fits(problem: IdentificationProblem, starts: np.ndarray, iterations: int,
               exact: bool = False) -> list:
    """Polish ``starts`` one after the other and in lock step (with the exact Jacobian or
    finite differences); assert they agree bit for bit; return the lock-step fits."""
    box = (problem.lower, problem.upper)
    jacobian = problem.jacobian if exact else None
    with threadpool_limits(limits=1, user_api="blas"):  # as identify runs the polish
        alone = [polish(problem.residuals, x, *box, max_iterations=iterations,
                        jacobian=jacobian) for x in starts]
        together = polish_many(problem.residuals, starts, *box, max_iterations=iterations,
                               jacobian=jacobian)
        # A round's residuals and Jacobians in one call (what identify runs): the same fits.
        merged = (polish_many(problem.residuals, starts, *box, max_iterations=iterations,
                              jacobian=jacobian, both=problem.residuals_and_jacobian)
                  if exact else together)
    for one, other, third in zip(alone, together, merged, strict=True):
        for fit in (other, third):
            assert np.array_equal(one.result.x, fit.result.x)
            assert one.result.fun == fit.result.fun
            assert one.result.nfev == fit.result.nfev and one.result.status == fit.result.status
            assert np.array_equal(one.jacobian, fit.jacobian)
            assert np.array_equal(one.residuals, fit.residuals)
    return together


@pytest.mark.parametrize("exact", [False, True])
def test_lock_step_polish_of_a_synthetic_trial_matches_the_starts_alone(exact) -> None:
    truth = {item.name: item.seed_value for item in load_identification().parameters}
    case = synthetic_case(truth, noise_m=0.001, seed=5, frames=300)
    problem = case.problem
    centre = problem.space.to_normalised(np.array([truth[n] for n in problem.space.names]))
    offsets = np.random.default_rng(6).uniform(-0.08, 0.08, (3, problem.dim))
    starts = np.clip(centre + offsets, 0.0, 1.0)
    fits = _same_fits(problem, starts, iterations=12, exact=exact)
    start_costs = np.sum(problem.residuals(starts) ** 2, axis=1)
    assert all(fit.result.fun < cost for fit, cost in zip(fits, start_costs, strict=True))


def test_a_rounds_residuals_and_jacobians_in_one_call_are_those_of_two_calls() -> None:
    from bemore.identify.space import ParameterSpace
    from bemore.paths import data_dir
    from bemore.settings import load_gymnast
    from bemore.trial import prepare_trial

    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(trial, space)
    assert problem.start is not None  # the spring equilibria the two calls share are solved
    rng = np.random.default_rng(9)
    X, Y = rng.uniform(0.2, 0.8, (3, problem.dim)), rng.uniform(0.2, 0.8, (2, problem.dim))
    X[1, 0] = np.nan  # a member the engine cannot simulate: the penalty
    for samples_per_step in (1, 2):
        residuals, (r, J) = problem.residuals_and_jacobian(X, Y, samples_per_step)
        assert np.array_equal(residuals, problem.residuals(X, samples_per_step))
        r_alone, J_alone = problem.jacobian(Y, samples_per_step)
        assert np.array_equal(r, r_alone) and np.array_equal(J, J_alone)
    assert np.all(np.isfinite(residuals)) and not np.array_equal(residuals[0], residuals[1])


@pytest.mark.slow
def test_lock_step_polish_of_the_sample_matches_the_starts_alone() -> None:
    from bemore.identify.run import (
        TIE_RELATIVE,
        RunSettings,
        _Archive,
        _polish_from_distinct_starts,
    )
    from bemore.identify.space import ParameterSpace
    from bemore.optimize import make_algorithm, minimize
    from bemore.optimize.polish import distinct_starts
    from bemore.paths import data_dir
    from bemore.settings import load_gymnast
    from bemore.trial import prepare_trial

    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    problem = IdentificationProblem.from_trial(trial, space)
    archive = _Archive(problem)
    with threadpool_limits(limits=1, user_api="blas"):
        minimize(archive, make_algorithm("gwo", problem, 40, 10, 0, {}), seed=0)
    X, F = np.vstack(archive.points), np.concatenate(archive.costs)
    starts = X[distinct_starts(X, F, RunSettings().polish_starts, problem.lower, problem.upper)]
    fits = _same_fits(problem, starts, iterations=100, exact=True)  # identify's default
    # identify polishes the same starts in lock step and keeps the earliest of the lowest.
    with threadpool_limits(limits=1, user_api="blas"):
        kept, records = _polish_from_distinct_starts(problem, archive, RunSettings())
    assert [record.polished_cost_m2 for record in records] == [f.result.fun for f in fits]
    costs = np.array([fit.result.fun for fit in fits])
    won = [index for index, record in enumerate(records) if record.won]
    assert won == [int(np.flatnonzero(costs <= costs.min() * (1.0 + TIE_RELATIVE))[0])]
    assert np.array_equal(kept.result.x, fits[won[0]].result.x)
