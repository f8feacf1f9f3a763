"""What ``bemore identify`` writes: fit metrics, athlete.json, convergence.csv, summary, plots."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import numpy as np

from bemore.identify.identifiability import Identifiability
from bemore.identify.space import ParameterSpace

ATHLETE_FORMAT = "bemore-athlete 1"


def fit_metrics(measured: np.ndarray, simulated: np.ndarray, names: list[str]) -> dict[str, Any]:
    """Cost and distances of a fit; ``measured``/``simulated`` are (F, 7, 2) joint centres in m.

    ``cost_m2`` = Σ over frames and joint centres of the squared distance (the cost f1);
    ``mean_distance_mm`` = mean of the distances; ``rms_mm`` = per joint centre, the RMS distance.
    Joint centres not seen (NaN) are left out.
    """
    squared = np.sum((simulated - measured) ** 2, axis=-1)  # (F, 7) m², NaN where not seen
    return {
        "cost_m2": float(np.nansum(squared)),
        "mean_distance_mm": float(np.nanmean(np.sqrt(squared))) * 1e3,
        "rms_mm": {
            name: float(np.sqrt(np.nanmean(squared[:, k]))) * 1e3 for k, name in enumerate(names)
        },
    }


def parameter_rows(
    space: ParameterSpace, values: np.ndarray, identifiability: Identifiability | None,
    held: list[dict[str, Any]] = (),
) -> dict[str, dict[str, Any]]:
    """``parameters`` of athlete.json: value, unit, lower, upper, position in the box, flags;
    then the ``held`` parameters (rows of ``ParameterSpace.without``: not fitted, at their seed
    values, ``"unobservable": true``, not identifiable, no standard error)."""
    flags = {item.name: item for item in identifiability.parameters} if identifiability else {}
    rows = {}
    for k, name in enumerate(space.names):
        row: dict[str, Any] = {
            "value": float(values[k]),
            "unit": space.units[k],
            "lower": float(space.lower[k]),
            "upper": float(space.upper[k]),
            "position": float((values[k] - space.lower[k]) / space.width[k]),
            "seed_value": float(space.seed_values[k]),
            "description": space.descriptions[k],
        }
        if name in flags:
            row["identifiable"] = flags[name].identifiable
            row["standard_error"] = flags[name].standard_error
        rows[name] = row
    for item in held:
        value = item["seed_value"]
        rows[item["name"]] = {
            "value": value, "unit": item["unit"], "lower": item["lower"], "upper": item["upper"],
            "position": (value - item["lower"]) / (item["upper"] - item["lower"]),
            "seed_value": value, "description": item["description"],
            "identifiable": False, "standard_error": None, "unobservable": True,
        }
    return rows


def versions() -> dict[str, str]:
    """Versions of Python, bemore and the numerical libraries used."""
    from importlib.metadata import PackageNotFoundError, version

    import scipy

    import bemore

    found = {
        "python": platform.python_version(),
        "bemore": bemore.__version__,
        "numpy": np.__version__,
        "scipy": scipy.__version__,
    }
    # From the installed metadata: importing numba (≈ 0.3 s, which the engine's C backend
    # does not need), pyswarms and pymoo (~1 s) for their version strings costs a run that
    # does not use them.
    for module in ("numba", "pyswarms", "pymoo"):
        try:
            found[module] = version(module)
        except PackageNotFoundError:
            found[module] = "not installed"
    return found


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` as indented JSON (NaN/inf are not valid JSON: they become null),
    atomically (:func:`bemore.paths.write_file`)."""
    from bemore.paths import write_file

    write_file(path, json_text(data))


