"""The `bemore` command line: every registered command works, helps, and is listed truthfully."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from bemore import __version__
from bemore.cli import COMMANDS, cli


def test_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"bemore, version {__version__}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_listed_summary_is_the_commands_own(name: str) -> None:
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    assert command.get_short_help_str(limit=300) == COMMANDS[name][2]


def test_help_lists_the_commands_in_workflow_order() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    listed = [line.split()[0] for line in result.output.split("Commands:")[1].splitlines()
              if line.startswith("  ") and not line.startswith("   ")]
    assert listed == ["trial", "identify", "synthesize", "drive", "replay", "batch", "athlete",
                      "import", "history", "squad", "export", "db", "simulate", "model",
                      "config"]


GROUPS = {"trial": ["inspect", "synth"], "athlete": ["add", "list", "show", "edit"],
          "db": ["info", "backup"], "config": ["check"], "model": ["equations", "export-c"]}
LEAF_COMMANDS = sorted([[name] for name in COMMANDS if name not in GROUPS]
                       + [[group, name] for group, names in GROUPS.items() for name in names])


@pytest.mark.parametrize("words", LEAF_COMMANDS, ids=" ".join)
def test_each_command_help_says_what_it_reads_writes_and_an_example(words: list[str]) -> None:
    result = CliRunner().invoke(cli, [*words, "--help"])
    assert result.exit_code == 0, result.output
    text = result.output.lower()
    assert "reads" in text and "writes" in text and "example" in text


def test_help_lists_every_command_without_importing_them() -> None:
    # `bemore --help` must not pay for the capabilities' heavy imports (numba, scipy.signal).
    code = ("import sys; from bemore.cli import main; sys.argv = ['bemore', '--help'];\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('HEAVY', sorted(m for m in ('numba', 'scipy.signal', 'matplotlib', "
            "'bemore.model', 'controller.session') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    for name in COMMANDS:
        assert f"  {name} " in result.stdout
    assert "HEAVY []" in result.stdout


def test_unknown_command_is_one_usage_error() -> None:
    result = CliRunner().invoke(cli, ["identfy"])
    assert result.exit_code == 2
    assert "No such command 'identfy'" in result.output


def _leaf_options() -> list[tuple[str, click.Option]]:
    """(command words, option) of every option of every command."""
    found = []
    for words in LEAF_COMMANDS:
        command: click.Command = cli
        for word in words:
            command = command.get_command(click.Context(command), word)  # type: ignore[union-attr]
        found += [(" ".join(words), param) for param in command.params
                  if isinstance(param, click.Option)]
    return found


OPTIONS = _leaf_options()


def test_every_option_states_its_default_in_help() -> None:
    # Flags are off unless given, and a required option has none; every other option shows its
    # default (click's show_default) or says it in its help.
    unstated = [f"{words} {param.opts[0]}" for words, param in OPTIONS
                if not (param.is_flag or param.required or param.show_default
                        or "default" in (param.help or "").lower())]
    assert unstated == []
    result = CliRunner().invoke(cli, ["synthesize", "--help"])
    assert "[default: out/gesture]" in " ".join(result.output.split())


def test_configuration_files_have_one_flag_scheme() -> None:
    # A configuration file is given as --KIND-config, KIND being its `bemore config check --kind`
    # name (--profile, the athlete's profile, is its own kind); no command takes a bare --config.
    from bemore.configcheck import KINDS

    names = {name for _, param in OPTIONS for name in param.opts}
    assert "--config" not in names and "--markerset" not in names
    config_flags = {name for name in names if name.endswith("-config")}
    assert config_flags == {"--trial-config", "--identification-config", "--synthesis-config",
                            "--markerset-config", "--bench-config"}
    for flag in config_flags:
        assert flag.removeprefix("--").removesuffix("-config") in KINDS
    assert "profile" in KINDS and "--profile" in names


def test_out_is_defaulted_and_shown_wherever_a_command_writes_a_folder() -> None:
    outs = {words: param for words, param in OPTIONS if "--out" in param.opts}
    assert set(outs) == {"trial inspect", "identify", "synthesize", "batch", "simulate",
                         "model equations", "model export-c"}
    for words, param in outs.items():
        assert not param.required and param.show_default, words
        assert str(param.default).startswith("out/"), (words, param.default)


@pytest.mark.parametrize(("words", "work"), [
    (["trial", "inspect", "data/sample_trial.c3d"], "bemore.trial.pipeline.read_recording"),
    (["model", "equations"], "bemore.model.symbolic.derive"),
    (["model", "export-c"], "bemore.model.symbolic.derive"),
    (["simulate"], "bemore.model.cli.simulate"),
])
def test_a_refused_output_folder_is_the_one_line_before_the_work(
        words: list[str], work: str, unwritable_folder, monkeypatch) -> None:
    # The report of a recording, a symbolic derivation (seconds) or a simulation is not done
    # for nothing: the folder is checked first, and its refusal is the whole output.
    from bemore.paths import data_dir

    monkeypatch.setattr(work, lambda *args, **kwargs: pytest.fail(f"{work} ran"))
    words = [str(data_dir().parent / word) if word.startswith("data/") else word
             for word in words]
    result = CliRunner().invoke(cli, [*words, "--out", str(unwritable_folder)])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()  # the system's reason in parentheses
    assert line.startswith(f"bemore: error: {unwritable_folder}: cannot write in the output "
                           "folder ("), result.output


@pytest.mark.parametrize(("words", "work", "output"), [
    (["trial", "inspect", "data/sample_trial.c3d"], "bemore.trial.pipeline.read_recording",
     "trial.json"),
    (["model", "equations"], "bemore.model.symbolic.derive", "real_gymnast_equations.md"),
    (["model", "export-c"], "bemore.model.symbolic.derive", "real_gymnast.c"),
    (["simulate"], "bemore.model.cli.simulate", "summary.json"),
])
def test_a_refused_output_file_is_the_one_line_before_the_work(
        words: list[str], work: str, output: str, tmp_path, monkeypatch) -> None:
    # A folder where one of the command's files goes (the default model, real_gymnast): said
    # before the work, and nothing else is written.
    from bemore.paths import data_dir

    monkeypatch.setattr(work, lambda *args, **kwargs: pytest.fail(f"{work} ran"))
    (tmp_path / output).mkdir()
    words = [str(data_dir().parent / word) if word.startswith("data/") else word
             for word in words]
    result = CliRunner().invoke(cli, [*words, "--out", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"bemore: error: {tmp_path / output}: cannot write the output file (Is a directory)"]
    assert [path.name for path in tmp_path.iterdir()] == [output]


@pytest.mark.parametrize("words", LEAF_COMMANDS, ids=" ".join)
def test_each_help_is_laid_out_as_the_others(words: list[str]) -> None:
    # the description starts at the help's own indentation (two spaces): drive's had been
    # indented 8 with a stray blank line, its 'Records:' paragraph one unwrapped line
    lines = CliRunner().invoke(cli, [*words, "--help"]).output.split("\nOptions:")[0]
    lines = lines.splitlines()
    reads = next(line for line in lines if line.lstrip().startswith("Reads:"))
    assert reads.startswith("  Reads:"), reads
    assert "\n\n\n" not in "\n".join(lines)
    assert all(len(line) <= 100 for line in lines), [line for line in lines if len(line) > 100]


def test_helps_name_what_they_write() -> None:
    from controller.cli import bench_cli

    replay = CliRunner().invoke(cli, ["replay", "--help"]).output
    assert "DIR/tracking.png" in replay and "DIR/summary.png" in replay
    bench = CliRunner().invoke(bench_cli, ["--help"]).output
    assert "pip install ./controller" in bench and "``" not in bench
