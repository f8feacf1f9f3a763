"""Exact sensitivities (forward-mode tangent kernel) against central differences of the engine.

The reference is Richardson's extrapolation R(h) = (4·D(h/2) − D(h))/3 of the engine's own
central differences D (fourth order). Its error is estimated by how much it changes when the
step halves, |R(h) − R(h/2)|: that catches the truncation (some corners are strongly
non-linear: an undamped shoulder moves its points' sensitivity by 90 % between steps of 1e-3
and 1e-4 of the box) and the rounding (≈ ε·|points|/h) alike. Per point and direction the step
of smallest estimated error among 1e-1 … 1e-6 box widths is used (a step at which a member
fails gives NaN and is not chosen; the steps above 1e-2 serve nearly linear directions such as
a shoulder's stiffness, whose small signal the rounding swamps at smaller steps: 1e-7 there
with steps of 1e-2 at most, 1.4e-8 with these), and the test asserts that this estimate is
itself below a tenth of the tolerance: a 1e-6 agreement then says the
sensitivities are right to 1e-6, not that the reference is loose. Relative errors are per
direction, over the whole trajectory: ‖exact − reference‖ / ‖reference‖ (an element-wise
ratio is meaningless where a coordinate does not move).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bemore.errors import ModelError
from bemore.identify.space import ParameterSpace
from bemore.model import simulate
from bemore.model.profiles import clear_hip_circle_profile
from bemore.model.sensitivity import field_tangents, point_sensitivities
from bemore.settings import load_gymnast, load_identification
from tests.identify.synthetic import handstand_start

TOLERANCE = 1e-6
STEPS = (1e-1, 3e-2, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6)  # fractions of the box's width


def _box_points(space: ParameterSpace, count: int, seed: int) -> np.ndarray:
    """``count`` normalised points: the stiffest and the softest corners (springs' stiffness at
    the upper bound and damping at the lower, and the reverse), random corners, interior."""
    rng = np.random.default_rng(seed)
    stiff = np.array([1.0 if "stiffness" in name else 0.0 if "damping" in name else 0.5
                      for name in space.names])
    corners = rng.integers(0, 2, (count // 4, space.dim)).astype(float)
    interior = rng.uniform(0.0, 1.0, (count - 2 - len(corners), space.dim))
    return np.vstack([stiff, 1.0 - stiff, corners, interior])


def _members_at_the_handstand(real, duration_s: float, count: int, seed: int):
    """(space, motion, columns of the space's parameters, P, q0, q̇0) of ``count`` box points
    (:func:`_box_points`) starting at the handstand of a clear hip circle ``duration_s`` long."""
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    motion = clear_hip_circle_profile(duration_s, 1000.0)
    X = _box_points(space, count, seed=seed)
    columns = [real.parameter_names.index(name) for name in space.names]
    P = np.repeat(real.parameter_matrix([{}]), len(X), axis=0)
    P[:, columns] = space.to_physical(X)
    q0, v0 = handstand_start(real, P, motion, hand_rotation_rad=3.0)
    return space, motion, columns, P, q0, v0


def _central(model, P, motion, q0, v0, dP, dq0, dv0, h, samples_per_step=1):
    """Central differences (B, F, n_points, 2) along (dP, dq0, dv0) (B, ·) with steps h (B,)."""
    B = P.shape[0]
    h = np.broadcast_to(np.asarray(h, dtype=float), (B,))[:, None]
    sim = simulate(model, np.vstack([P + h * dP, P - h * dP]), motion,
                   np.vstack([q0 + h * dq0, q0 - h * dq0]), np.vstack([v0 + h * dv0, v0 - h * dv0]),
                   outputs=("points",), samples_per_step=samples_per_step)
    return (sim.points[:B] - sim.points[B:]) / (2.0 * h[:, :, None, None])


def test_field_tangents_are_the_derivative_of_the_field_map(real) -> None:
    rng = np.random.default_rng(3)
    P = real.parameter_matrix([{}]) * rng.uniform(0.8, 1.2, (4, len(real.parameter_names)))
    dP = rng.normal(size=(4, 2, P.shape[1])) * P[:, None, :]
    dV = field_tangents(real.tree, P, dP)
    for k in range(2):
        # V is quadratic in P: the central difference is exact up to rounding.
        reference = (real.tree.fields(P + dP[:, k]) - real.tree.fields(P - dP[:, k])) / 2.0
        assert np.allclose(dV[:, k], reference, rtol=1e-12, atol=1e-12 * np.abs(reference).max())


@pytest.mark.slow
@pytest.mark.parametrize(("samples_per_step", "count"), [(1, 200), (2, 40)])
def test_sensitivities_agree_with_central_differences_over_the_box(
        real, samples_per_step: int, count: int) -> None:
    """One integrator step per sample (the exact cost), over 200 points of the box; per two
    samples (the search's cost, and the polish's first stage), over 40."""
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    motion = clear_hip_circle_profile(0.5, 1000.0)
    X = _box_points(space, count, seed=11 if samples_per_step == 1 else 12)
    defaults = real.parameter_matrix([{}])[0]
    columns = [real.parameter_names.index(name) for name in space.names]
    P = np.repeat(defaults[None, :], len(X), axis=0)
    P[:, columns] = space.to_physical(X)
    q0, v0 = handstand_start(real, P, motion, hand_rotation_rad=3.0)
    # Directions: every identified parameter (one box width), the start angle and rate.
    d = space.dim + 2
    dP = np.zeros((len(X), d, P.shape[1]))
    dP[:, np.arange(space.dim), columns] = space.width
    dq0 = np.zeros((len(X), d, real.n_free))
    dv0 = np.zeros_like(dq0)
    rotation = real.free_coordinates.index("hand_rotation")
    dq0[:, space.dim, rotation] = 1.0
    dv0[:, space.dim + 1, rotation] = 1.0
    exact = point_sensitivities(real, P, motion, q0, v0, dP, dq0, dv0,
                                samples_per_step=samples_per_step)
    assert exact.valid.all()
    plain = simulate(real, P, motion, q0, v0, outputs=("points",),
                     samples_per_step=samples_per_step).points
    assert np.array_equal(exact.points, plain)  # the primal is the engine's, bit for bit
    worst, worst_reference = 0.0, 0.0
    for k in range(d):
        args = (real, P, motion, q0, v0, dP[:, k], dq0[:, k], dv0[:, k])
        best_error = np.full(len(X), np.inf)
        reference = np.zeros_like(exact.derivatives[:, k])
        for h in STEPS:
            central = [_central(*args, h / 2**i, samples_per_step) for i in range(3)]
            coarse = (4.0 * central[1] - central[0]) / 3.0
            fine = (4.0 * central[2] - central[1]) / 3.0
            own = (np.linalg.norm((coarse - fine).reshape(len(X), -1), axis=1)
                   / np.linalg.norm(fine.reshape(len(X), -1), axis=1))
            better = own < best_error
            best_error[better] = own[better]
            reference[better] = fine[better]
        scale = np.linalg.norm(reference.reshape(len(X), -1), axis=1)
        error = np.linalg.norm((exact.derivatives[:, k] - reference).reshape(len(X), -1), axis=1)
        worst = max(worst, float(np.max(error / scale)))
        worst_reference = max(worst_reference, float(np.max(best_error)))
    assert worst < TOLERANCE, worst
    # The reference's own error estimate: well inside the tolerance at every point.
    assert worst_reference < 0.1 * TOLERANCE, worst_reference


_TOY = '''
import numpy as np


def toy(Vt, S, S0, MX, U, UN, R, out_pts, lo, hi):
    for b in range(lo, hi):
        a = Vt[0, b]
        c = Vt[1, b]
        k = np.floor(a * 0.15915494309189535 + 0.5)
        r = a - k * 6.283185307179586
        d = (1.0 / c) if c > 0.0 else np.nan
        e = a * c - r / c + d ** 3 - -a
        R[0, b] = e * e + abs(r) * 2.0
        g = R[0, b]
        S[1, b] = g * c
'''


@pytest.mark.parametrize("shared_primal", [False, True])
def test_tangent_rules_on_a_small_function(shared_primal: bool) -> None:
    """The rewriting's derivative rules (×, ÷, powers, selects, floor, abs, negation, array
    stores and loads) against central differences of the same function; with a shared primal
    (one member, a direction per lane) too."""
    from bemore.model.sensitivity import TANGENT_ARRAYS, tangent_source

    namespace: dict = {}
    K = 1 if shared_primal else 2
    exec(tangent_source(_TOY, "toy", K, "toy_d", shared_primal), namespace)
    exec(_TOY, namespace)
    lanes = 3
    rng = np.random.default_rng(2)
    base = rng.uniform(0.5, 4.0, (2, lanes))
    seeds = rng.normal(size=(K, 2, lanes))
    if shared_primal:  # one member: every lane has the same values, its own direction
        base[:] = base[:, :1]

    def arrays(V):
        return [V.copy(), np.zeros((2, lanes)), np.zeros((2, lanes)), np.zeros((1, lanes)),
                np.zeros((1, 2, lanes)), np.zeros((2, lanes)), np.zeros((1, lanes)),
                np.zeros((1, 1, 1, 1))]

    primal = arrays(base)
    tangents = [np.zeros((K, *a.shape)) if name != "out_pts" else np.zeros((1, K, 1, 1, 1))
                for name, a in zip(TANGENT_ARRAYS, primal, strict=True)]
    tangents[0][:] = seeds
    namespace["toy_d"](*primal, 0, lanes, *tangents)
    for t in range(K):
        h = 1e-6
        plus, minus = arrays(base + h * seeds[t]), arrays(base - h * seeds[t])
        namespace["toy"](*plus, 0, lanes)
        namespace["toy"](*minus, 0, lanes)
        for index, (name, row) in enumerate((("R", 0), ("S", 1))):
            slot = list(TANGENT_ARRAYS).index(name)
            reference = (plus[slot][row] - minus[slot][row]) / (2 * h)
            exact = tangents[slot][t, row]
            assert np.allclose(exact, reference, rtol=1e-7), (name, index, exact, reference)


def test_state_sensitivities_in_both_layouts(real) -> None:
    """``states=True``: the free state is the engine's bit for bit, both layouts give the same
    derivatives, the points are unchanged, and the state's derivatives agree with
    Richardson-extrapolated central differences of the engine's free state."""
    space, motion, columns, P, q0, v0 = _members_at_the_handstand(real, 0.3, 6, seed=5)
    v0[:, 1] = 0.03  # a bar start velocity (m/s): its tangent is a state seed too
    d = space.dim + 1
    dP = np.zeros((len(P), d, P.shape[1]))
    dP[:, np.arange(space.dim), columns] = space.width
    dq0 = np.zeros((len(P), d, real.n_free))
    dv0 = np.zeros_like(dq0)
    dv0[:, space.dim, 1] = 1.0
    plain = simulate(real, P, motion, q0, v0, outputs=("points", "free_q", "free_qd"))
    results = {layout: point_sensitivities(real, P, motion, q0, v0, dP, dq0, dv0,
                                           layout=layout, states=True)
               for layout in ("directions", "members")}
    without = point_sensitivities(real, P, motion, q0, v0, dP, dq0, dv0)
    assert without.free_q is None and without.d_free_q is None
    for result in results.values():
        assert result.valid.all()
        assert np.array_equal(result.free_q, plain.free_q)
        assert np.array_equal(result.free_qd, plain.free_qd)
        assert np.array_equal(result.points, without.points)
        np.testing.assert_allclose(result.derivatives, without.derivatives, rtol=1e-12,
                                   atol=1e-12 * np.abs(without.derivatives).max())
    a, b = results["directions"], results["members"]
    for name in ("d_free_q", "d_free_qd"):
        scale = np.abs(getattr(a, name)).max()
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-12 * scale)
    for k in range(d):
        def state(h: float, k: int = k) -> tuple[np.ndarray, np.ndarray]:
            sim = simulate(real, np.vstack([P + h * dP[:, k], P - h * dP[:, k]]), motion,
                           np.vstack([q0 + h * dq0[:, k], q0 - h * dq0[:, k]]),
                           np.vstack([v0 + h * dv0[:, k], v0 - h * dv0[:, k]]),
                           outputs=("free_q", "free_qd"))
            n = len(P)
            return tuple((s[:n] - s[n:]) / (2.0 * h) for s in (sim.free_q, sim.free_qd))
        for index, exact in enumerate((a.d_free_q[:, k], a.d_free_qd[:, k])):
            # Richardson from h, h/2, h/4; per direction the step whose estimate moves least.
            best, own = None, np.inf
            for h in (1e-2, 1e-3, 1e-4):
                central = [state(h / 2**i)[index] for i in range(3)]
                coarse = (4.0 * central[1] - central[0]) / 3.0
                estimate = (4.0 * central[2] - central[1]) / 3.0
                change = np.linalg.norm(coarse - estimate) / np.linalg.norm(estimate)
                if change < own:
                    best, own = estimate, change
            assert own < 0.5 * TOLERANCE, (k, own)
            error = np.linalg.norm(exact - best) / np.linalg.norm(best)
            assert error < TOLERANCE, (k, error)


