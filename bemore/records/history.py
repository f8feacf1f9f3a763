"""An athlete's season from the records: the identified parameters with their standard errors,
the gestures' key figures and the bench sessions, as text, a PNG, and the squad's one line each.
"""

from __future__ import annotations

import datetime as dt
import io
import math
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bemore.paths import write_file
from bemore.records import store

#: The parameters the per-trial table shows (the springs a coach follows over a season); the
#: drift table and the plot show every identified parameter.
TABLE_PARAMETERS = ("bar.stiffness_x", "bar.stiffness_y", "shoulder.stiffness_ap",
                    "shoulder.stiffness_pd", "trunk.mass")

#: Half-width of the plotted uncertainty band, in standard errors (≈ 95 %).
BAND_SE = 2.0


@dataclass
class Season:
    """Everything the records hold about one athlete, oldest first."""

    athlete: store.AthleteRecord
    body_mass: list[tuple[str, float]]
    changes: list[dict[str, Any]]
    models: list[dict[str, Any]]
    gestures: list[dict[str, Any]]
    sessions: list[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (the export of one athlete)."""
        athlete = self.athlete
        return {
            "athlete": {"name": athlete.name, "sex": athlete.sex, "stature_m": athlete.stature_m,
                        "torque_limit_nm": athlete.torque_limit_nm,
                        "flexion_range_deg": list(athlete.flexion_range_deg),
                        "created_utc": athlete.created_utc},
            "body_mass": [{"measured_on": on, "kg": kg} for on, kg in self.body_mass],
            "changes": self.changes,
            "models": self.models,
            "gestures": self.gestures,
            "sessions": self.sessions,
        }


def season(connection: sqlite3.Connection, name: str) -> Season:
    """Read the athlete's season (an unknown name is one DataError line)."""
    athlete = store.get_athlete(connection, name)
    return Season(athlete, store.body_mass_series(connection, athlete.name),
                  store.athlete_changes(connection, athlete.name),
                  store.models(connection, athlete.name), store.gestures(connection, athlete.name),
                  store.sessions(connection, athlete.name))


def _number(value: float | None, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}g}"


def _with_se(entry: dict[str, Any] | None) -> str:
    if not entry or entry.get("value") is None:
        return "—"
    se = entry.get("standard_error")
    text = _number(entry["value"], 5)
    if se is None or not math.isfinite(se):
        return text
    return text + " ± " + (f"{se:.0f}" if abs(se) >= 100 else f"{se:.2g}")


# The parts of a standard error the records keep beside it (athlete.json's identifiability
# rows): the segment table's and the markers' slide on the skin, inputs the same athlete brings
# to every fit of hers.
RECORDED_PARTS = ("standard_error_segment_table", "standard_error_soft_tissue")
# Of those, the parts a change between two of her fits leaves out: the table's (its values for
# her body are the same in every fit). The slide's stays in: its effect on the estimates
# depends on the motion (the same slide on the same body, the hip's and shoulder's ranges 25 %
# smaller: shoulder.stiffness_pd drifted 2.78 combined errors without it, 0.75 with no slide),
# and markers are placed again at each session.
COMMON_PARTS = ("standard_error_segment_table",)


def error_without(entry: dict[str, Any], parts: tuple[str, ...]) -> float | None:
    """A parameter's standard error (``entry["standard_error"]``, an athlete.json or records
    row) less the ``parts`` recorded beside it (in quadrature); the whole one where a part is
    not recorded; None without a standard error.

    >>> error_without({"standard_error": 13.0, "standard_error_segment_table": 4.0,
    ...                "standard_error_soft_tissue": 12.0}, RECORDED_PARTS)
    3.0
    >>> error_without({"standard_error": 5.0}, RECORDED_PARTS)
    5.0
    """
    se = entry.get("standard_error")
    if se is None or not math.isfinite(se):
        return None
    variance = se * se
    for part in parts:
        value = entry.get(part)
        if value is not None and math.isfinite(value):
            variance -= value * value
    return math.sqrt(max(variance, 0.0))


def within_athlete_error(entry: dict[str, Any]) -> float | None:
    """A parameter's standard error as two fits of the same body see it: the whole standard
    error less its segment table's part (:data:`COMMON_PARTS`: the table's error for her body
    is the same in every fit, so it cancels in a change); the whole one when that part is not
    recorded.

    >>> within_athlete_error({"standard_error": 5.0, "standard_error_segment_table": 4.0})
    3.0
    >>> within_athlete_error({"standard_error": 13.0, "standard_error_segment_table": 5.0,
    ...                       "standard_error_soft_tissue": 12.0})
    12.0
    """
    return error_without(entry, COMMON_PARTS)


