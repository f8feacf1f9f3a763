"""One exception family for bemore, defined by the bench side so that it installs alone.

Every error a user can cause is a :class:`BemoreError` whose message is one line naming the file,
the section and key, or the marker and time range. A CLI (``bemore``, ``bemore-bench``) prints
that line and exits with the class's ``exit_code``: 1 the run did not succeed, 2 usage,
configuration or data, 3 bench or protocol fault. The scientific side (``bemore.errors``) adds
its own subclasses to this family.
"""

from __future__ import annotations


class BemoreError(Exception):
    """Base class of every error bemore reports to a user (one clear line, no traceback)."""

    exit_code = 1


class ConfigError(BemoreError):
    """A configuration file is missing, malformed, or holds a wrong key, type or value."""

    exit_code = 2


class DataError(BemoreError):
    """An input data file (trial, athlete, setpoints, log) cannot be used as it is."""

    exit_code = 2


class BenchError(BemoreError):
    """The bench, its link or its protocol failed; the bench has been brought to a safe state."""

    exit_code = 3


def os_error_line(error: OSError) -> str:
    """``FILE: reason`` of an error of the operating system (the reason alone without a file).

    >>> os_error_line(IsADirectoryError(21, "Is a directory", "out/athlete.json"))
    'out/athlete.json: Is a directory'
    >>> os_error_line(OSError("no space left on the card"))
    'no space left on the card'
    """
    if error.filename is not None and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return str(error)
