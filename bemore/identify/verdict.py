"""Does the fitted model follow the trial? A verdict against the trial's own marker noise.

OpenSim reports every fit's marker errors so that a user sees at once where the model does not
follow; bemore goes one step further and judges them. A model that follows the trial leaves
joint-centre distances of the order of the noise the markers carry (a joint centre averages
2–12 filtered markers: with 1 mm of marker noise the mean distance of a right model is
0.4–0.6 mm). So, with σ the marker noise estimated from the recording
(:func:`bemore.trial.noise.marker_noise_m`, floored at ``NOISE_FLOOR_M``):

* the fit is **poor** when the mean joint-centre distance exceeds ``MEAN_DISTANCE_LIMIT``·σ, or
  when one joint centre's RMS distance exceeds ``JOINT_RMS_LIMIT``·σ (it "does not follow");
* a joint centre whose mean residual vector is at least ``SYSTEMATIC_FRACTION`` of its RMS and
  above ``MEAN_DISTANCE_LIMIT``·σ has a **systematic offset**: the model's point is not where
  the markers put it (a convention or a segment length), not noise;
* the worst joint centre is given its likely cause (``LIKELY_CAUSES``); a poor fit of a trial
  whose acromion markers contradict the declared side (:mod:`bemore.trial.acromion`'s check),
  or that pushed the shoulder spring-dampers to their bounds, points at the acromion markers
  instead: riding on the other side, they make the chain count the springs' deflection twice
  or not at all;
* unless the fit stopped short of a minimum (:class:`FitBudget`: the polish off, or stopped at
  its budget before converging): the worst joint centre is then no clue, and the cause is said
  to be the fit itself, with what to run instead (:meth:`FitVerdict.with_budget`); a cause
  the markers themselves show (the acromion check) stays first, the unfinished fit added.
  A fit whose polish converged after a search far shorter than the configured default's keeps
  its cause, with a note that the default search may find a lower minimum.

With bar forces the force is judged too (:func:`judge_force_fit`): a model that follows it
leaves on each axis an RMS residual of the channels' noise per prepared sample and the part of
the trial chain's noise the fit cannot absorb (its propagated copies' residual changes left
after the fit's own response), in quadrature; an axis beyond ``FORCE_RMS_LIMIT`` times that
does not follow — the bar force then carries what the model's spring-damper does not make
(``FORCE_CAUSE``), and the fit is poor.

When the trial's noise is only a lower bound (markers low-passed before export, or coloured
noise: :class:`bemore.trial.noise.NoiseEstimate`), the limits scaled by it are too strict: a fit
within them is still **good** (the true limits are wider); one beyond them is judged again at
the stated ceiling ``NOISE_CEILING_M``, **poor** beyond its limits, else **unjudged**, and the
message says which noise it was judged against.

A poor fit's parameters are not trusted: the standard errors bound the noise's effect, not a
model error's (docs/identify.md, "Fit verdict").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from bemore.trial.noise import NOISE_CEILING_M

MEAN_DISTANCE_LIMIT = 2.0  # mean joint-centre distance / marker noise above which a fit is poor
JOINT_RMS_LIMIT = 4.0  # one joint centre's RMS distance / marker noise above which it is named
SYSTEMATIC_FRACTION = 0.5  # |mean residual| / RMS from which an offset is systematic
NOISE_FLOOR_M = 1e-4  # marker noise used at least (m): the engine's own error is ~0.01 mm
FORCE_RMS_LIMIT = 1.5  # an axis' RMS force residual / what a following model leaves, above which
# the force is not followed (measured on synthetic trials: 0.89–1.26 following, 2.1–2.6 with a
# bar vibration or a 2 % non-linearity the model does not make; docs/identify.md "Fit verdict")

SHORT_SEARCH_FRACTION = 0.1  # a search of fewer evaluations than this share of the configured
# default's (an order of magnitude fewer) is short (:class:`FitBudget`)

FORCE_CAUSE = ("what the model's bar spring-damper does not make: a vibration of the bar, a "
               "channel's non-linearity, interference within the force's band ([forces] "
               "cutoff_hz in configs/trial.toml) or a channel error the fit does not model "
               "([forces] fitted_channel_errors)")

ACROMION_CAUSE = ("the acromion markers ride on the trunk's side of the shoulder springs "
                  "(the shoulder spring-dampers went to their bounds): declare [conventions] "
                  "acromion_side = \"trunk\" in the marker set (docs/trials.md, \"Acromion "
                  "side\")")
LIKELY_CAUSES = {
    "bar": "the bar markers, or a bar that does not move as the model's spring-damper",
    "wrist": "the hand length (bar to wrist) or the wrist markers",
    "elbow": "the arm chain: the forearm markers, or the acromion side of the shoulder springs "
             "([conventions] acromion_side in the marker set)",
    "neck": "the neck convention: the C7/STERNUM centre is not where the model hinges the head "
            "(neck.offset, identified within its box)",
    "hip": "the trunk: its length, the hip markers, or the neck convention",
    "knee": "the thigh length or the knee markers",
    "ankle": "the shank length or the ankle markers",
}


@dataclass
class JointCentreFit:
    """How one joint centre is followed (mm)."""

    name: str
    rms_mm: float
    offset_mm: list[float]  # mean of simulated − measured (x, y), model plane
    follows: bool
    systematic: bool


@dataclass
class ForceFit:
    """How the bar force is followed, per axis x, y (N)."""

    rms_n: list[float]  # RMS of simulated − measured (the fitted channel errors taken out)
    expected_n: list[float]  # what a model that follows leaves (module docstring)
    sample_noise_n: list[float]  # the channels' noise per prepared sample, part of expected
    chain_noise_n: list[float]  # the trial chain's noise the fit cannot absorb, the other part
    limit_n: list[float]  # FORCE_RMS_LIMIT × expected
    follows: list[bool]

    @property
    def poor(self) -> bool:
        """True when an axis does not follow."""
        return not all(self.follows)


def judge_force_fit(residual_n: np.ndarray, sample_noise_n: np.ndarray,
                    chain_noise_n: np.ndarray) -> ForceFit:
    """Judge the bar force's residual ``residual_n`` (F, 2) N (simulated − measured, x and y)
    against what a model that follows it leaves: ``sample_noise_n`` (2,) N, the channels' noise
    per prepared sample, and ``chain_noise_n`` (2,) N RMS, the trial chain's noise the fit
    cannot absorb (see the module docstring).

    >>> rng = np.random.default_rng(0)
    >>> noise = rng.normal(0.0, 3.0, (1000, 2))
    >>> judge_force_fit(noise, np.array([3.0, 3.0]), np.zeros(2)).follows
    [True, True]
    >>> vibrating = noise + np.c_[np.zeros(1000), 10.0 * np.sin(np.arange(1000) / 10.0)]
    >>> judge_force_fit(vibrating, np.array([3.0, 3.0]), np.zeros(2)).follows
    [True, False]
    """
    rms = np.sqrt(np.mean(np.asarray(residual_n, dtype=float) ** 2, axis=0))
    expected = np.hypot(np.asarray(sample_noise_n, dtype=float),
                        np.asarray(chain_noise_n, dtype=float))
    return ForceFit(rms_n=rms.tolist(), expected_n=expected.tolist(),
                    sample_noise_n=np.asarray(sample_noise_n, dtype=float).tolist(),
                    chain_noise_n=np.asarray(chain_noise_n, dtype=float).tolist(),
                    limit_n=(FORCE_RMS_LIMIT * expected).tolist(),
                    follows=[bool(r <= FORCE_RMS_LIMIT * e) for r, e in zip(rms, expected,
                                                                              strict=True)])


@dataclass
class FitVerdict:
    """The verdict on a fit (JSON-ready with :meth:`to_dict`)."""

    status: str  # "good" | "poor" | "unjudged" (the trial's noise unknown, or only a lower
    # bound the fit is beyond)
    mean_distance_mm: float
    marker_noise_mm: float  # as estimated from the trial (NaN if it could not be)
    noise_used_mm: float  # the noise the limits are scaled by (estimate, floored)
    limit_mm: float  # mean distance above which the fit is poor
    joint_centres: list[JointCentreFit]
    not_following: list[str] = field(default_factory=list)
    message: str = ""
    likely_cause: str = ""
    bar_force: ForceFit | None = None  # with bar forces: how the force is followed
    cause_evidence: str = ""  # what the likely cause rests on: "fit" (the worst joint centre,
    # the bounds reached, the force), "markers" (the trial's acromion check); "" without one
    noise_lower_bound: bool = False  # marker_noise_mm is only a lower bound (module docstring)
    joint_centres_status: str = ""  # with the force judged: the joint centres' own status

    @property
    def poor(self) -> bool:
        """True when the model does not follow the trial."""
        return self.status == "poor"

    def with_force(self, force: ForceFit) -> FitVerdict:
        """This verdict with the bar force's judged too: poor when an axis does not follow
        (its likely cause the force's, unless the joint centres do not follow either)."""
        poor_markers = self.poor
        verdict = replace(self, bar_force=force, not_following=list(self.not_following),
                          joint_centres_status=self.status)
        if force.poor:
            verdict.status = "poor"
            verdict.not_following += [f"bar force {axis}" for axis, follows
                                      in zip("xy", force.follows, strict=True) if not follows]
            if not poor_markers:
                verdict.likely_cause, verdict.cause_evidence = FORCE_CAUSE, "fit"
        verdict.message = _message(verdict)
        return verdict

    def with_budget(self, budget: FitBudget) -> FitVerdict:
        """This verdict told what the fit ran (:class:`FitBudget`). When it is poor and the fit
        stopped short of a minimum, the likely cause is that (the worst joint centre of an
        unfinished fit is no clue), after a cause the markers themselves show; when the
        polish converged after a short search, the cause stays, with the search's note."""
        if not self.poor:
            return self
        unfinished, note = budget.unfinished(), budget.short_search_note()
        if unfinished is not None:
            cause = (f"{self.likely_cause}; also {unfinished}"
                     if self.cause_evidence == "markers" else unfinished)
        elif note is not None:
            cause = f"{self.likely_cause}; {note}"
        else:
            return self
        verdict = replace(self, likely_cause=cause)
        verdict.message = _message(verdict)
        return verdict

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record (athlete.json ``fit_verdict``; an unknown noise is null)."""
        return {key: None if isinstance(value, float) and not np.isfinite(value) else value
                for key, value in asdict(self).items()}


@dataclass(frozen=True)
class FitBudget:
    r"""What a fit ran against the configured defaults (identification.toml ``[optimiser]``):
    ``search_evaluations`` simulations of the global search against ``default_pack`` ×
    ``default_iterations``, the polish run (``polished``) and converged (``polish_converged``;
    False: stopped at its evaluation budget); ``polish_on`` says how the caller's user turns
    the polish on (the command line's flag; a batch's manifest line).

    >>> def show(text):
    ...     for cut in (": run", ", after", ": the default"):
    ...         text = text.replace(cut, cut[0] + "\n" + cut[2:])
    ...     print(text)
    >>> show(FitBudget(13, 200, 50, polished=False).unfinished())
    the fit stopped short of a minimum (the polish off: the search's best point,
    after 13 search evaluations of the default 10 000):
    run with the default search (200 × 50) and the polish (without --no-polish)
    >>> show(FitBudget(10001, 200, 50, polished=False).unfinished())
    the fit stopped short of a minimum (the polish off: the search's best point):
    run with the polish (without --no-polish)
    >>> FitBudget(13, 200, 50, polished=True).unfinished() is None
    True
    >>> show(FitBudget(13, 200, 50, polished=True).short_search_note())
    the search ran 13 of the default 10 000 evaluations:
    the default search (200 × 50) may find a lower minimum
    """

    search_evaluations: int
    default_pack: int
    default_iterations: int
    polished: bool
    polish_converged: bool = True
    polish_on: str = "without --no-polish"  # how the caller turns the polish on

    @property
    def short_search(self) -> bool:
        """The search ran fewer than ``SHORT_SEARCH_FRACTION`` of the default's evaluations."""
        return self.search_evaluations < SHORT_SEARCH_FRACTION * self._default_evaluations

    @property
    def _default_evaluations(self) -> int:
        return self.default_pack * self.default_iterations

    def _default_search(self) -> str:
        return f"the default search ({self.default_pack} × {self.default_iterations})"

    def _evaluations(self) -> str:
        return (f"{_count(self.search_evaluations)} search evaluations of the default "
                f"{_count(self._default_evaluations)}")

    def unfinished(self) -> str | None:
        """Why the fit is not at a minimum, with what to run instead; None when its polish
        converged."""
        if self.polished and self.polish_converged:
            return None
        short = self.short_search
        if not self.polished:
            why = "the polish off: the search's best point"
            advice = [self._default_search()] if short else []
            advice.append(f"the polish ({self.polish_on})")
        else:
            why = "the polish stopped at its evaluation budget before converging"
            advice = [self._default_search()] if short else []
        if short:
            why += f", after {self._evaluations()}"
        run = f": run with {' and '.join(advice)}" if advice else ""
        return f"the fit stopped short of a minimum ({why}){run}"

    def short_search_note(self) -> str | None:
        """For a search far shorter than the default's: that the default search may find a
        lower minimum than the one the polish converged to (None otherwise)."""
        if not self.short_search:
            return None
        return (f"the search ran {_count(self.search_evaluations)} of the default "
                f"{_count(self._default_evaluations)} evaluations: {self._default_search()} may "
                "find a lower minimum")


def _count(number: int) -> str:
    """``number`` with its thousands apart: 10 000."""
    return f"{number:,}".replace(",", " ")


def judge_fit(measured: np.ndarray, simulated: np.ndarray, names: list[str] | tuple[str, ...],
              marker_noise_m: float, at_bounds: list[str] | tuple[str, ...] = (),
              acromion_check: dict[str, Any] | None = None,
              noise_lower_bound: bool = False) -> FitVerdict:
    """Judge a fit of the joint centres ``measured`` by ``simulated`` ((F, J, 2) m, NaN = not
    seen) against ``marker_noise_m`` (m; NaN: unknown, the fit is "unjudged"; with
    ``noise_lower_bound`` only a lower bound: judged again at ``NOISE_CEILING_M`` where it
    would be poor, "unjudged" within the ceiling's limits);
    ``at_bounds`` names the parameters the fit left at a bound of their box;
    ``acromion_check`` is the trial's acromion-side check (``AcromionCheck.to_dict()``). See
    the module docstring.

    >>> rng = np.random.default_rng(0)
    >>> measured = rng.normal(0.0, 1.0, (500, 2, 2))
    >>> right = measured + rng.normal(0.0, 0.0005, measured.shape)
    >>> judge_fit(measured, right, ["hip", "knee"], 0.001).status
    'good'
    >>> wrong = right.copy(); wrong[:, 1, 0] += 0.01   # the knee 10 mm off along x
    >>> verdict = judge_fit(measured, wrong, ["hip", "knee"], 0.001)
    >>> verdict.status, verdict.not_following, verdict.joint_centres[1].systematic
    ('poor', ['knee'], True)

    With 1 mm only a lower bound of the noise, the 10 mm knee is beyond the limits of the stated
    2 mm ceiling too (poor), a 5 mm knee within them (not judged):

    >>> judge_fit(measured, wrong, ["hip", "knee"], 0.001, noise_lower_bound=True).status
    'poor'
    >>> wrong[:, 1, 0] -= 0.005
    >>> judge_fit(measured, wrong, ["hip", "knee"], 0.001, noise_lower_bound=True).status
    'unjudged'
    """
    difference = simulated - measured  # (F, J, 2)
    distance = np.sqrt(np.sum(difference**2, axis=-1))  # (F, J), NaN where not seen
    mean_distance = float(np.nanmean(distance))
    judged = bool(np.isfinite(marker_noise_m))
    noise = max(marker_noise_m, NOISE_FLOOR_M) if judged else float("nan")
    rows, poor = _joint_centre_fits(difference, distance, names, noise if judged else None)
    bound = bool(noise_lower_bound and judged)
    if bound and poor:  # beyond the lower bound's limits: judged again at the stated ceiling
        ceiling = max(noise, NOISE_CEILING_M)
        ceiling_rows, poor = _joint_centre_fits(difference, distance, names, ceiling)
        if poor:
            rows, noise = ceiling_rows, ceiling
        judged = poor
    verdict = FitVerdict(
        status=("poor" if poor else "good") if judged else "unjudged",
        mean_distance_mm=mean_distance * 1e3,
        marker_noise_mm=float(marker_noise_m) * 1e3,
        noise_used_mm=noise * 1e3,
        limit_mm=MEAN_DISTANCE_LIMIT * noise * 1e3,
        joint_centres=rows,
        not_following=[row.name for row in rows if not row.follows],
        noise_lower_bound=bound,
    )
    if verdict.poor:
        worst = max(rows, key=lambda row: row.rms_mm).name
        shoulder = [name for name in at_bounds if name.startswith("shoulder.")]
        if acromion_check and acromion_check.get("contradicts"):
            check = acromion_check
            arm = (f"{check['arm_spread_mm']:.3g} mm against the arm-end recipe"
                   if check.get("arm_spread_mm") is not None else "no marker fixed on the arm")
            verdict.likely_cause = (
                f"the acromion markers ride on the {check['supported']}'s side of the shoulder "
                f"springs, declared {check['declared']} (their spread: "
                f"{check['trunk_spread_mm']:.3g} mm in the trunk's frame, {arm}): declare "
                f"[conventions] acromion_side = \"{check['supported']}\" in the marker set "
                "(--markerset-config FILE)")
            verdict.cause_evidence = "markers"
        else:
            verdict.likely_cause = (ACROMION_CAUSE if len(shoulder) >= 2
                                    else LIKELY_CAUSES.get(worst, "its markers"))
            verdict.cause_evidence = "fit"
    verdict.message = _message(verdict)
    return verdict


def _joint_centre_fits(difference: np.ndarray, distance: np.ndarray,
                       names: list[str] | tuple[str, ...], noise: float | None
                       ) -> tuple[list[JointCentreFit], bool]:
    """Each joint centre's fit against the marker noise ``noise`` (m; None: unknown, every
    joint centre follows), and whether the fit is poor. ``difference`` (F, J, 2) m simulated −
    measured, ``distance`` (F, J) m its length (NaN = not seen)."""
    rows = []
    for k, name in enumerate(names):
        rms = float(np.sqrt(np.nanmean(distance[:, k] ** 2)))
        offset = np.nanmean(difference[:, k], axis=0)
        systematic = bool(noise is not None and np.hypot(*offset) >= SYSTEMATIC_FRACTION * rms
                          and np.hypot(*offset) > MEAN_DISTANCE_LIMIT * noise)
        rows.append(JointCentreFit(name, rms * 1e3, [float(v) * 1e3 for v in offset],
                                   follows=noise is None or rms <= JOINT_RMS_LIMIT * noise,
                                   systematic=systematic))
    poor = noise is not None and (float(np.nanmean(distance)) > MEAN_DISTANCE_LIMIT * noise
                                  or not all(row.follows for row in rows))
    return rows, poor


def _message(verdict: FitVerdict) -> str:
    """One line: the verdict, the worst joint centres (at most three, worst first) and the
    likely cause of the worst one."""
    force = verdict.bar_force
    bound = verdict.noise_lower_bound
    force_text = "" if force is None else (
        "; bar force RMS " + ", ".join(f"{axis} {rms:.3g} N" for axis, rms
                                       in zip("xy", force.rms_n, strict=True))
        + " against " + ", ".join(f"{value:.3g}" for value in force.expected_n)
        + f" N expected (limit {FORCE_RMS_LIMIT:g}×"
        + (f"; the trial chain's part at the marker noise's stated ceiling, "
           f"{NOISE_CEILING_M * 1e3:g} mm" if bound else "") + ")")
    if verdict.status == "unjudged" and bound:
        beyond = "".join(f", {row.name} {row.rms_mm:.3g} mm RMS" for row
                         in verdict.joint_centres if not row.follows)
        return (f"fit not judged: mean distance {verdict.mean_distance_mm:.3g} mm, beyond the "
                f"limits of the marker noise's lower bound {verdict.noise_used_mm:.3g} mm "
                f"(limit {verdict.limit_mm:.3g} mm{beyond}), within those of the stated "
                f"ceiling {NOISE_CEILING_M * 1e3:g} mm: the markers' noise is not white "
                "(low-passed before export?), so the noise the fit sees is not known"
                f"{force_text}")
    if verdict.status == "unjudged":
        return (f"fit not judged: mean distance {verdict.mean_distance_mm:.3g} mm, the trial's "
                "marker noise is unknown")
    head = f"mean distance {verdict.mean_distance_mm:.3g} mm against a marker noise of "
    if verdict.joint_centres_status == "unjudged":
        head = (f"not judged: mean distance {verdict.mean_distance_mm:.3g} mm, beyond the limits "
                f"of the marker noise's lower bound {verdict.noise_used_mm:.3g} mm "
                f"(limit {verdict.limit_mm:.3g} mm), within those of the stated ceiling")
    elif bound and verdict.noise_used_mm > verdict.marker_noise_mm:
        head += (f"at most {verdict.noise_used_mm:.3g} mm (the stated ceiling: the trial's noise "
                 f"is a lower bound, {verdict.marker_noise_mm:.3g} mm; limit "
                 f"{verdict.limit_mm:.3g} mm)")
    elif bound:
        head += (f"at least {verdict.noise_used_mm:.3g} mm (limit {verdict.limit_mm:.3g} mm, "
                 "the noise a lower bound: the true limit is wider)")
    else:
        head += f"{verdict.noise_used_mm:.3g} mm (limit {verdict.limit_mm:.3g} mm)"
    if not verdict.poor:
        return f"fit good: {head}{force_text}"
    markers_follow = (not any(not row.follows for row in verdict.joint_centres)
                      and verdict.mean_distance_mm <= verdict.limit_mm)
    if force is not None and force.poor and (
            verdict.joint_centres_status == "unjudged" or markers_follow):
        axes = [axis for axis, follows in zip("xy", force.follows, strict=True) if not follows]
        markers = ("the joint centres " + head if verdict.joint_centres_status == "unjudged"
                   else f"the joint centres do ({head})")
        return (f"fit poor: the bar force does not follow the model on {' and '.join(axes)}"
                f"{force_text}; {markers}; likely: " + verdict.likely_cause)
    worst = sorted(verdict.joint_centres, key=lambda row: -row.rms_mm)
    parts = []
    for row in worst[:3]:
        text = f"{row.name} {row.rms_mm:.3g} mm RMS"
        if row.systematic:
            text += f" (systematic offset {np.hypot(*row.offset_mm):.3g} mm)"
        parts.append(text)
    count = sum(not row.follows for row in verdict.joint_centres)
    following = (f"{count} of {len(worst)} joint centres do not follow" if count
                 else "every joint centre within its own limit")
    return f"fit poor: {head}{force_text}; worst: {', '.join(parts)}; {following}; likely: " + (
        verdict.likely_cause)
