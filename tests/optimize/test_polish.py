"""Least-squares polish and its batched finite-difference Jacobian."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from bemore.errors import OptimisationError
from bemore.optimize.polish import finite_difference_jacobian, polish, polish_many
from tests.optimize.valley import rosenbrock_like, rosenbrock_like_jacobian

MATRIX = np.array([[1.0, 2.0], [-3.0, 0.5], [0.0, 4.0]])


def linear(X: np.ndarray) -> np.ndarray:
    return X @ MATRIX.T + np.array([1.0, 0.0, -1.0])


@pytest.mark.parametrize("scheme", ["central", "forward"])
def test_jacobian_of_a_linear_map_is_its_matrix_even_at_the_bounds(scheme: str) -> None:
    calls = []

    def counted(X: np.ndarray) -> np.ndarray:
        calls.append(X.shape[0])
        return linear(X)

    expected_points = 5 if scheme == "central" else 3
    for x in ([0.5, 0.5], [1.0, 0.0], [0.0, 1.0]):
        J, r, n_points = finite_difference_jacobian(
            counted, np.array(x), np.zeros(2), np.ones(2), 1e-3, scheme
        )
        assert np.allclose(J, MATRIX, atol=1e-9)
        assert n_points == expected_points
        assert np.allclose(r, linear(np.array([x]))[0])
    # One batch call per Jacobian: 2·d + 1 (central) or d + 1 (forward) points.
    assert calls == [expected_points] * 3


def test_unknown_scheme_is_refused() -> None:
    with pytest.raises(OptimisationError, match="scheme 'backward'"):
        finite_difference_jacobian(linear, np.zeros(2), np.zeros(2), np.ones(2), scheme="backward")


def test_polish_recovers_an_exponential_decay_from_a_far_start() -> None:
    # Data 1.5·exp(−0.8 t); unknowns scaled to [0, 1]: amplitude = 3·x0, rate = 2·x1.
    t = np.linspace(0.0, 1.0, 50)

    def residuals(X: np.ndarray) -> np.ndarray:
        return 3.0 * X[:, :1] * np.exp(-2.0 * X[:, 1:] * t) - 1.5 * np.exp(-0.8 * t)

    fit = polish(residuals, np.array([0.9, 0.9]), np.zeros(2), np.ones(2))
    assert np.allclose(fit.result.x, [0.5, 0.4], atol=1e-7)
    assert fit.result.fun < 1e-12 and fit.result.success
    assert fit.jacobian.shape == (50, 2) and fit.residuals.shape == (50,)


def test_polish_stays_in_the_box() -> None:
    # The unconstrained minimum (x = 2) is outside: the polish stops on the bound x = 1.
    fit = polish(lambda X: X - 2.0, np.array([0.2]), np.zeros(1), np.ones(1))
    assert fit.result.x[0] == pytest.approx(1.0)
    assert fit.result.fun == pytest.approx(1.0)


def test_distinct_starts_take_the_best_then_the_best_far_enough_from_those_taken() -> None:
    from bemore.optimize.polish import distinct_starts

    # Box [0, 10]²: distances are RMS over coordinates in box widths.
    X = np.array([[1.0, 1.0], [1.5, 1.0], [9.0, 9.0], [1.0, 1.2], [5.0, 5.0], [9.2, 9.0]])
    F = np.array([0.1, 0.2, 0.3, 0.15, 0.9, 0.25])
    low, high = np.zeros(2), np.full(2, 10.0)
    # [1.5, 1] is 0.035 from the best and [9.2, 9] is 0.01 from [9, 9]... [9.2, 9] costs less:
    # it is taken, and [9, 9] (0.014 from it) is not.
    assert distinct_starts(X, F, 3, low, high, radius=0.2).tolist() == [0, 5, 4]
    assert distinct_starts(X, F, 2, low, high, radius=0.2).tolist() == [0, 5]
    # A radius larger than the box's diagonal leaves only the best.
    assert distinct_starts(X, F, 3, low, high, radius=1.5).tolist() == [0]
    # radius 0.02: [1.5, 1] (0.035 away) counts as distinct, [1, 1.2] (0.014) does not.
    assert distinct_starts(X, F, 3, low, high, radius=0.02).tolist() == [0, 1, 5]


def test_distinct_starts_refuse_no_start_and_mismatched_costs() -> None:
    from bemore.optimize.polish import distinct_starts

    with pytest.raises(OptimisationError, match="polish starts = 0"):
        distinct_starts(np.zeros((2, 1)), np.zeros(2), 0, np.zeros(1), np.ones(1))
    with pytest.raises(OptimisationError, match="3 points and 2 costs"):
        distinct_starts(np.zeros((3, 1)), np.zeros(2), 1, np.zeros(1), np.ones(1))


def test_polish_from_the_second_distinct_start_finds_the_deeper_of_two_minima() -> None:
    from bemore.optimize.polish import distinct_starts

    # r(x) = ((x − 0.2)(x − 0.8), 0.1·(x − 0.8)): Σ r² is 0 at x = 0.8 and has a shallower
    # minimum at x = 0.218 (0.0034), the two basins split at x = 0.482. A run whose best points
    # crowd near 0.3 polishes into the shallow one from its best point.
    def residuals(X: np.ndarray) -> np.ndarray:
        x = X[:, :1]
        return np.hstack([(x - 0.2) * (x - 0.8), 0.1 * (x - 0.8)])

    X = np.array([[0.30], [0.31], [0.29], [0.95], [0.32]])
    F = np.sum(residuals(X) ** 2, axis=1)
    assert np.argmin(F) in (0, 1, 2, 4)  # the run's best is in the shallow basin
    picks = distinct_starts(X, F, 2, np.zeros(1), np.ones(1))
    fits = [polish(residuals, X[k], np.zeros(1), np.ones(1)) for k in picks]
    assert fits[0].result.x[0] == pytest.approx(0.218, abs=1e-3) and fits[0].result.fun > 3e-3
    assert fits[1].result.x[0] == pytest.approx(0.8, abs=1e-6) and fits[1].result.fun < 1e-12


DECAY_T = np.linspace(0.0, 1.0, 50)


def decay(X: np.ndarray) -> np.ndarray:
    """Each row alone: 3·x0·exp(−2·x1·t) − 1.5·exp(−0.8 t) (minimum at x = (0.5, 0.4))."""
    return 3.0 * X[:, :1] * np.exp(-2.0 * X[:, 1:] * DECAY_T) - 1.5 * np.exp(-0.8 * DECAY_T)


class Counted:
    """A batch residual function that counts its calls and the points it was given."""

    def __init__(self, residuals, interrupt_at: int = 0, fail_at: int = 0) -> None:
        self.residuals, self.calls, self.points = residuals, 0, 0
        self.interrupt_at, self.fail_at = interrupt_at, fail_at
        self.interrupted = threading.Event()  # set by the lock step's interrupt

    def __call__(self, X: np.ndarray) -> np.ndarray:
        self.calls += 1
        self.points += X.shape[0]
        if self.calls == self.fail_at:
            raise OptimisationError("residuals: engine fault")
        if self.calls == self.interrupt_at:
            import _thread

            _thread.interrupt_main()  # what Ctrl-C does: KeyboardInterrupt in the main thread
            # The engine call is still running when the main thread takes the interrupt.
            assert self.interrupted.wait(timeout=30.0)
        return self.residuals(X)


STARTS = np.array([[0.9, 0.9], [0.1, 0.7], [0.6, 0.05]])


def test_lock_step_starts_reach_the_points_of_the_starts_alone_bit_for_bit_in_fewer_calls(
) -> None:
    alone = Counted(decay)
    sequential = [polish(alone, x, np.zeros(2), np.ones(2)) for x in STARTS]
    together = Counted(decay)
    fits = polish_many(together, STARTS, np.zeros(2), np.ones(2))
    assert len(fits) == 3
    for one, other in zip(sequential, fits, strict=True):
        assert np.array_equal(one.result.x, other.result.x)
        assert one.result.fun == other.result.fun and one.result.nfev == other.result.nfev
        assert np.array_equal(one.jacobian, other.jacobian)
        assert np.array_equal(one.residuals, other.residuals)
        assert np.allclose(other.result.x, [0.5, 0.4], atol=1e-6)
    # Same points evaluated, in merged calls: no more calls than the longest start alone makes.
    assert together.points == alone.points
    longest = max(fit.result.nit + fit.result.nfev for fit in sequential)  # an upper bound
    assert together.calls < alone.calls and together.calls <= longest


def valley(X: np.ndarray) -> np.ndarray:
    """Batch residuals (N, m) of the Rosenbrock-like valley (minimum (1, 1, 0.3, 0.6))."""
    return np.array([rosenbrock_like(x) for x in X])


def valley_jacobian(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Residuals (N, m) and Jacobians (N, m, 4) of :func:`valley`."""
    return valley(X), np.array([rosenbrock_like_jacobian(x) for x in X])


