"""The engine's cost batch beside an earlier commit's kernel, alternated in one process.

``python -m bench engine_previous``: the batch of ``bench_engine`` (``simulate`` on the cost
path, 200 parameter vectors of the box × 1521 frames, one step per sample) run with this
checkout's kernel and with the kernel of :data:`PREVIOUS_COMMIT` (its generated source, C
translation and compiler flags, built by that commit's own code from a ``git archive`` of it,
in a child process), alternately, after one unmeasured call of each: the same Python around
both, so the difference is the compiled kernel's. CPU time of the process (all threads:
robust to the other jobs of a shared machine) and wall time, medians, with the 1-minute load
average before and after; and whether the two kernels' costs are equal bit for bit.
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.bench_engine import _box_population, handstand_start
from bench.common import Measurement, commit_tree

PREVIOUS_COMMIT = "754e9a1"
"""main before stage 0 copied the state to S0 as it read it, the new state's lane loop added the
next frame's cost and read stage 3's increment from UN (docs/speed.md, "The engine: fewer
passes over the lanes per step"; issue 24). Earlier: 4c83932, before the stages' forces were
summed at the free frames only; 0879f2f, before the exact Jacobian's kernel stored the cost
points only; c196c46, before the spills on 64-byte stack slots and the values computed where
needed."""
PAIRS = 15

# Run inside the previous tree: write the library of its shared-motion cost kernel for the
# real gymnast, print its driven-table slots. argv: tree, library path.
_BUILD_PREVIOUS = """
import json, sys
root, library = sys.argv[1], sys.argv[2]
sys.meta_path = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]
sys.path.insert(0, root)
import bemore
assert bemore.__file__.startswith(root), bemore.__file__
from pathlib import Path
from bemore.model import load_model, native
from bemore.model.generated import _KINDS, generate_program
from bemore.model.simulate import COST_POINTS
model = load_model("real_gymnast")
program = generate_program(model.tree, len(model.point_names),
                           tuple(model.point_names.index(p) for p in COST_POINTS))
native.build(native.translate(program.source, "integrate_shared", _KINDS), native.compiler(),
             Path(library))
print(json.dumps({"slots": program.slots, "member_slots": program.member_slots,
                  "source": program.source}))
"""


def previous_kernel(folder: Path):
    """(kernel, Program) of :data:`PREVIOUS_COMMIT`'s cost path, built under ``folder``."""
    from bemore.model import native
    from bemore.model.generated import Program

    tree = commit_tree(PREVIOUS_COMMIT, folder / "previous")
    library = folder / "previous_kernel.so"
    done = subprocess.run([sys.executable, "-c", _BUILD_PREVIOUS, str(tree), str(library)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"building {PREVIOUS_COMMIT}'s kernel: {done.stderr[-800:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    program = Program(data["source"], tuple(map(tuple, data["slots"])),
                      tuple(map(tuple, data["member_slots"])))
    return native.load(library, "integrate_shared"), program


def run(smoke: bool) -> list[Measurement]:
    """Alternated pairs at 2 threads and at 1 (see the module docstring)."""
    from bemore.model import load_model, native, simulate
    from bemore.model.generated import kernel_for
    from bemore.model.profiles import clear_hip_circle_profile
    from bemore.model.simulate import COST_POINTS

    if native.compiler() is None:
        raise RuntimeError("bench engine_previous compares compiled kernels: no C compiler")
    simulate_module = importlib.import_module("bemore.model.simulate")
    model = load_model("real_gymnast")
    duration, batch, pairs = (0.1, 16, 1) if smoke else (1.52, 200, PAIRS)
    motion = clear_hip_circle_profile(duration)
    P = _box_population(model, batch)
    q0, v0 = handstand_start(model, motion)
    names = [model.point_names.index(p) for p in COST_POINTS]
    measured = simulate(model, P[:1], motion, q0, v0, outputs=("points",)).points[0][:, names]
    measured = measured + 0.01
    kernel_for(model.tree, len(model.point_names), False, False, tuple(names))  # built first
    # Each kernel reads its own driven table: a copy of the motion keeps the cached tables
    # apart (they are cached per motion object).
    motions = {"now": motion, "previous": copy.copy(motion)}
    original = simulate_module.kernel_for
    with tempfile.TemporaryDirectory() as temporary:
        previous = previous_kernel(Path(temporary))
        chosen = {"which": "now"}

        def patched(*args, **kwargs):
            kernel, program = original(*args, **kwargs)
            shared_cost_kernel = not args[2] and not args[3]
            if shared_cost_kernel and chosen["which"] == "previous":
                return previous
            return kernel, program

        def batch_cost(which: str, threads: int) -> np.ndarray:
            chosen["which"] = which
            return simulate(model, P, motions[which], q0, v0, outputs=(), measured=measured,
                            points=COST_POINTS, threads=threads).cost

        simulate_module.kernel_for = patched
        try:
            costs = {which: batch_cost(which, 2) for which in ("previous", "now")}
            samples: dict[tuple[str, int], list[tuple[float, float]]] = {}
            load_before = os.getloadavg()[0]
            for threads in (2, 1):
                for pair in range(pairs):
                    order = ("previous", "now") if pair % 2 == 0 else ("now", "previous")
                    for which in order:
                        cpu, wall = time.process_time(), time.perf_counter()
                        batch_cost(which, threads)
                        samples.setdefault((which, threads), []).append(
                            (time.process_time() - cpu, time.perf_counter() - wall))
            load_after = os.getloadavg()[0]
        finally:
            simulate_module.kernel_for = original
    scale = np.maximum(np.abs(costs["previous"]), 1e-300)
    difference = float(np.nanmax(np.abs(costs["now"] - costs["previous"]) / scale))
    frames = len(motion.t)
    same = ("equal to the previous kernel's bit for bit" if difference == 0 else
            f"within {difference:.1e} (relative) of the previous kernel's")
    out = [Measurement(f"load average (1 min) before the pairs ({load_before:.1f}) and after; "
                       f"the {batch} costs {same}", "", load_after)]
    for threads in (2, 1):
        for column, what in ((0, "CPU of all threads"), (1, "wall")):
            now = float(np.median([s[column] for s in samples[("now", threads)]]))
            before = float(np.median([s[column] for s in samples[("previous", threads)]]))
            out.append(Measurement(
                f"cost batch ({batch} × {frames} frames), {threads} thread"
                f"{'s' if threads > 1 else ''}, {what}, median of {pairs} alternated",
                "ms/batch", now * 1e3, before * 1e3, f"{PREVIOUS_COMMIT}'s kernel"))
    return out
