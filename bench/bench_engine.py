"""Engine speed: the 14-coordinate gymnast, 1521 frames at 1 kHz, a batch of 200 parameter
vectors (target ≤ 12 ms per batch with one sample per step).

Against the hardware: the flop per member and step counted in the generated kernel
(:func:`flop_per_step`), the rate this gives at the batch's median wall time, as a fraction of
the CPU's nominal FMA peak (:func:`cpu_facts`: cores × clock × vector lanes × 2 × FMA pipes)
and next to an FMA-only kernel run on every core alternately with the batches (what the
machine, under its current load, gives at best).

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
from bemore.model.generated import kernel_for, run_calls
from bemore.model.profiles import HANDSTAND_HAND_ROTATION, clear_hip_circle_profile
from bemore.model.simulate import COST_POINTS
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


# The machine's FMA throughput, measured: ACCUMULATORS independent multiply-add chains of one
# vector register each (more chains than FMA latency × pipes, so that the pipes never wait), in
# the engine's vector width, compiled with the engine's flags.
ACCUMULATORS = 10
_FMA_SOURCE = """#include <stdint.h>
typedef double vec __attribute__((vector_size({bytes})));
const char fma_peak_signature[] = "x:1,reps:int";
void fma_peak(double *restrict x, int64_t x_n0, int64_t reps) {{
    vec a[{n}];
    vec m, c;
    for (int k = 0; k < {lanes}; k++) {{ m[k] = x[0]; c[k] = x[1]; }}
    for (int i = 0; i < {n}; i++) a[i] = m * (double)(i + 2);
    for (int64_t r = 0; r < reps; r++) {{
        for (int i = 0; i < {n}; i++) a[i] = a[i] * m + c;
    }}
    for (int i = 0; i < {n}; i++)
        for (int k = 0; k < {lanes}; k++) x[2 + i * {lanes} + k] = a[i][k];
}}
"""
FMA_PIPES = 2  # full-width FMA units per core (Intel Xeon Scalable, AMD Zen 5): what "peak" assumes
ZEN_FAMILY = 25  # AMD "cpu family" 0x19: Zen 3 and Zen 4


def fma_pipes(vendor: str, family: int, lanes: int) -> int:
    """Vector FMAs of ``lanes`` doubles a core can start per cycle: FMA_PIPES, but one for
    512-bit vectors on AMD's family 25 (Zen 4 runs each 512-bit operation on both of its two
    256-bit FMA pipes; this VM's FMA-only kernel reaches 16 flop per cycle, not 32).

    >>> fma_pipes("AuthenticAMD", 25, 8), fma_pipes("AuthenticAMD", 25, 4)
    (1, 2)
    >>> fma_pipes("GenuineIntel", 6, 8), fma_pipes("AuthenticAMD", 26, 8)
    (2, 2)
    """
    return 1 if vendor == "AuthenticAMD" and family == ZEN_FAMILY and lanes == 8 else FMA_PIPES


def cpu_facts() -> dict:
    """The CPU's model, cores, nominal clock (MHz, /proc/cpuinfo "cpu MHz"), doubles per vector
    register (8 with avx512f, 4 with avx2/fma, else 2) and nominal FMA peak in GFLOP/s:
    cores × clock × lanes × 2 flop per multiply-add × :func:`fma_pipes`."""
    facts = {"model": "unknown", "mhz": 0.0, "flags": set(), "vendor": "", "family": 0}
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name":
                    facts["model"] = value.strip()
                elif key == "cpu MHz":
                    facts["mhz"] = float(value)
                elif key == "flags":
                    facts["flags"] = set(value.split())
                elif key == "vendor_id":
                    facts["vendor"] = value.strip()
                elif key == "cpu family":
                    facts["family"] = int(value)
                elif not line.strip():
                    break
    except OSError:
        pass
    flags = facts["flags"]
    lanes = 8 if "avx512f" in flags else 4 if {"avx2", "fma"} <= flags else 2
    cores = os.cpu_count() or 1
    pipes = fma_pipes(facts["vendor"], facts["family"], lanes)
    peak = cores * facts["mhz"] * 1e-3 * lanes * 2 * pipes
    return {"model": facts["model"], "cores": cores, "mhz": facts["mhz"], "lanes": lanes,
            "pipes": pipes, "peak_gflops": peak, "peak_core_gflops": peak / cores}


def fma_kernel(lanes: int):
    """The compiled FMA-throughput kernel (see _FMA_SOURCE): fma(x, reps) does
    ACCUMULATORS × lanes × reps multiply-adds (2 flop each)."""
    from bemore.model import native

    source = _FMA_SOURCE.format(bytes=8 * lanes, n=ACCUMULATORS, lanes=lanes)
    path = native.library_path(native.cache_folder(), source, native.compiler())
    if not os.path.exists(path):
        native.build(source, native.compiler(), path)
    return native.load(path, "fma_peak")


def flop_per_step(source: str, name: str = "integrate_shared") -> int:
    """Floating-point operations per member and integrator step of the cost path
    (``joint_centre_cost``, one sample per step: stage 0, the generic stage three times, the new
    state, the cost of one frame), counted in the generated kernel ``name`` of ``source``:
    every +, −, ×, ÷ of a lane loop's statements (subscripts aside) is one flop, a fused
    multiply-add two; negations, comparisons, floor and abs are not counted, nor the driven
    values computed once per step for all lanes. A branch counts as the cost path takes it
    inside a step (cost only, one sample and one step per sample, n ≥ 1); a test on names
    it does not set (st) counts both sides."""
    import ast

    function = next(node for node in ast.parse(source).body
                    if isinstance(node, ast.FunctionDef) and node.name == name)

    def flops(node) -> int:
        if isinstance(node, ast.Subscript):
            return 0
        own = isinstance(node, ast.BinOp) and isinstance(
            node.op, ast.Add | ast.Sub | ast.Mult | ast.Div)
        return own + sum(flops(child) for child in ast.iter_child_nodes(node))

    def walk(body, weight: int) -> int:
        total = 0
        for s in body:
            if isinstance(s, ast.For):
                text = ast.unparse(s.iter)
                if text.startswith("range(lo, hi)"):
                    total += weight * sum(flops(x) for x in s.body)
                elif text == "range(1, 4)":  # the generic stage, for stages 1-3
                    total += walk(s.body, 3 * weight)
                else:  # the step loop, and the frames of a step (one, at 1 sample per step)
                    total += walk(s.body, weight)
            elif isinstance(s, ast.If):
                try:
                    taken = eval(compile(ast.Expression(s.test), "<test>", "eval"),
                                 {"__builtins__": {}}, dict(path))
                except NameError:
                    total += walk(s.body, weight) + walk(s.orelse, weight)
                else:
                    total += walk(s.body if taken else s.orelse, weight)
        return total

    path = {"store_state": 0, "store_points": 0, "do_cost": 1, "spp": 1, "n_sub": 1, "n": 1,
            "n_steps": 2}

    return walk(function.body, 1)


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


def handstand_start(model, motion) -> tuple[np.ndarray, np.ndarray]:
    """(q0, q̇0) of the free coordinates (5,): at rest, the hands 0.05 rad past the handstand,
    the bar springs at their equilibrium for the model's default parameters and the motion's
    first posture."""
    free = np.zeros(5)
    free[2] = HANDSTAND_HAND_ROTATION + 0.05
    q0 = model.equilibrium(model.parameter_matrix([{}]), motion.q[0], free_q=free)[0]
    return q0, np.zeros(5)


def run(smoke: bool) -> list[Measurement]:
    """Measure the batch, the baselines, compile/start-up times and memory."""
    model = load_model("real_gymnast")
    duration = 0.1 if smoke else 1.52
    batch = 20 if smoke else 200
    repeats = 1 if smoke else 9
    motion = clear_hip_circle_profile(duration)
    P = _box_population(model, batch)
    q0, v0 = handstand_start(model, motion)
    sim = simulate(model, P[:1], motion, q0, v0, outputs=("points",))
    names = [model.point_names.index(p) for p in COST_POINTS]
    measured = sim.points[0][:, names] + 0.01
    cost_path = lambda: joint_centre_cost(model, P, motion, q0, v0, measured)  # noqa: E731
    coarse_path = lambda: joint_centre_cost(  # noqa: E731
        model, P, motion, q0, v0, measured, samples_per_step=2)
    cost_path()
    coarse_path()
    # The cost batch alternated with the FMA-throughput kernel on every core (a call lasting
    # about as long as a batch at the nominal peak), so that both see the same load.
    facts = cpu_facts()
    fma = fma_kernel(facts["lanes"])
    reps = max(1, int(0.01 * facts["peak_core_gflops"] * 1e9 / (2 * ACCUMULATORS
                                                                 * facts["lanes"])))
    cells = [np.full(2 + ACCUMULATORS * facts["lanes"], 0.5) for _ in range(facts["cores"])]
    for x in cells:
        x[:2] = 0.999999, 1e-7
    walls, cpus, fma_rates, fma_cpu_rates = [], [], [], []
    load_before = os.getloadavg()[0]
    fma_flop = 2 * ACCUMULATORS * facts["lanes"] * reps * len(cells)
    for _ in range(repeats):
        cpu = time.process_time()
        walls += _wall_samples(cost_path, 1)
        cpus.append(time.process_time() - cpu)
        start, cpu = time.perf_counter(), time.process_time()
        run_calls(fma, [(x, reps) for x in cells])
        fma_rates.append(fma_flop / (time.perf_counter() - start) / 1e9)
        fma_cpu_rates.append(fma_flop / (time.process_time() - cpu) / 1e9)
    load_after = os.getloadavg()[0]
    t_batch = float(np.median(walls))
    _, program = kernel_for(model.tree, len(model.point_names), False, False,
                            tuple(model.point_names.index(p) for p in COST_POINTS))
    flop = flop_per_step(program.source)
    steps = len(motion.t) - 1
    rate = flop * batch * steps / t_batch / 1e9
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
                    target="≤ 12 ms/batch (200 × 1521, one sample per step)"),
        Measurement(f"load average (1 min) before the alternated batches ({load_before:.1f}) "
                    "and after", "", load_after),
        Measurement("engine flop per member and step (cost path, generated kernel)", "flop",
                    flop),
        Measurement(f"engine rate, cost batch, {facts['cores']} threads (median wall)",
                    "GFLOP/s", rate, float(np.median(fma_rates)),
                    "FMA-only kernel, all cores, same run (alternated)"),
        Measurement("engine rate per core while running (flop / CPU time of all threads, "
                    "median)", "GFLOP/s", flop * batch * steps / float(np.median(cpus)) / 1e9,
                    float(np.median(fma_cpu_rates)), "FMA-only kernel, same run"),
        Measurement(f"engine rate / nominal FMA peak ({facts['model']}, {facts['cores']} cores "
                    f"× {facts['mhz']:.0f} MHz × {facts['lanes']} lanes × 2 flop × "
                    f"{facts['pipes']} pipes = {facts['peak_gflops']:.1f} GFLOP/s)", "%",
                    100 * rate / facts["peak_gflops"]),
        Measurement("FMA-only kernel / nominal FMA peak (same run: what the load leaves)", "%",
                    100 * float(np.median(fma_rates)) / facts["peak_gflops"]),
        Measurement("engine / nominal peak of the cores it ran on (CPU time: the share the "
                    "load leaves aside)", "%", 100 * flop * batch * steps / float(np.median(cpus))
                    / 1e9 / facts["peak_core_gflops"]),
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
