"""The polish in two stages: first on a coarse cost (one integrator step per the problem's
``coarse_samples_per_step`` samples, 2 here, whose exact Jacobian costs about half; apart from
the search's own setting), then on the exact cost from where the first stage ended.
Starts whose first stage ends in one minimum share one exact stage.

The trial is a synthetic C3D with bar forces through the whole trial chain (markers with 1 mm
of noise, their own marker conventions, the force channels with 2 % noise): the two-sample
Jacobian is checked against differences of the two-sample residuals, forces included, and the
two-stage polish must end in the minimum the exact polish alone reaches.
"""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from bemore.identify.problem import IdentificationProblem
from bemore.identify.run import (
    TIE_RELATIVE,
    RunSettings,
    _Archive,
    _coarse_stage,
    _polish_from_distinct_starts,
)
from bemore.identify.space import ParameterSpace
from bemore.optimize import make_algorithm, minimize
from bemore.settings import ForceTerm, load_gymnast, load_identification
from tests.identify.test_forces import _prepared


@pytest.fixture(scope="module")
def forces_trial(tmp_path_factory):
    """A prepared synthetic trial with bar forces, noise seed 3."""
    return _prepared(3, tmp_path_factory.mktemp("stages"))[0]


def _problem(trial, search: int, coarse: int | None = None) -> IdentificationProblem:
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    return IdentificationProblem.from_trial(trial, space, samples_per_step=search,
                                            forces=ForceTerm(), coarse_samples_per_step=coarse)


@pytest.fixture(scope="module")
def forces_problem(forces_trial) -> IdentificationProblem:
    """The identification problem (search cost and the polish's first stage: 2 samples per
    step) of the synthetic trial with bar forces."""
    return _problem(forces_trial, 2)


def test_the_first_stage_steps_its_own_samples_per_step_not_the_searchs(forces_trial) -> None:
    starts = np.random.default_rng(5).uniform(0.3, 0.7, (2, _problem(forces_trial, 1).dim))
    settings = RunSettings(polish_iterations=2)

    def first_stage(search: int, coarse: int):
        problem = _problem(forces_trial, search, coarse)
        assert (problem.samples_per_step, problem.coarse_samples_per_step) == (search, coarse)
        with threadpool_limits(limits=1, user_api="blas"):
            return [fit.result.x for fit in _coarse_stage(problem, settings, starts)]

    # The search at 4 samples per step leaves the first stage at its own 2: the same fits, bit
    # for bit, as with the search at 2; a first stage at 4 takes other steps.
    at_two = first_stage(2, 2)
    np.testing.assert_array_equal(first_stage(4, 2), at_two)
    assert not np.array_equal(first_stage(2, 4), at_two)
    # 1: no first stage.
    assert _coarse_stage(_problem(forces_trial, 4, 1), settings, starts) is None


def test_the_two_sample_jacobian_is_the_derivative_of_the_two_sample_residuals(
        forces_problem) -> None:
    problem = forces_problem
    x = np.random.default_rng(4).uniform(0.3, 0.7, problem.dim)
    r, J = (a[0] for a in problem.jacobian(x[None, :], samples_per_step=2))
    assert np.array_equal(r, problem.residuals(x[None, :], samples_per_step=2)[0])
    # The two costs differ (the integrator's error at 2 samples per step), so do their slopes.
    exact_J = problem.jacobian(x[None, :])[1][0]
    assert not np.allclose(J, exact_J, rtol=1e-6, atol=0.0)
    # Central differences, two steps, Richardson-extrapolated (fourth order; step 1e-4 of the
    # box): every column within 1e-5 of its norm, forces rows included.
    step = 1e-4
    columns = []
    for k in range(problem.dim):
        shifted = []
        for h in (step, step / 2):
            e = np.zeros(problem.dim)
            e[k] = h
            ends = problem.residuals(np.vstack([x + e, x - e]), samples_per_step=2)
            shifted.append((ends[0] - ends[1]) / (2 * h))
        columns.append((4 * shifted[1] - shifted[0]) / 3)
    reference = np.array(columns).T
    error = np.linalg.norm(J - reference, axis=0) / np.linalg.norm(reference, axis=0)
    assert error.max() < 1e-5, error
    forces = problem.force_part(J.T).T  # the force rows' derivatives alone
    assert np.linalg.norm(forces) > 0.0