def test_the_warm_up_builds_the_kernels_the_exact_jacobian_runs(real) -> None:
    """After :func:`build_identification_kernels` (what ``python -m bemore.warmup`` runs), the
    exact Jacobian with and without the free state's tangents (a trial with and without bar
    forces; it stores the engine's default cost points only) finds its tangent kernel built:
    it adds none."""
    from bemore.model import sensitivity
    from bemore.model.sensitivity import build_identification_kernels, program_selection

    build_identification_kernels(real)
    built = set(sensitivity._kernels)
    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    motion = clear_hip_circle_profile(0.1, 1000.0)
    X = np.full((1, space.dim), 0.5)  # the box's centre
    columns = [real.parameter_names.index(name) for name in space.names]
    P = real.parameter_matrix([{}])
    P[:, columns] = space.to_physical(X)
    q0, v0 = handstand_start(real, P, motion, hand_rotation_rad=3.0)
    dP = np.zeros((1, 2, P.shape[1]))
    dP[0, 0, columns[0]] = 1.0
    dq0 = np.zeros((1, 2, real.n_free))
    dq0[0, 1, 0] = 1.0
    for states in (False, True):
        result = point_sensitivities(real, P, motion, q0, v0, dP, dq0, np.zeros_like(dq0),
                                     states=states, points=program_selection(real))
        assert result.valid.all() and np.isfinite(result.derivatives).all()
    assert set(sensitivity._kernels) == built


