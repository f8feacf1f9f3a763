"""The console scripts' Ctrl-C guard: a Ctrl-C while a command line loads its modules ends it
with one line saying nothing was done (exit code 1), never with an import's traceback nor click's
bare "Aborted!"."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

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


# A module whose import runs a string through exec(), as dataclasses, collections.namedtuple and
# typing do for the classes they make while the command line loads (CPython 3.11's exec of a
# string goes through the C API's PyRun_String): that code says it is loading, then waits for a
# line that never comes; the Ctrl-C lands there.
_EXEC_OF_A_STRING = '''
exec("import sys\\nprint('loading', flush=True)\\nsys.stdin.readline()\\n")
'''


_COMMAND = f"""
import click
from controller.cli import BenchGroup

@click.group(cls=BenchGroup)
def cli():
    pass

@cli.command()
def go():
{textwrap.indent(_EXEC_OF_A_STRING.strip(), "    ")}

cli(["go"])
"""


@pytest.mark.parametrize(("entry", "line"), [
    # while the command line's modules load (the console script's guard)
    ("from controller.console import run\nrun('loading_cli')\n",
     "bemore: interrupted (Ctrl-C) while starting: nothing was read, written or sent"),
    # while a command loads what it needs (the command group's Ctrl-C line)
    (_COMMAND, "bemore-bench: interrupted (Ctrl-C): nothing was written"),
], ids=["while-loading", "in-a-command"])
def test_a_real_ctrl_c_in_code_exec_runs_while_loading_exits_with_code_1(
        tmp_path, entry: str, line: str) -> None:
    # CPython marks a KeyboardInterrupt that leaves an exec of a string as unhandled and, at the
    # interpreter's exit, kills the process with SIGINT (exit status -2) even though bemore
    # caught it: the exit code is 1 all the same. Run as `python -m bemore` runs (runpy: the
    # interpreter's main then checks that mark). The SIGINT is sent on the child's "loading"
    # line (an event, not a delay).
    (tmp_path / "loading_cli.py").write_text(_EXEC_OF_A_STRING)
    (tmp_path / "entry.py").write_text(entry)
    root = Path(__file__).resolve().parents[1]
    child = subprocess.Popen(
        [sys.executable, "-m", "entry"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])})
    try:
        assert child.stdout.readline() == "loading\n"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert err == f"{line}\n"
    assert child.returncode == 1
