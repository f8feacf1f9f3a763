"""The exported C of the exemplary model on the ATmega2560: built with avr-gcc under strict C99,
run in simavr (tests/avr/model/cycles.c, the simavr library the firmware's harness uses), its
results compared with the engine and its cost measured in emulated CPU cycles at 16 MHz.

avr-gcc's ``double`` is 32 bits (IEEE single: 24-bit significand, ε = 1.2e-7): the exported code
computes in single precision there, so agreement is expected at ~1e-6 of the terms' magnitude,
not 1e-12. The cycle counts are emulated (deterministic for a compiler version), not wall time."""

from __future__ import annotations

import shutil
import struct
import subprocess

import numpy as np
import pytest

from bemore.model.symbolic import NumericModel
from bemore.paths import REPOSITORY_DIR
from tests.model.export_c_support import STRICT, write_c
from tests.model.symbolic_support import random_parameters, random_state, symbolic

HERE = REPOSITORY_DIR / "tests" / "avr" / "model"
AVR_FLAGS = ("-mmcu=atmega2560", "-DF_CPU=16000000UL", "-O2")  # firmware/avr.mk's target
CASES = 8
SINGLE_PRECISION_TOLERANCE = 1e-6  # of the terms' magnitude; float32 rounding, see the docstring
F_CPU_HZ = 16_000_000


def _c_array(rows: np.ndarray) -> str:
    return "{" + ", ".join("{" + ", ".join(repr(float(x)) for x in row) + "}" for row in rows) + "}"


