"""Mass matrix, bias forces and inverse dynamics agree with Pinocchio on random states."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from tests.model.pinocchio_bridge import build


@pytest.mark.parametrize("name", ["real", "exemplary"])
def test_dynamics_match_pinocchio(name, request):
    model = request.getfixturevalue(name)
    rng = np.random.default_rng(3)
    P = model.parameter_matrix([{}])
    V, valid = model.fields(P)
    assert valid[0]
    pm, perm = build(model, V[0])
    data = pm.createData()
    n = len(model.coordinates)
    inverse = np.argsort(perm)
    worst = {"M": 0.0, "bias": 0.0, "rnea": 0.0}
    for _ in range(100):
        q = rng.uniform(-np.pi, np.pi, n)
        for i, c in enumerate(model.coordinates):
            if "length" in c:
                q[i] = rng.uniform(0.15, 0.35)
            elif c.startswith(("bar_", "shoulder_a", "shoulder_p")):
                q[i] = rng.uniform(-0.05, 0.05)
        v = rng.normal(0.0, 3.0, n)
        a = rng.normal(0.0, 30.0, n)
        qp, vp, ap = q[inverse], v[inverse], a[inverse]
        M_pin = pin.crba(pm, data, qp)
        M_pin = np.triu(M_pin) + np.triu(M_pin, 1).T
        bias_pin = pin.nle(pm, data, qp, vp)
        tau_pin = pin.rnea(pm, data, qp, vp, ap)
        M, tau = model.mass_matrix_and_inverse_dynamics(P, q, v, a)
        _, bias = model.mass_matrix_and_inverse_dynamics(P, q, v, np.zeros(n))
        M_ref = M_pin[np.ix_(perm, perm)]
        for key, mine, ref in (("M", M, M_ref), ("bias", bias, bias_pin[perm]),
                               ("rnea", tau, tau_pin[perm])):
            scale = np.max(np.abs(ref))
            worst[key] = max(worst[key], np.max(np.abs(mine - ref)) / scale)
    assert worst["M"] < 1e-9, worst
    assert worst["bias"] < 1e-9, worst
    assert worst["rnea"] < 1e-9, worst


def test_hybrid_dynamics_match_pinocchio(real):
    """Free accelerations with springs, driven q̈ prescribed: bemore vs a Pinocchio solve."""
    from tests.model.pinocchio_bridge import hybrid_rhs

    rng = np.random.default_rng(5)
    P = real.parameter_matrix([{}])
    V, _ = real.fields(P)
    for _ in range(20):
        qd = rng.uniform(-1.0, 1.0, real.n_driven)
        qd[[1, 3]] = rng.uniform(0.18, 0.3, 2)
        vd, ad = rng.normal(0, 2, real.n_driven), rng.normal(0, 20, real.n_driven)
        y = np.concatenate([rng.uniform(-0.02, 0.02, 5), rng.normal(0, 1, 5)])
        y[2] = rng.uniform(-3, 3)
        reference = hybrid_rhs(real, V[0], lambda t, a=(qd, vd, ad): a)(0.0, y)[5:]
        acc, _ = real.hybrid(P, y[None, :5], y[None, 5:], qd[None], vd[None], ad[None])
        assert np.max(np.abs(acc[0] - reference)) < 1e-9 * np.max(np.abs(reference))
