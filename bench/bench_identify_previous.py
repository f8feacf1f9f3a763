"""``bemore identify`` on the sample, warm, whole processes, beside an earlier commit's code.

``python -m bench identify_previous``: ``bemore identify data/sample_trial.c3d`` (defaults:
GWO 200 × 50, the 3-start polish, the analysis, athlete.json, the plots) alternated between the
tree of :data:`PREVIOUS_COMMIT` (``git archive``, run with the same interpreter and compiled
kernels) and this checkout, one unmeasured pair then ``PAIRS`` measured ones; each phase
(:mod:`bemore.phases`) in wall and CPU time, the whole process's wall time and its CPU time
(``wait4``: the process and any child it waited for), medians, with the 1-minute load average
before each run. Both trees are byte-compiled first (as installed: a module changed since the
last compilation is otherwise compiled from source at every run where bytecode is not written).
The previous tree is given this checkout's ``bemore/phases.py`` (the marks alone, which then
carry the CPU time in both). Both
must write the same parameters and fit (``bench_polish.same_result``: numbers to 1e-5
relative; the standard errors, computed differently since the marker noise's propagation, are
not compared): a difference raises.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
from pathlib import Path

from bench.bench_polish import same_result
from bench.common import Measurement, byte_compiled, commit_tree, time_bemore

REPOSITORY = Path(__file__).resolve().parent.parent
SAMPLE = REPOSITORY / "data" / "sample_trial.c3d"
PREVIOUS_COMMIT = "69972a9"
"""main before the markers' slide on the skin was added to the analysis (its 14 noise-free copies
run through the trial chain with the noise copies: docs/identify.md, "Soft tissue"). Earlier:
8da8fcc, before a thread's lanes ran in one kernel call on cores with a 32 kB L1 data cache and
the segment table's uncertainty was added to the analysis; 4c83932, before
the stages' forces were summed at the free frames and the tangent kernels took sine, cosine and
reciprocals' derivatives in closed form; a276d58, before the polish's first stage
differenced a Jacobian's direction left over after whole tangent vectors; 0879f2f, before the
exact Jacobian's kernel stored the cost points only; d78928a, before a Jacobian's directions
were cut between the engine threads."""
PAIRS = 8  # even: as many pairs with each commit first


def identify_phases(tree: Path | None, out: Path, options: list[str]) -> dict[str, float]:
    """One ``bemore identify`` of the sample from ``tree`` (None: this checkout): seconds of
    each phase, "total" (wall), "cpu" (user + system) and "load" (before it)."""
    from bemore.phases import cpu_durations, durations

    run = time_bemore(tree, ["identify", str(SAMPLE), *options], out)
    seconds = durations(run.marks, run.started_unix_s, run.total)
    seconds.update({f"{phase} CPU": value
                    for phase, value in cpu_durations(run.marks, run.cpu).items()})
    seconds.update(total=run.total, cpu=run.cpu, load=run.load)
    return seconds


def alternated(pairs: int, options: list[str]) -> tuple[dict[str, list[dict[str, float]]], str]:
    """``pairs`` measured pairs (after one unmeasured), the previous commit first in every other
    pair: on the 2-core VM the second run of a pair can be slower by several percent, which a
    fixed order would add to one side's every phase (docs/speed.md, "identify: the Jacobian's
    seven points, …")."""
    samples: dict[str, list[dict[str, float]]] = {"previous": [], "now": []}
    with tempfile.TemporaryDirectory() as temporary:
        folder = Path(temporary)
        tree = commit_tree(PREVIOUS_COMMIT, folder / "previous")
        byte_compiled(REPOSITORY)  # both trees as installed: bytecode compiled once
        shutil.copyfile(REPOSITORY / "bemore" / "phases.py", tree / "bemore" / "phases.py")
        for pair in range(pairs + 1):
            order = (("previous", tree), ("now", None))
            for name, source in (order if pair % 2 == 0 else order[::-1]):
                sample = identify_phases(source, folder / name, options)
                if pair:
                    samples[name].append(sample)
            same_result(folder / "previous", folder / "now")
    loads = [sample["load"] for name in samples for sample in samples[name]]
    return samples, f"load {min(loads):.1f}–{max(loads):.1f}"


def run(smoke: bool) -> list[Measurement]:
    """Per-phase and whole-process medians (smoke: one pair of a 5 × 2 search on 0.5 s)."""
    if smoke:
        from bench.bench_identify import trimmed_trial_config

        with tempfile.TemporaryDirectory() as scratch:
            config = trimmed_trial_config(Path(scratch), 0.5)
            samples, loads = alternated(1, ["--trial-config", str(config), "--pack", "5",
                                            "--iterations", "2"])
    else:
        samples, loads = alternated(PAIRS, [])
    pairs = len(samples["now"])
    print(f"  {pairs} alternated pairs, {loads}; athlete.json the same (1e-5 relative)")
    keys = [key for key in samples["now"][0] if key != "load"]
    for name in ("previous", "now"):
        print(f"  {name}: whole process " + ", ".join(
            f"{sample['total']:.2f}" for sample in samples[name]) + " s")
    return [
        Measurement(f"identify {key} (median of {pairs})", "s",
                    statistics.median(sample[key] for sample in samples["now"]),
                    statistics.median(sample.get(key, 0.0) for sample in samples["previous"]),
                    f"commit {PREVIOUS_COMMIT}", "≤ 3 s" if key == "total" else "")
        for key in keys
    ]