@pytest.mark.parametrize("layout", ["directions", "members"])
def test_a_kernel_storing_some_points_gives_those_of_every_point_bit_for_bit(
        real, layout: str) -> None:
    """``points``: the kernel stores those points only, in the order asked (here not the
    model's), and they and their derivatives are those of the kernel storing every point, bit
    for bit; indices outside the model's points, non-integers or none are one clear error."""
    space, motion, columns, P, q0, v0 = _members_at_the_handstand(real, 0.2, 2, seed=3)
    dP = np.zeros((len(P), space.dim, P.shape[1]))
    dP[:, np.arange(space.dim), columns] = space.width
    dq0 = np.zeros((len(P), space.dim, real.n_free))
    chosen = (7, 0, 4, 5)  # ankle, bar, neck, hip
    every = point_sensitivities(real, P, motion, q0, v0, dP, dq0, dq0, layout=layout)
    some = point_sensitivities(real, P, motion, q0, v0, dP, dq0, dq0, layout=layout,
                               points=chosen)
    assert every.points.shape[2] == len(real.point_names)
    assert some.points.shape == (len(P), len(motion.t), len(chosen), 2)
    assert some.valid.all() and np.abs(some.derivatives).max() > 0.0
    assert np.array_equal(some.points, every.points[:, :, list(chosen)])
    assert np.array_equal(some.derivatives, every.derivatives[..., list(chosen), :])
    for wrong in ((0, 99), (-1,), (1.7, 2), ()):
        with pytest.raises(ModelError, match="points"):
            point_sensitivities(real, P, motion, q0, v0, dP, dq0, dq0, points=wrong)