def drift(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per parameter: first and last identified value, change (%) and the change in combined
    standard errors (z = Δ / √(se₁² + se₂²), each se without its segment table's part,
    :func:`within_athlete_error`: |z| > 2 is a change the fits can tell apart)."""
    if len(models) < 2:
        return []
    first, last = models[0]["parameters"], models[-1]["parameters"]
    rows = []
    for name, start in first.items():
        end = last.get(name)
        if end is None or start.get("value") is None or end.get("value") is None:
            continue
        delta = end["value"] - start["value"]
        se = [within_athlete_error(v) for v in (start, end)]
        spread = math.hypot(*se) if all(s is not None for s in se) else None
        rows.append({"parameter": name, "unit": start.get("unit", ""), "first": start["value"],
                     "last": end["value"],
                     "change_pct": 100.0 * delta / abs(start["value"]) if start["value"] else None,
                     "z": delta / spread if spread else None,
                     "identifiable": bool(start.get("identifiable") and end.get("identifiable"))})
    return rows


def history_lines(data: Season) -> list[str]:
    """The printed history: athlete, body mass series, models (key parameters ± standard
    error), drift first → last, gestures, sessions."""
    a = data.athlete
    lines = [f"athlete   {a.name} ({a.sex}, {a.stature_m:g} m; shoulder torque limit "
             f"{a.torque_limit_nm:g} N·m, flexion {a.flexion_range_deg[0]:g}…"
             f"{a.flexion_range_deg[1]:g} deg)",
             "body mass " + ", ".join(f"{on} {kg:g} kg" for on, kg in data.body_mass)]
    for change in data.changes:
        lines.append(f"edited    {change['changed_utc'][:10]} {change['field']}: "
                     f"{change['old_value']} → {change['new_value']}")
    lines.append(f"models    {len(data.models)}")
    if data.models:
        header = f"  {'trial date':<11}{'fit':<12}{'dist mm':>8}  " + "".join(
            f"{name:>24}" for name in TABLE_PARAMETERS)
        lines.append(header)
        for model in data.models:
            lines.append(f"  {model['trial_utc'][:10]:<11}{model['verdict']:<12}"
                         f"{_number(model['rms_distance_mm'], 3):>8}  " + "".join(
                             f"{_with_se(model['parameters'].get(name)):>24}"
                             for name in TABLE_PARAMETERS))
    rows = drift(data.models)
    if rows:
        lines.append(f"drift     {data.models[0]['trial_utc'][:10]} → "
                     f"{data.models[-1]['trial_utc'][:10]} (z = change / combined standard error;"
                     " * identifiable in both, |z| > 2)")
        for row in rows:
            told_apart = row["z"] is not None and abs(row["z"]) > 2
            mark = "*" if row["identifiable"] and told_apart else " "
            change = "—" if row["change_pct"] is None else f"{row['change_pct']:+.1f} %"
            z = "—" if row["z"] is None else f"{row['z']:+.1f}"
            lines.append(f"  {mark} {row['parameter']:<24}{_number(row['first'], 5):>10} → "
                         f"{_number(row['last'], 5):<10} {row['unit']:<7}{change:>9}  z {z}")
    lines.append(f"gestures  {len(data.gestures)}")
    model_dates = {m["sha256"]: m["trial_utc"][:10] for m in data.models}
    for g in data.gestures:
        lines.append(
            f"  {g['recorded_utc'][:16]}  model of {model_dates.get(g['model_sha256'], '?'):<10}"
            f"  {'feasible' if g['feasible'] else 'INFEASIBLE'}  t_f {_number(g['final_time_s'])}"
            f" s, t_flexmax {_number(g['flexion_end_time_s'])} s, phi_max "
            f"{_number(g['max_flexion_deg'])} deg, peak {_number(g['peak_torque_nm'])} N·m/"
            f"shoulder, {g['objective']} {_number(g['objective_value'])}")
    lines.append(f"sessions  {len(data.sessions)}")
    for s in data.sessions:
        load = "" if s["load_pct"] in (None, 0) else f" {s['load_pct']:g} %"
        lines.append(
            f"  {s['start_utc'][:16]}  {s['mode']}{load}, speed {_number(s['speed'])}, reps "
            f"{s['reps']}, {_number(s['duration_s'])} s; tracking RMS "
            f"{_number(s['tracking_rms_deg'], 3)} deg, max {_number(s['tracking_max_deg'], 3)} "
            f"deg; faults {s['faults'] or 'none'}; {s['end_reason']}")
    return lines


def _date(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def plot_history(data: Season, path: Path) -> Path:
    """PNG of the season: one panel per identified parameter (value, ± BAND_SE standard errors
    shaded, by trial date), then the gestures' peak torque and duration, and the sessions'
    tracking error. Written to ``path`` as named (a PNG whatever its suffix; ``bemore history
    --plot`` takes a .png name). Returns the path."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    from bemore.paths import output_folder

    names = list(data.models[-1]["parameters"]) if data.models else []
    panels = len(names) + 3
    columns = 4
    rows = math.ceil(panels / columns)
    figure = Figure(figsize=(4.0 * columns, 2.6 * rows), layout="constrained")
    figure.suptitle(f"{data.athlete.name}: the season (bands ±{BAND_SE:g} standard errors)")
    axes = figure.subplots(rows, columns, squeeze=False).ravel()
    for ax in axes:  # one locator per axis: a locator follows the axis it is set on
        locator = AutoDateLocator(maxticks=5)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    for ax, name in zip(axes, names, strict=False):
        points = [(_date(m["trial_utc"]), m["parameters"].get(name) or {}) for m in data.models]
        points = [(t, p) for t, p in points if p.get("value") is not None]
        t = [p[0] for p in points]
        value = [p[1]["value"] for p in points]
        se = [p[1].get("standard_error") for p in points]
        se = [s if s is not None and math.isfinite(s) else 0.0 for s in se]
        ax.fill_between(t, [v - BAND_SE * s for v, s in zip(value, se, strict=True)],
                        [v + BAND_SE * s for v, s in zip(value, se, strict=True)],
                        alpha=0.3, color="tab:blue", linewidth=0)
        ax.errorbar(t, value, yerr=[BAND_SE * s for s in se], fmt="o-", color="tab:blue",
                    capsize=3)
        unit = points[0][1].get("unit", "") if points else ""
        ax.set_title(f"{name} ({unit})", fontsize=9)
    extra = axes[len(names):]
    gestures = [g for g in data.gestures if g["peak_torque_nm"] is not None]
    model_dates = {m["sha256"]: m["trial_utc"] for m in data.models}

    def gesture_time(g: dict[str, Any]) -> dt.datetime:
        return _date(model_dates.get(g["model_sha256"]) or g["recorded_utc"])

    extra[0].plot([gesture_time(g) for g in gestures], [g["peak_torque_nm"] for g in gestures],
                  "s-", color="tab:red")
    extra[0].set_title("gesture: peak torque per shoulder (N·m)", fontsize=9)
    extra[1].plot([gesture_time(g) for g in gestures], [g["final_time_s"] for g in gestures],
                  "s-", color="tab:red", label="t_f")
    extra[1].plot([gesture_time(g) for g in gestures], [g["flexion_end_time_s"] for g in gestures],
                  "^-", color="tab:orange", label="t_flexmax")
    extra[1].set_title("gesture: timing (s), by model's trial date", fontsize=9)
    if gestures:
        extra[1].legend(fontsize=7)
    sessions = [s for s in data.sessions if s["tracking_rms_deg"] is not None]
    extra[2].plot([_date(s["start_utc"]) for s in sessions],
                  [s["tracking_rms_deg"] for s in sessions], "d", color="tab:green")
    faulted = [s for s in sessions if s["faults"]]
    extra[2].plot([_date(s["start_utc"]) for s in faulted],
                  [s["tracking_rms_deg"] for s in faulted], "x", color="black", label="fault")
    extra[2].set_title("sessions: tracking error RMS (deg)", fontsize=9)
    for ax in axes[panels:]:
        ax.set_visible(False)
    # one time axis for every panel, at least DATE_PAD either side of the season's dates: a
    # single date (one trial) or a panel without data had no range the date locator can tick
    dates = [_date(m["trial_utc"]) for m in data.models] + [
        gesture_time(g) for g in gestures] + [_date(s["start_utc"]) for s in sessions]
    if dates:
        pad = max((max(dates) - min(dates)) * 0.05, DATE_PAD)
        for ax in axes:
            ax.set_xlim(min(dates) - pad, max(dates) + pad)
    path = Path(path)
    output_folder(path.parent, files=[path.name])
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    return write_file(path, buffer.getvalue())


DATE_PAD = dt.timedelta(days=1)
"""The least margin of the history plot's time axis either side of the season's dates."""


def squad_lines(connection: sqlite3.Connection, today: dt.datetime | None = None) -> list[str]:
    """One line per athlete: last trial, the model's age (days since its trial), whether the
    latest gesture is stale (synthesized from an older model than her latest), last session."""
    now = today or dt.datetime.now(dt.timezone.utc)
    header = (f"{'athlete':<20}{'last trial':<12}{'model age':>10}  {'fit':<12}{'gesture':<28}"
              "last session")
    lines = [header]
    for athlete in store.list_athletes(connection):
        models = store.models(connection, athlete.name)
        gestures = store.gestures(connection, athlete.name)
        sessions = store.sessions(connection, athlete.name)
        latest = models[-1] if models else None
        if latest is None:
            trial, age, fit = "—", "—", "—"
        else:
            trial = latest["trial_utc"][:10]
            age = f"{(now - _date(latest['trial_utc'])).days} d"
            fit = latest["verdict"]
        if not gestures:
            gesture = "none"
        elif latest is None or gestures[-1]["model_sha256"] != latest["sha256"]:
            gesture = f"STALE ({gestures[-1]['recorded_utc'][:10]})"
        else:
            gesture = f"current ({gestures[-1]['recorded_utc'][:10]})"
        if sessions:
            s = sessions[-1]
            load = "" if s["load_pct"] in (None, 0) else f" {s['load_pct']:g} %"
            session = f"{s['start_utc'][:10]} {s['mode']}{load}, {s['end_reason']}"
        else:
            session = "none"
        lines.append(f"{athlete.name:<20}{trial:<12}{age:>10}  {fit:<12}{gesture:<28}{session}")
    return lines
