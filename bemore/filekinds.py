"""What a JSON file bemore wrote is, from its keys: for the one-line refusal when a command is
handed another command's output (a gesture.json where an athlete.json is expected, say)."""

from __future__ import annotations

import json
from typing import Any

from controller.cli import SESSION_LOG_FORMAT

# (what the file is, the top-level keys only it has): the outputs a user may pass to the wrong
# command. An athlete.json is recognised by its "format" ("bemore-athlete N") by its readers.
_SIGNATURES = (
    ("a gesture.json (written by bemore synthesize)", {"design", "objective", "constraints"}),
    ("a trial.json (written by bemore trial inspect)", {"rate_hz_original", "frames", "free_q0"}),
    ("a synthetic trial's truth (its generator's values)", {"synthetic", "generator"}),
)


def other_kind(data: Any) -> str | None:
    """What ``data`` (a parsed JSON document, or the first record of a JSON Lines file) is, if
    it is one of the outputs above or a session log's header; None otherwise.

    >>> other_kind({"design": {}, "objective": "torque", "constraints": {}, "feasible": True})
    'a gesture.json (written by bemore synthesize)'
    >>> other_kind({"type": "header", "format": "bemore-session 1"})
    'a session log (written by bemore drive)'
    >>> other_kind({"format": "bemore-athlete 1", "parameters": {}}) is None
    True
    """
    if not isinstance(data, dict):
        return None
    session_log = SESSION_LOG_FORMAT.split()[0]  # "bemore-session", whatever its version
    if data.get("type") == "header" and str(data.get("format", "")).startswith(session_log):
        return "a session log (written by bemore drive)"
    for kind, keys in _SIGNATURES:
        if keys <= data.keys():
            return kind
    return None


def first_record(text: str) -> Any:
    """The first line of ``text`` parsed as JSON (a JSON Lines file's first record), or None
    when it is not JSON: what :func:`other_kind` reads of a file that is not one document.

    >>> first_record('{"type": "header"}\\n{"type": "event"}\\n')
    {'type': 'header'}
    """
    try:
        return json.loads(text.partition("\n")[0])
    except json.JSONDecodeError:
        return None
