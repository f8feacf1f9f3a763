"""Compile, once per machine, what a first ``bemore identify`` and ``bemore synthesize`` compile.

``python -m bemore.warmup`` (run by ``make venv``) identifies the bundled sample with a tiny
search (5 wolves, 1 iteration, the default polish) and synthesizes one start for the athlete it
wrote, each in its own process and into a temporary folder that is then removed: the engine's
generated kernels every path of the two commands uses are compiled and cached
(``~/.cache/bemore``, or ``BEMORE_KERNEL_CACHE``), with numba's cache for the identification's
numba parts, so that a coach's first real run only loads them. The sample has no bar forces:
the tangent kernel a trial with forces adds (the exact Jacobian with the free state's tangents)
is built directly (:func:`bemore.model.sensitivity.build_identification_kernels`). Before
them, bemore's and the bench side's Python files are byte-compiled (``__pycache__``, as pip
does for an installed package; an editable install otherwise compiles them at each run where
Python is told not to write bytecode, ≈ 0.1 s of CPU per command). One progress line, then
the seconds it took; a command that fails is one error line and exit code 1.
"""

from __future__ import annotations

import compileall
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "sample_trial.c3d"
PACKAGES = ("bemore", "controller")
"""The packages whose modules the commands import (byte-compiled by :func:`compile_bytecode`)."""


def compile_bytecode() -> bool:
    """Byte-compile the modules of :data:`PACKAGES` where they are installed (files already
    compiled are skipped); False if one could not be compiled (it is then compiled at import,
    as without this step)."""
    import importlib.util

    done = True
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        for folder in (spec.submodule_search_locations or []) if spec else []:
            done = bool(compileall.compile_dir(folder, quiet=1)) and done
    return done


def warm_up() -> float:
    """Run the two commands on a tiny problem (see the module docstring); return the seconds
    taken. Raises RuntimeError naming the command that failed (exit code other than 0, or 1
    for the tiny search's poor fit)."""
    start = time.perf_counter()
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="bemore-warmup-") as scratch:
        folder = Path(scratch)
        identify = [sys.executable, "-m", "bemore", "identify", str(SAMPLE), "--pack", "5",
                    "--iterations", "1", "--out", str(folder / "identify")]
        synthesize = [sys.executable, "-m", "bemore", "synthesize",
                      str(folder / "identify" / "athlete.json"), "--accept-poor-fit",
                      "--starts", "1", "--no-animation", "--out", str(folder / "gesture")]
        for command, accepted in ((identify, (0, 1)), (synthesize, (0, 1))):
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            if result.returncode not in accepted:
                last = (result.stderr.strip().splitlines() or ["(no message)"])[-1]
                raise RuntimeError(f"bemore {command[3]} exited with {result.returncode}: {last}")
    from bemore.model import load_model
    from bemore.model.sensitivity import build_identification_kernels

    build_identification_kernels(load_model("real_gymnast"))
    return time.perf_counter() - start


def main() -> int:
    """Entry point of ``python -m bemore.warmup``."""
    if not SAMPLE.is_file():
        print(f"bemore warm-up: {SAMPLE} not found; the first run will compile instead")
        return 0
    print("bemore: compiling the engine's kernels for identify and synthesize "
          "(once per machine)…", flush=True)
    try:
        seconds = warm_up()
    except RuntimeError as error:
        print(f"bemore warm-up: error: {error}", file=sys.stderr)
        return 1
    print(f"bemore: kernels compiled and cached in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
