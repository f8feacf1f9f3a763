"""The engine's one thread setting (``set_engine_threads``): a batch runs on that many threads,
with the same numbers whatever the setting."""

from __future__ import annotations

import importlib
import os
import threading

import numpy as np
import pytest

from bemore.errors import ModelError
from bemore.model import DrivenMotion, joint_centre_cost, simulate
from bemore.model.profiles import clear_hip_circle_profile
from bemore.model.simulate import engine_threads, set_engine_threads

# The module (``bemore.model.simulate`` as an attribute is the function of that name).
engine = importlib.import_module("bemore.model.simulate")


@pytest.fixture
def kernel_threads(monkeypatch):
    """Records the thread of every call of the engine's kernel (the lane-group calls); the
    thread setting is restored afterwards."""
    calls: list[int] = []
    kernel_for = engine.kernel_for

    def recording_kernel_for(*args, **kwargs):
        kernel, program = kernel_for(*args, **kwargs)

        def run(*arguments):
            calls.append(threading.get_ident())
            kernel(*arguments)

        return run, program

    monkeypatch.setattr(engine, "kernel_for", recording_kernel_for)
    yield calls
    set_engine_threads(None)


def test_one_engine_thread_runs_a_batch_in_one_call_with_the_same_costs(
        real, motion, start, kernel_threads):
    q0, v0 = start
    P = real.parameter_matrix([{}, {"bar.stiffness_x": 5000.0}, {"trunk.mass": 20.0},
                               {"shoulder.damping_ap": 50000.0}] * 4)
    points = simulate(real, P[:1], motion, q0, v0, outputs=("points",)).points[0]
    measured = points[:, [0, 1, 2, 4, 5, 6, 7]] + 0.01
    costs = {}
    for threads in (1, 2):
        assert set_engine_threads(threads) == threads == engine_threads()
        kernel_threads.clear()
        costs[threads] = joint_centre_cost(real, P, motion, q0, v0, measured,
                                           samples_per_step=2)
        # One call per thread: one on this thread, the others on the pool's.
        assert len(kernel_threads) == threads == len(set(kernel_threads))
        assert threading.get_ident() in kernel_threads
    assert np.all(np.isfinite(costs[1])) and len(set(costs[1].tolist())) == 4
    assert np.array_equal(costs[1], costs[2])
    # None (or 0): back to one thread per core.
    assert set_engine_threads(None) == os.cpu_count() == set_engine_threads(0)


def test_one_engine_thread_runs_per_member_motions_in_one_call(exemplary, kernel_threads):
    t = np.arange(201) / 1000.0
    peaks = np.linspace(0.5, 1.5, 8)[:, None, None]
    motion = DrivenMotion(t, peaks * np.sin(t)[None, :, None], peaks * np.cos(t)[None, :, None],
                          -peaks * np.sin(t)[None, :, None])
    P = exemplary.parameter_matrix([{}] * 8)
    q0 = np.zeros(exemplary.n_free)
    q0[2] = np.pi / 2
    results = {}
    for threads in (1, 2):
        set_engine_threads(threads)
        kernel_threads.clear()
        results[threads] = simulate(exemplary, P, motion, q0, np.zeros_like(q0),
                                    outputs=("free_q", "efforts")).efforts
        assert len(kernel_threads) == threads == len(set(kernel_threads))
    assert np.all(np.isfinite(results[1]))
    assert np.array_equal(results[1], results[2])


def test_engine_threads_must_be_a_count():
    with pytest.raises(ModelError, match="engine threads: -1 is not a count"):
        set_engine_threads(-1)
    with pytest.raises(ModelError, match=r"engine threads: 1\.5 is not a count"):
        set_engine_threads(1.5)


def test_lanes_run_in_chunks_with_the_same_numbers(real, motion, start, kernel_threads,
                                                   monkeypatch):
    """A thread's lanes run LANE_CHUNK at a time (one kernel call per chunk; None: all in one
    call); the points and costs do not depend on the chunk size, bit for bit."""
    generated = importlib.import_module("bemore.model.generated")
    q0, v0 = start
    P = real.parameter_matrix([{}, {"bar.stiffness_x": 5000.0}, {"trunk.mass": 20.0},
                               {"shoulder.damping_ap": 50000.0}, {"bar.stiffness_y": 9000.0}] * 5)
    points = simulate(real, P[:1], motion, q0, v0, outputs=("points",)).points[0]
    measured = points[:, [0, 1, 2, 4, 5, 6, 7]] + 0.01
    runs = {}
    for chunk, calls in ((8, 4), (16, 2), (None, 1)):  # 25 lanes
        monkeypatch.setattr(generated, "LANE_CHUNK", chunk)
        kernel_threads.clear()
        runs[chunk] = simulate(real, P, motion, q0, v0, outputs=("points",), measured=measured,
                               threads=1)
        assert len(kernel_threads) == calls
    assert np.all(np.isfinite(runs[8].cost)) and len(set(runs[8].cost.tolist())) == 5
    for chunk in (16, None):
        assert np.array_equal(runs[8].cost, runs[chunk].cost)
        assert np.array_equal(runs[8].points, runs[chunk].points)