def test_a_rounds_residuals_and_jacobians_in_one_call_give_the_same_fits_in_fewer_calls(
) -> None:
    calls = {"residuals": 0, "jacobian": 0, "both": 0}

    def counted(kind, function):
        def call(*arguments):
            calls[kind] += 1
            return function(*arguments)
        return call

    def both(X, Y):
        return valley(X), valley_jacobian(Y)

    # In the valley the starts reject steps at different rounds: some rounds ask for residuals
    # (a step tried) and Jacobians (a step accepted) at once.
    starts = np.array([[-1.2, 1.0, 0.9, -0.9], [1.5, -1.5, 0.0, 0.5], [0.0, 0.0, -0.5, 0.5]])
    box = (np.array([-2.0, -2.0, -1.0, -1.0]), np.array([2.0, 2.0, 1.0, 1.0]))
    separate = polish_many(counted("residuals", valley), starts, *box, max_iterations=200,
                           jacobian=counted("jacobian", valley_jacobian))
    apart = dict(calls)
    calls.update(residuals=0, jacobian=0)
    merged = polish_many(counted("residuals", valley), starts, *box, max_iterations=200,
                         jacobian=counted("jacobian", valley_jacobian),
                         both=counted("both", both))
    for one, other in zip(separate, merged, strict=True):
        assert np.array_equal(one.result.x, other.result.x)
        assert one.result.fun == other.result.fun and one.result.nfev == other.result.nfev
        assert np.array_equal(one.jacobian, other.jacobian)
        assert np.allclose(other.result.x, [1.0, 1.0, 0.3, 0.6], atol=1e-6)
    # Each round with both kinds of request made one call instead of two.
    assert calls["both"] > 0
    assert (calls["residuals"] + calls["jacobian"] + calls["both"]
            == apart["residuals"] + apart["jacobian"] - calls["both"])


