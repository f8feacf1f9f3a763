"""An athlete's folder in a batch: one that cannot be cleared or written fails that athlete only,
before her fit; a re-run removes bemore's own files only; a poor fit is kept, marked, named by
its real path; the output folder is checked before any item or cluster."""

from __future__ import annotations

import csv
import errno
import json
import shutil
from pathlib import Path

import pytest

import bemore.batch.run
from bemore.batch import load_manifest, run_batch
from bemore.batch.item import ItemResult
from bemore.batch.run import DONE, FAILED, SUMMARY, store
from bemore.errors import DataError
from bemore.paths import configs_dir, data_dir
from tests.filesystem import immutable
from tests.scale.helpers import SYNTHESIS

# anna: a tiny search that fits this 0.6 s trim well; bea: 13 evaluations, no polish, a poor fit.
MANIFEST = """
[defaults]
starts = 1
synthesis_config = "synthesis.toml"
trial_config = "trial.toml"

[[athletes]]
athlete = "anna"
trial = "{trial}"
seed = 1
pack = 6
iterations = 2

[[athletes]]
athlete = "bea"
trial = "{trial}"
seed = 2
{bea}
"""
POOR = "pack = 12\niterations = 1\npolish = false\nplots = false"
GOOD = "pack = 6\niterations = 2\nplots = false"


def _squad(folder: Path, bea: str = POOR) -> Path:
    """The manifest of anna and bea (settings of ``bea``) with its configs, in ``folder``."""
    (folder / "synthesis.toml").write_text(SYNTHESIS)
    trial = (configs_dir() / "trial.toml").read_text()
    assert "\nend_s = 0.0\n" in trial
    (folder / "trial.toml").write_text(trial.replace("\nend_s = 0.0\n", "\nend_s = 0.6\n"))
    manifest = folder / "squad.toml"
    manifest.write_text(MANIFEST.format(trial=data_dir() / "sample_trial.c3d", bea=bea))
    return manifest


def _spy(monkeypatch, fake: bool = False) -> list[str]:
    """The athletes whose item starts, in order (the real item runs, unless ``fake``)."""
    started: list[str] = []
    real = bemore.batch.run.run_item

    def run_item(spec):
        started.append(spec.athlete)
        if fake:
            return ItemResult(spec.athlete, {"athlete.json": b"{}"},
                              {"athlete": spec.athlete, "cost_m2": 1.0})
        return real(spec)

    monkeypatch.setattr(bemore.batch.run, "run_item", run_item)
    return started


def _rows(out: Path) -> dict[str, dict[str, str]]:
    return {row["athlete"]: row for row in csv.DictReader((out / SUMMARY).open())}


def _refuse_removal(path: Path, monkeypatch) -> None:
    """Refuse ``path``'s removal as ``chattr +i`` would, EPERM, by patching ``Path.unlink``
    for that path alone (where the file system has no immutable flag: tmpfs, no chattr)."""
    unlink = Path.unlink

    def refused(self: Path, missing_ok: bool = False) -> None:
        if self == path:
            raise PermissionError(errno.EPERM, "Operation not permitted", str(self))
        unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", refused)


@pytest.mark.parametrize("where", ["a file in the place of her folder",
                                   "a folder in the place of her athlete.json"])
