"""The plain-Python frame kinematics (bemore/model/kinematics.py): equal to the compiled
dynamics, and the static effort equal to the inverse dynamics at rest."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from bemore.model import dynamics, exemplary_parameters, kinematics, load_model


def _states(model, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    qf = rng.uniform(-0.05, 0.05, (count, model.n_free))
    qf[:, 2] = rng.uniform(-np.pi, np.pi, count)  # the rotation about the bar, any angle
    qd = rng.uniform(-0.6, 2.6, (count, model.n_driven))
    for name in ("forearm_length", "upper_arm_length"):
        if name in model.driven_coordinates:
            qd[:, model.driven_coordinates.index(name)] = rng.uniform(0.2, 0.3, count)
    return qf, qd


@pytest.mark.parametrize("name", ["real_gymnast", "exemplary_gymnast"])
def test_plain_kinematics_equal_the_compiled_ones_bit_for_bit(name: str) -> None:
    model = load_model(name)
    V, _ = model.fields(model.parameter_matrix([{}]))
    qf, qd = _states(model, 5, seed=1)
    for row in range(qf.shape[0]):
        zero_f, zero_d = np.zeros(model.n_free), np.zeros(model.n_driven)
        compiled = dynamics.workspace(model.tree)
        dynamics.prepare(model._T, V[0], qf[row], zero_f, qd[row], zero_d, zero_d, compiled)
        plain = kinematics.workspace(model.tree)
        kinematics.load_coordinates(model._T, qf[row], zero_f, qd[row], zero_d, zero_d, plain)
        kinematics.driven_angles(model._T, qd[row], plain)
        kinematics.positions(model._T, V[0], plain)
        rows = [kinematics.OX, kinematics.OY, kinematics.CA, kinematics.SA]
        np.testing.assert_array_equal(plain[rows], compiled[rows])
        # the vectorised placements: the same recursion over many samples
        ox, oy, ca, sa = kinematics.placements(model._T, V[0], qf[row:row + 1], qd[row:row + 1])
        np.testing.assert_allclose(np.stack([ox[:, 0], oy[:, 0], ca[:, 0], sa[:, 0]]),
                                   compiled[rows, : ox.shape[0]], rtol=0, atol=1e-14)


@pytest.mark.parametrize("name", ["real_gymnast", "exemplary_gymnast"])
def test_static_effort_is_the_inverse_dynamics_at_rest(name: str) -> None:
    model = load_model(name)
    values = exemplary_parameters() if name == "exemplary_gymnast" else {}
    P = model.parameter_matrix([values])
    V, _ = model.fields(P)
    qf, qd = _states(model, 30, seed=2)
    for coordinate in range(model.n_driven):
        mine = kinematics.static_driven_effort(model._T, V[0], qf, qd, coordinate)
        reference = []
        for row in range(qf.shape[0]):
            q = np.r_[qf[row], qd[row]]
            _, tau = model.mass_matrix_and_inverse_dynamics(P, q, q * 0, q * 0)
            reference.append(tau[model.n_free + coordinate])
        reference = np.array(reference)
        assert np.abs(reference).max() > 0.5  # gravity loads every coordinate somewhere
        np.testing.assert_allclose(mine, reference, rtol=0, atol=1e-9 * np.abs(reference).max())


def test_the_exemplary_lumping_loads_no_numba() -> None:
    code = ("import sys; from bemore.model import exemplary_parameters; "
            "exemplary_parameters(); print('numba' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "False"