@pytest.mark.slow
def test_the_two_stage_polish_ends_in_the_exact_polishs_minimum(forces_problem) -> None:
    problem = forces_problem
    archive = _Archive(problem)
    with threadpool_limits(limits=1, user_api="blas"):  # as identify runs the polish
        minimize(archive, make_algorithm("gwo", problem, 60, 10, 0, {}), seed=0)
        kept, records = _polish_from_distinct_starts(problem, archive, RunSettings())
        alone, alone_records = _polish_from_distinct_starts(
            problem, archive, RunSettings(polish_coarse_first=False))
    # The same minimum: cost to rounding, every unknown within 1e-6 of the box but the bar
    # mass, the flattest direction (with the channels' offsets fitted only the bar's
    # accelerations show it; its standard error ≈ 35 %): within 1e-5 (3.2e-6 measured).
    assert kept.result.fun == pytest.approx(alone.result.fun, rel=TIE_RELATIVE)
    difference = np.abs(kept.result.x - alone.result.x)
    bar = list(problem.names).index("bar.mass")
    assert np.max(np.delete(difference, bar)) < 1e-6 and difference[bar] < 1e-5, difference
    # The cost is the exact one (one integrator step per sample), as the polish alone's.
    exact = problem.residuals(kept.result.x[None, :])[0]
    assert kept.result.fun == pytest.approx(float(exact @ exact), rel=1e-12)
    assert np.array_equal(kept.residuals, exact)
    # Every start ran a first stage; a start joined to another carries that start's end.
    assert all(record.coarse_jacobians > 0 for record in records)
    ranks = [record.rank for record in records]
    for record in records:
        if record.same_minimum_as is not None:
            leader = records[ranks.index(record.same_minimum_as)]
            assert leader.same_minimum_as is None
            assert record.x == leader.x and record.polished_cost_m2 == leader.polished_cost_m2
            assert record.jacobians == record.coarse_jacobians  # no exact stage of its own
        else:
            assert record.jacobians > record.coarse_jacobians
    assert [record.won for record in records].count(True) == 1
    assert all(record.coarse_jacobians == 0 for record in alone_records)


def test_differenced_columns_with_bar_forces(forces_problem, monkeypatch) -> None:
    """The first stage's differenced columns with the force rows: the tangents' own columns
    are those of the all-tangent Jacobian bit for bit (forces rows included), the differenced
    ones within 1e-4 of the exact columns. The problem's unknowns leave 3 directions over after
    two whole vectors: allowed to difference up to 3 here, all three are differenced."""
    import bemore.model.sensitivity as sensitivity

    problem = forces_problem
    left = problem.dim % 8
    assert problem.has_forces and left == 3
    monkeypatch.setattr(sensitivity, "DIFFERENCED_AT_MOST", left)
    X = np.random.default_rng(7).uniform(0.3, 0.7, (2, problem.dim))
    r, J = problem.jacobian(X, samples_per_step=2)
    r_d, J_d = problem.jacobian(X, samples_per_step=2, differences=True)
    assert np.array_equal(r_d, r)
    assert np.array_equal(J_d[:, :, :-left], J[:, :, :-left])
    error = (np.linalg.norm(J_d[:, :, -left:] - J[:, :, -left:], axis=1)
             / np.linalg.norm(J[:, :, -left:], axis=1))
    assert np.all(error < 1e-4), error
    # The force rows alone (they see those unknowns): as close.
    forces, forces_d = (problem.force_part(A[0].T)[-left:].reshape(left, -1) for A in (J, J_d))
    assert np.all(np.linalg.norm(forces, axis=1) > 0.0)
    error = np.linalg.norm(forces_d - forces, axis=1) / np.linalg.norm(forces, axis=1)
    assert np.all(error < 1e-4), error


def test_the_first_stage_asks_for_differences_and_the_exact_stage_does_not(
        forces_trial, monkeypatch) -> None:
    """The polish's first stage asks its Jacobians for differenced columns
    (``differences=True``, two samples per step); the exact stage, whose Jacobian the analysis
    takes, asks for tangents only."""
    problem = _problem(forces_trial, 2)
    asked = []
    for name in ("jacobian", "residuals_and_jacobian"):
        real = getattr(problem, name)

        def recording(*args, real=real, **kwargs):
            asked.append((kwargs.get("samples_per_step", 1), kwargs.get("differences", False)))
            return real(*args, **kwargs)

        monkeypatch.setattr(problem, name, recording)
    settings = RunSettings(polish_iterations=3, polish_starts=2)
    archive = _Archive(problem)
    archive.points.append(np.random.default_rng(5).uniform(0.3, 0.7, (4, problem.dim)))
    archive.costs.append(np.array([4.0, 3.0, 2.0, 1.0]))
    with threadpool_limits(limits=1, user_api="blas"):
        _polish_from_distinct_starts(problem, archive, settings)
    assert (2, True) in asked and (1, False) in asked
    assert set(asked) == {(2, True), (1, False)}
