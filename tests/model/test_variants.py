"""Kernel variants of the generated engine: which code each one holds, the cost of any choice of
points, the two-sample step against its own one-sample run."""

from __future__ import annotations

import re

import numpy as np

from bemore.model import joint_centre_cost, simulate
from bemore.model.generated import generate_program


def _function(source: str, name: str) -> str:
    start = source.index(f"def {name}(")
    end = source.find("\n@njit", start)
    return source[start:] if end < 0 else source[start:end]


def test_efforts_code_only_in_the_efforts_variants(real):
    source = generate_program(real.tree, len(real.point_names), (0, 1)).source
    for name in ("integrate_shared", "integrate_members"):
        plain, efforts = _function(source, name), _function(source, name + "_efforts")
        assert "out_eff[" not in plain
        assert "out_eff[" in efforts
        # The efforts are a real block (hybrid dynamics then inverse dynamics): far more code.
        assert len(efforts.splitlines()) > len(plain.splitlines()) + 500
        # ROS34PW2's stages 1-3 are one generic stage in a loop, not three copies.
        assert plain.count("for st in range(1, 4):") == 1
        # one store of the stage increment (the new state reads it too)
        assert len(re.findall(r"UN\[9, b_\d+\] = ", plain)) == 1
        assert plain.count("U[st, 9, b] = UN[9, b]") == 1


def test_cost_of_any_points_equals_the_stored_points(real, start):
    from bemore.model.profiles import clear_hip_circle_profile

    motion = clear_hip_circle_profile(0.2)
    q0, v0 = start
    P = real.parameter_matrix([{}, {"bar.stiffness_y": 9000.0}])
    sim = simulate(real, P, motion, q0, v0, outputs=("points",))
    names = ("toe", "bar", "head_top")  # not the identification's seven: a module of its own
    rows = [real.point_names.index(n) for n in names]
    measured = np.zeros((len(motion.t), 3, 2))
    measured[:, :, 0] = 0.5
    measured[:, :, 1] = -0.25
    measured[50:60, 1] = np.nan  # missing: skipped
    cost = joint_centre_cost(real, P, motion, q0, v0, measured, names=names)
    diff = sim.points[:, :, rows] - measured[None]
    expected = np.nansum(np.sum(diff**2, axis=-1), axis=(1, 2))
    assert np.all(expected > 1.0)  # metres off at each of 201 frames: a real sum
    np.testing.assert_allclose(cost, expected, rtol=1e-12)


def test_two_sample_steps_within_a_tenth_of_a_millimetre_in_the_box(real, motion, start):
    """Against one-sample steps over the 1.52 s profile, at the seed's parameters (measured
    0.046 mm) and at a stiff corner of the box (largest stiffnesses, smallest dampings:
    0.015 mm)."""
    q0, v0 = start
    P = real.parameter_matrix([{}, {"bar.stiffness_x": 50000.0, "bar.stiffness_y": 50000.0,
                                    "shoulder.stiffness_ap": 50000.0,
                                    "shoulder.stiffness_pd": 50000.0, "bar.damping_x": 10.0,
                                    "shoulder.damping_pd": 10.0}])
    fine = simulate(real, P, motion, q0, v0, outputs=("points",))
    coarse = simulate(real, P, motion, q0, v0, outputs=("points",), samples_per_step=2)
    error = np.linalg.norm(coarse.points - fine.points, axis=-1).max(axis=(1, 2))
    assert np.all(error < 1e-4), error
    assert np.all(error > 1e-7)  # a different integration, not the same numbers


def test_results_do_not_depend_on_the_number_of_threads(real, motion, start):
    """Each thread integrates its own lanes in arrays of its own: the split must not change a
    single bit of any member's states, points, cost or validity (one invalid member included)."""
    q0, v0 = start
    # 35 members: 4 whole vectors, so that 2, 3 and 4 threads each get a group of their own.
    P = real.parameter_matrix([{}, {"bar.stiffness_x": 5000.0}, {"trunk.mass": 27.5},
                               {"shoulder.damping_ap": 50000.0}, {"trunk.com": 0.25}] * 7)
    outputs = ("free_q", "free_qd", "points")
    alone = simulate(real, P, motion, q0, v0, outputs=outputs, threads=1)
    measured = alone.points[0][:, [0, 1, 2, 4, 5, 6, 7]] + 0.01
    cost_alone = simulate(real, P, motion, q0, v0, outputs=(), measured=measured, threads=1,
                          samples_per_step=2)
    assert alone.valid.tolist().count(False) == 7
    for threads in (2, 3, 4):
        split = simulate(real, P, motion, q0, v0, outputs=outputs, threads=threads)
        for name in ("free_q", "free_qd", "points"):
            assert np.array_equal(getattr(split, name), getattr(alone, name), equal_nan=True)
        assert np.array_equal(split.valid, alone.valid)
        cost = simulate(real, P, motion, q0, v0, outputs=(), measured=measured, threads=threads,
                        samples_per_step=2)
        assert np.array_equal(cost.cost, cost_alone.cost, equal_nan=True)
