"""Exact design gradients of the synthesis: against central differences, and in the solver.

The reference is Richardson's extrapolation R(h) = (4·D(h/2) − D(h))/3 of central differences D
of the problem's own evaluation (fourth order in h). Its error is estimated by how much it moves
when the step halves, |R(h) − R(h/2)|, and the tests assert that estimate is below a tenth of
the tolerance before comparing: an agreement within the tolerance then says the exact
derivatives are right, not that the reference is loose. Relative errors are per derivative,
against the largest magnitude of that derivative over the designs checked.
"""

from __future__ import annotations

import numpy as np
import pytest

from bemore.model import exemplary_parameters, load_model
from bemore.settings import load_identification, load_synthesis
from bemore.synthesis.athlete import default_parameters
from bemore.synthesis.gesture import gesture_design_derivatives, gesture_kinematics
from bemore.synthesis.problem import GestureProblem
from bemore.synthesis.solve import Normaliser
from bemore.synthesis.synthesize import POLISH_TOLERANCE, SynthesisOptions, synthesize

TOLERANCE = 1e-5
# Designs across the box (t_f s, t_flexmax s, φ_max rad), none with its extension phase
# pulled back (t_f − t_flexmax ≥ 0.05 s), with t_f between grid samples.
DESIGNS = np.array([
    [3.0, 2.0, np.deg2rad(140.0)],
    [3.3031, 1.7, np.deg2rad(150.0)],
    [2.4127, 0.9, np.deg2rad(170.0)],
    [3.55, 2.9, np.deg2rad(115.0)],
])


def _richardson(function, x: np.ndarray, i: int, h: float) -> tuple[np.ndarray, np.ndarray]:
    """(R(h/2), |R(h) − R(h/2)|) of ``function`` along coordinate i of the designs x."""

    def central(step: float) -> np.ndarray:
        up, down = x.copy(), x.copy()
        up[:, i] += step
        down[:, i] -= step
        return (function(up) - function(down)) / (2.0 * step)

    d = [central(h / 2**k) for k in range(3)]
    r = [(4.0 * d[k + 1] - d[k]) / 3.0 for k in range(2)]
    return r[1], np.abs(r[0] - r[1])


def _check(exact: np.ndarray, reference: np.ndarray, error: np.ndarray, label: str) -> None:
    scale = np.abs(reference).max()
    assert error.max() <= 0.1 * TOLERANCE * scale, f"{label}: reference error {error.max()}"
    assert np.abs(exact - reference).max() <= TOLERANCE * scale, (
        f"{label}: {np.abs(exact - reference).max() / scale:.2e} relative")


def test_gesture_design_derivatives_match_differences() -> None:
    t = np.linspace(0.0, 4.0, 1601) + 0.0013
    x = np.array([[3.1, 1.9, 2.3, 0.45, 0.55]])
    exact = gesture_design_derivatives(t, *x[0])[:, :, 0]
    for i in range(3):
        for order in range(3):
            def one(X, order=order):
                return np.stack([gesture_kinematics(t, *row)[order, 0] for row in X])

            reference, error = _richardson(one, x, i, 1e-3)
            _check(exact[order, i][None], reference, error, f"order {order}, variable {i}")


@pytest.fixture(scope="module")
def problems():
    model = load_model("exemplary_gymnast")
    P = model.parameter_matrix([exemplary_parameters()])
    return {objective: GestureProblem(model, P, load_synthesis(), objective, step_s=0.009,
                                      torque_limit_nm=150.0)
            for objective in ("abs_torque_integral", "squared_torque_integral", "peak_torque")}


@pytest.mark.parametrize("objective", ["abs_torque_integral", "squared_torque_integral",
                                       "peak_torque"])
def test_problem_jacobian_matches_differences(problems, objective) -> None:
    problem = problems[objective]
    f, c, df, dc = problem.evaluate_jacobian(DESIGNS)
    f_plain, c_plain = problem.evaluate(DESIGNS)
    # The values are those of the plain evaluation, bit for bit (same kernel arithmetic).
    assert np.array_equal(f, f_plain) and np.array_equal(c, c_plain)
    assert np.array_equal(dc[:, 0], np.tile([1.0, -1.0, 0.0], (len(DESIGNS), 1)))
    for i in range(3):
        reference, error = _richardson(lambda X: problem.evaluate(X)[0], DESIGNS, i, 1e-4)
        _check(df[:, i], reference, error, f"{objective}, variable {i}")
        for j in (1, 2):  # rotation at t_f, peak torque per shoulder
            reference, error = _richardson(lambda X, j=j: problem.evaluate(X)[1][:, j],
                                           DESIGNS, i, 1e-4)
            _check(dc[:, j, i], reference, error, f"constraint {j}, variable {i}")


def test_exact_gradients_same_gesture_with_half_the_evaluations() -> None:
    identification = load_identification()
    runs = {
        gradients: synthesize(default_parameters(identification), load_synthesis(),
                              SynthesisOptions(gradients=gradients))
        for gradients in ("finite-difference", "exact")
    }
    fd, exact = (runs[g][0].optimisation for g in ("finite-difference", "exact"))
    assert fd.success and exact.success
    assert exact.nfev <= fd.nfev / 2, (exact.nfev, fd.nfev)
    # The polish stops when SLSQP's scaled objective (≈ 1 at the start) changes by less than
    # POLISH_TOLERANCE: both ends agree on the objective to a few of those, and on the design
    # (normalised to the box) to a few √POLISH_TOLERANCE (a minimum's flat directions).
    assert abs(exact.fun - fd.fun) <= 10 * POLISH_TOLERANCE * abs(fd.fun)
    problem = runs["exact"][1]
    box = Normaliser(problem.lower, problem.upper)
    moved = np.abs(box.normalised(np.array(exact.x)) - box.normalised(np.array(fd.x))).max()
    assert moved <= 10 * np.sqrt(POLISH_TOLERANCE)


def test_the_command_takes_exact_gradients_and_refuses_them_where_there_are_none(tmp_path):
    """``bemore synthesize --gradients exact``: the same gesture as the default run with fewer
    than half its evaluations, recorded in gesture.json; with ``--free-midpoints`` (no exact
    derivatives) one line and exit code 1, not a traceback."""
    import json

    from click.testing import CliRunner

    from bemore.cli import cli

    runner = CliRunner()
    reports = {}
    for gradients in ("finite-difference", "exact"):
        out = tmp_path / gradients
        result = runner.invoke(cli, ["synthesize", "--gradients", gradients, "--no-animation",
                                     "--out", str(out)])
        assert result.exit_code == 0, result.output
        reports[gradients] = json.loads((out / "gesture.json").read_text())
    fd, exact = reports["finite-difference"], reports["exact"]
    assert exact["inputs"]["gradients"] == "exact"
    assert fd["inputs"]["gradients"] == "finite-difference"
    assert exact["optimisation"]["nfev"] <= fd["optimisation"]["nfev"] / 2
    assert abs(exact["objective_value"] - fd["objective_value"]) <= (
        10 * POLISH_TOLERANCE * abs(fd["objective_value"]))
    refused = runner.invoke(cli, ["synthesize", "--gradients", "exact", "--free-midpoints",
                                  "--no-animation", "--out", str(tmp_path / "free")])
    assert refused.exit_code != 0
    assert "Traceback" not in refused.output
    assert "exact gradients are not available" in refused.output