def json_text(data: dict[str, Any]) -> str:
    """``data`` as indented JSON text, NaN/inf as null (what :func:`write_json` writes)."""
    return json.dumps(_finite(data), indent=2) + "\n"


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not np.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def summary_text(athlete: dict[str, Any]) -> str:
    """A table like the seed's Table 7: value, bounds, position within the bounds, flags."""
    lines = [
        f"{'parameter':<24}{'value':>12}  {'unit':<6}{'lower':>10}{'upper':>10}  "
        f"{'position in box':<17}{'seed study':>11}"
    ]
    for name, row in athlete["parameters"].items():
        position = min(max(row["position"], 0.0), 1.0)
        bar = "".join("#" if (i + 0.5) / 10 <= position else "-" for i in range(10))
        flag = "" if row.get("identifiable", True) else "  ? flagged"
        if row.get("unobservable"):
            flag = "  UNOBSERVABLE (held)"
        lines.append(
            f"{name:<24}{row['value']:>12.5g}  {row['unit']:<6}{row['lower']:>10.5g}"
            f"{row['upper']:>10.5g}  [{bar}] {position:>4.0%}{row['seed_value']:>11.5g}{flag}"
        )
    fit = (
        f"cost {athlete['cost_m2']:.4g} m²   mean distance {athlete['mean_distance_mm']:.3g} mm   "
        f"{athlete['algorithm']} pack {athlete['pack']} × {athlete['iterations']} it, "
        f"{athlete['evaluations']} evaluations, {athlete['elapsed_s']:.3g} s"
    )
    lines += ["", fit]
    lines += [f"search: {note}" for note in athlete.get("search_notes", [])]
    lines += [f"polish: {note}" for note in athlete.get("polish_coarse_notes", [])]
    starts = athlete.get("polish_starts") or []
    if starts:
        lines.append(polish_starts_text(starts))
    start = athlete.get("initial_state")
    if start:
        unknowns = start["unknowns"]
        rate = unknowns.get("initial.rotation_rate")
        text = "initial state (trial nuisance, not athlete parameters):"
        if rate:
            text += (
                f" rotation rate {rate['value']:.4g} rad/s"
                f" (prepared {start['prepared_rotation_rate_rad_s']:.4g}, box {rate['lower']:.3g}"
                f"–{rate['upper']:.3g}),"
            )
        rest = start["bar_rest_m"]
        text += f" bar rest ({rest[0] * 1e3:.3g}, {rest[1] * 1e3:.3g}) mm"
        offsets = [unknowns[n]["value"] for n in ("bar.rest_offset_x", "bar.rest_offset_y")
                   if n in unknowns]
        if offsets:
            text += " (offset from equilibrium " + ", ".join(f"{v * 1e3:+.3g}" for v in offsets)
            text += " mm)"
        lines.append(text)
    lines.append(
        "RMS distance per joint centre (mm): "
        + ", ".join(f"{name} {value:.3g}" for name, value in athlete["rms_mm"].items())
    )
    check = ((athlete.get("trial") or {}).get("conventions") or {}).get("acromion_check")
    if check:
        lines.append(check["message"])
    unobservable = athlete.get("unobservable_parameters") or []
    if unobservable:
        lines.append(
            "UNOBSERVABLE, not fitted: " + ", ".join(unobservable)
            + " — the acromions ride on the trunk's side and no marker fixed on the arm is in "
            "the trial ([conventions] arm_markers): the springs' deflection is in the arm the "
            "trial drives, so the fit ran them locked; athlete.json holds their seed values and "
            "synthesize refuses this athlete unless --accept-poor-fit")
    verdict = athlete.get("fit_verdict")
    if verdict:
        lines.append(verdict["message"])
    noise_note = (athlete.get("trial") or {}).get("marker_noise_note")
    if noise_note:
        lines.append(noise_note)
    flagged = (athlete.get("identifiability") or {}).get("flagged", [])
    if flagged:
        lines.append(
            "flagged (insensitive, confounded or imprecise in this trial; reasons in "
            "athlete.json): " + ", ".join(flagged)
        )
    for text in (body_mass_text(athlete), segment_table_text(athlete),
                 soft_tissue_text(athlete)):
        if text:
            lines.append(text)
    forces = athlete.get("bar_forces")
    if forces:
        rms = forces.get("rms_residual_n") or {}
        text = ("bar forces in the cost: RMS residual "
                + ", ".join(f"{axis} {value:.3g} N" for axis, value in rms.items()))
        if forces.get("flagged_by_markers_alone") is not None:
            made = forces["made_identifiable_by_forces"]
            text += ("; the markers alone would flag "
                     + (", ".join(forces["flagged_by_markers_alone"]) or "nothing")
                     + "; the forces make identifiable: " + (", ".join(made) or "nothing more"))
        lines.append(text)
        channels = channel_errors_text(forces.get("fitted_channel_errors"), rms)
        if channels:
            lines.append(channels)
        weighting = forces.get("chain_noise_weighting")
        if weighting:
            lines.append("residuals weighed with the trial chain's input noise (errors in "
                         f"variables, {weighting['realisations']} noisy copies of the trial)")
        narrowed = [(name, alone, both) for name, (alone, both)
                    in (forces.get("relative_standard_errors") or {}).items()
                    if both > 0 and alone >= FORCE_NARROWING * both]
        if narrowed:
            lines.append("relative standard errors narrowed by the forces (markers alone → with "
                         "forces): " + ", ".join(f"{name} {alone:.1%} → {both:.1%}"
                                                 for name, alone, both in narrowed))
    if athlete.get("inertial_parameters"):
        lines += inertial_text(athlete["inertial_parameters"])
    if athlete.get("analysis_interrupted"):
        lines.append("INTERRUPTED during the analysis: the fit is complete; its standard "
                     "errors and verdict were not computed (run again for them)")
    elif athlete.get("polish_interrupted"):
        lines.append("INTERRUPTED before the polish (while the trial chain's noise was "
                     "measured or the polish's starts were set up): the global run's best, "
                     "not polished")
    elif athlete.get("interrupted"):
        lines.append("INTERRUPTED: best result so far")
    return "\n".join(lines)


