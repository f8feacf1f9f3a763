"""What a file bemore wrote is, from what it holds: for the one-line refusal when a command is
handed another command's output (a gesture.json where an athlete.json is expected, say).

The one definition is the bench side's (:mod:`controller.filekinds`: ``drive``, ``replay`` and
the TOML readers refuse other kinds too, and the bench side installs alone); re-exported here
for the scientific side through ``controller.cli``.
"""

from __future__ import annotations

from controller.cli import filekinds as _filekinds

ATHLETE = _filekinds.ATHLETE
CONFIGURATIONS = _filekinds.CONFIGURATIONS
MOTION_CAPTURE = _filekinds.MOTION_CAPTURE
GESTURE = _filekinds.GESTURE
PROFILE_COLUMNS = _filekinds.PROFILE_COLUMNS
SESSION_LOG = _filekinds.SESSION_LOG
Kind = _filekinds.Kind
driven_header = _filekinds.driven_header
first_record = _filekinds.first_record
joint_centres_header = _filekinds.joint_centres_header
kind_of = _filekinds.kind_of
kind_of_file = _filekinds.kind_of_file
kind_of_text = _filekinds.kind_of_text
misplaced = _filekinds.misplaced
other_than = _filekinds.other_than
refusal = _filekinds.refusal

__all__ = ["ATHLETE", "CONFIGURATIONS", "GESTURE", "MOTION_CAPTURE", "PROFILE_COLUMNS",
           "SESSION_LOG", "Kind", "driven_header", "first_record", "joint_centres_header",
           "kind_of", "kind_of_file", "kind_of_text", "misplaced", "other_than", "refusal"]
