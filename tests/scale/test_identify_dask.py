"""``bemore identify --dask ADDRESS``: the same athlete.json numbers as the in-process run."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from bemore.cli import cli
from bemore.paths import configs_dir, data_dir


def _identify(out: Path, trial_config: Path, *extra: str):
    arguments = ["identify", str(data_dir() / "sample_trial.c3d"), "--pack", "6",
                 "--iterations", "2", "--seed", "4", "--no-polish",
                 "--trial-config", str(trial_config),
                 "--out", str(out), *extra]
    return CliRunner().invoke(cli, arguments)


def test_identify_on_dask_matches_in_process(dask_client, tmp_path: Path) -> None:
    trial = (configs_dir() / "trial.toml").read_text()
    short = tmp_path / "trial.toml"
    short.write_text(trial.replace("\nend_s = 0.0\n", "\nend_s = 0.6\n"))
    # 12 simulations fit poorly (exit 1 after writing everything), the same on both evaluators.
    local = _identify(tmp_path / "local", short)
    assert local.exit_code == 1 and "fit poor" in local.output, local.output
    remote = _identify(tmp_path / "remote", short, "--dask", dask_client.scheduler.address)
    assert remote.exit_code == 1 and "fit poor" in remote.output, remote.output
    a = json.loads((tmp_path / "local" / "athlete.json").read_text())
    b = json.loads((tmp_path / "remote" / "athlete.json").read_text())
    assert b["parameters"] == a["parameters"] and b["cost_m2"] == a["cost_m2"]
    assert b["evaluations"] == a["evaluations"] == 6 * 2 + 1
    assert b["config"]["evaluator"]["kind"] == "dask"
    assert a["config"]["evaluator"]["kind"] == "in-process"


def test_identify_with_unreachable_scheduler_is_one_line(tmp_path: Path) -> None:
    result = _identify(tmp_path / "x", configs_dir() / "trial.toml", "--dask", "tcp://127.0.0.1:9")
    assert result.exit_code == 2
    assert result.output.startswith("bemore: error: --dask tcp://127.0.0.1:9: cannot connect")


def test_identification_config_key_selects_the_cluster(dask_client, tmp_path: Path) -> None:
    address = dask_client.scheduler.address
    text = (configs_dir() / "identification.toml").read_text()
    assert "\nworkers = 0" in text
    config = tmp_path / "identification.toml"
    config.write_text(text.replace("\nworkers = 0", f'\nworkers = 0\ndask = "{address}"', 1))
    trial = (configs_dir() / "trial.toml").read_text()
    short = tmp_path / "trial.toml"
    short.write_text(trial.replace("\nend_s = 0.0\n", "\nend_s = 0.6\n"))
    result = _identify(tmp_path / "out", short, "--identification-config", str(config))
    assert result.exit_code == 1 and "fit poor" in result.output, result.output
    record = json.loads((tmp_path / "out" / "athlete.json").read_text())
    assert record["config"]["evaluator"]["kind"] == "dask"
    assert record["config"]["evaluator"]["address"] == address
