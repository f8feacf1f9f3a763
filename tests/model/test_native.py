"""The C backend of the engine kernels (bemore/model/native.py): the translation of the
generated Python against numba's compilation of the same source, the translator's edge
semantics, and the errors."""

from __future__ import annotations

import importlib
import shutil

import numpy as np
import pytest

from bemore.errors import ConfigError, ModelError
from bemore.model import generated, native
from bemore.model.generated import _KINDS, _cached_program, _load_module

# The module (bemore.model re-exports its function under the same name).
simulation = importlib.import_module("bemore.model.simulate")
CLANG = shutil.which("clang")


def test_clang_is_there_and_is_the_default_backend(monkeypatch):
    """clang is a declared system package (tools/system-packages.txt); without it every first
    run would pay numba's compilation. Fail loudly rather than test the fallback only."""
    monkeypatch.delenv("BEMORE_CC", raising=False)
    assert CLANG is not None, "clang missing: run `make sysdeps`"
    assert generated.backend() == CLANG


def _small_batch(real, motion, start):
    q0, v0 = start
    P = real.parameter_matrix([{}, {"bar.stiffness_x": 5000.0}, {"trunk.mass": 27.5},
                               {"shoulder.damping_ap": 50000.0}, {"trunk.com": 0.25}])
    return P, q0, v0


def test_the_c_kernel_computes_what_numba_computes_from_the_same_source(real, motion, start,
                                                                        monkeypatch):
    """Shared motion, states, points and cost, one invalid member: the two compilations of the
    identification kernel agree to 1e-12 (relative to each quantity's scale) and on which
    members are invalid."""
    P, q0, v0 = _small_batch(real, motion, start)
    outputs = ("free_q", "free_qd", "points")
    results = {}
    for backend in ("c", "numba"):
        if backend == "numba":
            program = _cached_program(real.tree, len(real.point_names), tuple(
                real.point_names.index(p) for p in simulation.COST_POINTS))
            kernel = _load_module(program.source).integrate_shared
            monkeypatch.setattr(simulation, "kernel_for",
                                lambda *a, k=kernel, p=program, **kw: (k, p))
        sim = simulation.simulate(real, P, motion, q0, v0, outputs=outputs)
        measured = sim.points[0][:, [0, 1, 2, 4, 5, 6, 7]] + 0.01
        cost = simulation.simulate(real, P, motion, q0, v0, outputs=(), measured=measured,
                                 samples_per_step=2)
        results[backend] = sim, cost
    (c_sim, c_cost), (nb_sim, nb_cost) = results["c"], results["numba"]
    assert c_sim.valid.tolist() == nb_sim.valid.tolist() == [True, True, False, True, True]
    ok = c_sim.valid
    for name in outputs:
        a, b = getattr(c_sim, name)[ok], getattr(nb_sim, name)[ok]
        assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b)), name
        assert np.all(np.isnan(getattr(c_sim, name)[~ok]))
    assert np.allclose(c_cost.cost[ok], nb_cost.cost[ok], rtol=1e-12, atol=0.0)


def _compiled(tmp_path, source: str, name: str, kinds: dict):
    library = tmp_path / f"{name}.so"
    native.build(native.translate(source, name, kinds), CLANG, library)
    return native.load(library, name)


def test_integer_division_and_remainder_follow_python(tmp_path):
    """``//`` and ``%`` round toward −∞ as in Python (C truncates toward 0), ``/`` of two
    integers is a true division, ``x**3`` a product; NaN from a conditional expression."""
    source = (
        "def probe(n, d, x, out):\n"
        "    out[0] = n // d\n"
        "    out[1] = n % d\n"
        "    out[2] = n / d\n"
        "    out[3] = x**3\n"
        "    out[4] = (1.0 / x) if x > 0.0 else np.nan\n"
        "    out[5] = abs(x) + np.floor(x)\n"
    )
    probe = _compiled(tmp_path, source, "probe", {"n": "int", "d": "int", "x": "float",
                                                  "out": 1})
    out = np.zeros(6)
    for n, d, x in [(7, 2, 1.5), (-7, 2, -1.5), (7, -2, 0.3), (-7, -2, -2.25), (6, 3, 0.0)]:
        probe(n, d, x, out)
        expected = [n // d, n % d, n / d, x * x * x, (1.0 / x) if x > 0.0 else np.nan,
                    abs(x) + np.floor(x)]
        np.testing.assert_array_equal(out, expected)


