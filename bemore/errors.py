"""One exception family for bemore.

Every error a user can cause is a :class:`BemoreError` whose message is one line naming the file,
the section and key, or the marker and time range. The CLI prints that line and exits with the
class's ``exit_code``; a traceback is shown only with ``--debug``.

The family's base and the kinds both sides raise (configuration, data, bench) are defined by the
bench side (``controller.errors``, so that the bench installs alone) and re-exported here through
``controller.cli``; the kinds only the scientific side raises are defined below.
"""

from __future__ import annotations

from controller.cli import BemoreError, BenchError, ConfigError, DataError

__all__ = ["BemoreError", "BenchError", "ConfigError", "DataError", "ModelError",
           "OptimisationError", "PoorFitError"]


class ModelError(BemoreError):
    """A model description is inconsistent (cycle, unknown parent, non-positive mass, ...)."""

    exit_code = 2


class OptimisationError(BemoreError):
    """An optimisation could not be set up or run (not: it ran and did not converge)."""

    exit_code = 1


class PoorFitError(BemoreError):
    """An identification ran to its end but the model does not follow the trial (its results
    are written, marked poor); or a poorly fitted athlete was given where a good one is needed."""

    exit_code = 1
