"""What a file bemore wrote is, from what it holds: for the one-line refusal when a command is
handed another command's output (an athlete.json where a setpoints.csv, a session log or a TOML
profile is expected, say).

The one definition of how each kind is recognised, on the bench side because its commands
(``drive``, ``replay``, ``--profile``, ``--bench-config``) need it and it installs alone; the
scientific side reaches it through ``controller.cli`` (``bemore.filekinds`` re-exports it). A
reader calls it when the file it was given is not what it reads, so that the line names what the
file is and which command writes the one it wanted::

    out/identify/athlete.json: an athlete.json (written by bemore identify; bemore synthesize
    takes it), not a setpoints.csv (bemore synthesize writes one)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.dump import MAGIC as DUMP_MAGIC
from controller.log import FORMAT_TAG as SESSION_FORMAT
from controller.setpoints import FORMAT_TAG as SETPOINTS_FORMAT


@dataclass(frozen=True)
class Kind:
    """A kind of file a bemore command writes: its name, the command that writes it and the
    one that takes it as its input (None when only people and the records read it)."""

    name: str  # "an athlete.json"
    writer: str  # "bemore identify"
    taker: str | None = None  # "bemore synthesize"

    def found(self) -> str:
        """The kind as found in a file, and where it goes: 'an athlete.json (written by bemore
        identify; bemore synthesize takes it)'."""
        takes = f"; {self.taker} takes it" if self.taker else ""
        return f"{self.name} (written by {self.writer}{takes})"

    def wanted(self) -> str:
        """The kind as wanted instead: 'an athlete.json (bemore identify writes one)'."""
        return f"{self.name} ({self.writer} writes one)"


ATHLETE = Kind("an athlete.json", "bemore identify", "bemore synthesize")
GESTURE = Kind("a gesture.json", "bemore synthesize")
TRIAL = Kind("a trial.json", "bemore trial inspect")
TRUTH = Kind("a synthetic trial's truth", "bemore trial synth")
SETPOINTS = Kind("a setpoints.csv", "bemore synthesize", "bemore drive")
SESSION_LOG = Kind("a session log", "bemore drive", "bemore replay")
PROFILES = Kind("a profiles.csv", "bemore synthesize")  # the gesture's kinematics and torques
BYTE_DUMP = Kind("a byte dump", "bemore drive --dump", "bemore replay")

ATHLETE_FORMAT = "bemore-athlete"  # an athlete.json's "format", whatever its version
# The UTF-8 byte order mark (U+FEFF) an editor or a spreadsheet may put before a re-saved text
# file: the text kinds are recognised after it, and their readers read past it ("utf-8-sig")
BOM = "\ufeff"
# A profiles.csv's header line, written by bemore synthesize (bemore.synthesis.outputs): its
# one definition, here so that the bench side recognises the file without the scientific side.
PROFILE_COLUMNS = ("t_s", "shoulder_angle_rad", "shoulder_velocity_rad_s",
                   "shoulder_acceleration_rad_s2", "shoulder_jerk_rad_s3", "torque_total_nm",
                   "torque_per_shoulder_nm", "rotation_about_bar_rad", "bar_x_m", "bar_y_m")
# (kind, the top-level keys only it has) of the JSON documents without a "format"
_SIGNATURES = (
    (GESTURE, {"design", "objective", "constraints", "feasible"}),
    (TRIAL, {"rate_hz_original", "frames", "free_q0"}),
    (TRUTH, {"synthetic", "generator"}),
)


def kind_of(data: Any) -> Kind | None:
    """The kind of ``data`` (a parsed JSON document, or the first record of a JSON Lines file),
    if it is one of bemore's JSON outputs; None otherwise.

    >>> kind_of({"design": {}, "objective": "torque", "constraints": {}, "feasible": True})
    Kind(name='a gesture.json', writer='bemore synthesize', taker=None)
    >>> kind_of({"type": "header", "format": "bemore-session 1"}).found()
    'a session log (written by bemore drive; bemore replay takes it)'
    >>> kind_of({"format": "bemore-athlete 1", "parameters": {}}) is ATHLETE
    True
    >>> kind_of({"parameters": {}}) is None
    True
    """
    if not isinstance(data, dict):
        return None
    tag = str(data.get("format", ""))
    if data.get("type") == "header" and tag.split(" ")[0] == SESSION_FORMAT.split()[0]:
        return SESSION_LOG
    if tag.split(" ")[0] == ATHLETE_FORMAT:
        return ATHLETE
    for kind, keys in _SIGNATURES:
        if keys <= data.keys():
            return kind
    return None


