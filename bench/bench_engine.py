"""Engine speed: the 14-coordinate gymnast, 1521 frames at 1 kHz, a batch of 200 parameter
vectors (target ≤ 25 ms per batch, ≤ 0.125 ms per simulation).

Baselines measured in the same run, on the same model and trial, per simulation, in CPU time
(the machine is shared; bemore's wall times are printed too): a plain scipy ``solve_ivp``
(LSODA, default tolerances) on a plain-Python/numpy right-hand side (bemore's own reference
recursion with numba's JIT disabled, in a subprocess) and LSODA on a Pinocchio right-hand side.
Also: first-call compile time (fresh caches, subprocess), cached start-up time — each next to
numba compiling and loading the same generated source (``BEMORE_CC=none``) —, peak memory.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import tracemalloc

import numpy as np
from scipy.integrate import solve_ivp

from bemore.model import joint_centre_cost, load_model, simulate
from bemore.model.profiles import HANDSTAND_HAND_ROTATION, clear_hip_circle_profile
from bemore.settings import load_gymnast, load_identification, trunk_mass_upper_bound_kg
from bench.common import Measurement, median_time, run_child

_BASELINE_SCRIPT = """
import sys, time, numpy as np
from scipy.integrate import solve_ivp
from bemore.model import load_model
from bemore.model.profiles import clear_hip_circle_profile, CLEAR_HIP_CIRCLE, raised_cosine
duration = float(sys.argv[1])
model = load_model("real_gymnast")
P = model.parameter_matrix([{}])
motion = clear_hip_circle_profile(duration)
free = np.zeros(5); free[2] = np.pi / 2 + 0.05
q0 = model.equilibrium(P, motion.q[0], free_q=free)[0]
base = np.array([v[0] for v in CLEAR_HIP_CIRCLE.values()])
amp = np.array([v[1] for v in CLEAR_HIP_CIRCLE.values()])
def rhs(t, y):
    s, sd, sdd = raised_cosine(np.asarray(t), duration)
    acc, _ = model.hybrid(P, y[None, :5], y[None, 5:], (base + s * amp)[None], (sd * amp)[None],
                          (sdd * amp)[None])
    return np.concatenate([y[5:], acc[0]])
start = time.process_time()
solve_ivp(rhs, (0.0, duration), np.concatenate([q0, np.zeros(5)]), method="LSODA",
          t_eval=motion.t)
print(time.process_time() - start)
"""

# First call of each engine path in a fresh process: prints the seconds of the whole script
# (imports, model, start state, first call) and of the first engine call alone (with fresh
# caches: generating and compiling the kernel this path uses).
_STARTUP_SCRIPT = """
import sys, time
start = time.perf_counter()
import numpy as np
from bemore.model import DrivenMotion, load_model, joint_centre_cost, simulate
from bemore.model.profiles import clear_hip_circle_profile, shoulder_flexion_profile
if sys.argv[1] == "identify":
    model = load_model("real_gymnast")
    motion = clear_hip_circle_profile(0.05)
    P = model.parameter_matrix([{}])
    q0 = np.zeros(5); q0[2] = np.pi / 2
    call = time.perf_counter()
    joint_centre_cost(model, P, motion, q0, np.zeros(5), np.zeros((len(motion.t), 7, 2)),
                      samples_per_step=2)
else:
    model = load_model("exemplary_gymnast")
    one = shoulder_flexion_profile(0.05, 2.6)
    motion = DrivenMotion(one.t, one.q[None].repeat(2, 0), one.qd[None].repeat(2, 0),
                          one.qdd[None].repeat(2, 0))
    P = model.parameter_matrix([{}]).repeat(2, 0)
    q0 = np.zeros(model.n_free); q0[2] = np.pi / 2
    call = time.perf_counter()
    simulate(model, P, motion, q0, np.zeros(model.n_free), outputs=("free_q", "efforts"))
end = time.perf_counter()
print(end - start, end - call)
"""


def _box_population(model, size: int, seed: int = 0) -> np.ndarray:
    identification = load_identification()
    names = identification.names
    lower = np.array([identification.parameter(n).lower for n in names])
    upper = np.array([identification.parameter(n).upper for n in names])
    upper[names.index("trunk.mass")] = trunk_mass_upper_bound_kg(identification, load_gymnast())
    P = model.parameter_matrix([{}]).repeat(size, axis=0)
    columns = [model.parameter_names.index(n) for n in names]
    rng = np.random.default_rng(seed)
    P[:, columns] = lower + rng.uniform(size=(size, len(names))) * (upper - lower)
    return P


def _wall_samples(function, repeats: int) -> list[float]:
    """Wall times (s) of ``repeats`` calls: the median is the figure, the best shows what the
    machine gives when the other jobs leave both cores free."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return samples


