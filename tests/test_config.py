"""The validated configuration layer: every bad file gives one line naming file, key, allowance."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bemore.config import load_toml_model
from bemore.errors import ConfigError
from bemore.paths import configs_dir, default_config
from bemore.settings import (
    Bench,
    Identification,
    load_bench,
    load_gymnast,
    load_identification,
    load_synthesis,
    trunk_mass_upper_bound_kg,
)

BENCH_TOML = default_config("bench.toml").read_text()


def _write(tmp_path: Path, text: str, name: str = "bench.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _error(path: Path, schema=Bench) -> str:
    with pytest.raises(ConfigError) as caught:
        load_toml_model(path, schema)
    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message
    return message


def test_bundled_defaults_hold_the_seed_values() -> None:
    gymnast = load_gymnast()
    assert gymnast.segments["trunk"].mass_kg == 17.529
    assert gymnast.segments["thigh"].total_mass_kg == pytest.approx(9.904)
    # Sum of the segment table, pairs counted twice.
    assert gymnast.total_mass_kg == pytest.approx(
        3.565 + 17.529 + 2 * (1.387 + 1.188 + 0.396 + 4.952 + 1.089 + 0.990)
    )
    identification = load_identification()
    assert len(identification.parameters) == 13  # the seed's twelve and the neck convention
    assert identification.optimiser.pack == 200
    assert identification.optimiser.iterations == 50
    assert identification.parameter("bar.stiffness_x").seed_value == 15326.0
    synthesis = load_synthesis()
    assert synthesis.bounds.max_flexion_deg.upper == 160.0
    assert synthesis.constraints.final_rotation_deg.lower == 360.0
    assert load_bench().streaming.watchdog_ms == 50.0


def test_trunk_mass_bound_keeps_the_thighs_massive() -> None:
    # Seed upper bound 29.8 kg exceeds the trunk+thighs total 27.433 kg; the searched bound is
    # total − min_thigh_pair_mass_kg = 27.433 − 2.0.
    bound = trunk_mass_upper_bound_kg(load_identification(), load_gymnast())
    assert bound == pytest.approx(25.433)


def test_unknown_key_names_key_and_allowed_keys(tmp_path: Path) -> None:
    path = _write(tmp_path, BENCH_TOML.replace("max_torque_nm = 240.0", "max_torqe_nm = 240.0"))
    message = _error(path)
    assert "[limits] max_torqe_nm: unknown key" in message
    assert "max_torque_nm" in message  # the allowed keys are listed


def test_wrong_type_names_key_and_value(tmp_path: Path) -> None:
    path = _write(tmp_path, BENCH_TOML.replace("rate_hz = 1000.0", 'rate_hz = "fast"'))
    message = _error(path)
    assert "[streaming] rate_hz = 'fast'" in message
    assert "must be a valid number" in message


def test_out_of_range_names_key_and_range(tmp_path: Path) -> None:
    path = _write(tmp_path, BENCH_TOML.replace("watchdog_ms = 50.0", "watchdog_ms = 5000.0"))
    message = _error(path)
    assert "[streaming] watchdog_ms = 5000.0: must be less than or equal to 500" in message


def test_missing_key_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, BENCH_TOML.replace("ramp_down_s = 0.3", ""))
    assert "[streaming] ramp_down_s: missing required key" in _error(path)


def test_missing_file_is_named(tmp_path: Path) -> None:
    assert _error(tmp_path / "nowhere.toml").endswith("nowhere.toml: file not found")


def test_malformed_toml_is_named(tmp_path: Path) -> None:
    path = _write(tmp_path, "[limits\nmax_torque_nm = 80")
    message = _error(path)
    assert "malformed TOML" in message
    assert "line 1" in message


def test_bounds_in_wrong_order_are_refused(tmp_path: Path) -> None:
    text = (configs_dir() / "identification.toml").read_text()
    text = text.replace("lower = 5000.0\nupper = 50000.0\nseed_value = 15326.0",
                        "lower = 50000.0\nupper = 5000.0\nseed_value = 15326.0")
    path = _write(tmp_path, text, "identification.toml")
    message = _error(path, Identification)
    assert "bar.stiffness_x: lower (50000.0) must be below upper (5000.0)" in message


def test_cli_prints_one_line_and_exit_code_2(tmp_path: Path) -> None:
    folder = tmp_path / "configs"
    shutil.copytree(configs_dir(), folder)
    bench = folder / "bench.toml"
    bench.write_text(BENCH_TOML.replace("max_velocity_deg_s = 400.0", "max_velocity_deg_s = -1"))
    result = subprocess.run(
        [sys.executable, "-m", "bemore", "config", "check", str(bench)],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert "[limits] max_velocity_deg_s = -1: must be greater than 0" in result.stderr


def test_cli_checks_every_bundled_file() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bemore", "config", "check"],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    checked = {line.split(": ok")[0] for line in result.stdout.splitlines()}
    bundled = {str(path) for path in configs_dir().rglob("*.toml")}
    bundled |= {str(default_config(name)) for name in ("bench.toml", "bench_sim.toml")}
    assert checked == bundled  # every bundled file, bench_sim, the batch example, the models


def test_kind_checks_a_renamed_copy(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from bemore.cli import cli
    from bemore.configcheck import KINDS

    copies = {kind: spec.bundled.replace("*", "real_gymnast") for kind, spec in KINDS.items()}
    assert set(copies) >= {"bench", "bench_sim", "batch", "model", "markerset", "profile", "trial",
                           "identification", "synthesis", "gymnast"}
    for kind, name in copies.items():
        copy = tmp_path / f"my_{kind}.toml"
        shutil.copy(default_config(name), copy)
        result = CliRunner().invoke(cli, ["config", "check", str(copy), "--kind", kind])
        assert result.exit_code == 0, result.output
    unnamed = CliRunner().invoke(cli, ["config", "check", str(tmp_path / "my_bench.toml")])
    assert unnamed.exit_code == 2
    assert "unknown kind of configuration file; name it with --kind" in unnamed.output
    (tmp_path / "bad.toml").write_text(BENCH_TOML.replace("max_velocity_deg_s = ",
                                                           "max_velocity_deg_s = -1 #", 1))
    bad = CliRunner().invoke(cli, ["config", "check", str(tmp_path / "bad.toml"), "--kind",
                                   "bench"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines() == [
        f"bemore: error: {tmp_path / 'bad.toml'}: [limits] max_velocity_deg_s = -1: must be "
        "greater than 0"]


def test_kind_help_names_every_kind() -> None:
    from click.testing import CliRunner

    from bemore.cli import cli
    from bemore.configcheck import KINDS

    text = " ".join(CliRunner().invoke(cli, ["config", "check", "--help"]).output.split())
    assert all(f" {name}," in text or f" {name}." in text for name in KINDS), text
