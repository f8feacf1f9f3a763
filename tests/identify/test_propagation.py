"""The marker noise propagated through the trial chain gives the spread the estimates really have.

Two checks against what is known without the program: on a linear model the least-squares
responses of white-noise residual changes have the textbook covariance σ²(JᵀJ)⁻¹; and on one
synthetic trial, fitted again on several independent noise draws (each written as a C3D, read
back through the whole chain and polished from the truth), the spread of the estimates over the
draws is the propagated standard error within the spread's own sampling error.
"""

from __future__ import annotations

import numpy as np
import pytest

from bemore.identify.identifiability import analyse
from bemore.identify.problem import IdentificationProblem
from bemore.identify.propagation import propagated_noise, response_covariance
from bemore.identify.run import _values_and_widths
from bemore.identify.space import ParameterSpace
from bemore.optimize.polish import polish_many
from bemore.settings import load_gymnast, load_identification
from bemore.trial import prepare_trial
from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial


def test_linear_responses_have_the_textbook_covariance() -> None:
    rng = np.random.default_rng(3)
    J = rng.normal(size=(200, 3)) * [0.02, 0.005, 0.001]
    sigma, draws = 0.001, 4000
    changes = rng.normal(0.0, sigma, (draws, 200))
    expected = sigma**2 * np.linalg.inv(J.T @ J)
    measured = response_covariance(changes, J)
    # A sample variance's relative standard error is √(2/(K − 1)) (2.2 % here): within 4 of it.
    relative = np.diag(measured) / np.diag(expected) - 1.0
    assert np.all(np.abs(relative) < 4.0 * np.sqrt(2.0 / (draws - 1))), relative
    correlation = measured / np.sqrt(np.outer(np.diag(measured), np.diag(measured)))
    truth = expected / np.sqrt(np.outer(np.diag(expected), np.diag(expected)))
    assert np.abs(correlation - truth).max() < 0.1


DRAWS = 8  # independent noise draws of the same trial


@pytest.fixture(scope="module")
def draws(tmp_path_factory):
    """Per draw: the polished estimates (SI) and the propagated and sandwich standard errors
    (SI) of the identified parameters; and their names."""
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    folder = tmp_path_factory.mktemp("draws")
    estimates, propagated, sandwich = [], [], []
    for draw in range(DRAWS):
        spec = SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=100 + draw)
        path, _, truth = write_synthetic_trial(spec, folder / f"draw{draw}.c3d")
        problem = IdentificationProblem.from_trial(prepare_trial(path), space)
        true_x = space.to_normalised(np.array([[truth.parameters[n] for n in space.names]]))[0]
        start = np.r_[true_x, np.full(problem.dim - space.dim, 0.5)]
        fit = polish_many(problem.residuals, start[None], problem.lower, problem.upper,
                          max_iterations=30, jacobian=problem.jacobian)[0]
        x = fit.result.x
        residuals, jacobian = (a[0] for a in problem.jacobian(x[None]))
        values, widths = _values_and_widths(problem, x)
        result = analyse(jacobian, residuals, problem.names, values, widths,
                         nuisance=problem.dim - space.dim, frames=problem.measured.shape[0],
                         noise=propagated_noise(problem, x, jacobian))
        rows = result.parameters[: space.dim]
        estimates.append(values[: space.dim])
        propagated.append([row.standard_error_noise for row in rows])
        sandwich.append([row.standard_error_residuals for row in rows])
    return np.array(estimates), np.array(propagated), np.array(sandwich), space.names


def test_the_spread_over_noise_draws_is_the_propagated_standard_error(draws) -> None:
    estimates, propagated, _, names = draws
    spread = estimates.std(axis=0, ddof=1)
    predicted = np.median(propagated, axis=0)
    ratio = (spread / predicted) ** 2
    # One parameter's variance ratio has a relative standard error of √(2/(n − 1)) (0.53 for
    # 8 draws); pooled over the 13 parameters (correlated, so fewer than 13 independent ones)
    # it must be 1 within about three of the pooled error.
    pooled = float(np.mean(ratio))
    assert 0.45 < pooled < 1.8, dict(zip(names, np.round(np.sqrt(ratio), 2), strict=True))
    # No single parameter is off by more than a single variance ratio can be by chance.
    assert np.all((ratio > 0.15) & (ratio < 4.0)), dict(zip(names, np.round(ratio, 2),
                                                            strict=True))


def _at_truth(side: str, folder):
    """(problem, x at the truth, residuals, Jacobian) of a synthetic trial with the acromions
    on ``side`` (declared so)."""
    from bemore.trial.markerset import load_markerset

    markerset = None
    if side == "trunk":
        markerset = load_markerset()
        markerset = markerset.model_copy(update={"conventions": markerset.conventions.model_copy(
            update={"acromion_side": "trunk"})})
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    spec = SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=4, acromion_side=side)
    path, _, truth = write_synthetic_trial(spec, folder / f"{side}.c3d")
    problem = IdentificationProblem.from_trial(prepare_trial(path, markerset), space)
    true_x = space.to_normalised(np.array([[truth.parameters[n] for n in space.names]]))[0]
    x = np.r_[true_x, np.full(problem.dim - space.dim, 0.5)]
    residuals, jacobian = (a[0] for a in problem.jacobian(x[None]))
    return problem, x, residuals, jacobian