def mostly_from(athlete: dict[str, Any], part: str) -> list[str]:
    """The parameters of an athlete.json whose standard error is mostly its ``part`` (e.g.
    ``standard_error_body_mass``): more than half its variance.

    >>> mostly_from({"identifiability": {"parameters": [
    ...     {"name": "a", "standard_error": 2.0, "standard_error_body_mass": 1.5},
    ...     {"name": "b", "standard_error": 2.0, "standard_error_body_mass": 1.0}]}},
    ...     "standard_error_body_mass")
    ['a']
    """
    rows = (athlete.get("identifiability") or {}).get("parameters", [])
    athlete_parameters = athlete.get("parameters")  # not the trial's nuisance unknowns
    return [row["name"] for row in rows if row.get(part) and row.get("standard_error")
            and row[part] ** 2 > 0.5 * row["standard_error"] ** 2
            and (athlete_parameters is None or row["name"] in athlete_parameters)]


def body_mass_text(athlete: dict[str, Any]) -> str | None:
    """One line: the body mass the fit scaled to, how well it is known, and the parameters
    whose standard error is mostly that uncertainty's (None: taken as exact)."""
    config = athlete.get("config") or {}
    sigma = config.get("body_mass_uncertainty_kg")
    if not sigma:
        return None
    given = config.get("body_mass_kg")
    text = (f"body mass {given:.4g} ± {sigma:.2g} kg (given), counted in the standard errors"
            if given is not None else
            f"body mass: the segment table's, ± {sigma:.2g} kg (give --body-mass: masses, "
            "stiffnesses and dampings scale with it), counted in the standard errors")
    return text + _mostly(athlete, "standard_error_body_mass", "the body mass's")