def _median_cpu(function, repeats: int) -> float:
    """Median CPU time (s, all threads of this process): robust to other jobs on the machine."""
    samples = []
    for _ in range(repeats):
        start = time.process_time()
        function()
        samples.append(time.process_time() - start)
    return float(np.median(samples))


def _subprocess_seconds(script: str, args: list[str], env: dict | None = None) -> list[float]:
    """The numbers the script prints on its last line (seconds)."""
    result = run_child([sys.executable, "-c", script, *args],
                       env={**os.environ, **(env or {})})
    return [float(x) for x in result.stdout.strip().splitlines()[-1].split()]


def _pinocchio_lsoda(model, motion, q0) -> float:
    from tests.model.pinocchio_bridge import hybrid_rhs

    V, _ = model.fields(model.parameter_matrix([{}]))
    t, dt = motion.t, motion.dt

    def driven(time_s):
        i = min(int(time_s / dt), len(t) - 2)
        w = (time_s - t[i]) / dt
        return tuple((1 - w) * a[i] + w * a[i + 1] for a in (motion.q, motion.qd, motion.qdd))

    rhs = hybrid_rhs(model, V[0], driven)
    start = time.process_time()
    solve_ivp(rhs, (0.0, t[-1]), np.concatenate([q0, np.zeros(5)]), method="LSODA", t_eval=t)
    return time.process_time() - start