def test_a_one_step_motion_runs_each_threads_lanes_in_one_call(real, start, kernel_threads,
                                                               monkeypatch):
    """A motion of one integrator step (the spring equilibria's two-sample oracle) is one
    kernel call per thread whatever LANE_CHUNK is, with the numbers its lanes get in calls of
    their own (batches of 8), bit for bit."""
    from bemore.model.equilibrium import oracle_motion

    generated = importlib.import_module("bemore.model.generated")
    monkeypatch.setattr(generated, "LANE_CHUNK", 8)
    q0, v0 = start
    P = real.parameter_matrix([{}, {"bar.stiffness_x": 5000.0}, {"trunk.mass": 20.0},
                               {"shoulder.damping_ap": 50000.0}, {"bar.stiffness_y": 9000.0}] * 7)
    oracle = oracle_motion(np.zeros(real.n_driven), np.full(real.n_driven, 0.5),
                           np.full(real.n_driven, -1.0))
    kernel_threads.clear()
    whole = simulate(real, P, oracle, q0, v0, outputs=("free_q", "free_qd"), threads=1)
    assert len(kernel_threads) == 1
    parts = [simulate(real, P[lo:lo + 8], oracle, q0, v0, outputs=("free_q", "free_qd"),
                      threads=1) for lo in range(0, len(P), 8)]
    assert len(kernel_threads) == 1 + len(parts)
    assert np.all(np.isfinite(whole.free_qd)) and len({row.tobytes() for row in
                                                      whole.free_qd[:, 1]}) == 5
    assert np.array_equal(whole.free_qd, np.concatenate([part.free_qd for part in parts]))
    assert np.array_equal(whole.free_q, np.concatenate([part.free_q for part in parts]))


@pytest.mark.parametrize(("members", "invalid"), [(1, False), (5, False), (13, False),
                                                 (3, True), (8, True), (35, True)])
def test_one_step_velocities_are_the_engines_bit_for_bit(real, start, kernel_threads,
                                                         members: int, invalid: bool) -> None:
    """The spring equilibria's lean call (one kernel call on this thread, the members' fields
    repeated ``copies`` times, no padding) gives the free velocities :func:`simulate` gives at
    sample 1 of the one-step oracle motion, bit for bit; with ``invalid``, members that cannot
    be simulated (a non-positive mass, a NaN start) are NaN in both."""
    from bemore.model.equilibrium import oracle_motion
    from bemore.model.simulate import one_step_velocities

    q0, _ = start
    rng = np.random.default_rng(members)
    P = real.parameter_matrix([{"bar.stiffness_x": k, "trunk.mass": m} for k, m in zip(
        rng.uniform(5000.0, 50000.0, members), rng.uniform(8.0, 25.0, members), strict=True)])
    if invalid:
        P[1, real.parameter_names.index("trunk.mass")] = -1.0  # cannot be simulated
    oracle = oracle_motion(np.zeros(real.n_driven), np.full(real.n_driven, 0.5),
                           np.full(real.n_driven, -1.0))
    copies = 3
    free_q = q0 + rng.normal(0.0, 1e-3, (copies * members, real.n_free))
    if invalid:
        free_q[members + 2, 0] = np.nan  # the second copy of member 2: a NaN start
    kernel_threads.clear()
    lean = one_step_velocities(real, real.fields(P), oracle, free_q, copies)
    assert kernel_threads == [threading.get_ident()]  # one kernel call, on this thread
    engine = simulate(real, np.tile(P, (copies, 1)), oracle, free_q, np.zeros_like(free_q),
                      outputs=("free_qd",), threads=1).free_qd[:, 1]
    assert np.array_equal(lean, engine, equal_nan=True)
    failed = ~np.all(np.isfinite(lean), axis=1)
    expected = np.zeros(copies * members, dtype=bool)
    if invalid:
        expected[1::members] = True
        expected[members + 2] = True
    assert np.array_equal(failed, expected)
    with pytest.raises(ModelError, match="two-sample shared motion"):
        one_step_velocities(real, real.fields(P), clear_hip_circle_profile(0.01, 1000.0),
                            free_q, copies)


