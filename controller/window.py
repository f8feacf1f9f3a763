"""The feasible window of a gesture: which modes, loads and speeds pass the pre-flight.

For every mode (:data:`controller.modes.MODES`) and every slow-motion speed of :data:`SPEEDS`,
the window is found with the pre-flight itself (:func:`controller.preflight.preflight`, on the
exact setpoints that would be sent), so it can never disagree with what ``bemore drive`` then
accepts or refuses. Loads are whole percents. In the assistive mode the athlete's share
(1 − load) falls and the bench's (load) rises with the load, so the passing loads form one
interval [lowest the athlete can take, highest the bench can take]; in the resistive mode both
shares rise with the load, so the interval starts at 1 %. Each bound is found by a bracketed
search on the load (the violations of one side are monotonic in it), then both ends are
checked. The search keeps a passing and a failing load and probes strictly between them until
they are neighbours, so it finds what bisection finds; it probes first where the failing
pre-flights point (each side's quantities are nearly proportional to its share of the torque,
:func:`controller.modes.shares`, so the worst value over the limit predicts the bound), which
needs about 3 pre-flights per bound instead of 7.

``bemore drive --plan SETPOINTS`` prints :func:`format_window`; a refused drive prints it too.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller.errors import BemoreError
from controller.modes import LOADED_MODES, MODES, ModeSettings, Pace, build_plan, pace, shares
from controller.preflight import FirmwareLimits, Violation, preflight
from controller.profile import DEFAULT_PROFILE, AthleteProfile
from controller.setpoints import Gesture
from controller.settings import Bench

SPEEDS = (1.0, 0.75, 0.5, 0.25)
ATHLETE_SIDE = ("athlete torque",)  # quantities that grow with the athlete's share
BENCH_SIDE = ("torque", "torque rate", "stop torque rate")  # grow with the bench's share
NO_STATIC = ("slow motion needs the static torque column shoulder_static_torque_nm (written by "
             "bemore synthesize)")


@dataclass(frozen=True)
class Cell:
    """One mode at one speed: the passing loads (whole %, inclusive) or why none passes.

    ``loads`` is (0, 0) for a mode without a load that passes, (low, high) for a loaded mode,
    None when nothing passes; ``reason`` then names the first violation (or the refusal).
    """

    mode: str
    speed: float
    loads: tuple[int, int] | None
    reason: str = ""
    worst: Violation | None = None  # the violation ``reason`` names, if one

    @property
    def passes(self) -> bool:
        """Whether some load passes at this speed."""
        return self.loads is not None

    def text(self) -> str:
        """'ok', '64–100 %' or '—' for the window table."""
        if self.loads is None:
            return "—"
        if self.mode not in LOADED_MODES:
            return "ok"
        low, high = self.loads
        return f"{low} %" if low == high else f"{low}–{high} %"


def _violations(gesture: Gesture, bench: Bench, athlete: AthleteProfile,
                firmware: FirmwareLimits | None, template: ModeSettings, mode: str,
                load: float, speed: float, paced: Pace | None = None) -> list[Violation]:
    """Pre-flight violations of ``gesture`` played in ``mode`` at ``load`` % and ``speed``
    (``paced``: the gesture already played at that speed, :func:`controller.modes.pace`)."""
    settings = _settings(template, mode, load, speed)
    plan = build_plan(gesture, settings, paced)
    return preflight(gesture, plan, bench, firmware, settings.torque_gain, athlete)


def _settings(template: ModeSettings, mode: str, load: float, speed: float) -> ModeSettings:
    """``template``'s repetitions, rest, rate and ramp with this mode, load (%) and speed."""
    return ModeSettings(mode=mode, load_pct=load, speed=speed, reps=template.reps,
                        rest_s=template.rest_s, rate_hz=template.rate_hz,
                        ramp_down_s=template.ramp_down_s)


def _worst(violations: list[Violation]) -> Violation:
    """The violation furthest beyond its limit (relatively)."""
    return max(violations, key=lambda v: abs(v.value - v.limit) / max(abs(v.limit), 1e-9))


def _refused(mode: str, speed: float, violations: list[Violation]) -> Cell:
    """A cell where nothing passes, naming the worst violation, e.g.
    'athlete torque 191.7 N·m, limit 70.0 (athlete profile)'."""
    if not violations:
        return Cell(mode, speed, None, "no load passes")
    worst = _worst(violations)
    return Cell(mode, speed, None, f"{worst.quantity} {worst.value:.1f} {worst.unit}, limit "
                f"{worst.limit:.1f} ({worst.source})", worst)


