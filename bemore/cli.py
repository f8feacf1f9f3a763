"""The ``bemore`` command line: a thin layer over the library API.

Each subcommand lives in the module of its capability and is registered in
:func:`_register_commands` once it really works. Every :class:`~bemore.errors.BemoreError` becomes
one line on stderr and the error's exit code (0 ok, 1 a run that did not succeed, 2 usage, config
or data error, 3 bench or protocol fault); ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from bemore import __version__
from bemore.errors import BemoreError


class BemoreGroup(click.Group):
    """Click group that turns library errors into one clear line and an exit code."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except BemoreError as error:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"bemore: error: {error}", err=True)
            sys.exit(error.exit_code)


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
def config_check(files: tuple[Path, ...]) -> None:
    """Validate configuration files (default: every bundled file in configs/).

    \b
    Reads:  TOML files; the schema is chosen by file name (gymnast.toml, identification.toml,
            synthesis.toml, bench.toml, or files in configs/models/ for model descriptions).
    Writes: nothing; prints one line per file, or one error line and exit code 2.
    Example:
        bemore config check configs/bench.toml
    """
    from bemore.configcheck import check_files

    for line in check_files(list(files)):
        click.echo(line)


def _register_commands() -> None:
    """Attach the subcommands of each capability (only those that work)."""
    import bemore.batch.cli  # registers "bemore batch"
    import bemore.identify.cli  # registers "bemore identify"
    import bemore.synthesis.cli  # registers "bemore synthesize"
    import bemore.trial.cli  # noqa: F401  (registers "bemore trial")
    import controller.cli  # noqa: F401  (registers "bemore drive" and "bemore replay")
    from bemore.model.cli import simulate_command

    cli.add_command(simulate_command)


_register_commands()


def main() -> None:
    """Entry point of the ``bemore`` console script."""
    cli(prog_name="bemore")
