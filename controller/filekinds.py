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

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

from controller.dump import MAGIC as DUMP_MAGIC
from controller.log import FORMAT_TAG as SESSION_FORMAT
from controller.setpoints import FORMAT_TAG as SETPOINTS_FORMAT


@dataclass(frozen=True)
class Kind:
    """A kind of file bemore reads or writes: its name, the command that writes it (None for
    a file people write: a configuration, a motion-capture trial), the one that takes it as
    its input (None when only people and the records read it), the bundled file it is like (a
    configuration's, e.g. "controller/configs/bench.toml") and the names (glob patterns) a
    file of the kind has in a folder, for the refusal of a folder given in its place."""

    name: str  # "an athlete.json"
    writer: str | None  # "bemore identify"
    taker: str | None = None  # "bemore synthesize"
    like: str | None = None  # "configs/athlete.example.toml"
    names: tuple[str, ...] = ()  # ("athlete.json",)

    def found(self) -> str:
        """The kind as found in a file, and where it goes: 'an athlete.json (written by bemore
        identify; bemore synthesize takes it)', 'a bench configuration (like
        controller/configs/bench.toml)'."""
        notes = [f"written by {self.writer}" if self.writer else
                 f"like {self.like}" if self.like else "",
                 f"{self.taker} takes it" if self.taker else ""]
        notes = [note for note in notes if note]
        return f"{self.name} ({'; '.join(notes)})" if notes else self.name

    def wanted(self) -> str:
        """The kind as wanted instead: 'an athlete.json (bemore identify writes one)', 'a bench
        configuration (a TOML file like controller/configs/bench.toml)'."""
        if self.writer:
            return f"{self.name} ({self.writer} writes one)"
        return f"{self.name} (a TOML file like {self.like})" if self.like else self.name


ATHLETE = Kind("an athlete.json", "bemore identify", "bemore synthesize",
               names=("athlete.json",))
GESTURE = Kind("a gesture.json", "bemore synthesize", names=("gesture.json",))
TRIAL = Kind("a trial.json", "bemore trial inspect", names=("trial.json",))
TRUTH = Kind("a synthetic trial's truth", "bemore trial synth", names=("*.truth.json",))
SETPOINTS = Kind("a setpoints.csv", "bemore synthesize", "bemore drive",
                 names=("setpoints.csv",))
SESSION_LOG = Kind("a session log", "bemore drive", "bemore replay", names=("*.jsonl",))
PROFILES = Kind("a profiles.csv", "bemore synthesize")  # the gesture's kinematics and torques
BYTE_DUMP = Kind("a byte dump", "bemore drive --dump", "bemore replay")
JOINT_CENTRES = Kind("a joint_centres.csv", "bemore trial inspect")
DRIVEN = Kind("a driven.csv", "bemore trial inspect")
# What bemore identify and bemore trial inspect read: a motion-capture system's export
MOTION_CAPTURE = Kind("a motion-capture trial (.c3d, .trc or .csv)", None,
                      names=("*.c3d", "*.trc"))
C3D = Kind("a C3D motion-capture trial", None, "bemore identify")
C3D_KEY = 0x50  # a C3D file's second byte (its header's key); its first points at parameters

# The configurations people write, each recognised by the top-level keys (TOML tables, mostly)
# its bundled file has and no other kind has all of: (kind, keys)
BENCH_CONFIG = Kind("a bench configuration", None, "bemore drive --bench-config",
                    "controller/configs/bench.toml")
ATHLETE_PROFILE = Kind("an athlete profile", None, "--profile", "configs/athlete.example.toml")
CONFIGURATIONS = (
    (BENCH_CONFIG, {"limits", "streaming"}),
    (Kind("a simulated bench's configuration", None, None, "controller/configs/bench_sim.toml"),
     {"plant", "controller"}),
    (ATHLETE_PROFILE, {"body_mass_kg", "stature_m"}),
    (Kind("a gymnast model's segment table", None, None, "configs/gymnast.toml"),
     {"segments"}),
    (Kind("an identification configuration", None, "bemore identify --identification-config",
          "configs/identification.toml"), {"optimiser", "parameters"}),
    (Kind("a synthesis configuration", None, None, "configs/synthesis.toml"),
     {"bounds", "constraints", "solver"}),
    (Kind("a marker set", None, "--markerset-config", "configs/markerset.toml"),
     {"labels", "joint_centres"}),
    (Kind("a trial-processing configuration", None, "--trial-config", "configs/trial.toml"),
     {"trim", "filter", "resample"}),
    (Kind("a batch manifest", None, "bemore batch", "configs/batch.example.toml"),
     {"athletes"}),
)

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


