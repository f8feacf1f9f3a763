"""What a run produced, read back from its output files into rows of the records.

The output files stay the record (athlete.json, gesture.json, session logs); the database holds
their hashes and the figures a coach compares over a season. A session log is read through the
registered ``bemore replay --json`` command (its summary is the one definition of a session's
figures) and the log's header line (docs/drive.md: mode, load, speed, repetitions).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

from bemore import filekinds
from bemore.errors import DataError
from bemore.records.history import RECORDED_PARTS
from controller.cli import streamed


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))  # past a byte order mark
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise DataError(f"{path}: cannot be read as JSON ({error})") from None
    if not isinstance(data, dict):
        raise DataError(f"{path}: not a JSON object")
    return data


def file_time_utc(path: str | Path) -> str:
    """The file's modification time, ISO 8601 UTC (a trial's capture date when no other is
    given: keep it when copying recordings, ``cp -p``)."""
    stamp = Path(path).stat().st_mtime
    return dt.datetime.fromtimestamp(stamp, dt.timezone.utc).isoformat(timespec="seconds")


def is_athlete_json(data: dict[str, Any]) -> bool:
    """Whether a JSON object is an athlete.json written by ``bemore identify``
    (:mod:`controller.filekinds`, the one definition)."""
    return filekinds.kind_of(data) is filekinds.ATHLETE


def is_gesture_json(data: dict[str, Any]) -> bool:
    """Whether a JSON object is a gesture.json written by ``bemore synthesize``
    (:mod:`controller.filekinds`, the one definition)."""
    return filekinds.kind_of(data) is filekinds.GESTURE


def model_row(athlete_json: Path, sha256: str, trial_utc: str,
              trial_sha256: str | None) -> dict[str, Any]:
    """The ``model`` row of an athlete.json: verdict, mean distance (mm), and each parameter's
    value, standard error (and its segment table's and soft-tissue parts,
    :data:`bemore.records.history.RECORDED_PARTS`; a drift leaves the table's out), unit and
    identifiability."""
    data = _read_json(athlete_json)
    if not is_athlete_json(data):
        raise DataError(f"{athlete_json}: not an athlete.json of bemore identify")
    rows = {row.get("name"): row
            for row in (data.get("identifiability") or {}).get("parameters", [])}
    parameters = {
        name: {"value": entry.get("value"), "standard_error": entry.get("standard_error"),
               **{part: rows.get(name, {}).get(part) for part in RECORDED_PARTS},
               "unit": entry.get("unit", ""), "identifiable": bool(entry.get("identifiable"))}
        for name, entry in data.get("parameters", {}).items()
    }
    verdict = (data.get("fit_verdict") or {}).get("status") or "unknown"
    if data.get("interrupted"):
        verdict = "interrupted"
    return {"sha256": sha256, "trial_sha256": trial_sha256, "trial_utc": trial_utc,
            "verdict": str(verdict), "rms_distance_mm": data.get("mean_distance_mm"),
            "parameters_json": json.dumps(parameters)}


def athlete_trial(athlete_json: Path) -> Path | None:
    """The trial file an athlete.json was identified from, when it is still there."""
    source = (_read_json(athlete_json).get("trial") or {}).get("source")
    if not isinstance(source, str):
        return None
    for candidate in (Path(source), athlete_json.parent / source):
        if candidate.is_file():
            return candidate
    return None


def athlete_profile_name(athlete_json: Path) -> str | None:
    """The profile name an athlete.json was identified with (``config.profile.name``)."""
    profile = (_read_json(athlete_json).get("config") or {}).get("profile") or {}
    return profile.get("name") if isinstance(profile, dict) else None


def gesture_row(gesture_json: Path, sha256: str, model_sha256: str | None) -> dict[str, Any]:
    """The ``gesture`` row of a gesture.json: feasibility, timing, peak flexion, objective and
    peak torque per shoulder."""
    data = _read_json(gesture_json)
    if not is_gesture_json(data):
        raise DataError(f"{gesture_json}: not a gesture.json of bemore synthesize")
    design = data.get("design") or {}
    return {"sha256": sha256, "model_sha256": model_sha256, "feasible": int(bool(data["feasible"])),
            "final_time_s": design.get("final_time_s"),
            "flexion_end_time_s": design.get("flexion_end_time_s"),
            "max_flexion_deg": design.get("max_flexion_deg"),
            "objective": data.get("objective"), "objective_value": data.get("objective_value"),
            "peak_torque_nm": data.get("peak_torque_per_shoulder_nm")}


def gesture_athlete_json(gesture_json: Path) -> Path | None:
    """The athlete.json a gesture was synthesized for (``inputs.athlete``), when it exists."""
    source = (_read_json(gesture_json).get("inputs") or {}).get("athlete")
    if not isinstance(source, str):
        return None
    for candidate in (Path(source), gesture_json.parent / source):
        if candidate.is_file():
            return candidate
    return None


def session_header(log: Path) -> dict[str, Any] | None:
    """The header record (line 1) of a session log, or None if the file is not one."""
    try:
        with open(log, encoding="utf-8") as handle:
            first = handle.readline()
        header = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return header if filekinds.kind_of(header) is filekinds.SESSION_LOG else None


def replay_summary(log: Path) -> dict[str, Any]:
    """The summary ``bemore replay LOG --json`` prints (the registered command, in-process)."""
    from controller.cli import replay_command

    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        replay_command.main([str(log), "--json"], prog_name="bemore replay",
                            standalone_mode=False)
    text = output.getvalue()
    try:
        return json.loads(text[text.index("{"): text.rindex("}") + 1])
    except ValueError:
        raise DataError(f"{log}: bemore replay gave no summary") from None


#: The session figures a session that streamed nothing has not measured (NULL in its row,
#: ``—`` in ``bemore history``, empty in ``bemore export``'s sessions.csv).
MEASURED = ("duration_s", "tracking_rms_deg", "tracking_max_deg", "peak_commanded_torque_nm")


def session_row(log: Path, sha256: str) -> dict[str, Any]:
    """The ``session`` row of a session log: when, gesture, mode, load (%), speed, repetitions,
    duration (s), tracking error RMS/max (deg), peak commanded torque (N·m), faults, end; a
    session that never armed (nothing streamed, no telemetry: :func:`controller.replay.streamed`)
    is recorded as an attempt, its :data:`MEASURED` figures None."""
    header = session_header(log)
    if header is None:
        raise DataError(f"{log}: not a bemore session log (no header line)")
    summary = replay_summary(log)
    if not streamed(summary):  # never armed: an attempt, with no figures (not 0.000 deg)
        summary = {key: value for key, value in summary.items() if key not in MEASURED}
    settings = header.get("settings") or {}
    return {"sha256": sha256, "path": str(Path(log).resolve()),
            "start_utc": str(header.get("start_utc", "")), "gesture": summary.get("gesture", ""),
            "mode": str(settings.get("mode", summary.get("mode", ""))),
            "load_pct": settings.get("load_pct"), "speed": settings.get("speed"),
            "reps": settings.get("reps"), "duration_s": summary.get("duration_s"),
            "tracking_rms_deg": summary.get("tracking_rms_deg"),
            "tracking_max_deg": summary.get("tracking_max_deg"),
            "peak_commanded_torque_nm": summary.get("peak_commanded_torque_nm"),
            "faults": ",".join(summary.get("faults") or []),
            "end_reason": str(summary.get("end", "")).split(":")[0] or "unknown"}


def session_profile_name(log: Path) -> str | None:
    """The athlete-profile name in a session log's header (who the session was for)."""
    header = session_header(log) or {}
    profile = header.get("athlete_profile") or {}
    return profile.get("name") if isinstance(profile, dict) else None
