"""The identification's exact Jacobian (engine sensitivities chained with the start state) and
the polish that uses it: same residuals as the problem's, same derivatives as differences of
them, same optimum as the finite-difference polish with fewer simulations."""

from __future__ import annotations

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from bemore.identify.problem import IdentificationProblem
from bemore.optimize.polish import polish, polish_many
from bemore.settings import load_identification
from tests.identify.synthetic import synthetic_case

TOLERANCE = 1e-6


def _reference(problem: IdentificationProblem, x: np.ndarray) -> tuple:
    """Richardson-extrapolated central differences (m, d) of the residuals at x, and the
    change of that estimate when the step halves (relative, per column: its error bound); per
    column the step of smallest such change among 1e-2 … 1e-4 of the box (a parameter the
    trial barely sees, like the bar's mass, needs a long step to rise above rounding)."""
    d = x.size
    best, error = None, np.full(d, np.inf)
    for h in (1e-2, 1e-3, 1e-4):
        estimates = []
        for step in (h, h / 2, h / 4):
            eye = np.eye(d) * step
            values = problem.residuals(np.vstack([x + eye, x - eye]))
            estimates.append((values[:d] - values[d:]).T / (2 * step))
        coarse = (4 * estimates[1] - estimates[0]) / 3
        fine = (4 * estimates[2] - estimates[1]) / 3
        own = np.linalg.norm(coarse - fine, axis=0) / np.linalg.norm(fine, axis=0)
        better = own < error
        best = fine if best is None else np.where(better, fine, best)
        error = np.where(better, own, error)
    return best, error


@pytest.fixture(scope="module")
def sample_problem() -> IdentificationProblem:
    from bemore.identify.space import ParameterSpace
    from bemore.paths import data_dir
    from bemore.settings import load_gymnast
    from bemore.trial import prepare_trial

    trial = prepare_trial(data_dir() / "sample_trial.c3d")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    return IdentificationProblem.from_trial(trial, space)


def test_exact_jacobian_of_the_sample_matches_differences(sample_problem) -> None:
    problem = sample_problem
    assert problem.start is not None and problem.dim > problem.space.dim  # start unknowns in
    X = np.random.default_rng(4).uniform(0.1, 0.9, (2, problem.dim))
    r, J = problem.jacobian(X)
    assert np.array_equal(r, problem.residuals(X))  # the residuals are the problem's own
    for n in range(len(X)):
        reference, own = _reference(problem, X[n])
        assert np.all(own < 0.5 * TOLERANCE), own  # the bar mass: 1.5e-7 (barely seen)
        error = np.linalg.norm(J[n] - reference, axis=0) / np.linalg.norm(reference, axis=0)
        assert np.all(error < TOLERANCE), error


def test_exact_polish_reaches_the_finite_difference_optimum_on_synthetic_trials() -> None:
    truth = {item.name: item.seed_value for item in load_identification().parameters}
    for seed in (5, 8):
        case = synthetic_case(truth, noise_m=0.001, seed=seed, frames=300)
        problem = case.problem
        centre = problem.space.to_normalised(np.array([truth[n] for n in problem.space.names]))
        rng = np.random.default_rng(seed)
        starts = np.clip(centre + rng.uniform(-0.1, 0.1, (2, problem.dim)), 0.0, 1.0)
        box = (problem.lower, problem.upper)
        with threadpool_limits(limits=1, user_api="blas"):
            differences = polish_many(problem.residuals, starts, *box, max_iterations=60)
            exact = polish_many(problem.residuals, starts, *box, max_iterations=60,
                                jacobian=problem.jacobian)
        for fd, ex in zip(differences, exact, strict=True):
            assert ex.result.status in (2, 3, 4) and fd.result.status in (2, 3, 4)
            assert abs(ex.result.fun - fd.result.fun) <= 1e-9 * fd.result.fun
            assert np.max(np.abs(ex.result.x - fd.result.x)) < 1e-4
            # The Jacobians at the optimum agree too (the identifiability's input).
            scale = np.linalg.norm(fd.jacobian, axis=0)
            assert np.all(np.linalg.norm(ex.jacobian - fd.jacobian, axis=0) < 1e-5 * scale)
            # Far fewer simulated points: one per Jacobian instead of 2·d + 1.
            assert ex.result.nfev < fd.result.nfev / 5


