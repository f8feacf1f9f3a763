"""The install's warm-up (bemore.warmup) and the phase marks (bemore.phases)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

import bemore.warmup as warmup
from bemore import phases


def test_a_failing_warm_up_command_is_one_line_and_exit_1(monkeypatch, capsys) -> None:
    calls = []

    def failing(command, **options):
        calls.append(command)
        return subprocess.CompletedProcess(command, 2, "", "Traceback…\nbemore: error: bad\n")

    monkeypatch.setattr(warmup.subprocess, "run", failing)
    assert warmup.main() == 1
    error = capsys.readouterr().err.strip().splitlines()
    assert error == ["bemore warm-up: error: bemore identify exited with 2: bemore: error: bad"]
    assert len(calls) == 1  # synthesize is not tried without an athlete


def test_the_tiny_search_poor_fit_is_accepted(monkeypatch, capsys) -> None:
    seen = []

    def poor_fit(command, **options):
        seen.append(command[3])
        return subprocess.CompletedProcess(command, 1, "", "bemore: error: fit poor\n")

    monkeypatch.setattr(warmup.subprocess, "run", poor_fit)
    assert warmup.main() == 0
    assert seen == ["identify", "synthesize"]
    assert "kernels compiled and cached" in capsys.readouterr().out


def test_marks_are_written_only_when_asked(tmp_path, monkeypatch) -> None:
    target = tmp_path / "marks.jsonl"
    monkeypatch.delenv(phases.ENVIRONMENT, raising=False)
    phases.mark("synthesize", "start-up")
    assert not target.exists()
    monkeypatch.setenv(phases.ENVIRONMENT, str(target))
    phases.mark("synthesize", "start-up")
    phases.mark("synthesize", "synthesis")
    marks = phases.read(target)
    assert [item["phase"] for item in marks] == ["start-up", "synthesis"]
    assert marks[0]["end_unix_s"] <= marks[1]["end_unix_s"]
    # a folder that cannot be written never fails the command
    monkeypatch.setenv(phases.ENVIRONMENT, str(tmp_path / "missing" / "marks.jsonl"))
    phases.mark("synthesize", "outputs")


def test_the_warm_up_byte_compiles_the_packages(tmp_path, monkeypatch) -> None:
    import importlib.util

    package = tmp_path / "warmed_package"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 1\n")
    (package / "module.py").write_text("def twice(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(warmup, "PACKAGES", ("warmed_package",))
    assert warmup.compile_bytecode() is True
    for name in ("__init__.py", "module.py"):
        assert Path(importlib.util.cache_from_source(str(package / name))).is_file()
    (package / "broken.py").write_text("def broken(:\n")
    assert warmup.compile_bytecode() is False  # that file is compiled at import instead


def test_cpu_durations_follow_the_process_cpu_time_between_marks(tmp_path, monkeypatch) -> None:
    target = tmp_path / "marks.jsonl"
    monkeypatch.setenv(phases.ENVIRONMENT, str(target))
    phases.mark("identify", "start-up")
    spent = time.process_time()
    while time.process_time() - spent < 0.05:  # 50 ms of CPU in this phase
        sum(range(1000))
    phases.mark("identify", "search")
    marks = phases.read(target)
    seconds = phases.cpu_durations(target, marks[-1]["cpu_s"] + 0.25)
    assert seconds["start-up"] == marks[0]["cpu_s"]
    assert 0.05 <= seconds["search"] < 1.0
    assert seconds["exit"] == pytest.approx(0.25, abs=1e-9)
