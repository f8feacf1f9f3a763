"""Dask is an optional extra (`pip install 'bemore[dask]'`): without it, every command still runs
in-process, and asking for a cluster gives one line that names the extra."""

from __future__ import annotations

import sys

import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.paths import data_dir


@pytest.fixture()
def without_dask(monkeypatch):
    """This process as if Dask were not installed: importing it raises ImportError."""
    for name in ("dask", "distributed"):
        monkeypatch.setitem(sys.modules, name, None)


def _one_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert "Traceback" not in result.output
    assert len(lines) >= 1
    return lines[-1]


def test_identify_with_dask_but_no_dask_names_the_extra(without_dask, tmp_path) -> None:
    result = CliRunner().invoke(cli, [
        "identify", str(data_dir() / "sample_trial.c3d"), "--dask", "tcp://127.0.0.1:1",
        "--pack", "6", "--iterations", "1", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert _one_line(result) == (
        "bemore: error: --dask (or a configured Dask address) needs Dask, which is not "
        "installed: pip install 'bemore[dask]'")


def test_batch_local_cluster_without_dask_names_the_extra(without_dask, tmp_path) -> None:
    manifest = tmp_path / "squad.csv"
    manifest.write_text(f"athlete,trial\nanna,{data_dir() / 'sample_trial.c3d'}\n")
    result = CliRunner().invoke(cli, ["batch", str(manifest), "--out", str(tmp_path / "out"),
                                      "--local-cluster", "1"])
    assert result.exit_code == 2, result.output
    assert _one_line(result) == (
        "bemore: error: --local-cluster needs Dask, which is not installed: "
        "pip install 'bemore[dask]'")


def test_the_in_process_evaluator_needs_no_dask(without_dask) -> None:
    from bemore.evaluate import InProcessEvaluator, make_evaluator

    assert isinstance(make_evaluator(None), InProcessEvaluator)