def test_lock_step_with_exact_jacobians_matches_the_starts_alone() -> None:
    truth = {item.name: item.seed_value for item in load_identification().parameters}
    problem = synthetic_case(truth, noise_m=0.001, seed=5, frames=300).problem
    centre = problem.space.to_normalised(np.array([truth[n] for n in problem.space.names]))
    starts = np.clip(centre + np.random.default_rng(6).uniform(-0.08, 0.08, (3, problem.dim)),
                     0.0, 1.0)
    box = (problem.lower, problem.upper)
    with threadpool_limits(limits=1, user_api="blas"):
        alone = [polish(problem.residuals, x, *box, max_iterations=12,
                        jacobian=problem.jacobian) for x in starts]
        together = polish_many(problem.residuals, starts, *box, max_iterations=12,
                               jacobian=problem.jacobian)
    for one, other in zip(alone, together, strict=True):
        assert np.array_equal(one.result.x, other.result.x)
        assert one.result.fun == other.result.fun
        assert np.array_equal(one.jacobian, other.jacobian)


@pytest.mark.parametrize("cost_points", [
    ("ankle", "knee", "hip", "neck", "elbow", "wrist", "bar"),  # the default seven, reversed
    ("hip", "bar", "knee"),  # some of them
    ("bar", "wrist", "elbow", "shoulder", "neck"),  # one the engine's default set lacks
])
def test_exact_jacobian_of_other_cost_points(sample_problem, cost_points) -> None:
    """A problem fitting other joint centres than the engine's default seven gets, from the
    exact Jacobian, its own residuals bit for bit and, for each of its points, the derivatives
    the default problem gets for the same point, bit for bit: the tangent kernel stores the
    default seven (a subset of them taken) or, with a point outside them, every point."""
    from bemore.model.sensitivity import program_selection

    default = sample_problem
    model = default.model
    # The sample's own problem asks for exactly the kernel the warm-up builds.
    assert default._stored_points == program_selection(model)
    assert default._stored_index is None
    columns = [default.cost_points.index(name) if name in default.cost_points
               else default.cost_points.index("elbow") for name in cost_points]
    problem = IdentificationProblem(
        model, default.space, default.motion, default.free_q0, default.free_qd0,
        default.measured[:, columns], cost_points, start=default.start,
        samples_per_step=default.samples_per_step, marker_noise_m=default.marker_noise_m,
        body=default.body)
    outside = "shoulder" in cost_points
    expected = None if outside else program_selection(model)
    assert problem._stored_points == expected
    X = np.random.default_rng(5).uniform(0.1, 0.9, (2, problem.dim))
    r, J = problem.jacobian(X, samples_per_step=2)
    assert np.array_equal(r, problem.residuals(X, samples_per_step=2))
    _, J_default = default.jacobian(X, samples_per_step=2)
    frames = default.measured.shape[0]
    mine = J.reshape(len(X), frames, len(cost_points), 2, -1)
    theirs = J_default.reshape(len(X), frames, len(default.cost_points), 2, -1)
    for k, name in enumerate(cost_points):
        if name in default.cost_points:
            assert np.array_equal(mine[:, :, k], theirs[:, :, default.cost_points.index(name)])
        else:
            assert np.abs(mine[:, :, k]).max() > 0.0


def test_a_coarse_jacobian_differences_the_direction_left_over(sample_problem) -> None:
    """``differences``: a Jacobian takes the tangent kernel's direction left over after two
    whole vectors (the 17th) as a one-sided difference of the residuals, the
    step backwards at the box's upper bound: the residuals and the 16 other columns are the
    tangent Jacobian's bit for bit, the differenced column within 1e-4 of the exact one
    (measured 0.5–2.3e-6 with its step of 1e-6). One member keeps every tangent; the lock
    step's call of both kinds gives the same numbers as the two calls."""
    problem = sample_problem
    assert problem.dim == 17
    X = np.random.default_rng(4).uniform(0.1, 0.9, (3, problem.dim))
    X[2, -1] = 1.0  # at the upper bound: differenced backwards
    r, J = problem.jacobian(X, samples_per_step=2)
    r_d, J_d = problem.jacobian(X, samples_per_step=2, differences=True)
    assert np.array_equal(r_d, r)
    assert np.array_equal(J_d[:, :, :-1], J[:, :, :-1])
    assert not np.array_equal(J_d[:, :, -1], J[:, :, -1])  # a difference, not the tangent
    error = np.linalg.norm(J_d[:, :, -1] - J[:, :, -1], axis=1) / np.linalg.norm(J[:, :, -1],
                                                                                 axis=1)
    assert np.all(error < 1e-4), error
    # A member's Jacobian does not depend on its batch (the lock step's promise).
    one = problem.jacobian(X[1:2], samples_per_step=2, differences=True)
    assert np.array_equal(one[1], J_d[1:2])
    residuals, (r_b, J_b) = problem.residuals_and_jacobian(X[1:], X, 2, differences=True)
    assert np.array_equal(residuals, problem.residuals(X[1:], samples_per_step=2))
    assert np.array_equal(r_b, r) and np.array_equal(J_b, J_d)