def run(smoke: bool) -> list[Measurement]:
    """Measure the batch, the baselines, compile/start-up times and memory."""
    model = load_model("real_gymnast")
    duration = 0.1 if smoke else 1.52
    batch = 20 if smoke else 200
    repeats = 1 if smoke else 9
    motion = clear_hip_circle_profile(duration)
    P = _box_population(model, batch)
    free = np.zeros(5)
    free[2] = HANDSTAND_HAND_ROTATION + 0.05
    q0 = model.equilibrium(model.parameter_matrix([{}]), motion.q[0], free_q=free)[0]
    v0 = np.zeros(5)
    sim = simulate(model, P[:1], motion, q0, v0, outputs=("points",))
    names = [model.point_names.index(p) for p in ("bar", "wrist", "elbow", "neck", "hip", "knee",
                                                  "ankle")]
    measured = sim.points[0][:, names] + 0.01
    cost_path = lambda: joint_centre_cost(model, P, motion, q0, v0, measured)  # noqa: E731
    coarse_path = lambda: joint_centre_cost(  # noqa: E731
        model, P, motion, q0, v0, measured, samples_per_step=2)
    cost_path()
    coarse_path()
    walls = _wall_samples(cost_path, repeats)
    t_batch = float(np.median(walls))
    cpu_batch = _median_cpu(cost_path, repeats)
    coarse_walls = _wall_samples(coarse_path, repeats)
    t_coarse = float(np.median(coarse_walls))
    cpu_coarse = _median_cpu(coarse_path, repeats)
    coarse_one = lambda: simulate(model, P, motion, q0, v0, outputs=(),  # noqa: E731
                                  measured=measured, threads=1, samples_per_step=2)
    t_coarse_one = median_time(coarse_one, repeats)
    one_thread = lambda: simulate(model, P, motion, q0, v0, outputs=(),  # noqa: E731
                                  measured=measured, threads=1)
    t_one = median_time(one_thread, repeats)
    t_points = median_time(lambda: simulate(model, P, motion, q0, v0, outputs=("points",)),
                           repeats)
    t_reference = median_time(lambda: simulate(model, P, motion, q0, v0, outputs=("points",),
                                               engine="reference"), 1)
    tracemalloc.start()
    simulate(model, P, motion, q0, v0, outputs=("free_q", "free_qd", "points"))
    peak_mb = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    t_pin = _pinocchio_lsoda(model, motion, q0)
    frames = len(motion.t)
    out = [
        Measurement(f"cost batch ({batch} × {frames} frames), wall", "ms/batch", t_batch * 1e3,
                    target="≤ 25 ms/batch (200 × 1521)"),
        Measurement(f"cost batch ({batch} × {frames} frames), wall, best of {repeats}",
                    "ms/batch", min(walls) * 1e3),
        Measurement(f"cost batch ({batch} × {frames} frames), CPU of both cores", "ms/batch",
                    cpu_batch * 1e3, target="≤ 50 ms CPU (25 ms wall on 2 cores)"),
        Measurement(f"cost batch ({batch} × {frames} frames), wall, one thread", "ms/batch",
                    t_one * 1e3),
        Measurement(f"cost batch ({batch} × {frames} frames), 2-sample steps, wall",
                    "ms/batch", t_coarse * 1e3, target="≤ 25 ms/batch (200 × 1521)"),
        Measurement(f"cost batch ({batch} × {frames} frames), 2-sample steps, wall, best of "
                    f"{repeats}", "ms/batch", min(coarse_walls) * 1e3),
        Measurement(f"cost batch ({batch} × {frames} frames), 2-sample steps, CPU", "ms/batch",
                    cpu_coarse * 1e3),
        Measurement(f"cost batch ({batch} × {frames} frames), 2-sample steps, wall, one "
                    "thread", "ms/batch", t_coarse_one * 1e3),
        Measurement("cost path per simulation, wall", "ms", t_batch / batch * 1e3,
                    target="≤ 0.125 ms"),
        Measurement("cost path per simulation, CPU", "ms", cpu_batch / batch * 1e3, t_pin * 1e3,
                    "LSODA + Pinocchio rhs (CPU)", target="≤ 0.25 ms CPU"),
        Measurement("cost path per simulation, 2-sample steps, wall", "ms",
                    t_coarse / batch * 1e3, target="≤ 0.125 ms"),
        Measurement("cost path per simulation, 2-sample steps, CPU", "ms",
                    cpu_coarse / batch * 1e3, t_pin * 1e3, "LSODA + Pinocchio rhs (CPU)",
                    target="≤ 0.25 ms CPU"),
        Measurement("points stored per simulation", "ms", t_points / batch * 1e3,
                    t_reference / batch * 1e3, "bemore reference kernel (kernels.py)"),
        Measurement("peak memory of the batch (states + points)", "MB", peak_mb,
                    target="≤ 200 MB"),
    ]
    if not smoke:
        t_numpy = _subprocess_seconds(_BASELINE_SCRIPT, [str(duration)],
                                      {"NUMBA_DISABLE_JIT": "1"})[0]
        out.insert(len(out) - 2, Measurement("cost path per simulation, CPU", "ms",
                                  cpu_batch / batch * 1e3, t_numpy * 1e3,
                                  "LSODA + plain numpy rhs, JIT off (CPU)"))
        for path, what in (("identify", "identification (real gymnast, shared motion, cost)"),
                           ("synthesis", "synthesis (exemplary, per-member motions, efforts)")):
            # Baseline: numba compiling the same generated source (BEMORE_CC=none), as every
            # run did before the C backend.
            fresh_runs = {}
            for backend, extra in (("clang", {}), ("numba", {"BEMORE_CC": "none"})):
                with tempfile.TemporaryDirectory() as fresh:
                    env = {"NUMBA_CACHE_DIR": fresh, "BEMORE_KERNEL_CACHE": fresh, **extra}
                    fresh_runs[backend] = _subprocess_seconds(_STARTUP_SCRIPT, [path], env)
            (total, first), (nb_total, nb_first) = fresh_runs["clang"], fresh_runs["numba"]
            out.append(Measurement(f"{what}: first engine call, fresh caches (compile)", "s",
                                   first, nb_first, "numba compiling the same source"))
            out.append(Measurement(f"{what}: whole script, fresh caches", "s", total, nb_total,
                                   "numba"))
            cached = {}
            for backend, extra in (("clang", {}), ("numba", {"BEMORE_CC": "none"})):
                _subprocess_seconds(_STARTUP_SCRIPT, [path], extra)  # fills the default caches
                cached[backend] = _subprocess_seconds(_STARTUP_SCRIPT, [path], extra)
            (total, first), (nb_total, nb_first) = cached["clang"], cached["numba"]
            out.append(Measurement(f"{what}: whole script, cached kernels", "s", total,
                                   nb_total, "numba"))
            out.append(Measurement(f"{what}: first engine call, cached (kernel load)", "s",
                                   first, nb_first, "numba"))
    return out
