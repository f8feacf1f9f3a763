"""Entry point of the ``bemore`` console script: :func:`bemore.cli.main`, its modules imported
under the bench side's Ctrl-C guard (:func:`controller.console.run`)."""

from __future__ import annotations

from controller.console import run


def main() -> None:
    """Run the ``bemore`` command line (a Ctrl-C while it loads: "Aborted!", exit code 1)."""
    run("bemore.cli")