def segment_table_text(athlete: dict[str, Any]) -> str | None:
    """One line: how far her segments may be from the table the fit held fixed, and the
    parameters whose standard error is mostly that uncertainty's (None: taken as exact or
    not propagated).

    >>> print(segment_table_text({"config": {"identification_settings": {"segment_table": {
    ...     "mass": 0.1, "com": 0.05, "gyration": 0.1}}}, "identifiability": {"parameters": [
    ...     {"name": "thigh.com", "standard_error": 3.0, "standard_error_segment_table": 2.5}]}}))
    segment table: masses ± 10 %, centres of mass ± 5 %, radii of gyration ± 10 % (1 SD) of the \
values it holds fixed, counted in the standard errors; mostly the table's error: thigh.com
    """
    declared = _declared(athlete, "segment_table")
    if not any(declared.values()) or not _carried(athlete, "standard_error_segment_table"):
        return None
    percent = {key: f"{100.0 * float(declared.get(key, 0.0)):.3g} %"
               for key in ("mass", "com", "gyration")}
    text = (f"segment table: masses ± {percent['mass']}, centres of mass ± {percent['com']}, "
            f"radii of gyration ± {percent['gyration']} (1 SD) of the values it holds fixed, "
            "counted in the standard errors")
    return text + _mostly(athlete, "standard_error_segment_table", "the table's")


def soft_tissue_text(athlete: dict[str, Any]) -> str | None:
    """One line: how far the markers may slide on the skin, and the parameters whose standard
    error is mostly that uncertainty's (None: taken as riding on the bone, or not propagated).

    >>> print(soft_tissue_text({"config": {"identification_settings": {"soft_tissue": {
    ...     "hip_mm": 8.0, "knee_mm": 5.0, "wrist_mm": 0.0}}}, "identifiability": {"parameters": [
    ...     {"name": "shoulder.damping_ap", "standard_error": 3.0,
    ...      "standard_error_soft_tissue": 2.5}]}}))
    soft tissue: an assumed slide of the markers on the skin (1 SD at the ends of each joint's \
range: hip 8, knee 5 mm), counted in the standard errors; mostly the slide's error: \
shoulder.damping_ap
    """
    declared = {key.removesuffix("_mm"): float(value)
                for key, value in _declared(athlete, "soft_tissue").items() if value}
    if not declared or not _carried(athlete, "standard_error_soft_tissue"):
        return None
    text = ("soft tissue: an assumed slide of the markers on the skin (1 SD at the ends of each "
            "joint's range: " + ", ".join(f"{name} {value:.3g}" for name, value
                                          in declared.items())
            + " mm), counted in the standard errors")
    return text + _mostly(athlete, "standard_error_soft_tissue", "the slide's")


def _declared(athlete: dict[str, Any], section: str) -> dict[str, Any]:
    """The identification settings' ``section`` an athlete.json was fitted with ({} if none)."""
    settings = (athlete.get("config") or {}).get("identification_settings") or {}
    return settings.get(section) or {}


def _carried(athlete: dict[str, Any], part: str) -> bool:
    """Whether the athlete.json's standard errors carry ``part`` (it was propagated)."""
    rows = (athlete.get("identifiability") or {}).get("parameters", [])
    return any(row.get(part) is not None for row in rows)


def _mostly(athlete: dict[str, Any], part: str, whose: str) -> str:
    """"; mostly <whose> error: a, b" for the parameters whose standard error is mostly
    ``part`` (:func:`mostly_from`), "" when none is."""
    mostly = mostly_from(athlete, part)
    return f"; mostly {whose} error: " + ", ".join(mostly) if mostly else ""