@pytest.mark.parametrize(("members", "calls"), [(5, [8]), (12, [12]), (2, [1, 1])])
def test_a_small_batch_runs_in_whole_vectors_with_its_members_numbers(
        real, motion, start, monkeypatch, members, calls):
    """Below two vectors' worth of lanes a batch does not split a vector between two threads
    (each would run its part as scalar code): 3–7 members run as one vector of 8 lanes on one
    thread (the extra lanes copies of the first member, dropped), 8–15 on one thread, 2 lane by
    lane on two. Every member's states, points, cost and validity are those it gets alone, bit
    for bit (an invalid member included)."""
    generated = importlib.import_module("bemore.model.generated")
    lanes: list[int] = []
    run_calls = engine.run_calls

    def recording(kernel, arguments):
        lanes.extend(call[generated.LANE_LO_ARG + 1] - call[generated.LANE_LO_ARG]
                     for call in arguments)
        run_calls(kernel, arguments)

    monkeypatch.setattr(engine, "run_calls", recording)
    q0, v0 = start
    P = real.parameter_matrix([{}, {"bar.stiffness_x": 5000.0}, {"trunk.mass": -1.0},
                               {"shoulder.damping_ap": 50000.0}, {"trunk.com": 0.25},
                               {"bar.stiffness_y": 9000.0}] * 2)[:members]
    points = simulate(real, P[:1], motion, q0, v0, outputs=("points",)).points[0]
    measured = points[:, [0, 1, 2, 4, 5, 6, 7]] + 0.01
    outputs = ("free_q", "free_qd", "points")
    lanes.clear()
    batch = simulate(real, P, motion, q0, v0, outputs=outputs, measured=measured, threads=2)
    assert lanes == calls
    alone = [simulate(real, P[b:b + 1], motion, q0, v0, outputs=outputs, measured=measured,
                      threads=1) for b in range(members)]
    assert batch.valid.tolist() == [b % 6 != 2 for b in range(members)]
    for name in ("free_q", "free_qd", "points", "cost", "valid"):
        expected = np.concatenate([getattr(one, name) for one in alone])
        assert getattr(batch, name).shape == expected.shape
        assert np.array_equal(getattr(batch, name), expected, equal_nan=True), name


def test_an_empty_batch_gives_empty_results(real, motion, start):
    """No members: empty arrays of the right shapes, no engine call (it raised IndexError)."""
    from bemore.model.sensitivity import point_sensitivities

    q0, v0 = start
    P = real.parameter_matrix([{}])[:0]
    frames = len(motion.t)
    empty = simulate(real, P, motion, q0, v0, outputs=("points", "free_q"), threads=2)
    assert empty.points.shape == (0, frames, len(real.point_names), 2)
    assert empty.free_q.shape == (0, frames, real.n_free) and empty.valid.shape == (0,)
    seeds = np.zeros((0, 3, real.n_free))
    tangents = point_sensitivities(real, P, motion, q0, v0, np.zeros((0, 3, P.shape[1])),
                                   seeds, seeds, threads=2)
    assert tangents.derivatives.shape == (0, 3, frames, len(real.point_names), 2)


def test_run_beside_raises_the_callers_error_once_both_ended():
    """``run_beside``: the caller's own error (a Ctrl-C would be one) wins over the other
    thread's, and is raised only once that thread's work has ended; results come back in
    order."""
    from bemore.model.generated import run_beside

    go, finished = threading.Event(), threading.Event()

    def first():
        go.wait(30.0)
        finished.set()
        raise ValueError("first")

    def second():
        go.set()
        raise KeyError("second")

    with pytest.raises(KeyError, match="second"):
        run_beside(first, second)
    assert finished.is_set()
    with pytest.raises(ValueError, match="first"):
        run_beside(first, lambda: 2)
    assert run_beside(lambda: 1, lambda: 2) == (1, 2)


def test_run_beside_called_from_its_own_thread_runs_both_there():
    """A ``run_beside`` inside the first function (on the helper thread) runs both of its
    functions on that thread instead of waiting for itself."""
    from bemore.model.generated import run_beside

    results, done = [], threading.Event()

    def outer():
        results.append(run_beside(lambda: run_beside(lambda: "a", lambda: "b"), lambda: "c"))
        done.set()

    threading.Thread(target=outer, daemon=True).start()
    assert done.wait(30.0), "run_beside waited for itself"
    assert results == [(("a", "b"), "c")]