def test_the_recipes_form_counts_on_the_trunk_side_only(tmp_path, monkeypatch) -> None:
    from bemore.identify import propagation

    problem, x, residuals, jacobian = _at_truth("arm", tmp_path)
    arm = propagated_noise(problem, x, jacobian, realisations=3)
    assert arm.recipe_change is None and arm.recipe_covariance is None
    values, widths = _values_and_widths(problem, x)
    rows = analyse(jacobian, residuals, problem.names, values, widths,
                   frames=problem.measured.shape[0], noise=arm).parameters
    assert all(row.standard_error_recipe is None for row in rows)

    problem, x, residuals, jacobian = _at_truth("trunk", tmp_path)
    trunk = propagated_noise(problem, x, jacobian, realisations=3)
    change = trunk.recipe_change
    assert change.shape == residuals.shape and np.isfinite(change).all()
    assert np.sqrt(np.mean(change**2)) > 1e-6  # m: the two forms' arm ends differ
    # Its covariance is the least-squares response's outer product (solved independently) as
    # a rectangular distribution's half-width: variance a²/3.
    response = np.linalg.lstsq(jacobian, -change, rcond=None)[0]
    assert np.allclose(3.0 * trunk.recipe_covariance, np.outer(response, response),
                       rtol=1e-6, atol=1e-12 * np.abs(response).max() ** 2)
    values, widths = _values_and_widths(problem, x)
    rows = analyse(jacobian, residuals, problem.names, values, widths,
                   frames=problem.measured.shape[0], noise=trunk).parameters
    for row, step, width in zip(rows, response, widths, strict=True):
        assert row.standard_error_recipe == pytest.approx(abs(step) * width / np.sqrt(3.0),
                                                          rel=1e-6)
        # (+ the body mass's part: this trial's body is the table's total, ± 20 % of it; the
        # segment table's and the markers' slide on the skin)
        assert row.standard_error**2 == pytest.approx(
            row.standard_error_noise**2 + row.standard_error_model**2
            + row.standard_error_recipe**2 + row.standard_error_body_mass**2
            + row.standard_error_segment_table**2 + row.standard_error_soft_tissue**2,
            rel=1e-9)
    assert max(row.standard_error_recipe / row.standard_error for row in rows) > 0.01
    # Linearised at 1 % of the step, it is the whole step's residual change to first order:
    # the chain and the simulation run with the arm end entirely on the other form.
    monkeypatch.setattr(propagation, "LINEAR_FRACTION", 1.0)
    whole = propagated_noise(problem, x, jacobian, realisations=3).recipe_change
    assert np.linalg.norm(whole - change) < 0.2 * np.linalg.norm(change)


@pytest.mark.slow
def test_the_body_mass_term_is_the_shift_a_wrong_body_mass_makes(tmp_path) -> None:
    # A trial with bar forces (seed 1, 1 mm, 2 %), the fit given the table's total with a
    # 0.2 kg uncertainty: the response the propagation states for a body mass one SD heavy
    # (δx_M, through the chain-noise weighting the fit used) against what a polish actually
    # does when the body mass given is 0.1 kg heavier, from the same optimum.
    from bemore.identify.chain_noise import chain_noise_weighting
    from bemore.identify.propagation import body_mass_change
    from bemore.identify.run import _weighted
    from bemore.model.body import table_mass_kg
    from tests.identify.test_forces import _prepared, calibrated_forces

    trial, truth = _prepared(1, tmp_path)
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    mass = table_mass_kg(load_gymnast().segments)
    # The channels' offsets not fitted (a calibrated lab): with them fitted a constant force
    # (the body's weight) moves nothing.
    problems = [IdentificationProblem.from_trial(
        trial, space, forces=calibrated_forces(), body_mass_kg=mass + extra,
        body_mass_uncertainty_kg=0.2) for extra in (0.0, 0.1)]
    x0 = np.r_[space.to_normalised(np.array([truth.parameters[n] for n in space.names])),
               np.full(problems[0].dim - space.dim, 0.5)]
    weighting = chain_noise_weighting(problems[0], x0)
    ends = []
    start = x0
    for problem in problems:
        residuals, jacobian = _weighted(problem, weighting)
        fit = polish_many(residuals, start[None, :], problem.lower, problem.upper,
                          max_iterations=40, jacobian=jacobian)[0]
        ends.append(fit.result.x)
        start = fit.result.x  # the heavier body's polish starts at the first one's optimum
    x = ends[0]
    _, J = problems[0].jacobian(x[None, :])
    WJ = weighting.apply_jacobian(J[0])
    change = weighting.apply(body_mass_change(problems[0], x))
    predicted = -0.5 * (change @ WJ) @ np.linalg.pinv(WJ.T @ WJ)  # 0.1 kg = 0.5 SD
    actual = ends[1] - ends[0]
    widths = space.upper - space.lower
    for name in ("bar.mass", "trunk.mass", "trunk.com"):
        k = list(space.names).index(name)
        # A shift of several standard errors (bar mass ≈ 0.13 kg), linear to within 15 %.
        assert abs(actual[k] * widths[k]) > 0.005 * abs(truth.parameters[name]), name
        assert predicted[k] == pytest.approx(actual[k], rel=0.15), (name, predicted[k], actual[k])