def test_an_athlete_folder_it_cannot_clear_fails_her_only_before_her_fit(
        tmp_path: Path, monkeypatch, where: str) -> None:
    from click.testing import CliRunner

    from bemore.cli import cli

    started = _spy(monkeypatch, fake=True)
    manifest = _squad(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    if where.startswith("a file"):
        (out / "bea").write_text("not a folder")
        expected = f"{out / 'bea'}: output folder exists and is not a folder"
    else:
        (out / "bea" / "athlete.json").mkdir(parents=True)
        (out / "bea" / "athlete.json" / "coach.txt").write_text("hers")
        expected = (f"{out / 'bea' / 'athlete.json'}: cannot remove the previous run's file "
                    "(Is a directory)")
    result = CliRunner().invoke(cli, ["batch", str(manifest), "--out", str(out)])
    assert result.exit_code == 1, result.output
    assert started == ["anna"]  # bea's fit never started
    assert (out / "anna" / DONE).is_file()
    row = _rows(out)["bea"]
    assert row["status"] == "failed"
    if where.startswith("a file"):  # not even failed.txt can be written: the summary says so
        assert row["error"] == (f"{expected} ({FAILED} not written: {out / 'bea'}: "
                                "cannot make the folder (File exists))")
    else:
        assert row["error"] == expected
        assert (out / "bea" / FAILED).read_text() == expected + "\n"
        assert (out / "bea" / "athlete.json" / "coach.txt").read_text() == "hers"
    assert f"bemore: bea: {row['error']}" in result.output


def test_an_immutable_athlete_json_fails_her_only_before_her_fit(tmp_path: Path,
                                                                   monkeypatch) -> None:
    """The review's case, real items: bea's athlete.json from an earlier run is immutable."""
    started = _spy(monkeypatch)
    manifest = _squad(tmp_path, bea=GOOD)
    out = tmp_path / "out"
    (out / "bea").mkdir(parents=True)
    stuck = out / "bea" / "athlete.json"
    stuck.write_text("{}")
    (out / "bea" / "gesture").mkdir()
    (out / "bea" / "gesture" / "gesture.json").write_text("{}")  # the rest is cleared
    with immutable(stuck) as refused_by_chattr:
        if not refused_by_chattr:
            _refuse_removal(stuck, monkeypatch)
        report = run_batch(load_manifest(manifest), out)
    assert started == ["anna"] and report.finished == ["anna"]
    message = f"{stuck}: cannot remove the previous run's file (Operation not permitted)"
    assert report.failed == {"bea": message}
    assert (out / "bea" / FAILED).read_text() == message + "\n"
    assert _rows(out)["bea"]["error"] == message
    assert _rows(out)["anna"]["status"] == "done"
    assert sorted(path.name for path in (out / "bea").iterdir()) == ["athlete.json", FAILED]


@pytest.fixture(scope="module")
def squad_run(tmp_path_factory):
    """A real batch of anna (a good fit) and bea (a poor one) into an output folder holding an
    earlier, unfinished run's files of anna's and the coach's own; (manifest, out, report,
    athletes whose item started)."""
    folder = tmp_path_factory.mktemp("squad")
    manifest = _squad(folder)
    out = folder / "out"
    anna = out / "anna"
    (anna / "gesture" / "plots").mkdir(parents=True)
    (anna / FAILED).write_text("an earlier failure\n")
    (anna / "gesture" / "plots" / "shoulder_jerk.png").write_text("stale")
    (anna / "notes.txt").write_text("coach's notes")
    (anna / "gesture" / "notes.txt").write_text("about the gesture")
    with pytest.MonkeyPatch.context() as monkeypatch:
        started = _spy(monkeypatch)
        report = run_batch(load_manifest(manifest), out)
    return manifest, out, report, started


def test_a_rerun_removes_bemore_files_only(squad_run, tmp_path: Path) -> None:
    _, out, report, started = squad_run
    anna = out / "anna"
    assert started[:2] == ["anna", "bea"] and report.finished == ["anna"]
    assert (anna / "notes.txt").read_text() == "coach's notes"
    assert (anna / "gesture" / "notes.txt").read_text() == "about the gesture"
    assert not (anna / FAILED).exists()
    assert (anna / "gesture" / "plots" / "shoulder_jerk.png").read_bytes()[:4] == b"\x89PNG"
    from bemore.batch.run import clear_outputs, own_files  # (new with it)

    # Every file the item wrote is one bemore knows as its own, and clears.
    written = {str(path.relative_to(anna)) for path in anna.rglob("*") if path.is_file()}
    assert written - {"notes.txt", "gesture/notes.txt"} <= set(own_files())
    copy = shutil.copytree(anna, tmp_path / "anna")
    clear_outputs(copy)
    left = sorted(str(path.relative_to(copy)) for path in copy.rglob("*"))
    assert left == ["gesture", "gesture/notes.txt", "notes.txt"]


def test_a_poor_fit_is_kept_marked_and_named_by_its_real_path(squad_run, monkeypatch) -> None:
    from click.testing import CliRunner

    from bemore.cli import cli

    manifest, out, report, _ = squad_run
    bea = out / "bea"
    athlete = bea / "athlete.json"
    message = report.failed["bea"]
    assert message.startswith(f"{athlete}: fit poor: mean distance ")
    assert "bemore-bea-" not in message  # the item's temporary folder
    advice = f"`bemore synthesize {athlete} --accept-poor-fit`"
    assert message.endswith(advice) and message.count("--accept-poor-fit") == 1
    help_text = CliRunner().invoke(cli, ["synthesize", "--help"]).output
    assert "--accept-poor-fit" in help_text  # the advice names a flag that exists
    # Her fit was not polished (polish = false in her line): the advice says how in the
    # manifest, not with identify's --no-polish, which a batch does not have.
    assert "(polish = true in her manifest line)" in message and "--no-polish" not in message
    assert (bea / FAILED).read_text() == message + "\n"
    record = json.loads(athlete.read_text())
    assert record["fit_verdict"]["status"] == "poor"
    assert not (bea / DONE).exists() and not (bea / "gesture").exists()
    row = _rows(out)["bea"]
    assert (row["status"], row["fit"], row["error"]) == ("poor", "poor", message)
    assert float(row["mean_distance_mm"]) == pytest.approx(record["mean_distance_mm"])

    # A later run redoes her (no marker), and leaves finished anna alone.
    started = _spy(monkeypatch)
    again = run_batch(load_manifest(manifest), out)
    assert started == ["bea"] and again.skipped == ["anna"] and list(again.failed) == ["bea"]
    _squad(manifest.parent, bea=GOOD)
    again = run_batch(load_manifest(manifest), out)
    assert started == ["bea", "bea"] and again.finished == ["bea"] and not again.failed
    assert not (bea / FAILED).exists() and (bea / DONE).is_file()


def test_store_removes_its_previous_files_and_keeps_the_others(tmp_path: Path) -> None:
    """A re-stored item whose new run writes fewer files (no plots, infeasible: no
    setpoints.csv) leaves none of the old ones; other files stay, empty folders go."""
    manifest = tmp_path / "squad.toml"
    manifest.write_text('[[athletes]]\nathlete = "anna"\ntrial = "anna.csv"\n')
    (tmp_path / "anna.csv").write_text("recorded bytes")
    spec = load_manifest(manifest).items[0]
    out = tmp_path / "out"
    old = {name: b"old" for name in ("athlete.json", "trajectories.png", "gesture/setpoints.csv",
                                     "gesture/plots/bar_displacement.png")}
    store(out, spec, ItemResult("anna", old, {"x": 1}))
    (out / "anna" / "mine.txt").write_text("kept")
    store(out, spec, ItemResult("anna", {"athlete.json": b"new"}, {"x": 2}))
    left = sorted(str(path.relative_to(out / "anna")) for path in (out / "anna").rglob("*"))
    assert left == ["athlete.json", DONE, "mine.txt"]
    assert (out / "anna" / "athlete.json").read_bytes() == b"new"


@pytest.mark.parametrize("where", ["under a file", "unwritable folder"])
def test_run_batch_output_folder_it_cannot_write_is_one_line_before_any_item(
        tmp_path: Path, monkeypatch, request, where: str) -> None:
    # The library path (no CLI): a folder not even root can write a file in (the fixture).
    started = _spy(monkeypatch, fake=True)
    manifest = _squad(tmp_path)
    out = (manifest / "out" if where == "under a file"
           else request.getfixturevalue("unwritable_folder"))
    with pytest.raises(DataError) as raised:
        run_batch(load_manifest(manifest), out)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"{out}: cannot ")
    assert started == []


def test_batch_command_checks_the_output_folder_before_starting_a_cluster(
        tmp_path: Path, monkeypatch, unwritable_folder: Path) -> None:
    from click.testing import CliRunner

    import bemore.batch.cli
    from bemore.cli import cli

    clusters = []
    monkeypatch.setattr(bemore.batch.cli, "_client",
                        lambda stack, address, workers: clusters.append(workers))
    started = _spy(monkeypatch, fake=True)
    manifest = _squad(tmp_path)
    result = CliRunner().invoke(cli, ["batch", str(manifest), "--out", str(unwritable_folder),
                                      "--local-cluster", "2"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().startswith(
        f"bemore: error: {unwritable_folder}: cannot write in the output folder (")
    assert clusters == [] and started == []
    # The same command with a folder it can write does start the (patched) cluster.
    result = CliRunner().invoke(cli, ["batch", str(manifest), "--out", str(tmp_path / "o"),
                                      "--local-cluster", "2"])
    assert clusters == [2], result.output
