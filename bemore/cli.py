"""The ``bemore`` command line: a thin layer over the library API.

Each subcommand lives in the module of its capability and is registered in
:func:`_register_commands` once it really works. Every :class:`~bemore.errors.BemoreError` becomes
one line on stderr and the error's exit code (0 ok, 1 a run that did not succeed, 2 usage, config
or data error, 3 bench or protocol fault); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from bemore import __version__
from controller.cli import BenchGroup

# The capabilities' commands in the coach's workflow order (the order `bemore --help` lists them:
# look at the recording, identify, synthesize, drive, replay; then the whole-squad batch, the
# records and the model tool; `config` follows): name → (module, attribute, one-line summary for
# `bemore --help`).
# A command's module is imported only when that command runs, so that `bemore --help` and each
# command start without the others' heavy imports (numba kernels, scipy.signal, matplotlib).
# Register a command here only once it really works; tests/test_bemore_cli.py checks each summary
# against the command's own help.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "trial": ("bemore.trial.cli", "trial_group",
              "Motion-capture trials: inspect a recording, synthesise a test trial."),
    "identify": ("bemore.identify.cli", "identify_command",
                 "Identify the gymnast model's parameters (identification.toml) from a "
                 "motion-capture trial."),
    "synthesize": ("bemore.synthesis.cli", "synthesize_command",
                   "Synthesize the optimal shoulder gesture of a clear hip circle and its bench "
                   "setpoints."),
    "drive": ("bemore.records.drive", "drive_command",
              "Stream a gesture to the bench, safely, and log the session."),
    "replay": ("controller.cli", "replay_command",
               "Summarise a session log; plot it; stream it again."),
    "batch": ("bemore.batch.cli", "batch_command",
              "Identify and synthesize every athlete of MANIFEST (TOML or CSV), in parallel, "
              "resumably."),
    # The coach's records (docs/records.md): the squad, the season, the database file.
    "athlete": ("bemore.records.cli", "athlete_group",
                "The squad's athletes: add, list, show, edit (a body mass is a dated series)."),
    "import": ("bemore.records.cli", "import_command",
               "Register existing output folders and session logs in the records."),
    "history": ("bemore.records.cli", "history_command",
                "An athlete's season: parameters with standard errors, gestures, bench sessions."),
    "squad": ("bemore.records.cli", "squad_command",
              "One line per athlete: last trial, model age, gesture current or stale, last "
              "session."),
    "export": ("bemore.records.cli", "export_command",
               "Export the records: a folder of CSV files, or one JSON file (OUT ending in "
               ".json)."),
    "db": ("bemore.records.cli", "db_group",
           "The records database file: where it is, its schema version, an online backup."),
    # The model tools.
    "simulate": ("bemore.model.cli", "simulate_command",
                 "Simulate a gymnast model along a driven motion, from spring equilibrium."),
    "model": ("bemore.model.compiler_cli", "model_group",
              "A model's equations of motion for people (LaTeX, Markdown) and as portable C."),
}


class BemoreGroup(BenchGroup):
    """Click group that loads capability commands lazily and turns library errors into one
    clear line and an exit code (the bench side's group, named ``bemore``)."""

    program = "bemore"

    def list_commands(self, ctx: click.Context) -> list[str]:
        """The capabilities' commands in workflow order, then the group's own (config)."""
        own = [name for name in super().list_commands(ctx) if name not in COMMANDS]
        return [*COMMANDS, *own]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in COMMANDS and name not in self.commands:
            module, attribute, _ = COMMANDS[name]
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            if name in COMMANDS and name not in self.commands:
                rows.append((name, COMMANDS[name][2]))
            else:
                rows.append((name, self.commands[name].get_short_help_str(limit=80)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)



@click.group(cls=BemoreGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="bemore")
@click.option("--debug", is_flag=True, help="Show full tracebacks instead of one-line errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Personalise and drive a robotic gymnastics training bench.

    The coach's workflow: identify the gymnast model from a motion-capture trial, synthesize the
    optimal shoulder gesture, drive the bench with it, replay the session.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


@cli.group("config")
def config_group() -> None:
    """Inspect and check configuration files."""


@config_group.command("check")
@click.argument("files", nargs=-1, type=click.Path(path_type=Path))
@click.option("--kind", default=None, metavar="KIND",
              help="Kind of every FILE, for a copy whose name does not tell it: gymnast, "
              "identification, synthesis, bench, profile, markerset, trial, bench_sim, batch, "
              "model. "
              "Default: told by the file name (bench.toml, models/*.toml, ...).")
def config_check(files: tuple[Path, ...], kind: str | None) -> None:
    """Validate configuration files (default: every bundled file in configs/).

    \b
    Reads:  TOML files (and CSV batch manifests); the schema is the one the program loads the
            file with, chosen by the file name (configs/ names, models/*.toml) or --kind.
    Writes: nothing; prints one line per file, or one error line and exit code 2.
    Example:
        bemore config check
        bemore config check my_bench.toml --kind bench
    """
    from bemore.configcheck import check_files

    for line in check_files(list(files), kind):
        click.echo(line)


def main() -> None:
    """Entry point of the ``bemore`` console script."""
    cli(prog_name="bemore")
