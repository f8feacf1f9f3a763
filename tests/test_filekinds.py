"""A command handed another command's output says what the file is, in one line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from bemore.cli import cli

ROOT = Path(__file__).resolve().parents[1]


def _synthesize(path: Path, tmp_path: Path) -> str:
    result = CliRunner().invoke(cli, ["synthesize", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "out").exists()
    return result.stderr.strip()


def test_synthesize_names_the_kind_of_file_it_was_given_instead_of_an_athlete(tmp_path):
    # Files of the shapes the other commands write (their keys), not copies of bemore's own
    # writers: a reader must recognise them from what they hold.
    gesture = tmp_path / "gesture.json"
    gesture.write_text(json.dumps({"design": {"c": [0.1]}, "objective": "torque",
                                   "objective_value": 1.0, "constraints": {}, "feasible": True}))
    trial = tmp_path / "trial.json"
    trial.write_text(json.dumps({"source": "t.c3d", "rate_hz_original": 200.0, "rate_hz": 1000.0,
                                 "frames": 10, "free_q0": [0.0]}))
    log = tmp_path / "session.jsonl"
    log.write_text(json.dumps({"type": "header", "format": "bemore-session 1"}) + "\n"
                   + json.dumps({"type": "event", "kind": "armed"}) + "\n")
    truth = ROOT / "data" / "sample_trial.truth.json"
    for path, kind in ((gesture, "a gesture.json (written by bemore synthesize)"),
                       (trial, "a trial.json (written by bemore trial inspect)"),
                       (log, "a session log (written by bemore drive)"),
                       (truth, "a synthetic trial's truth (its generator's values)")):
        assert _synthesize(path, tmp_path) == (
            f"bemore: error: {path}: {kind}, not an athlete.json (bemore identify writes one)")
    # Anything else keeps the reader's own message.
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"parameters": "none"}))
    assert _synthesize(other, tmp_path).endswith("missing 'parameters' mapping (name → "
                                                 "{value, unit, ...})")
