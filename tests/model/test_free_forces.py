"""The generated kernels' free-coordinate forces on a tree the gymnast models do not have.

A stage of the generated kernels needs only the free coordinates' generalised forces: it sums
the bodies' forces, and their moments about one origin (the first free hinge's), at the free
frames, then moves each moment to its own hinge (``codegen._free_forces``). The gymnasts have
one free hinge, at that origin, so the move is never exercised there. tests/model/data/
two_free_hinges.toml has a second free hinge below a driven one, away from the first, and a
free slider below it: its simulation must agree with the reference kernel (``kernels.py``:
the RNEA frame by frame, every frame's force and moment carried up the tree).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bemore.model import DrivenMotion, load_model, simulate

MODEL = Path(__file__).parent / "data" / "two_free_hinges.toml"


def test_two_free_hinges_agree_with_the_reference_kernel() -> None:
    model = load_model(MODEL)
    t = np.arange(0.0, 1.5 + 1e-9, 0.001)
    omega = 2.0 * np.pi * 1.5  # the driven elbow swings ±0.6 rad at 1.5 Hz
    motion = DrivenMotion(t, 0.6 * np.sin(omega * t), 0.6 * omega * np.cos(omega * t),
                          -0.6 * omega**2 * np.sin(omega * t))
    P = model.parameter_matrix([{}, {"hand.mass": 0.8, "flail.stiffness": 9.0},
                                {"pole.mass": 2.0, "reach.stiffness": 900.0}])
    # Off equilibrium, moving: slide, swing, flail, reach.
    q0 = np.array([0.02, 0.4, -0.3, 0.01])
    v0 = np.array([0.1, -1.0, 2.0, 0.05])
    fast = simulate(model, P, motion, q0, v0, outputs=("free_q", "points", "efforts"),
                    engine="generated")
    reference = simulate(model, P, motion, q0, v0, outputs=("free_q", "points", "efforts"),
                         engine="reference")
    assert fast.valid.all() and reference.valid.all()
    # The hinges move (the test is not of a system at rest): ≥ 0.2 rad of swing and flail.
    assert np.ptp(reference.free_q[:, :, 1], axis=1).min() > 0.2
    assert np.ptp(reference.free_q[:, :, 2], axis=1).min() > 0.2
    assert np.max(np.abs(fast.free_q - reference.free_q)) < 1e-11
    assert np.max(np.abs(fast.points - reference.points)) < 1e-11
    scale = np.max(np.abs(reference.efforts))
    assert np.max(np.abs(fast.efforts - reference.efforts)) < 1e-11 * scale
