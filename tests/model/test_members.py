"""Per-member driven motions and driven efforts in the generated kernel.

The reference kernel (``kernels.py``, readable loops) is the oracle: the generated kernel's
efforts agree with it, and a batch of members that each follow their own motion gives what each
member gives alone.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from bemore.errors import DataError, ModelError
from bemore.model import DrivenMotion, Model, joint_centre_cost, simulate, straight_posture
from bemore.model.description import parse_description
from bemore.model.gymnasts import model_path
from bemore.model.profiles import HANDSTAND_HAND_ROTATION, shoulder_flexion_profile

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the tomli backport (declared for python_version < 3.11)
    import tomli as tomllib


def _relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.fixture(scope="module")
def gestures():
    """Three shoulder gestures of 2.4 s with different peak flexions (rad), one per member."""
    peaks = (2.2, 2.6, 2.79)
    motions = [shoulder_flexion_profile(2.4, peak) for peak in peaks]
    t = motions[0].t
    stacked = DrivenMotion(t, np.stack([m.q for m in motions]), np.stack([m.qd for m in motions]),
                           np.stack([m.qdd for m in motions]))
    return motions, stacked


@pytest.fixture(scope="module")
def ex_start(exemplary):
    P = exemplary.parameter_matrix([{}])
    free = np.zeros(exemplary.n_free)
    free[2] = HANDSTAND_HAND_ROTATION
    return exemplary.equilibrium(P, [0.0], free_q=free)[0], np.zeros(exemplary.n_free)


def test_generated_efforts_equal_the_reference_kernel_real_gymnast(real, motion, start):
    P = real.parameter_matrix([{}, {"bar.stiffness_x": 5000.0, "shoulder.damping_ap": 50000.0},
                               {"trunk.mass": 20.0}])
    q0, v0 = start
    fast = simulate(real, P, motion, q0, v0, outputs=("efforts", "free_q"), engine="generated")
    ref = simulate(real, P, motion, q0, v0, outputs=("efforts", "free_q"), engine="reference")
    assert fast.valid.all() and ref.valid.all()
    assert _relative(fast.efforts, ref.efforts) < 1e-9
    # Real efforts: the shoulder flexion needs over 100 N·m, the arm lengths hundreds of N.
    flexion = real.driven_coordinates.index("shoulder_flexion")
    assert np.max(np.abs(ref.efforts[:, :, flexion])) > 100.0
    # The efforts are the inverse dynamics of the simulated state (a third, independent path).
    f = 700
    _, tau = real.hybrid(P[:1], fast.free_q[0, f][None], simulate(
        real, P[:1], motion, q0, v0, outputs=("free_qd",)).free_qd[0, f][None],
        motion.q[f][None], motion.qd[f][None], motion.qdd[f][None])
    assert _relative(fast.efforts[0, f], tau[0]) < 1e-9


def test_generated_efforts_equal_the_reference_kernel_exemplary(exemplary, gestures, ex_start):
    motions, _ = gestures
    P = exemplary.parameter_matrix([{}, {"body.mass": 40.0, "shoulder.damping_pd": 10.0}])
    q0, v0 = ex_start
    fast = simulate(exemplary, P, motions[1], q0, v0, outputs=("efforts",))
    ref = simulate(exemplary, P, motions[1], q0, v0, outputs=("efforts",), engine="reference")
    assert _relative(fast.efforts, ref.efforts) < 1e-9
    assert 100.0 < np.max(np.abs(ref.efforts)) < 2000.0  # N·m, both shoulders


def test_per_member_motions_give_what_each_member_gives_alone(exemplary, gestures, ex_start):
    motions, stacked = gestures
    P = exemplary.parameter_matrix([{}, {"bar.stiffness_y": 8000.0}, {"arm.mass": 7.0}])
    q0, v0 = ex_start
    outputs = ("free_q", "free_qd", "efforts", "points")
    batch = simulate(exemplary, P, stacked, q0, v0, outputs=outputs)
    assert batch.valid.all()
    rotations = batch.free_q[:, -1, 2] - q0[2]
    # Different gestures really give different swings (not one motion repeated).
    assert np.min(np.abs(np.diff(rotations))) > 1e-3
    for b, shared in enumerate(motions):
        alone = simulate(exemplary, P[b:b + 1], shared, q0, v0, outputs=outputs)
        for key in outputs:
            np.testing.assert_allclose(getattr(batch, key)[b], getattr(alone, key)[0],
                                       rtol=1e-12, atol=1e-12 * np.max(np.abs(
                                           getattr(alone, key))), err_msg=key)
    reference = simulate(exemplary, P, stacked, q0, v0, outputs=("efforts",), engine="reference")
    assert _relative(batch.efforts, reference.efforts) < 1e-9


def test_per_member_cost_and_substeps(exemplary, gestures, ex_start):
    motions, stacked = gestures
    P = exemplary.parameter_matrix([{}] * 3)
    q0, v0 = ex_start
    names = ("bar", "shoulder", "hip", "toe")
    columns = [exemplary.point_names.index(n) for n in names]
    first = simulate(exemplary, P[:1], motions[0], q0, v0, outputs=("points",), substeps=2)
    measured = first.points[0][:, columns] + 0.01  # 1 cm off in x and y: 2e-4 m² per point
    cost = joint_centre_cost(exemplary, P, stacked, q0, v0, measured, names, substeps=2)
    expected_first = 2e-4 * len(names) * len(motions[0].t)
    assert abs(cost[0] - expected_first) < 1e-9 * expected_first
    assert np.all(cost[1:] > 10 * expected_first)  # the other gestures are far from it


def test_mismatched_members_are_one_clear_error(exemplary, gestures, ex_start):
    _, stacked = gestures
    q0, v0 = ex_start
    with pytest.raises(DataError, match="3 per-member motions but the parameter matrix has 2"):
        simulate(exemplary, exemplary.parameter_matrix([{}] * 2), stacked, q0, v0)
    with pytest.raises(DataError, match=r"qd has shape \(3, 2401, 1\), q has \(2, 2401, 1\)"):
        DrivenMotion(stacked.t, stacked.q[:2], stacked.qd, stacked.qdd)
    bad = stacked.q.copy()
    bad[1, 1200, 0] = np.nan
    with pytest.raises(DataError, match=r"q of member 1 is not finite at t = 1.2000 s"):
        DrivenMotion(stacked.t, bad, stacked.qd, stacked.qdd)


def _real_with_bar_rest() -> Model:
    """The real gymnast with its bar springs' rest fields bound to bar.rest_x / bar.rest_y
    (as the identification's configuration does; added here if the file does not yet)."""
    data = tomllib.loads(model_path("real_gymnast").read_text())
    for axis in ("x", "y"):
        data["parameters"].setdefault(f"bar.rest_{axis}", "0 m")
        data["springs"][f"bar_{axis}"]["rest"] = f"bar.rest_{axis}"
    return Model(parse_description(data, "real_gymnast.toml"))


def test_bar_rest_position_parameters_move_the_equilibrium():
    """Rest positions bound to parameters shift the whole hanging gymnast by the same amount."""
    real = _real_with_bar_rest()
    P = real.parameter_matrix([{}, {"bar.rest_x": 0.01, "bar.rest_y": -0.02}])
    free = np.zeros(real.n_free)
    free[2] = -np.pi / 2  # hanging below the bar
    posture = straight_posture(real)
    q = real.equilibrium(P, posture, free_q=free)
    assert q[1, 0] - q[0, 0] == pytest.approx(0.01, abs=1e-12)
    assert q[1, 1] - q[0, 1] == pytest.approx(-0.02, abs=1e-12)
    t = np.arange(51) / 1000.0
    still = DrivenMotion(t, np.tile(posture, (51, 1)), np.zeros((51, real.n_driven)),
                         np.zeros((51, real.n_driven)))
    sim = simulate(real, P, still, q, np.zeros(real.n_free), outputs=("points",))
    shift = sim.points[1] - sim.points[0]
    assert np.max(np.abs(shift[..., 0] - 0.01)) < 1e-9
    assert np.max(np.abs(shift[..., 1] + 0.02)) < 1e-9


def test_two_sample_steps_need_the_generated_engine_and_no_efforts(exemplary, gestures,
                                                                   ex_start):
    motions, _ = gestures
    q0, v0 = ex_start
    P = exemplary.parameter_matrix([{}])
    with pytest.raises(ModelError, match="samples_per_step = 2 needs substeps = 1"):
        simulate(exemplary, P, motions[0], q0, v0, outputs=("efforts",), samples_per_step=2)
    odd = DrivenMotion(motions[0].t[:-1], motions[0].q[:-1], motions[0].qd[:-1],
                       motions[0].qdd[:-1])
    with pytest.raises(ModelError, match="the motion has 2399"):
        simulate(exemplary, P, odd, q0, v0, outputs=("free_q",), samples_per_step=2)
    fine = simulate(exemplary, P, motions[0], q0, v0, outputs=("free_q", "free_qd"))
    coarse = simulate(exemplary, P, motions[0], q0, v0, outputs=("free_q", "free_qd"),
                      samples_per_step=2)
    # Swing angle within 1e-4 rad (0.06 mm at the shoulder) at every frame, step ends and
    # interpolated frames alike (measured 3.3e-5 rad).
    assert np.max(np.abs(coarse.free_q[0, :, 2] - fine.free_q[0, :, 2])) < 1e-4
    assert np.max(np.abs(coarse.free_qd[0, :, 2] - fine.free_qd[0, :, 2])) < 1e-3
