"""One exception family for bemore.

Every error a user can cause is a :class:`BemoreError` whose message is one line naming the file,
the section and key, or the marker and time range. The CLI prints that line and exits with the
class's ``exit_code``; a traceback is shown only with ``--debug``.
"""

from __future__ import annotations


class BemoreError(Exception):
    """Base class of every error bemore reports to a user (one clear line, no traceback)."""

    exit_code = 1


class ConfigError(BemoreError):
    """A configuration file is missing, malformed, or holds a wrong key, type or value."""

    exit_code = 2


class ModelError(BemoreError):
    """A model description is inconsistent (cycle, unknown parent, non-positive mass, ...)."""

    exit_code = 2


class DataError(BemoreError):
    """An input data file (trial, athlete, setpoints, log) cannot be used as it is."""

    exit_code = 2


class OptimisationError(BemoreError):
    """An optimisation could not be set up or run (not: it ran and did not converge)."""

    exit_code = 1


class PoorFitError(BemoreError):
    """An identification ran to its end but the model does not follow the trial (its results
    are written, marked poor); or a poorly fitted athlete was given where a good one is needed."""

    exit_code = 1


class BenchError(BemoreError):
    """The bench, its link or its protocol failed; the bench has been brought to a safe state."""

    exit_code = 3