def test_out_receives_the_derivatives_and_keeps_its_other_directions(real) -> None:
    """``out``: an array with room for more directions than the seeds' receives their
    derivatives (those of a call without it, bit for bit), is the result's derivatives, and
    its other directions keep what the caller put there; a wrong array is one clear error."""
    space, motion, columns, P, q0, v0 = _members_at_the_handstand(real, 0.2, 3, seed=4)
    P[1, real.parameter_names.index("trunk.mass")] = -1.0  # cannot be simulated: NaN
    K = 5
    dP = np.zeros((len(P), K, P.shape[1]))
    dP[:, np.arange(K), columns[:K]] = space.width[:K]
    dq0 = np.zeros((len(P), K, real.n_free))
    plain = point_sensitivities(real, P, motion, q0, v0, dP, dq0, dq0)
    out = np.full((len(P), K + 2, len(motion.t), len(real.point_names), 2), 7.0)
    given = point_sensitivities(real, P, motion, q0, v0, dP, dq0, dq0, out=out)
    assert given.derivatives is out
    assert np.array_equal(out[:, :K], plain.derivatives, equal_nan=True)
    assert np.all(np.isnan(out[1, :K])) and np.all(np.isfinite(out[[0, 2], :K]))
    assert np.all(out[:, K:] == 7.0)  # the failed member's room too
    read_only = out.copy()
    read_only.flags.writeable = False
    for wrong in (out[:, :K - 1], out[:2], out.astype(np.float32), out[..., :1],
                  np.asfortranarray(out), read_only):
        with pytest.raises(ModelError, match="out must be"):
            point_sensitivities(real, P, motion, q0, v0, dP, dq0, dq0, out=wrong)
    with pytest.raises(ModelError, match="out is for"):
        point_sensitivities(real, P, motion, q0, v0, dP, dq0, dq0, out=out, layout="members")


