"""What a file bemore wrote is, from what it holds: for the one-line refusal when a command is
handed another command's output (a gesture.json where an athlete.json is expected, say).

The one definition is the bench side's (:mod:`controller.filekinds`: ``drive``, ``replay`` and
the TOML readers refuse other kinds too, and the bench side installs alone); re-exported here
for the scientific side through ``controller.cli``.
"""

from __future__ import annotations

from controller.cli import filekinds as _filekinds

ATHLETE = _filekinds.ATHLETE
GESTURE = _filekinds.GESTURE
PROFILE_COLUMNS = _filekinds.PROFILE_COLUMNS
SESSION_LOG = _filekinds.SESSION_LOG
Kind = _filekinds.Kind
first_record = _filekinds.first_record
kind_of = _filekinds.kind_of
kind_of_text = _filekinds.kind_of_text
other_than = _filekinds.other_than
refusal = _filekinds.refusal

__all__ = ["ATHLETE", "GESTURE", "PROFILE_COLUMNS", "SESSION_LOG", "Kind", "first_record",
           "kind_of", "kind_of_text", "other_than", "refusal"]