PREDICTED_PROBES = 3  # probes placed by prediction before the search falls back to halving


def _search(ok: Callable[[int], bool], low: int, high: int, rising: bool,
            predict: Callable[[int], float | None]) -> int | None:
    """With ``ok(load)`` monotonic on [low, high]: the first passing load (``rising``: ok from
    some load on) or the last passing one (ok up to some load); None if none passes.

    A passing and a failing load bracket the bound (the far end first: ``low`` when
    ``rising``, else ``high``); each probe lies strictly between them and replaces one, until
    they are neighbours: the passing one is then the first (``rising``) or last passing load.
    ``predict(load)``, for a failing ``load``, guesses that bound (a load, possibly fractional
    or out of range, or None); the first :data:`PREDICTED_PROBES` probes follow it, the rest
    halve the bracket.
    """
    good = high if rising else low
    if not ok(good):
        return None
    bad = low - 1 if rising else high + 1  # a virtual failing load just outside the range
    far = low if rising else high
    if far != good:
        if ok(far):
            return far
        bad = far
    last_bad = bad if far != good else None
    guesses = 0
    while abs(good - bad) > 1:
        guess = predict(last_bad) if last_bad is not None and guesses < PREDICTED_PROBES else None
        if guess is None or not math.isfinite(guess):
            probe = (good + bad) // 2 if rising else (good + bad + 1) // 2
        else:
            guesses += 1
            whole = math.ceil(guess) if rising else math.floor(guess)
            inner, outer = sorted((good, bad))
            probe = min(max(whole, inner + 1), outer - 1)
        if ok(probe):
            good = probe
        else:
            bad = last_bad = probe
    return good


def _predictor(check: Callable[[float], list[Violation]], mode: str, side: tuple[str, ...],
               ) -> Callable[[int], float | None]:
    """For a failing load: the load (%) at which ``side``'s worst quantity would reach its
    limit, taking each quantity as proportional to ``side``'s share of the torque in ``mode``
    (:func:`controller.modes.shares`, linear in the load; a guess: quantisation and finite
    differences make it nearly so)."""
    which = 0 if side == ATHLETE_SIDE else 1

    def share(load: float) -> float:
        return abs(shares(mode, load)[which])

    at_zero, slope = share(0.0), (share(100.0) - share(0.0)) / 100.0

    def predict(load: int) -> float | None:
        ratios = [abs(v.limit) / abs(v.value) for v in check(load)
                  if v.quantity in side and v.value != 0.0]
        if not ratios or slope == 0.0:
            return None
        allowed = share(load) * min(ratios)  # the largest share within every limit
        return (allowed - at_zero) / slope

    return predict


def _cell(gesture: Gesture, bench: Bench, athlete: AthleteProfile,
          firmware: FirmwareLimits | None, template: ModeSettings, mode: str,
          speed: float, paced: Pace | None = None) -> Cell:
    """The passing loads of ``mode`` at ``speed`` (see the module doc; ``paced``: the gesture
    already played at that speed)."""
    checked: dict[float, list[Violation]] = {}

    def check(load: float) -> list[Violation]:
        if load not in checked:  # both bisections and the final check meet at some loads
            checked[load] = _violations(gesture, bench, athlete, firmware, template, mode,
                                        load, speed, paced)
        return checked[load]

    try:
        if mode not in LOADED_MODES:
            found = check(0.0)
            return _refused(mode, speed, found) if found else Cell(mode, speed, (0, 0))
        clear_of = {
            side: (lambda load, side=side: not any(v.quantity in side for v in check(load)))
            for side in (ATHLETE_SIDE, BENCH_SIDE)
        }
        predict = {side: _predictor(check, mode, side) for side in (ATHLETE_SIDE, BENCH_SIDE)}
        if mode == "assistive":
            low = _search(clear_of[ATHLETE_SIDE], 1, 100, True, predict[ATHLETE_SIDE])
            high = _search(clear_of[BENCH_SIDE], 1, 100, False, predict[BENCH_SIDE])
        else:
            low = 1
            high_athlete = _search(clear_of[ATHLETE_SIDE], 1, 100, False, predict[ATHLETE_SIDE])
            # when the athlete side fails at every load, the bench side's bound changes nothing
            high_bench = (None if high_athlete is None else
                          _search(clear_of[BENCH_SIDE], 1, 100, False, predict[BENCH_SIDE]))
            high = None if None in (high_athlete, high_bench) else min(high_athlete,
                                                                        high_bench)
        if low is not None and high is not None and low <= high:
            found = check(low) or check(high)
            if not found:
                return Cell(mode, speed, (low, high))
        else:
            # the side that fails everywhere on its own, at the load the other side likes best
            probe = 100 if mode == "assistive" and low is None else 1
            found = check(probe)
        return _refused(mode, speed, found)
    except BemoreError as error:
        return Cell(mode, speed, None, str(error))