def kind_of_text(text: str) -> Kind | None:
    """The kind of a file holding ``text``: a byte dump or a setpoints.csv from its first line,
    a session log from its first record, any other of :func:`kind_of`'s from the whole JSON
    document; None for anything else (a TOML file, a trial, another program's file). A text
    kind is recognised after a leading :data:`BOM` too (a re-saved file); a byte dump, binary,
    only from its first byte.

    >>> kind_of_text("# format: bemore-setpoints 1\\n# rate_hz: 1000\\n") is SETPOINTS
    True
    >>> kind_of_text('{"type": "header", "format": "bemore-session 1"}\\n{"type": "sp"}\\n')
    Kind(name='a session log', writer='bemore drive', taker='bemore replay')
    >>> kind_of_text("name = 'Ada'\\n") is None
    True
    >>> kind_of_text(",".join(PROFILE_COLUMNS) + "\\n0,0,0,0,0,0,0,0,0,0\\n") is PROFILES
    True
    >>> kind_of_text(BOM + ",".join(PROFILE_COLUMNS) + "\\r\\n") is PROFILES  # a re-saved one
    True
    """
    if text.partition("\n")[0].split()[:1] == DUMP_MAGIC.decode("ascii").split()[:1]:
        return BYTE_DUMP
    text = text.removeprefix(BOM)
    first = text.partition("\n")[0]
    if tuple(first.strip().split(",")) == PROFILE_COLUMNS:
        return PROFILES
    key, _, value = first.removeprefix("#").partition(":")
    if first.startswith("#") and key.strip() == "format" and (
            value.split()[:1] == SETPOINTS_FORMAT.split()[:1]):
        return SETPOINTS
    kind = kind_of(first_record(text))
    if kind is not None or not text.lstrip().startswith("{"):
        return kind
    try:
        return kind_of(json.loads(text))
    except json.JSONDecodeError:
        return None


def other_than(text: str, expected: Kind) -> Kind | None:
    """The kind of a file holding ``text`` when it is one of bemore's outputs other than
    ``expected`` (what the reader asking reads), else None.

    >>> other_than("# format: bemore-setpoints 1\\n", SETPOINTS) is None
    True
    >>> other_than("# format: bemore-setpoints 1\\n", SESSION_LOG) is SETPOINTS
    True
    """
    kind = kind_of_text(text)
    return None if kind is expected else kind


def kind_of_file(path: str | Path) -> Kind | None:
    """The kind of the file at ``path`` (:func:`kind_of_text`), or None, also when it cannot be
    read: a reader asks this once the file is not what it reads, and keeps its own message for
    a file of no known kind."""
    try:
        return kind_of_text(Path(path).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def refusal(path: str | Path, found: Kind, wanted: str) -> str:
    """The one line refusing ``path``, a ``found`` file where ``wanted`` (a phrase:
    :meth:`Kind.wanted`, or a TOML reader's, e.g. ``controller.profile.PROFILE_WANTED``) was
    expected.

    >>> print(refusal("athlete.json", ATHLETE, SETPOINTS.wanted()))
    athlete.json: an athlete.json (written by bemore identify; bemore synthesize takes it), not
    a setpoints.csv (bemore synthesize writes one)
    """
    return f"{path}: {found.found()}, not {wanted}"


def first_record(text: str) -> Any:
    """The first line of ``text`` parsed as JSON (a JSON Lines file's first record), or None
    when it is not JSON: what :func:`kind_of` reads of a file that is not one document.

    >>> first_record('{"type": "header"}\\n{"type": "event"}\\n')
    {'type': 'header'}
    """
    try:
        return json.loads(text.partition("\n")[0])
    except json.JSONDecodeError:
        return None