@pytest.fixture(scope="module")
def avr_run(tmp_path_factory):
    """Build and run the exemplary model's bench program; the inputs, outputs and markers."""
    for tool in ("avr-gcc", "avr-size", "gcc", "pkg-config"):
        assert shutil.which(tool), f"{tool} is missing: run `make sysdeps`"
    model, sym = symbolic("exemplary_gymnast")
    out = tmp_path_factory.mktemp("avr_model")
    prefix, _, source = write_c(sym, out)
    rng = np.random.default_rng(2560)
    P = np.vstack([random_parameters(model, rng) for _ in range(CASES)])
    states = [random_state(model, rng) for _ in range(CASES)]
    # The AVR sees single-precision inputs: the engine gets the same (rounded) numbers.
    single = lambda x: np.asarray(x, dtype=np.float32).astype(np.float64)  # noqa: E731
    P = single(P)
    q, v, a = (single(np.array([s[k] for s in states])) for k in range(3))
    up = prefix.upper()
    (out / "cases.h").write_text(
        f'#include "{prefix}.h"\n#define PREFIX(name) {prefix}_##name\n'
        f"#define N {up}_N\n#define N_FREE {up}_N_FREE\n#define N_DRIVEN {up}_N_DRIVEN\n"
        f"#define N_CASES {CASES}\n"
        f"static const volatile double case_parameters[N_CASES][{P.shape[1]}] = {_c_array(P)};\n"
        f"static const volatile double case_q[N_CASES][N] = {_c_array(q)};\n"
        f"static const volatile double case_v[N_CASES][N] = {_c_array(v)};\n"
        f"static const volatile double case_a[N_CASES][N] = {_c_array(a)};\n")
    elf = out / "bench.elf"
    build = subprocess.run(["avr-gcc", *STRICT, *AVR_FLAGS, "-I", str(out), "-o", str(elf),
                            str(source), str(HERE / "bench.c"), "-lm"],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    # The model alone, as a library would link it: its flash (code) and static RAM.
    model_object = out / f"{prefix}.o"
    subprocess.run(["avr-gcc", *STRICT, *AVR_FLAGS, "-c", "-o", str(model_object), str(source)],
                   check=True, capture_output=True, timeout=600)
    size = subprocess.run(["avr-size", "-A", str(model_object)], capture_output=True, text=True,
                          check=True).stdout
    flash = sum(int(line.split()[1]) for line in size.splitlines()
                if line.startswith((".text", ".data", ".rodata")))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "simavr"], capture_output=True,
                           text=True).stdout.split() or ["-I/usr/include/simavr", "-lsimavr"]
    runner = out / "cycles"
    subprocess.run(["gcc", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", str(runner),
                    str(HERE / "cycles.c"), *flags, "-lelf"], check=True, capture_output=True,
                   timeout=600)
    result = subprocess.run([str(runner), str(elf)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    markers = [tuple(int(x) for x in line.split()[1:]) for line in result.stdout.splitlines()
               if line.startswith("marker")]
    data = bytes.fromhex(next(line.split()[1] for line in result.stdout.splitlines()
                              if line.startswith("bytes")))
    return model, sym, P, q, v, a, markers, data, flash


def test_exemplary_model_runs_on_the_atmega2560(avr_run):
    model, sym, P, q, v, a, markers, data, flash = avr_run
    n, nf, nd = len(model.coordinates), model.n_free, model.n_driven
    assert struct.calcsize("<f") == 4
    oracle = NumericModel(sym, model.parameter_names)
    record = 4 * n + 2 + 4 * (nf + 2 * nd)  # tau, int16 status, af, effort, driven efforts
    assert len(data) == CASES * record
    worst_tau = worst_effort = 0.0
    for c in range(CASES):
        chunk = data[c * record:(c + 1) * record]
        tau = np.array(struct.unpack(f"<{n}f", chunk[:4 * n]))
        (status,) = struct.unpack("<h", chunk[4 * n:4 * n + 2])
        rest = np.array(struct.unpack(f"<{nf + 2 * nd}f", chunk[4 * n + 2:]))
        assert status == 0
        effort, driven = rest[nf:nf + nd], rest[nf + nd:]
        _, tau_engine = model.mass_matrix_and_inverse_dynamics(P[c:c + 1], q[c], v[c], a[c])
        M, cv, g, springs = oracle.terms(P[c], q[c], v[c])
        terms = np.abs(M) @ np.abs(a[c]) + np.abs(cv) + np.abs(g)
        worst_tau = max(worst_tau, np.max(np.abs(tau - tau_engine)) / np.max(terms),
                        np.max(np.abs(driven - tau_engine[nf:])) / np.max(terms))
        _, eff_engine = model.hybrid(P[c:c + 1], q[c:c + 1, :nf], v[c:c + 1, :nf],
                                     q[c:c + 1, nf:], v[c:c + 1, nf:], a[c:c + 1, nf:])
        acc_scale = np.max(np.abs(np.linalg.inv(M[:nf, :nf])) @ (np.abs(springs) + terms[:nf]))
        effort_terms = (np.abs(M[nf:, :nf]) @ np.full(nf, acc_scale)
                        + np.abs(M[nf:, nf:]) @ np.abs(a[c, nf:]) + np.abs(cv[nf:])
                        + np.abs(g[nf:]))
        worst_effort = max(worst_effort, np.max(np.abs(effort - eff_engine[0]))
                           / np.max(effort_terms))
    cycles = {"inverse": [], "hybrid": [], "driven efforts": []}
    start = {}
    for value, cycle in markers:
        if value % 2:
            start[value] = cycle
        else:
            key = {2: "inverse", 4: "hybrid", 6: "driven efforts"}[value]
            cycles[key].append(cycle - start[value - 1])
    assert all(len(x) == CASES for x in cycles.values())
    figures = {key: (min(x), int(np.median(x)), max(x)) for key, x in cycles.items()}
    print(f"\nATmega2560 (simavr, 16 MHz, avr-gcc -O2, double = float32): exemplary model, "
          f"{CASES} random states; flash of the model's code {flash} B")
    for key, (low, median, high) in figures.items():
        print(f"  {key}: cycles min {low} median {median} max {high} "
              f"= {median / F_CPU_HZ * 1e3:.2f} ms at 16 MHz")
    print(f"  worst difference from the engine, of the terms' magnitude: inverse dynamics "
          f"(and driven efforts) {worst_tau:.1e}, hybrid efforts {worst_effort:.1e}")
    assert worst_tau < SINGLE_PRECISION_TOLERANCE
    assert worst_effort < SINGLE_PRECISION_TOLERANCE
    assert all(low > 100 for low, _, _ in figures.values())  # the calls really ran