@pytest.mark.parametrize(("members", "states"), [(1, True), (3, False)])
def test_directions_cut_among_threads_give_the_numbers_of_one_call_per_member(
        real, monkeypatch, members: int, states: bool) -> None:
    """With two threads a lone member's 17 directions run as two calls (directions 0–7 and
    8–16, each computing the member's own simulation), and the third of three members is cut
    so (:func:`direction_pieces`): the points, the derivatives, the states and their
    derivatives are those of one thread running one call per member, bit for bit (the calls of
    one member share no array the kernel writes)."""
    from bemore.model import generated

    space = ParameterSpace.from_config(load_identification(), load_gymnast())
    motion = clear_hip_circle_profile(0.2, 1000.0)
    X = _box_points(space, members + 2, seed=7)[2:]
    columns = [real.parameter_names.index(name) for name in space.names]
    P = np.repeat(real.parameter_matrix([{}]), members, axis=0)
    P[:, columns] = space.to_physical(X)
    q0, v0 = handstand_start(real, P, motion, hand_rotation_rad=3.0)
    d = space.dim + 4  # 17 directions: the parameters' and four of the start state
    assert d == 17
    rng = np.random.default_rng(2)
    dP = np.zeros((members, d, P.shape[1]))
    dP[:, np.arange(space.dim), columns] = space.width
    dq0 = np.zeros((members, d, real.n_free))
    dv0 = np.zeros_like(dq0)
    dq0[:, space.dim:, :] = rng.normal(size=(members, 4, real.n_free)) * 1e-3
    dv0[:, space.dim:, :] = rng.normal(size=(members, 4, real.n_free)) * 1e-2
    plans: list[list[list[int]]] = []  # per engine call: each thread's calls' directions
    run_call_lists = generated.run_call_lists

    def recording(kernel, lists):
        plans.append([[call[generated.LANE_LO_ARG + 1] - call[generated.LANE_LO_ARG]
                       for call in calls] for calls in lists])
        run_call_lists(kernel, lists)

    monkeypatch.setattr(generated, "run_call_lists", recording)
    one = point_sensitivities(real, P, motion, q0, v0, dP, dq0, dv0, threads=1, states=states)
    two = point_sensitivities(real, P, motion, q0, v0, dP, dq0, dv0, threads=2, states=states)
    # One thread: each member one call of its 17 directions; two: a member cut in 8 + 9.
    assert len(plans) == 2 and plans[0] == [[17] * members]
    assert len(plans[1]) == 2
    assert sorted(n for calls in plans[1] for n in calls) == sorted([17] * (members - 1) + [8, 9])
    assert one.valid.all() and two.valid.all()
    assert np.abs(one.derivatives).max() > 0.0
    assert np.array_equal(one.points, two.points)
    assert np.array_equal(one.derivatives, two.derivatives)
    if states:
        for name in ("free_q", "free_qd", "d_free_q", "d_free_qd"):
            assert np.array_equal(getattr(one, name), getattr(two, name)), name


def test_direction_pieces_run_every_direction_once() -> None:
    """Every plan covers each member's directions exactly once, in ranges cut on whole vectors,
    on at most the threads given; a lone member of more than one vector of directions is cut
    when there are threads for it (a shorter longest list), and as many members as threads are
    not (no work added)."""
    from bemore.model.sensitivity import _longest_first, direction_pieces, piece_cost

    for members in range(1, 7):
        for directions in (0, 1, 7, 8, 9, 16, 17, 19, 24, 33):
            for threads in (1, 2, 3, 4):
                plan = direction_pieces(members, directions, threads)
                assert 1 <= len(plan) <= threads
                covered = sorted(piece for calls in plan for piece in calls)
                for b in range(members):
                    ranges = [(lo, hi) for m, lo, hi in covered if m == b]
                    assert ranges[0][0] == 0 and ranges[-1][1] == directions
                    assert all(hi == next_lo for (_, hi), (next_lo, _) in
                               itertools.pairwise(ranges))
                    assert all(lo % 8 == 0 for lo, _ in ranges)
                longest = max(sum(piece_cost(hi - lo) for _, lo, hi in calls) for calls in plan)
                _, whole = _longest_first([(b, 0, directions) for b in range(members)], threads)
                if members == 1 < threads and directions > 8:
                    assert longest < whole - 1e-9
                if members == threads:
                    assert plan == [[(b, 0, directions)] for b in range(members)]