def test_an_error_of_the_merged_call_is_raised_in_lock_step() -> None:
    def both(X, Y):
        raise OptimisationError("engine fault in both")

    starts = np.array([[-1.2, 1.0, 0.9, -0.9], [1.5, -1.5, 0.0, 0.5]])
    box = (np.array([-2.0, -2.0, -1.0, -1.0]), np.array([2.0, 2.0, 1.0, 1.0]))
    with pytest.raises(OptimisationError, match="engine fault in both"):
        polish_many(valley, starts, *box, max_iterations=200, jacobian=valley_jacobian,
                    both=both)


def test_the_polish_returns_the_jacobian_at_its_best_point_without_recomputing_it() -> None:
    counted = Counted(decay)
    fit = polish(counted, np.array([0.9, 0.9]), np.zeros(2), np.ones(2))
    J, r, _ = finite_difference_jacobian(decay, fit.result.x, np.zeros(2), np.ones(2))
    assert np.array_equal(fit.jacobian, J) and np.array_equal(fit.residuals, r)
    # Every point evaluated is counted, and scipy's last Jacobian (at the best point) is reused.
    assert fit.result.nfev == counted.points


def test_an_error_of_the_residuals_in_lock_step_is_raised_and_no_start_is_left_waiting() -> None:
    with pytest.raises(OptimisationError, match="engine fault"):
        polish_many(Counted(decay, fail_at=4), STARTS, np.zeros(2), np.ones(2))
    for thread in threading.enumerate():
        if thread.name.startswith("polish-"):
            thread.join(timeout=30.0)
            assert not thread.is_alive()


def test_ctrl_c_stops_every_lock_step_start_at_its_best_point_so_far(monkeypatch) -> None:
    from bemore.optimize.polish import LockStep

    counted = Counted(decay, interrupt_at=4)
    interrupt = LockStep.interrupt

    def observed(self: LockStep) -> None:
        interrupt(self)
        counted.interrupted.set()

    monkeypatch.setattr(LockStep, "interrupt", observed)
    fits = polish_many(counted, STARTS, np.zeros(2), np.ones(2))
    assert [fit.result.status for fit in fits] == [1, 1, 1]
    for fit, start in zip(fits, STARTS, strict=True):
        cost_at_start = float(np.sum(decay(start[None, :])[0] ** 2))
        assert fit.result.fun <= cost_at_start
        # The returned residuals and Jacobian are at the returned point.
        J, r, _ = finite_difference_jacobian(decay, fit.result.x, np.zeros(2), np.ones(2))
        assert np.array_equal(fit.residuals, r) and np.array_equal(fit.jacobian, J)


def test_a_ctrl_c_after_every_starts_last_request_is_not_lost(monkeypatch) -> None:
    """Ctrl-C while every start is past its last engine call (nothing left for the lock step to
    stop): each start keeps its end point, and reports itself stopped (status 1), so that the
    identification says it was interrupted instead of carrying on as if nothing happened."""
    import _thread

    from bemore.optimize.polish import LockStep

    finish = LockStep.finish
    taken = threading.Event()
    interrupt = LockStep.interrupt

    def observed(self: LockStep) -> None:
        interrupt(self)
        taken.set()

    took = []

    def last_finish_interrupts(self: LockStep) -> None:
        try:
            if self._active == 1:  # the last start has made its last request
                _thread.interrupt_main()
                # The main thread takes it before this start ends.
                took.append(taken.wait(timeout=30.0))
        finally:
            finish(self)

    monkeypatch.setattr(LockStep, "interrupt", observed)
    monkeypatch.setattr(LockStep, "finish", last_finish_interrupts)
    fits = polish_many(decay, STARTS, np.zeros(2), np.ones(2))
    assert took == [True]
    assert [fit.result.status for fit in fits] == [1, 1, 1]
    alone = [polish(decay, start, np.zeros(2), np.ones(2)) for start in STARTS]
    for fit, own in zip(fits, alone, strict=True):
        assert own.result.status != 1
        assert np.array_equal(fit.result.x, own.result.x)  # it ended where it ends alone