def test_a_product_read_once_is_written_into_the_sum_that_reads_it(tmp_path):
    """So that clang can fuse the multiply-add within one expression; a product read twice,
    or read in a branch, or whose operand is reassigned in between, stays a statement."""
    source = (
        "def f(x, y, out):\n"
        "    t = x * y\n"
        "    u = x * x\n"
        "    w = y * 2.0\n"
        "    out[0] = t + 1.0\n"
        "    out[1] = u + u\n"
        "    if x > 0.0:\n"
        "        out[2] = w - 1.0\n"
    )
    text = native.translate(source, "f", {"x": "float", "y": "float", "out": 1})
    assert "t = " not in text and "out[(0)] = ((x * y) + 1.0);" in text
    assert "u = (x * x);" in text and "w = (y * 2.0);" in text
    f = _compiled(tmp_path, source, "f", {"x": "float", "y": "float", "out": 1})
    out = np.zeros(3)
    f(1.5, 2.5, out)
    np.testing.assert_array_equal(out, [1.5 * 2.5 + 1.0, 4.5, 4.0])


def test_arrays_are_indexed_row_major_and_checked(tmp_path):
    source = (
        "def copy(A, B, lo, hi):\n"
        "    for b in range(lo, hi):\n"
        "        s = A[1, b, 0] * 2.0\n"
        "        B[b, 1] = s + A.shape[1]\n"
    )
    copy = _compiled(tmp_path, source, "copy", {"A": 3, "B": 2, "lo": "int", "hi": "int"})
    A = np.arange(2 * 5 * 3, dtype=np.float64).reshape(2, 5, 3)
    B = np.zeros((5, 2))
    copy(A, B, 1, 4)
    np.testing.assert_array_equal(B[:, 1], [0, *(2 * A[1, 1:4, 0] + 5), 0])
    np.testing.assert_array_equal(B[:, 0], 0)
    with pytest.raises(ModelError, match="B must be a C-contiguous float64 array of rank 2"):
        copy(A, np.zeros((2, 5)).T, 1, 4)
    with pytest.raises(ModelError, match="rank 2"):
        copy(A, np.zeros(5), 1, 4)


@pytest.mark.parametrize("line, message", [
    ("    out[0] = np.sin(x)\n", "call"),
    ("    out[0] = 0.0 < x < 1.0\n", "chained comparison"),
    ("    out[0, 0] = x\n", "rank"),
    ("    out[0] = x ** 0.5\n", "power"),
    ("    out[0] = y\n", "read before it is assigned"),
])
def test_what_the_translator_does_not_know_is_an_error(line, message):
    source = "def f(x, out):\n" + line
    with pytest.raises(ModelError, match=message):
        native.translate(source, "f", {"x": "float", "out": 1})


def test_the_translation_covers_every_generated_kernel(real):
    """All four kernels of the real gymnast translate (compiling them is the other tests')."""
    program = _cached_program(real.tree, len(real.point_names), (0, 1, 2))
    for name in ("integrate_shared", "integrate_shared_efforts", "integrate_members",
                 "integrate_members_efforts"):
        kinds = dict(_KINDS, D=4) if name.startswith("integrate_members") else _KINDS
        text = native.translate(program.source, name, kinds)
        assert f"void {name}(" in text
        assert text.count(native._LANE_PRAGMA) == program.source.split(
            f"def {name}(")[1].split("\ndef ")[0].count("range(lo, hi)")


