"""Shared helpers of the benchmark scripts: timing, and one result format."""

from __future__ import annotations

import compileall
import platform
import statistics
import subprocess
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from io import BytesIO
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent

# Runs ``python -m bemore`` from the tree given first, not the editable install of this checkout
# (whose import hook would take precedence over sys.path): ``python -c RUN_TREE TREE ARGS…``.
RUN_TREE = (
    "import runpy, sys\n"
    "root = sys.argv.pop(1)\n"
    "sys.meta_path = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]\n"
    "sys.path.insert(0, root)\n"
    "import bemore\n"
    "assert bemore.__file__.startswith(root), bemore.__file__\n"
    "runpy.run_module('bemore', run_name='__main__', alter_sys=True)\n"
)


@dataclass
class Measurement:
    """One benchmark figure of bemore next to its baseline (same unit for both)."""

    name: str
    unit: str
    bemore: float
    baseline: float | None = None
    baseline_name: str = ""
    target: str = ""

    def line(self) -> str:
        """Human-readable one-line report."""
        text = f"{self.name}: bemore {self.bemore:.4g} {self.unit}"
        if self.baseline is not None:
            ratio = self.baseline / self.bemore if self.bemore else float("inf")
            text += f" | {self.baseline_name} {self.baseline:.4g} {self.unit} | ratio {ratio:.1f}x"
        if self.target:
            text += f" | target {self.target}"
        return text


def median_time(function: Callable[[], object], repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``function`` (seconds)."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def run_child(args: list[str], **options) -> subprocess.CompletedProcess:
    """Run a child process (output captured as text); a failure raises RuntimeError carrying
    the end of the child's stderr, so that a failing benchmark says why."""
    result = subprocess.run(args, capture_output=True, text=True, check=False, **options)
    if result.returncode != 0:
        raise RuntimeError(f"{args[:3]} exited with {result.returncode}:\n{result.stderr[-3000:]}")
    return result


@dataclass
class TimedCommand:
    """One ``bemore`` command timed as a whole process: wall and CPU seconds (the process and
    its waited-for children), the load average before it, and where its phase marks went."""

    total: float
    cpu: float
    load: float
    started_unix_s: float
    marks: Path


def time_bemore(tree: Path | None, args: list[str], out: Path,
                accepted: tuple[int, ...] = (0,)) -> TimedCommand:
    """Run ``bemore ARGS --out OUT`` from ``tree`` (None: this checkout) with its phase marks
    in ``OUT-phases.jsonl``; an exit code not in ``accepted`` raises RuntimeError with the end
    of the command's stderr."""
    import os
    import sys

    marks = out.parent / f"{out.name}-phases.jsonl"
    marks.unlink(missing_ok=True)
    env = dict(os.environ, BEMORE_PHASE_TIMES=str(marks))
    prefix = [sys.executable, "-c", RUN_TREE, str(tree)] if tree else [sys.executable, "-m",
                                                                        "bemore"]
    before, started, clock = os.getloadavg()[0], time.time(), time.perf_counter()
    child = subprocess.Popen([*prefix, *args, "--out", str(out)],
                             cwd=Path(__file__).resolve().parent.parent, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(child.pid, 0)
    total = time.perf_counter() - clock
    error = child.stderr.read()
    child.stderr.close()
    if os.waitstatus_to_exitcode(status) not in accepted:
        raise RuntimeError(f"{args[0]} from {tree or 'the checkout'} failed: {error[-1500:]}")
    return TimedCommand(total=total, cpu=usage.ru_utime + usage.ru_stime, load=before,
                        started_unix_s=started, marks=marks)


def machine() -> str:
    """A one-line description of the machine the figures come from."""
    import os

    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


def commit_tree(commit: str, folder: Path) -> Path:
    """The files of ``commit`` extracted into ``folder`` (``git archive``), to run a baseline
    with :data:`RUN_TREE` beside this checkout in the same run."""
    archive = subprocess.run(["git", "archive", commit], cwd=REPOSITORY, capture_output=True,
                             check=False)
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {commit}: {archive.stderr.decode()[-500:]}")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return byte_compiled(folder)


def byte_compiled(tree: Path) -> Path:
    """``tree`` with its bemore and controller modules byte-compiled (``__pycache__``), as an
    installed program runs: the trees compared then pay the same imports, and none pays Python
    compiling its sources at every run where it is told not to write bytecode
    (``PYTHONDONTWRITEBYTECODE``)."""
    for package in ("bemore", "controller"):
        if (tree / package).is_dir():
            compileall.compile_dir(tree / package, quiet=1)
    return tree


def search_starts(problem, pack: int, iterations: int, count: int):
    """The ``count`` best distinct points (count, dim) of a GWO search of ``problem`` (pack ×
    iterations, seed 0), picked as ``bemore identify`` picks its polish starts."""
    import numpy as np

    from bemore.identify.run import _Archive
    from bemore.optimize import make_algorithm, minimize
    from bemore.optimize.polish import distinct_starts

    archive = _Archive(problem)
    minimize(archive, make_algorithm("gwo", problem, pack, iterations, 0, {}), seed=0)
    X, F = np.vstack(archive.points), np.concatenate(archive.costs)
    return X[distinct_starts(X, F, count, problem.lower, problem.upper)]
