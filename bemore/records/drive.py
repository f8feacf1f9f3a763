"""``bemore drive … --athlete NAME``: the bench's drive command with the athlete's profile taken
from the records and the session log indexed there afterwards.

The bench side (``controller/``) knows nothing of the records: this command is the registered
``controller.cli.drive_command`` with two more options. With ``--athlete`` it writes her profile
(from the records) to a temporary profile TOML passed as ``--profile``, runs the drive, then
indexes the session log it wrote (whatever the outcome: completed, stopped or faulted). Without
``--athlete`` it is exactly the bench's command.
"""

from __future__ import annotations

import inspect
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from controller.cli import drive_command as bench_drive_command

EXTRA_HELP = (
    "\n\nRecords: --athlete NAME takes her profile (limits) from the records database "
    "(--db) and indexes the session log there afterwards (bemore history NAME)."
)


def _drive(**options: Any) -> None:
    """Run the bench's drive; with --athlete, her profile from the records, then index the log."""
    athlete = options.pop("athlete")
    db_path = options.pop("db_path")
    context = click.get_current_context()
    if athlete is None:
        context.invoke(bench_drive_command.callback, **options)
        return
    from bemore.errors import BemoreError
    from bemore.records import open_athlete
    from bemore.records.register import register_session
    from bemore.records.store import utc_now

    connection, athlete_record = open_athlete(athlete, db_path, options.get("profile_path"))
    started = utc_now()
    started_s = time.time()
    with tempfile.TemporaryDirectory(prefix="bemore-profile-") as folder:
        profile = Path(folder) / "athlete.toml"
        profile.write_text(athlete_record.profile_toml(), encoding="utf-8")
        options["profile_path"] = profile
        log = options.get("log")
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in options.items()
                    if k != "profile_path"}

        def record() -> None:
            # only a log this run wrote (a refusal before arming writes none)
            if (log is None or options.get("plan_only") or not Path(log).is_file()
                    or Path(log).stat().st_mtime < started_s - 1.0):
                return
            register_session(connection, Path(log), athlete_record.name, "drive", started,
                             settings)
            click.echo(f"recorded session of {athlete_record.name} in the records")

        try:
            context.invoke(bench_drive_command.callback, **options)
        except BaseException:
            # a stopped or faulted session is recorded too; the drive's own error stays the one
            # reported (a failure to record is one more line, never a mask over it)
            try:
                record()
            except BemoreError as error:
                click.echo(f"bemore: error: the session was not recorded: {error}", err=True)
            raise
        record()


drive_command = click.Command(
    name="drive",
    callback=_drive,
    params=[
        *bench_drive_command.params,
        click.Option(["--athlete"], default=None, metavar="NAME",
                     help="The athlete in the records: her profile (limits) instead of "
                     "--profile, and the session log indexed under her name (default: none, no "
                     "records)."),
        click.Option(["--db", "db_path"], type=click.Path(path_type=Path), default=None,
                     metavar="PATH", help="Records database (default: $BEMORE_DB, else "
                     "$XDG_DATA_HOME/bemore/records.sqlite)."),
    ],
    # the bench's docstring without its indentation: added to as it is, the added paragraph's
    # none made the docstring's the help's, and its trailing blank line stayed
    help=inspect.cleandoc(bench_drive_command.help or "") + EXTRA_HELP,
    short_help=bench_drive_command.short_help,
)
