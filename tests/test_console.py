"""The console scripts' Ctrl-C guard: a Ctrl-C while a command line loads its modules ends it
with one line saying nothing was done (exit code 1), never with an import's traceback nor click's
bare "Aborted!"."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from controller.console import run


def test_a_ctrl_c_during_the_import_is_aborted_without_a_traceback(tmp_path, monkeypatch,
                                                                    capsys) -> None:
    # A real module whose import is interrupted, as a Ctrl-C in the first 0.3 s would be.
    (tmp_path / "interrupted_cli.py").write_text("raise KeyboardInterrupt\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SystemExit) as stopped:
        run("interrupted_cli")
    assert stopped.value.code == 1
    assert capsys.readouterr().err == ("bemore: interrupted (Ctrl-C) while starting: nothing was "
                                       "read, written or sent\n")


def test_the_entry_is_called_once_imported(tmp_path, monkeypatch, capsys) -> None:
    (tmp_path / "fine_cli.py").write_text("def main():\n    print('ran')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    run("fine_cli")
    assert capsys.readouterr().out == "ran\n"


@pytest.mark.parametrize(("script", "target"), [("bemore", "bemore.console:main")])
def test_the_installed_console_script_goes_through_the_guard(script: str, target: str) -> None:
    # The environment `make venv` installed: its `bemore` script is the guarded entry, and a
    # whole command through it works (`python -m bemore` takes the same entry).
    (point,) = entry_points(group="console_scripts", name=script)
    assert point.value == target
    done = subprocess.run([sys.executable, "-m", "bemore", "--version"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip(), done.stderr