def test_a_differenced_column_whose_moved_point_fails_is_zero(sample_problem, monkeypatch
                                                              ) -> None:
    """A moved point the engine cannot simulate (its residuals the penalty) gives its column 0
    (no information, rather than the penalty's slope); the other columns are untouched."""
    from bemore.identify.problem import PENALTY_DISTANCE_M

    problem = sample_problem
    X = np.random.default_rng(6).uniform(0.1, 0.9, (2, problem.dim))
    _, J = problem.jacobian(X, samples_per_step=2)
    real = problem.residuals

    def failing(points, *args, **kwargs):
        values = real(points, *args, **kwargs)
        values[1] = PENALTY_DISTANCE_M / np.sqrt(2.0)  # the second member's moved point
        return values

    monkeypatch.setattr(problem, "residuals", failing)
    _, J_d = problem.jacobian(X, samples_per_step=2, differences=True)
    assert np.all(J_d[1, :, -1] == 0.0) and np.any(J_d[0, :, -1] != 0.0)
    assert np.array_equal(J_d[:, :, :-1], J[:, :, :-1])


def test_differenced_jacobians_leave_the_room_and_penalties_alone(sample_problem, monkeypatch
                                                                 ) -> None:
    """The differenced columns' room in the tangents' array is never read: filled with NaN
    before the kernel runs, the residuals and Jacobian are the same and finite. A member that
    cannot be simulated (outside the box: a negative mass) gets the penalty residuals and a
    zero Jacobian, its differenced column included."""
    import bemore.model.sensitivity as sensitivity
    from bemore.identify.problem import PENALTY_DISTANCE_M

    problem = sample_problem
    X = np.random.default_rng(8).uniform(0.1, 0.9, (3, problem.dim))
    X[2, problem.space.names.index("trunk.mass")] = -5.0  # a negative mass: not simulable
    clean = problem.jacobian(X, samples_per_step=2, differences=True)
    real = sensitivity.point_sensitivities

    def poisoned(*args, out=None, **kwargs):
        if out is not None:
            out[...] = np.nan
        return real(*args, out=out, **kwargs)

    monkeypatch.setattr(sensitivity, "point_sensitivities", poisoned)
    for r, J in (problem.jacobian(X, samples_per_step=2, differences=True),
                 problem.residuals_and_jacobian(X[:1], X, 2, differences=True)[1]):
        assert np.array_equal(r, clean[0]) and np.array_equal(J, clean[1])
        assert np.all(np.isfinite(J))
    assert np.all(clean[0][2] == PENALTY_DISTANCE_M / np.sqrt(2.0))
    assert np.all(clean[1][2] == 0.0)
    assert all(np.any(clean[1][n, :, -1] != 0.0) for n in (0, 1))  # the others differenced


def test_lock_step_with_differenced_jacobians_matches_the_starts_alone(monkeypatch) -> None:
    """With differenced columns (the first stage's Jacobians) each start still reaches, bit for
    bit, the point it reaches alone: a member's Jacobian does not depend on how many others
    share its round. The synthetic problem's 13 unknowns leave 5 over; allowed here."""
    import functools

    import bemore.model.sensitivity as sensitivity

    monkeypatch.setattr(sensitivity, "DIFFERENCED_AT_MOST", 5)
    truth = {item.name: item.seed_value for item in load_identification().parameters}
    problem = synthetic_case(truth, noise_m=0.001, seed=5, frames=300).problem
    assert sensitivity.differenced_directions(problem.dim) == 5
    centre = problem.space.to_normalised(np.array([truth[n] for n in problem.space.names]))
    starts = np.clip(centre + np.random.default_rng(7).uniform(-0.08, 0.08, (3, problem.dim)),
                     0.0, 1.0)
    box = (problem.lower, problem.upper)
    jacobian = functools.partial(problem.jacobian, differences=True)
    with threadpool_limits(limits=1, user_api="blas"):
        alone = [polish(problem.residuals, x, *box, max_iterations=10, jacobian=jacobian)
                 for x in starts]
        together = polish_many(problem.residuals, starts, *box, max_iterations=10,
                               jacobian=jacobian)
    for one, other in zip(alone, together, strict=True):
        assert np.array_equal(one.result.x, other.result.x)
        assert one.result.fun == other.result.fun
        assert np.array_equal(one.jacobian, other.jacobian)
