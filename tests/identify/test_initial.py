"""The trial's initial state as nuisance unknowns (bemore.identify.initial), on the sample file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from bemore.identify.identifiability import analyse
from bemore.identify.initial import (
    ANGLE,
    RATE,
    REST_X,
    REST_Y,
    StartState,
    oracle_motion,
    spring_equilibrium,
)
from bemore.identify.problem import IdentificationProblem
from bemore.identify.space import ParameterSpace
from bemore.model import load_model
from bemore.paths import data_dir
from bemore.settings import InitialState, load_gymnast, load_identification
from bemore.trial import prepare_trial

SAMPLE = data_dir() / "sample_trial.c3d"
TRUTH = json.loads((data_dir() / "sample_trial.truth.json").read_text())


@pytest.fixture(scope="module")
def trial():
    return prepare_trial(SAMPLE)


@pytest.fixture(scope="module")
def problem(trial) -> IdentificationProblem:
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    return IdentificationProblem.from_trial(trial, space)


def _truth_points(problem: IdentificationProblem, rates: np.ndarray, offsets=(0.0, 0.0)):
    """Normalised points: the sample's true parameters, the given rates (rad/s) and offsets."""
    space, start = problem.space, problem.start
    parameters = space.to_normalised(np.array([TRUTH["parameters"][n] for n in space.names]))
    nuisance = np.zeros((rates.size, start.dim))
    nuisance[:, start.names.index(RATE)] = (rates - start.lower[0]) / start.width[0]
    if ANGLE in start.names:
        nuisance[:, start.names.index(ANGLE)] = 0.5  # the prepared start angle
    for name, value in zip((REST_X, REST_Y), offsets, strict=True):
        k = start.names.index(name)
        nuisance[:, k] = (value - start.lower[k]) / start.width[k]
    return np.hstack([np.repeat(parameters[None], rates.size, axis=0), nuisance])


def test_two_chord_steps_give_model_equilibrium(trial) -> None:
    """The batched chord-Newton equilibrium, on accelerations read from one 10 µs engine
    step, agrees with model.equilibrium (Newton to 1e-10 m/s² on model.hybrid) within 1 µm
    over members spread across the box (measured 0.09 µm over 200), and leaves the springs
    unaccelerated."""
    model = load_model("real_gymnast")
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    X = np.random.default_rng(5).uniform(0.0, 1.0, (16, space.dim))
    P = model.parameter_matrix([{}] * 16)
    P[:, [model.parameter_names.index(n) for n in space.names]] = space.to_physical(X)
    q, qd, qdd = trial.driven.q[0], trial.driven.qd[0], trial.driven.qdd[0]
    reference = model.equilibrium(P, q, free_q=trial.free_q0, driven_qd0=qd, driven_qdd0=qdd)
    fast = spring_equilibrium(model, P, trial.free_q0, oracle_motion(q, qd, qdd))
    assert np.abs(fast - reference).max() < 1e-6
    deflection = np.abs(fast[:, [0, 1, 3, 4]]).max(axis=1)
    assert deflection.min() > 1e-3  # millimetres of deflection: the test is not trivial
    springs = [0, 1, 3, 4]
    acc, _ = model.hybrid(P, fast, np.zeros_like(fast), q, qd, qdd)
    at_rest = fast.copy()
    at_rest[:, springs] = 0.0
    unbalanced, _ = model.hybrid(P, at_rest, np.zeros_like(fast), q, qd, qdd)
    # Less than 1/1000 of the unbalanced load's acceleration (m/s²) is left.
    assert np.abs(acc[:, springs]).max() < 1e-3 * np.abs(unbalanced[:, springs]).max()


