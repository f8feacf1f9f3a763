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
    spec = copy / "protocol.toml"
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