def joint_centres_header(points: list[str]) -> list[str]:
    """A joint_centres.csv's columns (written by bemore trial inspect, bemore.trial.report):
    the time in s, then each point's x and y in m in the model plane.

    >>> joint_centres_header(["bar", "wrist"])
    ['t_s', 'bar_x_m', 'bar_y_m', 'wrist_x_m', 'wrist_y_m']
    """
    return ["t_s"] + [f"{name}_{axis}_m" for name in points for axis in "xy"]


def driven_header(coordinates: list[str]) -> list[str]:
    """A driven.csv's columns (written by bemore trial inspect, bemore.trial.report): the time
    in s, then each driven coordinate (m for a ``*_length``, else rad), its rate and its
    acceleration (per s, s²).

    >>> driven_header(["elbow", "forearm_length"])[:5]
    ['t_s', 'elbow_rad', 'elbow_rad_s', 'elbow_rad_s2', 'forearm_length_m']
    """
    header = ["t_s"]
    for name in coordinates:
        unit = "m" if name.endswith("_length") else "rad"
        header += [f"{name}_{unit}", f"{name}_{unit}_s", f"{name}_{unit}_s2"]
    return header


def _kind_of_columns(columns: list[str]) -> Kind | None:
    """The kind of a CSV file whose header line is ``columns``: a profiles.csv, a
    joint_centres.csv or a driven.csv; None for any other."""
    if tuple(columns) == PROFILE_COLUMNS:
        return PROFILES
    if len(columns) < 2:
        return None
    points = [name.removesuffix("_x_m") for name in columns[1::2]]
    if columns == joint_centres_header(points):
        return JOINT_CENTRES
    coordinates = [name.rpartition("_")[0] for name in columns[1::3]]
    return DRIVEN if columns == driven_header(coordinates) else None


