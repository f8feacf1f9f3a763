"""``bemore batch`` end to end: killed and restarted, and on a 2-worker LocalCluster.

Small items so that each runs in seconds: the sample trial trimmed to 0.6 s, a 6-wolf pack for
2 iterations, one synthesis start in a narrow box around the default athlete's optimum, no plots.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bemore.batch import load_manifest, run_batch
from bemore.paths import REPOSITORY_DIR, configs_dir, data_dir
from tests.scale.helpers import SYNTHESIS

pytestmark = pytest.mark.slow


MANIFEST = """
[defaults]
pack = 6
iterations = 2
starts = 1
plots = false
synthesis_config = "synthesis.toml"
trial_config = "trial.toml"

[[athletes]]
athlete = "anna"
trial = "{trial}"
seed = 1

[[athletes]]
athlete = "bea"
trial = "{trial}"
seed = 2
"""


@pytest.fixture(scope="module")
def squad(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("squad")
    (folder / "synthesis.toml").write_text(SYNTHESIS)
    trial = (configs_dir() / "trial.toml").read_text()
    assert "\nend_s = 0.0\n" in trial
    (folder / "trial.toml").write_text(trial.replace("\nend_s = 0.0\n", "\nend_s = 0.6\n"))
    manifest = folder / "squad.toml"
    manifest.write_text(MANIFEST.format(trial=data_dir() / "sample_trial.c3d"))
    return manifest


def _batch(manifest: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "bemore", "batch", str(manifest), "--out", str(out)]


@pytest.fixture(scope="module")
def resumed(squad: Path, tmp_path_factory):
    """Kill `bemore batch` (SIGKILL) once the first athlete is done, then run it again."""
    out = tmp_path_factory.mktemp("out")
    process = subprocess.Popen(
        _batch(squad, out), cwd=REPOSITORY_DIR, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 400
    marker = out / "anna" / "done.json"
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert marker.exists(), process.stderr.read().decode()[-2000:]
    before = {
        "done_bea": (out / "bea" / "done.json").exists(),
        "marker": marker.read_bytes(),
        "mtime_ns": marker.stat().st_mtime_ns,
    }
    rerun = subprocess.run(
        _batch(squad, out), cwd=REPOSITORY_DIR, capture_output=True, text=True, timeout=500
    )
    return out, before, rerun


def test_killed_batch_resumes_without_redoing_finished_athletes(resumed) -> None:
    out, before, rerun = resumed
    assert before["done_bea"] is False  # the kill came while bea was running
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "1 done, 1 already finished (skipped), 0 failed" in rerun.stdout
    marker = out / "anna" / "done.json"
    assert marker.read_bytes() == before["marker"]
    assert marker.stat().st_mtime_ns == before["mtime_ns"]
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [(row["athlete"], row["status"]) for row in rows] == [("anna", "done"), ("bea", "done")]
    for athlete in ("anna", "bea"):
        record = json.loads((out / athlete / "athlete.json").read_text())
        assert record["pack"] == 6 and record["iterations"] == 2
        assert record["evaluations"] >= 6 * 2 + 1
        gesture = json.loads((out / athlete / "gesture" / "gesture.json").read_text())
        assert 2.9 <= gesture["design"]["final_time_s"] <= 3.03
    assert float(rows[0]["cost_m2"]) > 0 and rows[0]["feasible"] in ("True", "False")


def test_cluster_batch_gives_the_in_process_results(resumed, squad: Path, dask_client, tmp_path):
    reference, _, _ = resumed
    report = run_batch(load_manifest(squad), tmp_path, client=dask_client)
    assert sorted(report.finished) == ["anna", "bea"] and not report.failed
    hosts = {row["host"].rsplit(":", 1)[1] for row in report.rows}
    assert str(os.getpid()) not in hosts  # the items ran on the workers
    for athlete in ("anna", "bea"):
        local = json.loads((reference / athlete / "athlete.json").read_text())
        remote = json.loads((tmp_path / athlete / "athlete.json").read_text())
        assert remote["parameters"] == local["parameters"]
        assert remote["cost_m2"] == local["cost_m2"]
        local_gesture = json.loads((reference / athlete / "gesture" / "gesture.json").read_text())
        remote_gesture = json.loads((tmp_path / athlete / "gesture" / "gesture.json").read_text())
        assert remote_gesture["design"] == local_gesture["design"]
        assert remote_gesture["objective_value"] == local_gesture["objective_value"]


def test_a_batch_item_writes_what_identify_and_synthesize_write(resumed, squad: Path, tmp_path):
    """The batch and the two commands run the same library functions: the commands given the
    item's settings write the item's parameters, fit, config record and gesture."""
    reference, _, _ = resumed
    folder = squad.parent
    identified, gesture = tmp_path / "identify", tmp_path / "gesture"
    commands = [
        ["identify", str(data_dir() / "sample_trial.c3d"), "--trial-config",
         str(folder / "trial.toml"), "--pack", "6", "--iterations", "2", "--seed", "1",
         "--out", str(identified)],
        ["synthesize", str(identified / "athlete.json"), "--synthesis-config",
         str(folder / "synthesis.toml"), "--starts", "1", "--no-animation",
         "--out", str(gesture)],
    ]
    # A batch item pins BLAS to one thread; so do the commands here (SLSQP's end point moves
    # by ~1e-7 relative with BLAS's thread count: measured 2.9381347 vs 2.9381350 s).
    environment = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    for command in commands:
        done = subprocess.run([sys.executable, "-m", "bemore", *command], cwd=REPOSITORY_DIR,
                              capture_output=True, text=True, timeout=500, env=environment)
        assert done.returncode in (0, 1), done.stderr[-2000:]  # 1: a poor fit, still written
    batch = json.loads((reference / "anna" / "athlete.json").read_text())
    alone = json.loads((identified / "athlete.json").read_text())
    assert alone["parameters"] == batch["parameters"]
    assert alone["cost_m2"] == batch["cost_m2"]
    assert alone["evaluations"] == batch["evaluations"]
    assert {key: value for key, value in batch["config"].items() if key != "batch_athlete"} == (
        alone["config"]
    )
    batch_gesture = json.loads((reference / "anna" / "gesture" / "gesture.json").read_text())
    alone_gesture = json.loads((gesture / "gesture.json").read_text())
    assert alone_gesture["design"] == batch_gesture["design"]
    assert alone_gesture["objective_value"] == batch_gesture["objective_value"]