def inertial_text(result: dict[str, Any]) -> list[str]:
    """The inertial mode's table: per segment identified ± SE against the table, a ``?`` on
    what the bar force does not determine (a value that leans on the table), the segment
    groups it determines and each segment's data shares."""

    def cell(value: float, error: float, determined: bool, digits: str) -> str:
        text = f"{value:{digits}}±{error:{digits}}"
        return text + (" " if determined else "?")

    lines = ["", "inertial parameters from the bar force (identified ± SE, J ≻ 0; ? = not "
             "determined by the trial: the value leans on the table):",
             f"{'segment':<10}{'mass kg':>15}{'table':>8}{'CoM x m':>16}{'table':>7}"
             f"{'I_CoM kg·m²':>18}{'table':>8}{'min eig J':>11}"]
    for row in result["segments"]:
        lines.append(
            f"{row['body']:<10}"
            f"{cell(row['mass_kg'], row['mass_se_kg'], row['mass_determined'], '.2f'):>15}"
            f"{row['table_mass_kg']:>8.2f}"
            f"{cell(row['com_m'][0], row['com_se_m'][0], row['com_determined'][0], '.3f'):>16}"
            f"{row['table_com_m'][0]:>7.3f}"
            f"{cell(row['inertia_com_kgm2'], row['inertia_com_se_kgm2'], row['inertia_determined'], '.4f'):>18}"  # noqa: E501
            f"{row['table_inertia_com_kgm2']:>8.4f}{row['j_min_eigenvalue']:>11.3g}")
    rms, table_rms = result["force_residual_rms_n"], result["table_force_residual_rms_n"]
    lines.append(
        f"total mass {result['total_mass_kg']:.3f} ± {result['total_mass_se_kg']:.3f} kg "
        f"(table {result['table_total_mass_kg']:.3f}); bar-force residual x {rms[0]:.3g}, "
        f"y {rms[1]:.3g} N (table's parameters: {table_rms[0]:.3g}, {table_rms[1]:.3g} N); "
        f"{result['determined_combinations']} of {len(result['parameters'])} parameter "
        f"combinations narrowed to half the table's uncertainty or less, "
        f"{result['effective_samples']:.0f} independent samples")
    fitted = result.get("fitted_channel_errors")
    if fitted is not None:
        lines.append("the force read with its channels' offsets and gains as calibrated"
                     + (" and its " + ", ".join(fitted) + " fitted" if fitted else ""))
    determined = [group for group in result.get("groups", []) if group["determined"]]
    lines.append("masses the bar force determines together (kg, ± SE, table): " + (", ".join(
        f"{'+'.join(group['bodies'])} {group['mass_kg']:.2f} ± {group['se_kg']:.2f} "
        f"({group['table_kg']:.2f})" for group in determined) or "none"))
    shares = {row["name"]: row["data_share"] for row in result["parameters"]}
    lines.append("share of the table's uncertainty the bar force removed (mass / first moment x): "
                 + ", ".join(f"{row['body']} {shares[row['body'] + '.mass']:.2f}/"
                             f"{shares[row['body'] + '.first_moment_x']:.2f}"
                             for row in result["segments"]))
    return lines


# The force channels' correction: its neglected terms above this share of the force residual
# are reported (the first order does not hold).
SECOND_ORDER_SHARE = 0.3
# A channel whose fitted gain is off by more than this (fraction) is read inverted or in other
# units: its calibration is wrong, not imprecise (an inverted channel is fitted as +200 %).
IMPLAUSIBLE_GAIN = 0.05