def test_each_member_starts_at_the_seen_bar_with_its_own_rest(problem, trial) -> None:
    """The bar starts where the markers see it; the rest sits one equilibrium deflection away,
    so a bar twice as stiff vertically rests half as far (deflection ∝ 1/k)."""
    model, start = problem.model, problem.start
    k_y = model.parameter_names.index("bar.stiffness_y")
    P = model.parameter_matrix([TRUTH["parameters"]] * 2)
    P[1, k_y] *= 2.0
    X = np.full((2, start.dim), 0.5)  # prepared rate, no offsets
    P1, q0, qd0, equilibrium = start.start(model, P, X)
    rest = P1[:, [model.parameter_names.index(n) for n in ("bar.rest_x", "bar.rest_y")]]
    assert q0[:, :2] == pytest.approx(np.repeat(trial.free_q0[None, :2], 2, axis=0))
    assert rest == pytest.approx(trial.free_q0[None, :2] - equilibrium[:, :2])
    assert 0.008 < rest[0, 1] < 0.020  # the loaded bar is 8–20 mm below its rest
    assert rest[0, 1] / rest[1, 1] == pytest.approx(2.0, rel=0.05)
    assert q0[:, 3:] == pytest.approx(equilibrium[:, 3:])
    assert qd0[:, 2] == pytest.approx([trial.free_qd0[2]] * 2)
    # The sample's truth: the generator started the springs at model.equilibrium with the TRUE
    # driven accelerations; the prepared ones put the vertical rest within 2.5 mm of it.
    # truth.json: the bar starts at initial_bar_displacement_m from its rest.
    true_rest = trial.free_q0[:2] - np.array(TRUTH["initial_bar_displacement_m"])
    assert np.abs(rest[0] - true_rest).max() < 2.5e-3  # measured: 0.2 mm in x, 1.8 mm in y


def test_box_is_the_prepared_rate_plus_minus_the_margin(trial) -> None:
    settings = InitialState(rate_margin_rad_per_s=0.2, bar_rest_margin_m=0.0, angle_margin_rad=0.0,
                            shoulder_start="seen")
    start = StartState.from_trial(trial, settings)
    assert start.names == (RATE,)  # no rest offsets with a zero margin
    assert start.lower == pytest.approx([trial.free_qd0[2] - 0.2])
    assert start.upper == pytest.approx([trial.free_qd0[2] + 0.2])
    model = load_model("real_gymnast")
    _, q0, qd0, _ = start.start(model, model.parameter_matrix([{}]), np.array([[1.0]]))
    assert q0[0, 3:] == pytest.approx(trial.free_seen[0, 3:])  # shoulder_start = "seen"
    assert qd0[0, 2] == pytest.approx(trial.free_qd0[2] + 0.2)


def test_truth_with_the_fitted_rate_reproduces_the_file(problem) -> None:
    """The sample's true parameters, started as bemore starts them (no rest offset, the
    prepared start angle), on the body the trial's markers show (segment lengths measured to
    ±0.2 mm), meet the prepared joint centres within 4 mm RMS at the best rate of a 5 mrad scan
    (measured 3.31 mm; 2.54 mm with the table's exact lengths); at the prepared rate
    (1.362 rad/s) the miss is more than 10× that: the rate must be fitted."""
    rates = np.r_[np.arange(1.40, 1.5401, 0.005), problem.start.free_qd0[2]]
    residuals = problem.residuals(_truth_points(problem, rates))
    rms = np.sqrt(np.mean(residuals**2, axis=1) * 2)  # RMS distance (2 coordinates)
    best = int(np.argmin(rms[:-1]))
    assert rms[best] < 4e-3
    assert 0 < best < rates.size - 2  # a minimum inside the scan
    assert rms[-1] > 10 * rms[best]


def test_problem_appends_the_nuisance_unknowns(problem) -> None:
    assert problem.dim == 17  # 13 parameters, rate, angle, two bar rest offsets
    assert problem.names[13:] == [RATE, ANGLE, REST_X, REST_Y]
    costs = problem.evaluate(np.full((3, problem.dim), 0.5))
    assert np.all(np.isfinite(costs)) and np.ptp(costs) == 0.0
    record = problem.start_record(np.full(problem.dim, 0.5))
    assert record["unknowns"][RATE]["value"] == pytest.approx(problem.start.free_qd0[2])
    assert record["unknowns"][ANGLE]["value"] == pytest.approx(problem.start.free_q0[2])
    assert record["unknowns"][REST_Y]["value"] == pytest.approx(0.0, abs=1e-15)


def test_nuisance_columns_neither_flagged_nor_setting_the_floor() -> None:
    """The near-critical rate is far more sensitive than any parameter: the parameters'
    insensitivity floor is 1 % of the most sensitive PARAMETER, not of the rate."""
    rng = np.random.default_rng(0)
    J = rng.normal(size=(400, 3)) * np.array([0.01, 0.0002, 5.0])  # a, b, then the rate
    r = rng.normal(scale=1e-3, size=400)
    result = analyse(J, r, ["a", "b", RATE], np.array([1.0, 1.0, 1.2]), np.ones(3), nuisance=1)
    assert result.nuisance == [RATE]
    # b: 2 % of a's sensitivity (0.004 % of the rate's): not insensitive.
    assert not any("insensitive" in reason for reason in result.parameters[1].reasons)
    assert RATE not in result.flagged