def kind_of(data: Any) -> Kind | None:
    """The kind of ``data`` (a parsed JSON document, or the first record of a JSON Lines file),
    if it is one of bemore's JSON outputs; None otherwise.

    >>> kind_of({"design": {}, "objective": "torque", "constraints": {}, "feasible": True})
    Kind(name='a gesture.json', writer='bemore synthesize', taker=None, like=None,
         names=('gesture.json',))
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


def kind_of_configuration(data: Any) -> Kind | None:
    """The kind of ``data`` (a parsed TOML file) if it is one of the configurations of
    :data:`CONFIGURATIONS`, by the keys it has; None otherwise.

    >>> print(kind_of_configuration({"limits": {}, "streaming": {}}).found())
    a bench configuration (like controller/configs/bench.toml; bemore drive --bench-config
    takes it)
    >>> kind_of_configuration({"name": "Ada"}) is None
    True
    """
    if not isinstance(data, dict):
        return None
    return next((kind for kind, keys in CONFIGURATIONS if keys <= data.keys()), None)


def kind_of_text(text: str) -> Kind | None:
    """The kind of a file holding ``text``: a byte dump or a setpoints.csv from its first line,
    a session log from its first record, any other of :func:`kind_of`'s from the whole JSON
    document, a C3D trial from its header's key, a configuration from its TOML tables
    (:func:`kind_of_configuration`); None for anything else (another TOML file, a TRC trial,
    another program's file). A text
    kind is recognised after a leading :data:`BOM` too (a re-saved file); a byte dump, binary,
    only from its first byte.

    >>> kind_of_text("# format: bemore-setpoints 1\\n# rate_hz: 1000\\n") is SETPOINTS
    True
    >>> kind_of_text('{"type": "header", "format": "bemore-session 1"}\\n{"type": "sp"}\\n')
    Kind(name='a session log', writer='bemore drive', taker='bemore replay', like=None,
         names=('*.jsonl',))
    >>> kind_of_text("name = 'Ada'\\n") is None
    True
    >>> kind_of_text(",".join(PROFILE_COLUMNS) + "\\n0,0,0,0,0,0,0,0,0,0\\n") is PROFILES
    True
    >>> kind_of_text(BOM + ",".join(PROFILE_COLUMNS) + "\\r\\n") is PROFILES  # a re-saved one
    True
    >>> kind_of_text("\\x02P" + "\\x00" * 510) is C3D  # a C3D header: parameters at block 2
    True
    >>> kind_of_text("[limits]\\nmax_torque_nm = 240.0\\n[streaming]\\n").name
    'a bench configuration'
    """
    # a C3D's first byte: the parameters' block number, a control character (not whitespace)
    if len(text) > 1 and text[1] == chr(C3D_KEY) and "\x00" < text[0] < " " and text[0].strip():
        return C3D
    if text.partition("\n")[0].split()[:1] == DUMP_MAGIC.decode("ascii").split()[:1]:
        return BYTE_DUMP
    text = text.removeprefix(BOM)
    first = text.partition("\n")[0]
    kind = _kind_of_columns([cell.strip() for cell in first.strip().split(",")])
    if kind is not None:
        return kind
    key, _, value = first.removeprefix("#").partition(":")
    if first.startswith("#") and key.strip() == "format" and (
            value.split()[:1] == SETPOINTS_FORMAT.split()[:1]):
        return SETPOINTS
    kind = kind_of(first_record(text))
    if kind is not None:
        return kind
    try:
        if text.lstrip().startswith("{"):
            return kind_of(json.loads(text))
        return kind_of_configuration(tomllib.loads(text))
    except (json.JSONDecodeError, tomllib.TOMLDecodeError):
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


def folder_refusal(path: str | Path, wanted: Kind | str) -> str | None:
    """The one line refusing ``path`` when it is a folder, where a file of the ``wanted`` kind
    (or phrase, e.g. a TOML reader's) was expected, naming the files of that kind the folder
    holds (by :attr:`Kind.names`); None when ``path`` is not a folder.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     _ = (Path(folder) / "athlete.json").write_text("{}")
    ...     folder_refusal(folder, ATHLETE) == (f"{folder}: a folder, not an athlete.json "
    ...                                         f"(give {folder}/athlete.json)")
    True
    """
    path = Path(path)
    if not path.is_dir():
        return None
    if isinstance(wanted, str):
        return f"{path}: a folder, not {wanted}"
    held = sorted({str(file) for name in wanted.names for file in path.glob(name)
                   if file.is_file()})
    give = ""
    if held:
        more = f" (and {len(held) - 3} more)" if len(held) > 3 else ""
        give = (f" (give {held[0]})" if len(held) == 1 else
                f" (give one of {', '.join(held[:3])}{more})")
    return f"{path}: a folder, not {wanted.name}{give}"


def misplaced(path: str | Path, wanted: Kind) -> str | None:
    """The one line refusing ``path`` when it is a folder (:func:`folder_refusal`) or a file of
    a known kind other than ``wanted`` (:func:`kind_of_file`); None otherwise (the reader then
    keeps its own message). What a reader asks once the file is not what it reads."""
    line = folder_refusal(path, wanted)
    if line is not None:
        return line
    kind = kind_of_file(path)
    return None if kind in (None, wanted) else refusal(path, kind, wanted.wanted())


def configuration_for(fields: set[str]) -> Kind | None:
    """The kind of configuration a schema of top-level keys ``fields`` reads (the one whose
    :data:`CONFIGURATIONS` keys it has), or None (a schema of no bundled kind).

    >>> configuration_for({"limits", "streaming"}).name
    'a bench configuration'
    """
    return next((kind for kind, keys in CONFIGURATIONS if keys <= fields), None)


def configuration_refusal(path: str | Path, data: dict[str, Any], expected: Kind | None,
                          wanted: str) -> str | None:
    """The one line refusing ``path``, a TOML file holding ``data``, when it is a configuration
    of another kind (by :data:`CONFIGURATIONS`' keys) than ``expected`` (what the reader reads,
    :func:`configuration_for`; ``wanted``: its phrase); None otherwise (the schema's own
    message then says what is wrong).

    >>> print(configuration_refusal("bench.toml", {"limits": {}, "streaming": {}},
    ...                             ATHLETE_PROFILE, ATHLETE_PROFILE.wanted()))
    bench.toml: a bench configuration (like controller/configs/bench.toml; bemore drive
    --bench-config takes it), not an athlete profile (a TOML file like
    configs/athlete.example.toml)
    """
    found = kind_of_configuration(data)
    if found is None or found is expected:
        return None
    return refusal(path, found, wanted)


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