def channel_errors_text(fitted: dict[str, Any] | None, rms_n: dict[str, float]) -> str | None:
    """The summary line of the force channels' fitted errors (athlete.json
    ``bar_forces.fitted_channel_errors``, with their standard errors when known), with a
    warning when a gain is off by more than :data:`IMPLAUSIBLE_GAIN` (a channel read inverted
    or in other units) and when the first-order correction's neglected terms exceed
    :data:`SECOND_ORDER_SHARE` of the RMS force residual ``rms_n``.

    >>> print(channel_errors_text({"offset_x_n": 0.4, "offset_y_n": -2.9, "gain_x_pct": 0.1,
    ...                            "gain_y_pct": -0.41, "lag_x_ms": 1.02, "lag_y_ms": -0.2,
    ...                            "second_order_rms_n": [0.1, 0.2],
    ...                            "standard_errors": {"offset_y_n": 2.34, "lag_y_ms": 0.3}},
    ...                           {"x": 4.0, "y": 5.0}))
    ... # doctest: +NORMALIZE_WHITESPACE
    force channels fitted (± standard error): offset x +0.4 N, y -2.9 ± 2.3 N; gain x +0.10 %,
    y -0.41 %; lag x +1.02 ms, y -0.20 ± 0.30 ms (positive: the force behind the markers)
    >>> print(channel_errors_text({"gain_y_pct": 199.0, "lag_y_ms": 4.0,
    ...                            "second_order_rms_n": [2.0, 3.0]},
    ...                           {"x": 4.0, "y": 5.0}).split("; ", 2)[2])
    ... # doctest: +NORMALIZE_WHITESPACE
    CHECK the y channel: its gain is off by +199 % (+200 %: read inverted), so its sign or
    units in configs/trial.toml [forces] are wrong; beyond what the first-order correction
    holds (neglected 2 N, 3 N RMS): calibrate and synchronise the channels
    """
    if not fitted:
        return None
    parts = []
    errors = fitted.get("standard_errors") or {}
    for kind, unit, digits in (("offset", "N", 1), ("gain", "%", 2), ("crosstalk", "%", 2),
                               ("lag", "ms", 2)):
        suffix = {"offset": "_n", "lag": "_ms"}.get(kind, "_pct")
        values = [(axis, fitted.get(f"{kind}_{axis}{suffix}"),
                   errors.get(f"{kind}_{axis}{suffix}")) for axis in "xy"]
        if any(value is not None for _, value, _ in values):
            parts.append(f"{kind} " + ", ".join(
                f"{axis} {value:+.{digits}f}"
                + ("" if error is None else f" ± {error:.{digits}f}") + f" {unit}"
                for axis, value, error in values if value is not None))
    if any(f"lag_{axis}_ms" in fitted for axis in "xy"):
        parts[-1] += " (positive: the force behind the markers)"
    text = ("force channels fitted" + (" (± standard error): " if errors else ": ")
            + "; ".join(parts))
    for axis in "xy":
        gain = fitted.get(f"gain_{axis}_pct")
        if gain is not None and abs(gain) > 100 * IMPLAUSIBLE_GAIN:
            text += (f"; CHECK the {axis} channel: its gain is off by {gain:+.0f} % (+200 %: "
                     "read inverted), so its sign or units in configs/trial.toml [forces] are "
                     "wrong")
    neglected = fitted.get("second_order_rms_n") or []
    residual = [rms_n.get(axis) for axis in "xy"]
    if any(r and n > SECOND_ORDER_SHARE * r for n, r in zip(neglected, residual, strict=False)):
        text += ("; beyond what the first-order correction holds (neglected "
                 + ", ".join(f"{n:.2g} N" for n in neglected)
                 + " RMS): calibrate and synchronise the channels")
    return text


FORCE_NARROWING = 1.5  # a relative standard error this many times smaller with forces is shown


def polish_starts_text(starts: list[dict[str, Any]]) -> str:
    """One line: each polish start's rank in the global run → its exact cost (m²) and mean
    distance (mm), the winner marked; shows whether two minima compete. A start whose first
    stage ended in another's minimum says so ("= #rank": from there they were one start).

    >>> polish_starts_text([
    ...     {"rank": 0, "won": True, "polished_cost_m2": 0.0031197, "mean_distance_mm": 0.4345},
    ...     {"rank": 1783, "won": False, "same_minimum_as": 0, "polished_cost_m2": 0.0031197,
    ...      "mean_distance_mm": 0.4345},
    ...     {"rank": 1797, "won": False, "polished_cost_m2": 0.0032249,
    ...      "mean_distance_mm": 0.4491}]).split(": ", 1)[1].split(", ")
    ['*#0 → 0.0031197 m² (0.4345 mm)', '#1783 → = #0', '#1797 → 0.0032249 m² (0.4491 mm)']
    """
    items = [
        f"{'*' if start['won'] else ''}#{start['rank']} → "
        + (f"= #{start['same_minimum_as']}" if start.get("same_minimum_as") is not None else
           f"{start['polished_cost_m2']:.5g} m² ({start['mean_distance_mm']:.4g} mm)")
        for start in starts
    ]
    return f"polish from {len(starts)} distinct start(s) (* kept): " + ", ".join(items)


