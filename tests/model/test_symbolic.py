"""The symbolic model (sympy, derived from the description alone) against the engine.

An oracle independent of the engine's emitter (codegen.py) and of its recursion (dynamics.py):
positions of the planar chain, Lagrange's equations. At random states and random parameters
of the three descriptions, the lambdified terms agree with the engine to 1e-12, relative to
the magnitude of the terms that make each quantity (|M||q̈| + |c| + |g|: summing the same
terms in another order rounds differently, more so where they cancel)."""

from __future__ import annotations

import numpy as np
import pytest

from bemore.model.symbolic import NumericModel
from tests.model.symbolic_support import (
    MODELS,
    model_id,
    random_parameters,
    random_state,
    symbolic,
)

TOLERANCE = 1e-12


@pytest.mark.parametrize("name", MODELS, ids=model_id)
def test_symbolic_model_agrees_with_the_engine(name):
    model, sym = symbolic(name)
    oracle = NumericModel(sym, model.parameter_names)
    nf = model.n_free
    rng = np.random.default_rng(19)
    worst = dict.fromkeys(("M", "tau", "acc", "effort", "points"), 0.0)
    for _ in range(25):
        P = random_parameters(model, rng)
        q, v, a = random_state(model, rng)
        M, c, g, springs = oracle.terms(P[0], q, v)
        M_engine, tau_engine = model.mass_matrix_and_inverse_dynamics(P, q, v, a)
        terms = np.abs(M) @ np.abs(a) + np.abs(c) + np.abs(g)
        worst["M"] = max(worst["M"], np.max(np.abs(M - M_engine)) / np.max(np.abs(M)))
        worst["tau"] = max(worst["tau"], np.max(np.abs(M @ a + c + g - tau_engine))
                           / np.max(terms))
        # Hybrid dynamics: the free accelerations amplify the rounding of the right-hand side by
        # the free mass matrix's inverse; the efforts gather them back through M_df.
        af, effort = oracle.hybrid(P[0], q[:nf], v[:nf], q[nf:], v[nf:], a[nf:])
        acc_engine, eff_engine = model.hybrid(P, q[None, :nf], v[None, :nf], q[None, nf:],
                                              v[None, nf:], a[None, nf:])
        rhs_terms = np.abs(springs) + terms[:nf]
        acc_scale = np.max(np.abs(np.linalg.inv(M[:nf, :nf])) @ rhs_terms)
        worst["acc"] = max(worst["acc"], np.max(np.abs(af - acc_engine[0])) / acc_scale)
        effort_terms = (np.abs(M[nf:, :nf]) @ (np.abs(af) + acc_scale)
                        + np.abs(M[nf:, nf:]) @ np.abs(a[nf:]) + np.abs(c[nf:]) + np.abs(g[nf:]))
        worst["effort"] = max(worst["effort"], np.max(np.abs(effort - eff_engine[0]))
                              / np.max(effort_terms))
        points = oracle.points(P[0], q)
        worst["points"] = max(worst["points"], np.max(np.abs(points - model.point_positions(
            P, q)[0])) / np.max(np.abs(points)))
    print(model_id(name), {k: f"{v:.1e}" for k, v in worst.items()})
    assert all(value < TOLERANCE for value in worst.values()), worst


def test_symbolic_terms_are_lagrange_s():
    """The exemplary model's velocity-product terms are Lagrange's d/dt(∂T/∂q̇) − ∂T/∂q at q̈ = 0,
    from its kinetic energy T = ½ q̇ᵀ M q̇ (Christoffel symbols), and the gravity terms the
    gradient of the potential energy the engine reports (model.energy at rest)."""
    import sympy as sp

    model, sym = symbolic("exemplary_gymnast")
    n = len(sym.coordinates)
    qd = sp.Matrix(sym.qd)
    T = (qd.T * sym.mass_matrix * qd)[0] / 2
    for i in range(n):
        lagrange = sum(sp.diff(sp.diff(T, sym.qd[i]), sym.q[j]) * sym.qd[j] for j in range(n))
        lagrange -= sp.diff(T, sym.q[i])
        assert sp.expand(sp.expand_trig(lagrange - sym.velocity_terms[i])) == 0
    rng = np.random.default_rng(5)
    P = random_parameters(model, rng)
    values = dict(zip(model.parameter_names, P[0], strict=True))
    q, _, _ = random_state(model, rng)
    oracle = NumericModel(sym, model.parameter_names)
    _, _, g, _ = oracle.terms(P[0], q, np.zeros(n))
    nf, step = model.n_free, 1e-6

    def potential(x):  # the engine's energy at rest, less the springs' ½k(q − rest)²
        energy = model.energy(P, x[None, :nf], np.zeros((1, nf)), x[None, nf:],
                              np.zeros((1, n - nf)))[0]
        for spring in model.description.springs:
            i = model.free_coordinates.index(spring.coordinate)
            stretch = x[i] - spring.rest.evaluate(values)
            energy -= 0.5 * spring.stiffness.evaluate(values) * stretch ** 2
        return energy

    for i in range(n):
        up, down = q.copy(), q.copy()
        up[i] += step
        down[i] -= step
        gradient = (potential(up) - potential(down)) / (2 * step)
        assert gradient == pytest.approx(g[i], rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("name", MODELS, ids=model_id)
def test_symbolic_model_agrees_with_the_generated_kernel(name):
    """The compiled kernel (codegen.py's emitter, what simulate runs): its driven efforts and
    points at the frames of a short simulation equal the symbolic model's at the same states."""
    from bemore.model import DrivenMotion, simulate

    model, sym = symbolic(name)
    oracle = NumericModel(sym, model.parameter_names)
    rng = np.random.default_rng(11)
    P = random_parameters(model, rng)
    q, v, a = random_state(model, rng)
    nf = model.n_free
    t = np.arange(41) * 1e-3
    # a driven motion with constant acceleration from the random state (exact q, q̇, q̈)
    qd = q[nf:] + np.outer(t, v[nf:]) + 0.5 * np.outer(t ** 2, a[nf:])
    motion = DrivenMotion(t, qd, v[nf:] + np.outer(t, a[nf:]), np.tile(a[nf:], (len(t), 1)))
    sim = simulate(model, P, motion, q[:nf][None], v[:nf][None],
                   outputs=("free_q", "free_qd", "efforts", "points"))
    assert sim.valid[0]
    worst_effort = worst_points = 0.0
    for f in range(0, len(t), 5):
        qf, vf = sim.free_q[0, f], sim.free_qd[0, f]
        M, c, g, _ = oracle.terms(P[0], [*qf, *motion.q[f]], [*vf, *motion.qd[f]])
        af, effort = oracle.hybrid(P[0], qf, vf, motion.q[f], motion.qd[f], motion.qdd[f])
        terms = (np.abs(M[nf:, :nf]) @ np.abs(af) + np.abs(M[nf:, nf:]) @ np.abs(motion.qdd[f])
                 + np.abs(c[nf:]) + np.abs(g[nf:]))
        worst_effort = max(worst_effort, np.max(np.abs(effort - sim.efforts[0, f]))
                           / np.max(terms))
        points = oracle.points(P[0], [*qf, *motion.q[f]])
        worst_points = max(worst_points, np.max(np.abs(points - sim.points[0, f]))
                           / np.max(np.abs(points)))
    print(model_id(name), f"efforts {worst_effort:.1e}, points {worst_points:.1e}")
    assert worst_effort < TOLERANCE and worst_points < TOLERANCE
