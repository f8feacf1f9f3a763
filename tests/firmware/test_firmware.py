"""The firmware's own checks, run by the suite: C unit tests (plain and ASan+UBSan), the
warning-free host build, the generated header's freshness, and a short libFuzzer run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from bemore.paths import REPOSITORY_DIR

FIRMWARE = REPOSITORY_DIR / "firmware"


def make(*targets: str, timeout_s: float = 300) -> subprocess.CompletedProcess:
    """Run make in firmware/ and return the completed process (output as text)."""
    return subprocess.run(["make", "--no-print-directory", "-C", str(FIRMWARE), *targets],
                          capture_output=True, text=True, timeout=timeout_s)


def test_host_build_is_warning_free():
    # -Wall -Wextra -Werror: any warning fails the build.
    result = make("all")
    assert result.returncode == 0, result.stderr
    assert (FIRMWARE / "build" / "simbench").is_file()


@pytest.mark.parametrize("target", ["test-plain", "test-sanitize"])
def test_c_unit_tests_pass(target):
    result = make(target)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = re.search(r"firmware tests: (\d+) checks, (\d+) failures", result.stdout)
    assert summary is not None, result.stdout
    assert int(summary.group(1)) > 5000  # the golden vectors, bit flips, states, limits, ...
    assert int(summary.group(2)) == 0


def test_generated_files_are_fresh():
    result = subprocess.run([sys.executable, str(FIRMWARE / "tools" / "gen_protocol.py"),
                             "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_staleness_check_notices_a_changed_spec(tmp_path):
    copy = tmp_path / "firmware"
    shutil.copytree(FIRMWARE, copy, ignore=shutil.ignore_patterns("build"))
    spec = tmp_path / "controller" / "protocol.toml"
    spec.parent.mkdir()
    shutil.copyfile(REPOSITORY_DIR / "controller" / "protocol.toml", spec)
    spec.write_text(spec.read_text().replace("watchdog_default_ms = 50",
                                             "watchdog_default_ms = 60"))
    result = subprocess.run([sys.executable, str(copy / "tools" / "gen_protocol.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "protocol_gen.h: stale" in result.stderr


def test_short_fuzz_run_finds_nothing():
    assert shutil.which("clang"), "clang is missing: run `make sysdeps` (tools/system-packages.txt)"
    result = make("fuzz", "FUZZ_SECONDS=5", timeout_s=240)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    runs = re.search(r"stat::number_of_executed_units: (\d+)", result.stdout + result.stderr)
    assert runs is not None and int(runs.group(1)) > 1000


def test_core_compiles_for_the_atmega2560():
    # 16-bit int, -Wconversion -Werror: the portable core must not rely on a 32-bit int.
    assert shutil.which("clang"), "clang is missing: run `make sysdeps` (tools/system-packages.txt)"
    result = make("check-avr")
    assert result.returncode == 0, result.stderr


def _executions(report: str, code: str) -> int:
    """Execution count of the first line of an llvm-cov text report holding ``code``."""
    for line in report.splitlines():
        parts = line.split("|", 2)
        if len(parts) == 3 and code in parts[2]:
            count = parts[1].strip()
            scale = {"k": 1_000, "M": 1_000_000}.get(count[-1:], 1)
            return int(float(count.rstrip("kM") or 0) * scale)
    raise AssertionError(f"{code!r} is not in the coverage report")


def test_the_fuzz_corpus_reaches_the_schedule_corners():
    """The harness lets the input choose the ticks: its seeds reach the late replacement (two
    setpoints within one tick), QUEUE_OVERFLOW (33 without a tick), LIMIT and the silent host."""
    assert shutil.which("clang") and shutil.which("llvm-cov"), \
        "clang/llvm-cov missing: run `make sysdeps` (tools/system-packages.txt)"
    result = make("fuzz-coverage", timeout_s=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = (FIRMWARE / "build" / "fuzz-coverage-core.txt").read_text()
    assert _executions(report, "core->queue[tail] = entry;") > 0
    assert _executions(report, "latch_fault(core, BM_FAULT_QUEUE_OVERFLOW, 0);") > 0
    assert _executions(report, "latch_fault(core, BM_FAULT_LIMIT, 0);") > 0
    assert _executions(report, "core->limit_flags |= BM_FLAG_FEEDFORWARD_DROPPED;") > 0
    assert _executions(report, "core->limit_flags |= BM_FLAG_SPEED_LIMITED;") > 0
    assert _executions(report, "core->limit_flags |= BM_FLAG_RANGE_LIMITED;") > 0
