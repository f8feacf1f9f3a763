"""Batch manifests (TOML and CSV), item identity, and the completion marker (no engine runs)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from bemore.batch.item import ItemResult
from bemore.batch.manifest import load_manifest
from bemore.batch.run import DONE, finished_row, item_digest, store, summary_rows, write_summary
from bemore.errors import ConfigError

TOML = """
[defaults]
pack = 12
iterations = 3
starts = 2
synthesis_config = "synth.toml"

[cluster]
dask = "tcp://127.0.0.1:8786"

[[athletes]]
athlete = "anna"
trial = "trials/anna.c3d"

[[athletes]]
athlete = "bea"
trial = "/data/bea.trc"
pack = 20
seed = 4
polish = true
"""


def test_toml_manifest_applies_defaults_and_overrides(tmp_path: Path) -> None:
    path = tmp_path / "squad.toml"
    path.write_text(TOML)
    manifest = load_manifest(path)
    anna, bea = manifest.items
    assert manifest.dask == "tcp://127.0.0.1:8786"
    assert (anna.athlete, anna.pack, anna.iterations, anna.seed, anna.starts) == (
        "anna", 12, 3, None, 2,
    )
    assert anna.trial == str(tmp_path / "trials" / "anna.c3d")
    assert anna.synthesis_config == str(tmp_path / "synth.toml")
    assert (bea.pack, bea.seed, bea.polish, bea.iterations) == (20, 4, True, 3)
    assert bea.trial == "/data/bea.trc"
    assert anna.plots is True


def test_csv_manifest_empty_cells_are_defaults(tmp_path: Path) -> None:
    path = tmp_path / "squad.csv"
    path.write_text("athlete,trial,pack,polish,plots\nanna,a.c3d,30,true,\nbea,b.c3d,,,false\n")
    anna, bea = load_manifest(path).items
    assert (anna.pack, anna.polish, anna.plots) == (30, True, True)
    assert (bea.pack, bea.polish, bea.plots) == (None, None, False)
    assert bea.trial == str(tmp_path / "b.c3d")


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("a.csv", "athlete,trial,pack\nanna,a.c3d,1\n", r"a.csv: row 2: pack = '1': .*greater"),
        ("b.csv", "athlete,trial\nanna,a.c3d\nanna,b.c3d\n", r"b.csv: athlete 'anna' is listed"),
        ("c.csv", "athlete,trial\n../up,a.c3d\n", r"c.csv: row 2: athlete = '../up'"),
        ("d.toml", "[[athletes]]\nathlete='a'\ntrial='t'\npak=3\n", r"unknown key .*pack"),
        ("e.toml", "[defaults]\npack = 5\n", r"e.toml: athletes: missing required key"),
        ("f.json", "{}", r"f.json: a manifest is a .toml or a .csv file"),
    ],
)
def test_bad_manifest_is_one_config_error(tmp_path: Path, name, text, message) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_manifest(path)


def _squad(tmp_path: Path):
    trial = tmp_path / "anna.csv"
    trial.write_text("recorded bytes")
    path = tmp_path / "squad.toml"
    path.write_text('[[athletes]]\nathlete = "anna"\ntrial = "anna.csv"\nseed = 1\n')
    return path, trial


def test_marker_written_last_marks_the_item_finished(tmp_path: Path) -> None:
    path, _ = _squad(tmp_path)
    spec = load_manifest(path).items[0]
    out = tmp_path / "out"
    # A crash mid-item leaves files but no marker: not finished.
    (out / "anna" / "gesture").mkdir(parents=True)
    (out / "anna" / "athlete.json").write_text("{half")
    assert finished_row(out, spec) is None
    result = ItemResult("anna", {"athlete.json": b"{}", "gesture/gesture.json": b"[]"}, {"x": 1})
    store(out, spec, result)
    assert sorted(p.name for p in (out / "anna").rglob("*")) == [
        "athlete.json", "done.json", "gesture", "gesture.json",
    ]
    assert (out / "anna" / "athlete.json").read_bytes() == b"{}"
    assert finished_row(out, spec) == {"x": 1}
    marker = json.loads((out / "anna" / DONE).read_text())
    assert marker["digest"] == item_digest(spec) and marker["spec"]["seed"] == 1
    rows = summary_rows(out, load_manifest(path), {})
    write_summary(out, rows)
    assert (out / "summary.csv").read_text() == "status,x\ndone,1\n"


def test_changed_settings_or_trial_make_the_item_unfinished(tmp_path: Path) -> None:
    path, trial = _squad(tmp_path)
    spec = load_manifest(path).items[0]
    out = tmp_path / "out"
    store(out, spec, ItemResult("anna", {}, {"x": 1}))
    assert finished_row(out, spec) == {"x": 1}
    path.write_text('[[athletes]]\nathlete = "anna"\ntrial = "anna.csv"\nseed = 2\n')
    assert finished_row(out, load_manifest(path).items[0]) is None
    trial.write_text("another recording")
    assert finished_row(out, spec) is None


def test_batch_command_bad_input_is_one_line_and_exit_code_2(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from bemore.cli import cli

    runner = CliRunner()
    missing = runner.invoke(cli, ["batch", str(tmp_path / "none.toml"), "--out", str(tmp_path)])
    assert missing.exit_code == 2
    assert missing.output.strip() == f"bemore: error: {tmp_path / 'none.toml'}: file not found"
    path, _ = _squad(tmp_path)
    both = runner.invoke(
        cli, ["batch", str(path), "--out", str(tmp_path / "o"), "--local-cluster", "2",
              "--dask", "tcp://127.0.0.1:8786"],
    )
    assert both.exit_code == 2 and "--local-cluster and a Dask address" in both.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("where", ["under a file", "unwritable folder", "summary a folder"])
def test_batch_output_folder_it_cannot_write_is_one_line_before_any_athlete(
        tmp_path: Path, monkeypatch, request, where: str) -> None:
    # The fixture unwritable_folder: a folder that exists and that not even root can
    # write a file in. No athlete is run, no cluster started.
    from click.testing import CliRunner

    import bemore.batch.run
    from bemore.cli import cli

    items = []
    monkeypatch.setattr(bemore.batch.run, "run_item", lambda spec: items.append(spec))
    path, _ = _squad(tmp_path)
    if where == "summary a folder":  # a folder where summary.csv goes
        out = tmp_path / "out"
        (out / "summary.csv").mkdir(parents=True)
    else:
        out = (tmp_path / "squad.toml" / "out" if where == "under a file"
               else request.getfixturevalue("unwritable_folder"))
    result = CliRunner().invoke(cli, ["batch", str(path), "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    expected = {"under a file": f"{out}: cannot create the output folder (Not a directory)",
                "unwritable folder": f"{out}: cannot write in the output folder (",
                "summary a folder": f"{out / 'summary.csv'}: cannot write the output file "
                                    "(Is a directory)"}[where]
    assert len(lines) == 1 and lines[0].startswith(f"bemore: error: {expected}"), result.output
    assert items == []


def test_a_cluster_that_cannot_be_reached_leaves_no_output_folder(tmp_path: Path,
                                                                  monkeypatch) -> None:
    # The output folder is shown writable before the cluster is reached, and not left
    # behind when the batch stops there.
    from click.testing import CliRunner

    import bemore.batch.cli
    from bemore.cli import cli
    from bemore.errors import DataError

    def unreachable(stack, address, local_workers):
        raise DataError(f"{address}: no Dask scheduler answers")

    monkeypatch.setattr(bemore.batch.cli, "_client", unreachable)
    path, _ = _squad(tmp_path)
    result = CliRunner().invoke(cli, ["batch", str(path), "--out", str(tmp_path / "new" / "o"),
                                      "--dask", "tcp://127.0.0.1:9"])
    assert (result.exit_code, result.output) == (
        2, "bemore: error: tcp://127.0.0.1:9: no Dask scheduler answers\n")
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("on_cluster", [False, True])
def test_unreadable_trial_fails_its_athlete_only(tmp_path: Path, on_cluster, request) -> None:
    from bemore.batch import run_batch

    path = tmp_path / "squad.toml"
    path.write_text('[[athletes]]\nathlete = "ghost"\ntrial = "missing.c3d"\n')
    client = request.getfixturevalue("dask_client") if on_cluster else None
    report = run_batch(load_manifest(path), tmp_path / "out", client=client)
    assert list(report.failed) == ["ghost"] and not report.finished
    assert "missing.c3d" in report.failed["ghost"]
    failed = (tmp_path / "out" / "ghost" / "failed.txt").read_text()
    assert failed.strip() == report.failed["ghost"]
    assert not (tmp_path / "out" / "ghost" / DONE).exists()
    rows = list(csv.DictReader((tmp_path / "out" / "summary.csv").open()))
    assert [(row["athlete"], row["status"]) for row in rows] == [("ghost", "failed")]
