"""The constrained solvers on small problems whose optimum is known in closed form."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.errors import OptimisationError
from bemore.optimize import ConstrainedProblem, FunctionConstrainedProblem
from bemore.optimize.constrained import constraint_form, violation
from bemore.synthesis.pymoo_search import solve_pymoo
from bemore.synthesis.solve import (
    screened_starts,
    solve_corrected,
    solve_multistart,
    starting_points,
)


class Sphere(ConstrainedProblem):
    """min x²+y²+z² s.t. 3 ≤ x+y+z ≤ band_upper, x − y ≥ 0.5, box [0, 2]³.

    Optimum: the projection of the origin on {x+y+z = 3, x−y = 0.5} (orthogonal normals):
    (1.25, 0.75, 1.0), objective 3.125.
    """

    def __init__(self, band: tuple[float, float] = (3.0, 3.1)) -> None:
        super().__init__(
            np.zeros(3), np.full(3, 2.0), ("x", "y", "z"),
            constraint_lower=[band[0], 0.5], constraint_upper=[band[1], np.inf],
            constraint_names=("sum", "difference"),
        )
        self.batch_sizes: list[int] = []

    def _evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.batch_sizes.append(len(X))
        f = (X**2).sum(axis=1)
        c = np.column_stack([X.sum(axis=1), X[:, 0] - X[:, 1]])
        return f, c


def test_constraint_conventions_convert_in_one_place() -> None:
    values = np.array([[3.05, 0.2]])
    lower = np.array([3.0, 0.5])
    upper = np.array([3.1, np.inf])
    scipy_form = constraint_form(values, lower, upper, "scipy")
    np.testing.assert_allclose(scipy_form, [[0.05, -0.3, 0.05]], atol=1e-12)
    np.testing.assert_allclose(constraint_form(values, lower, upper, "pymoo"), -scipy_form)
    assert violation(values, lower, upper)[0] == pytest.approx(0.3)
    assert violation(np.array([3.05, 0.6]), lower, upper) == 0.0


@pytest.mark.parametrize("method", ["slsqp", "trust-constr"])
def test_multistart_finds_the_known_optimum(method: str) -> None:
    problem = Sphere()
    rng = np.random.default_rng(3)
    starts = starting_points(problem, 4, rng, lambda X: X[:, 0] - X[:, 1] - 0.5)
    assert (starts[:, 0] - starts[:, 1] >= 0.5).all()
    outcome = solve_multistart(problem, starts, method=method, feasibility_tolerance=1e-6)
    assert outcome.success and outcome.status == 6 and outcome.maxcv <= 1e-6
    # trust-constr (interior point) stops a little further from the corner of the constraints.
    atol = 2e-4 if method == "slsqp" else 1e-3
    np.testing.assert_allclose(outcome.x, [1.25, 0.75, 1.0], atol=atol)
    assert outcome.fun == pytest.approx(3.125, rel=atol)
    assert len(outcome.runs) == 4
    # The result explains itself: constraint values at x by name, and what the run cost.
    assert outcome.constraint_names == ("sum", "difference")
    np.testing.assert_allclose(outcome.constraints, [3.0, 0.5], atol=10 * atol)
    # every point the problem evaluated is counted: the runs', the objective's scale at the
    # first start and the re-evaluated best
    assert outcome.nfev == sum(run.nfev for run in outcome.runs) + 2 == problem.nfev
    assert outcome.njev >= 4  # at least one Jacobian per start
    assert outcome.nbatch == len(problem.batch_sizes) == len(outcome.history) + 2
    assert [r.nfev for r in outcome.history][-1] == sum(problem.batch_sizes[1:-1])
    bests = [r.best for r in outcome.history if np.isfinite(r.best)]
    assert bests == sorted(bests, reverse=True) and bests[-1] == pytest.approx(3.125, rel=atol)


def test_lockstep_batches_the_starts_and_matches_sequential_runs() -> None:
    starts = np.array([[1.0, 0.2, 1.9], [1.9, 0.1, 0.1], [1.5, 1.0, 0.5]])
    lockstep, sequential = Sphere(), Sphere()
    a = solve_multistart(lockstep, starts, lockstep=True)
    b = solve_multistart(sequential, starts, lockstep=False)
    np.testing.assert_array_equal(a.x, b.x)
    assert a.nfev == b.nfev
    # Every stencil has n + 1 = 4 points; lockstep merges the three runs' stencils.
    assert max(lockstep.batch_sizes) == 12
    assert max(sequential.batch_sizes) == 4
    assert len(lockstep.batch_sizes) < len(sequential.batch_sizes)


def test_infeasible_problem_returns_the_closest_design() -> None:
    problem = Sphere(band=(7.0, 8.0))  # the box allows x+y+z ≤ 6 at most
    outcome = solve_multistart(problem, np.array([[1.0, 0.2, 1.0], [2.0, 1.0, 0.5]]))
    assert not outcome.success and outcome.status == 7
    assert outcome.message.startswith("no feasible point found")
    # Closest = least sum of squared violations over the box: at x = z = 2 it is
    # (7 − (4 + y))² + max(0, y − 1.5)², decreasing up to the bound y = 2: the corner (2, 2, 2),
    # sum 6 (1 short of 7) and x − y = 0 (0.5 short).
    np.testing.assert_allclose(outcome.x, [2.0, 2.0, 2.0], atol=1e-6)
    assert outcome.maxcv == pytest.approx(1.0, abs=1e-6)
    assert all(not run.success for run in outcome.runs)


def test_pymoo_global_search_then_polish() -> None:
    problem = Sphere()
    outcome = solve_pymoo(problem, rng_seed=1, population=20, generations=15)
    assert outcome.success
    np.testing.assert_allclose(outcome.x, [1.25, 0.75, 1.0], atol=2e-4)
    assert max(problem.batch_sizes) >= 20  # the population is evaluated as one batch
    assert outcome.algorithm == "pymoo"
    assert outcome.runs[0].stage == "global" and outcome.runs[0].nit == 15


class Recording(Sphere):
    """The sphere problem, remembering every design it evaluated."""

    def __init__(self, band: tuple[float, float] = (3.0, 3.1)) -> None:
        super().__init__(band)
        self.seen: list[np.ndarray] = []

    def _evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.seen.extend(np.array(X))
        return super()._evaluate(X)


def test_budget_stops_a_run_with_the_best_point_it_visited() -> None:
    problem = Recording()
    outcome = solve_multistart(
        problem, np.array([[2.0, 0.1, 2.0]]), objective_scale=1.0, budget=3, reevaluate=False
    )
    run = outcome.runs[0]
    assert "stopped after 3 batched evaluations" in run.message and not run.success
    assert len(problem.batch_sizes) == 3  # no fourth request was made
    # The returned design is the best of the visited ones: feasible ones first, then by
    # objective (the test's own ranking of what the problem saw).
    seen = np.array(problem.seen)
    f, c = Sphere().evaluate(seen)
    worst = violation(c, problem.constraint_lower, problem.constraint_upper)
    ranked = seen[np.lexsort((f, np.where(worst <= 1e-6, 0.0, worst)))]
    np.testing.assert_array_equal(outcome.x, ranked[0])


def test_screened_starts_take_the_best_spread_candidates_from_one_batch() -> None:
    problem = Sphere(band=(0.5, 6.0))  # most of the box is feasible here

    def linear(X: np.ndarray) -> np.ndarray:
        return X[:, 0] - X[:, 1] - 0.5

    starts, f_starts, evaluated = screened_starts(
        problem, 4, np.random.default_rng(5), linear, pool=40, spacing=0.15
    )
    assert evaluated == 40 and problem.batch_sizes == [40]
    pool = starting_points(Sphere(), 40, np.random.default_rng(5), linear)
    f_pool, c_pool = Sphere(band=(0.5, 6.0)).evaluate(pool)
    feasible = violation(c_pool, problem.constraint_lower, problem.constraint_upper) == 0.0
    best = pool[feasible][np.argmin(f_pool[feasible])]
    np.testing.assert_array_equal(starts[0], best)
    np.testing.assert_allclose(f_starts, (starts**2).sum(axis=1))
    u = starts / 2.0  # normalised: the box is [0, 2]³
    gaps = [np.abs(u[i] - u[j]).max() for i in range(4) for j in range(i)]
    assert min(gaps) >= 0.15


class ShiftedSum(Sphere):
    """The sphere problem whose first constraint is a·(x + y + z) + b (a "fine" version)."""

    def __init__(self, a: float, b: float) -> None:
        super().__init__()
        self.a, self.b = a, b

    def _evaluate(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        f, c = super()._evaluate(X)
        c[:, 0] = self.a * c[:, 0] + self.b
        return f, c


@pytest.mark.parametrize(
    ("a", "b", "total"),
    [(1.0, 0.2, 2.8), (1.02, 0.0, 3.0 / 1.02)],  # a constant defect, then one that varies
)
def test_defect_correction_solves_the_fine_problem_through_the_coarse_one(a, b, total) -> None:
    # The fine optimum: the projection of the origin on {x + y + z = total, x − y = 0.5}.
    expected = np.array([total / 3 + 0.25, total / 3 - 0.25, total / 3])
    fine = ShiftedSum(a, b)
    outcome, fine_evaluations = solve_corrected(Sphere(), fine, np.array([1.2, 0.7, 1.1]))
    assert outcome.success
    np.testing.assert_allclose(outcome.x, expected, atol=2e-4)
    assert fine_evaluations <= 4
    assert sum(fine.batch_sizes) == fine_evaluations  # one design per fine evaluation


def test_an_equality_constraint_is_a_range_of_zero_width() -> None:
    # x + y + z = 3 (lower = upper) and x − y ≥ 0.5 over [0, 2]³: the same projection of the
    # origin as the band [3, 3.1], (1.25, 0.75, 1.0).
    problem = FunctionConstrainedProblem(
        lambda X: ((X**2).sum(axis=1), np.column_stack([X.sum(axis=1), X[:, 0] - X[:, 1]])),
        np.zeros(3), np.full(3, 2.0), ("x", "y", "z"),
        constraint_lower=[3.0, 0.5], constraint_upper=[3.0, np.inf],
        constraint_names=("sum", "difference"),
    )
    outcome = solve_multistart(problem, np.array([[1.0, 0.2, 1.9], [1.9, 0.1, 0.1]]))
    assert outcome.success and outcome.maxcv <= 1e-6
    np.testing.assert_allclose(outcome.x, [1.25, 0.75, 1.0], atol=2e-4)
    np.testing.assert_allclose(outcome.constraints[0], 3.0, atol=1e-6)


@pytest.mark.parametrize(("bounds", "message"), [
    (([1.0], [np.inf, 2.0]), "constraints: 1 lower bounds and 2 upper bounds"),
    (([2.0], [1.0]), "constraints: every lower bound must be at most its upper one"),
])
def test_constraint_bounds_that_cannot_hold_are_one_line_errors(bounds, message) -> None:
    with pytest.raises(OptimisationError) as error:
        FunctionConstrainedProblem(lambda X: (X[:, 0], X), [0.0], [1.0],
                                   constraint_lower=bounds[0], constraint_upper=bounds[1])
    assert str(error.value) == message