def test_a_compiler_that_fails_gives_one_clear_error(tmp_path, monkeypatch):
    with pytest.raises(ModelError, match="could not compile the engine kernel"):
        native.build("this is not C", shutil.which("false"), tmp_path / "x.so")
    assert not list(tmp_path.iterdir())  # nothing half-written is left
    with pytest.raises(ModelError, match=r"could not compile the engine kernel: .*No such file"):
        native.build("int x;", str(tmp_path / "vanished-compiler"), tmp_path / "y.so")
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv("BEMORE_CC", "no-such-compiler-here")
    with pytest.raises(ConfigError, match="BEMORE_CC=no-such-compiler-here: no such compiler"):
        native.compiler()
    monkeypatch.setenv("BEMORE_CC", "none")
    assert native.compiler() is None
    assert generated.backend() == "numba"


def test_a_damaged_cached_library_is_built_again(real, tmp_path, monkeypatch):
    """A truncated file in the kernel cache (a full disk, a killed copy) is rebuilt, not a
    traceback: loading the rebuilt library reads its signature symbol."""
    monkeypatch.setenv("BEMORE_KERNEL_CACHE", str(tmp_path))
    program = _cached_program(real.tree, len(real.point_names), (0, 1))
    library = native.library_path(tmp_path, f"integrate_shared\n{program.source}", CLANG)
    library.write_bytes(b"\x7fELF truncated")
    kernel = generated._build(program.source, "integrate_shared")
    assert library.stat().st_size > 10_000
    assert kernel.__name__ == "integrate_shared"


def test_threads_asking_for_one_library_build_it_once(tmp_path, monkeypatch):
    """Two threads asking for the same missing library: the second waits for the first's build
    (the per-library lock) and loads it, instead of translating and compiling it again."""
    import threading

    monkeypatch.setenv("BEMORE_KERNEL_CACHE", str(tmp_path))
    source = "def twice(x, out):\n    out[0] = 2.0 * x\n"
    built, started, waiting = [], threading.Event(), threading.Event()
    real_build, real_lock = native.build, native._library_lock

    def slow_build(c_source, cc, path):
        built.append(path)
        started.set()
        assert waiting.wait(60), "the second thread never reached the library's lock"
        real_build(c_source, cc, path)

    class Noticed:  # the lock, telling when a thread is about to wait for it
        def __init__(self, lock):
            self.lock = lock

        def __enter__(self):
            if started.is_set():
                waiting.set()
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    monkeypatch.setattr(native, "build", slow_build)
    monkeypatch.setattr(native, "_library_lock", lambda library: Noticed(real_lock(library)))
    kinds = {"x": "float", "out": 1}
    results = []

    def ask():
        results.append(native.cached(source, "twice", lambda: native.translate(
            source, "twice", kinds), CLANG))

    first = threading.Thread(target=ask)
    first.start()
    assert started.wait(60)
    ask()  # this thread: finds the build in progress and waits for it
    first.join()
    assert len(built) == 1 and len(results) == 2
    for kernel in results:  # both loaded the one library built
        out = np.zeros(1)
        kernel(1.25, out)
        assert out[0] == 2.5


def test_a_build_removes_what_killed_builds_left(tmp_path, monkeypatch):
    """The temporary files of builds older than the compile timeout (a killed process's) are
    removed by the next build; those of a build that may still be running are kept."""
    import os
    import time

    monkeypatch.setenv("BEMORE_KERNEL_CACHE", str(tmp_path))
    old = tmp_path / "native_0123456789abcdef-tmp99-7.c"
    recent = tmp_path / "native_0123456789abcdef-tmp98-7.so"
    for path in (old, recent):
        path.write_text("left behind")
    long_ago = time.time() - native.COMPILE_TIMEOUT_S - 60
    os.utime(old, (long_ago, long_ago))
    source = "def twice(x, out):\n    out[0] = 2.0 * x\n"
    native.cached(source, "twice",
                  lambda: native.translate(source, "twice", {"x": "float", "out": 1}), CLANG)
    assert not old.exists() and recent.exists()