def feasible_window(gesture: Gesture, bench: Bench, athlete: AthleteProfile = DEFAULT_PROFILE,
                    firmware: FirmwareLimits | None = None,
                    template: ModeSettings | None = None) -> list[Cell]:
    """Every mode at every speed of :data:`SPEEDS`: which loads pass the pre-flight.

    ``template`` gives the repetitions, rest, rate and ramp of the session (default: one
    repetition at 1 kHz with a 0.3 s ramp).
    """
    template = template or ModeSettings()
    cells: dict[tuple[str, float], Cell] = {}
    for speed in SPEEDS:  # speed by speed: the plans of one speed share most columns
        cells.update({(cell.mode, speed): cell for cell in
                      _cells_at(gesture, bench, athlete, firmware, template, MODES, speed)})
    return [cells[mode, speed] for mode in MODES for speed in SPEEDS]


def mode_cell(gesture: Gesture, bench: Bench, athlete: AthleteProfile, mode: str, speed: float,
              firmware: FirmwareLimits | None = None,
              template: ModeSettings | None = None) -> Cell:
    """The loads (whole %) of ``mode`` that pass the pre-flight at ``speed`` (any speed in
    0.25..1, not only those of :data:`SPEEDS`): one cell of :func:`feasible_window`."""
    return _cells_at(gesture, bench, athlete, firmware, template or ModeSettings(), (mode,),
                     speed)[0]


def _cells_at(gesture: Gesture, bench: Bench, athlete: AthleteProfile,
              firmware: FirmwareLimits | None, template: ModeSettings, modes: Sequence[str],
              speed: float) -> list[Cell]:
    """The cells of ``modes`` at ``speed``, the gesture played at that speed once."""
    if speed != 1.0 and gesture.static_torque_nm is None:
        return [Cell(mode, speed, None, NO_STATIC) for mode in modes]
    try:  # the gesture played at this speed, once
        paced: Pace | None = pace(gesture, _settings(template, MODES[0], 0.0, speed))
    except BemoreError:
        paced = None  # each cell then names the refusal itself
    return [_cell(gesture, bench, athlete, firmware, template, mode, speed, paced)
            for mode in modes]


def format_window(cells: list[Cell], gesture: Gesture, athlete: AthleteProfile,
                  bench_source: str = "bench.toml") -> str:
    """The window as a table (rows: modes, columns: speeds) and one line per reason."""
    torque_limit = athlete.shoulder_torque_limit_Nm
    low, high = athlete.shoulder_flexion_range_deg
    lines = [
        f"feasible window of {gesture.path} (peak {max(map(abs, gesture.torque_nm)):.1f} N·m per "
        f"shoulder at full pace) for {athlete.name} ({torque_limit:g} N·m, {low:g}..{high:g} "
        f"deg) on {bench_source}:",
        f"{'mode':<11}" + "".join(f"{'speed ' + format(s, 'g'):>14}" for s in SPEEDS),
    ]
    for mode in MODES:
        row = [cell for cell in cells if cell.mode == mode]
        lines.append(f"{mode:<11}" + "".join(f"{cell.text():>14}" for cell in row))
    if any(cell.reason == NO_STATIC for cell in cells):
        lines.append(f"  speeds below 1: {NO_STATIC}; this file has none")
    for mode in MODES:
        refused = [cell for cell in cells if cell.mode == mode and not cell.passes
                   and cell.reason != NO_STATIC]
        groups: dict[tuple, list[Cell]] = {}
        for cell in refused:
            worst = cell.worst
            key = ((worst.quantity, worst.unit, abs(worst.limit), worst.source) if worst
                   else (cell.reason,))
            groups.setdefault(key, []).append(cell)
        for key, group in groups.items():
            speeds = ", ".join(f"{cell.speed:g}" for cell in group)
            if len(key) == 1:
                lines.append(f"  {mode} at speed {speeds}: {key[0]}")
                continue
            quantity, unit, limit, source = key
            values = ", ".join(f"{abs(cell.worst.value):.1f}" for cell in group)
            lines.append(f"  {mode}: {quantity} up to {values} {unit} at speed {speeds}; "
                         f"limit {limit:.1f} ({source})")
    return "\n".join(lines)