MAX_PLOTTED_SAMPLES = 400  # a 1 kHz trial is decimated for drawing: the plots stay fast


def _decimation(frames: int) -> int:
    """Stride that keeps at most MAX_PLOTTED_SAMPLES samples."""
    return max(1, -(-frames // MAX_PLOTTED_SAMPLES))


def plot_trajectories(
    path: Path, t: np.ndarray, measured: np.ndarray, simulated: np.ndarray, names: list[str]
) -> None:
    """Measured vs simulated x(t) and y(t) of each joint centre (mm), one panel per centre,
    stacked in one PNG (Pillow, :mod:`bemore.raster`: no matplotlib import)."""
    from PIL import Image

    from bemore.raster import Chart, save_image

    step = _decimation(t.size)
    panels = []
    for k, name in enumerate(names):
        chart = Chart(title="", xlabel="t (s)" if k == len(names) - 1 else "",
                      ylabel=f"{name} (mm)", legend_below=k == 0, legend_columns=4)
        for column, (solid, dashed) in enumerate((("black", "tab:red"),
                                                  ("grey", "tab:orange"))):
            label = "xy"[column]
            chart.line(t[::step], measured[::step, k, column] * 1e3, colour=solid, width=1.2,
                       label=f"{label} measured" if k == 0 else None)
            chart.line(t[::step], simulated[::step, k, column] * 1e3, colour=dashed,
                       width=1.0, style="dashed",
                       label=f"{label} simulated" if k == 0 else None)
        panels.append(chart.draw((800, 190 if k == 0 else 160)))
    image = Image.new("RGB", (800, sum(panel.height for panel in panels)), "white")
    top = 0
    for panel in panels:
        image.paste(panel, (0, top))
        top += panel.height
    save_image(image, path, compress_level=1)


def plot_stick_figures(
    path: Path, t: np.ndarray, measured: np.ndarray, simulated: np.ndarray, count: int = 6
) -> None:
    """Measured (black) and simulated (red, dashed) joint-centre chains at ``count`` key frames.

    The frames are drawn side by side, each shifted by 3.5 m along x; blue dots: the bar, with
    the frame's time (Pillow, :mod:`bemore.raster`).
    """
    from bemore.raster import Chart, Mark

    frames = np.linspace(0, t.size - 1, count).round().astype(int)
    chart = Chart(title="", xlabel="m (frames shifted by 3.5 m)", ylabel="m")
    for slot, frame in enumerate(frames):
        shift = np.array([3.5 * slot, 0.0])
        chart.line(*(measured[frame] + shift).T, colour="black", width=2.0,
                   label="measured" if slot == 0 else None)
        chart.line(*(simulated[frame] + shift).T, colour="tab:red", width=1.2, style="dashed",
                   label="simulated" if slot == 0 else None)
        chart.marks.append(Mark(float(shift[0]), 0.0, "tab:blue", f"t = {t[frame]:.2f} s"))
    # About 0.7 px per cm on both axes: the chains keep their shape.
    chart.save(path, (int(110 + 3.5 * count * 70), 340))


def plot_convergence(path: Path, nfev: list[int], best: list[float], label: str) -> None:
    """Best cost (m², as log10) against the number of simulations (Pillow)."""
    from bemore.raster import Chart

    chart = Chart(title=label, xlabel="simulations", ylabel="log10 best cost f1 (m²)")
    best_array = np.asarray(best, dtype=float)
    chart.line(np.asarray(nfev, dtype=float),
               np.log10(np.where(best_array > 0, best_array, np.nan)), colour="tab:blue",
               width=1.5)
    chart.save(path, (480, 320))
