"""Which parameters a trial can determine: sensitivities and correlations from the Jacobian.

At the optimum, J (m × d) is the Jacobian of the stacked joint-centre residuals (m) with respect
to the normalised parameters (0 → lower bound, 1 → upper bound). Three quantities per parameter:

* **sensitivity**: the RMS displacement of the joint-centre coordinates when the parameter moves
  by 10 % of its range, ``0.1·‖J_k‖/√m`` (mm);
* **standard error**: from the linearised least-squares covariance, in SI units and relative to
  the value. The residuals of a trial are not independent samples: the markers are filtered
  (6 Hz) and resampled (100 Hz → 1 kHz), so neighbouring frames carry the same noise, and model
  error is correlated over the whole trial. With ``frames`` given, the covariance is the
  sandwich ``(JᵀJ)⁻¹·S·(JᵀJ)⁻¹`` whose middle S is the long-run covariance of the per-frame
  scores ``s_t = J_tᵀ r_t`` (Newey–West, Bartlett weights, the bandwidth the lag at which the
  residuals' pooled autocorrelation falls below ``BANDWIDTH_CORRELATION``). Without it, the
  white-noise ``σ²·(JᵀJ)⁻¹`` with ``σ² = Σr²/(m − d)`` (7–15 times too small on the sample,
  a 1 kHz trial of 100 Hz markers: docs/identify.md, "Standard errors"). The sandwich sees
  the noise only where it shows in the residuals; the noise of the driven motion, the arm's
  end and the start moves the estimates without showing there. With ``noise`` (the trial's
  marker noise propagated through the trial chain, :mod:`bemore.identify.propagation`) the
  covariance is that propagated noise's plus the sandwich's MODEL-ERROR part: the sandwich
  less what the noise alone puts into it (the same sandwich of the copies' residual changes
  left after their own least-squares response), its negative eigenvalues set to 0, and on a
  trunk-side trial the arm-end recipe's form (a systematic part, the same propagation); then
  the body mass's, the segment table's and the markers' slide on the skin (systematic, the
  same propagation), after the quadratic check;
* **correlation** with every other parameter, from the same covariance less the systematic
  parts (what the trial tells apart).

A parameter is flagged as not determined by the trial when its relative standard error exceeds
``MAX_RELATIVE_ERROR``, when it sits at a bound of its box (within ``BOUND_MARGIN`` of the range:
the box, not the trial, decided its value, and the linearised error means nothing there), or when
its standard error cannot be trusted. A standard error is a linearisation: it holds while the
least-squares cost across the interval it states is the quadratic the Jacobian predicts. With
``residuals_at`` given, that is **checked** for every parameter: the cost is evaluated at
±``CHECK_STEP`` standard errors, the others moved with it as the covariance says (its
conditional mean, ``C[:, k] / C[k, k]``), and its rise compared with the quadratic's
(``quadratic_ratio``); a ratio below ``MIN_QUADRATIC_RATIO`` on either side means the cost is
flatter there than assumed and the interval wider than stated by more than
``1/√MIN_QUADRATIC_RATIO``: flagged. A sensitivity below ``SENSITIVITY_FLOOR`` of the largest
one, or a correlation beyond ``MAX_CORRELATION`` with another parameter, makes the information
nearly singular, which is where a linearisation fails: they flag a parameter when that check
fails or could not be made (no ``residuals_at``, or the interval leaves the box); a correlated
parameter whose check holds is determined to its standard error, its errors moving with its
partner's (the row keeps the correlation).
The trial's nuisance unknowns (initial rotation rate, bar rest offsets)
are part of J — they are estimated with the parameters, so they widen the parameters' errors —
but they are not flagged, do not set the sensitivity floor (the near-critical initial rate is
by far the most sensitive unknown), and their relative error is relative to their search range.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from bemore.identify.propagation import PropagatedNoise

SENSITIVITY_FLOOR = 0.01  # fraction of the most sensitive parameter's sensitivity
MAX_CORRELATION = 0.95  # |correlation| above which two parameters are not told apart
MAX_RELATIVE_ERROR = 0.25  # standard error / |value| above which a value is not trusted
BOUND_MARGIN = 0.005  # fraction of the box's width within which a value sits at a bound
BANDWIDTH_CORRELATION = 0.05  # residual autocorrelation below which lags are not summed
CHECK_STEP = 2.0  # standard errors either side at which the cost's quadratic form is checked
MIN_QUADRATIC_RATIO = 0.64  # cost rise / quadratic's below which the interval is > 1.25× wider


@dataclass
class ParameterIdentifiability:
    """Identifiability of one parameter (JSON-ready)."""

    name: str
    sensitivity_mm: float
    standard_error: float
    relative_standard_error: float
    most_correlated_with: str
    correlation: float
    identifiable: bool
    reasons: list[str]
    # The standard error's parts (SI; None: not propagated): the residual sandwich's, the
    # propagated marker noise's and the model error's (the sandwich's part beyond what the
    # noise puts into it); ``standard_error`` = √(noise² + model²) when propagated.
    standard_error_residuals: float | None = None
    standard_error_noise: float | None = None
    standard_error_model: float | None = None
    # The arm-end recipe's form (trunk-side trials; None: no recipe), a systematic part added
    # to the covariance (bemore.identify.propagation): then ``standard_error`` = √(noise² +
    # model² + recipe²) (+ body mass², below).
    standard_error_recipe: float | None = None
    # The body mass's uncertainty (None: taken as exact), a systematic part added likewise
    # (bemore.identify.propagation, "The body mass").
    standard_error_body_mass: float | None = None
    # The segment table's values the fit holds fixed (None: taken as exact), added likewise
    # (bemore.identify.propagation, "The segment table").
    standard_error_segment_table: float | None = None
    # The force channels' declared offset, gain and lag errors (None: taken as exact), added
    # likewise.
    standard_error_force_channels: float | None = None
    # The markers' slide on the skin (None: taken as riding on the bone), added likewise
    # (bemore.identify.propagation, "Soft tissue").
    standard_error_soft_tissue: float | None = None
    # The cost's rise at −/+ CHECK_STEP standard errors over its quadratic model's (None: not
    # checked; below MIN_QUADRATIC_RATIO the stated error is too small).
    quadratic_ratio: list[float] | None = None


@dataclass
class Identifiability:
    """Per-parameter results and the full correlation matrix (order of ``names``)."""

    parameters: list[ParameterIdentifiability]
    names: list[str]
    correlation_matrix: list[list[float]]
    residual_rms_mm: float
    nuisance: list[str]
    covariance: str = "white"  # "long-run (Newey-West, N frames)" or "white", and the noise
    bandwidth_frames: int = 0
    noise_realisations: int = 0  # K noisy copies of the trial propagated (0: none)
    # The covariance's part beyond the propagated inputs (d, d, normalised units): the model
    # error's, or the whole residual sandwich when nothing was propagated; what moves a
    # quantity computed from the estimate besides the inputs whose changes are known (the
    # fitted force channel errors, bemore.identify.force_channels.error_covariance). Not in
    # the record.
    unpropagated_covariance: np.ndarray | None = field(default=None, repr=False)

    def record(self) -> dict[str, Any]:
        """JSON-ready record (athlete.json ``identifiability``), with the flagged names."""
        record = asdict(self)
        del record["unpropagated_covariance"]
        return {**record, "flagged": self.flagged}

    @property
    def flagged(self) -> list[str]:
        """Names of the model parameters the trial does not determine."""
        return [
            item.name
            for item in self.parameters
            if not item.identifiable and item.name not in self.nuisance
        ]


def analyse(
    jacobian: np.ndarray,
    residuals: np.ndarray,
    names: list[str] | tuple[str, ...],
    values: np.ndarray,
    widths: np.ndarray,
    nuisance: int = 0,
    frames: int | None = None,
    positions: np.ndarray | None = None,
    untrusted: str | None = None,
    lowers: np.ndarray | None = None,
    noise: PropagatedNoise | None = None,
    residuals_at: Callable[[np.ndarray], np.ndarray] | None = None,
    bounds: tuple[np.ndarray, np.ndarray] | None = None,
) -> Identifiability:
    """Identifiability at the optimum.

    ``jacobian``: (m, d) in metres per normalised unit; ``residuals``: (m,) m; ``values``: (d,)
    SI values at the optimum; ``widths``: (d,) upper − lower (SI); the last ``nuisance``
    columns are the trial's nuisance unknowns (see the module docstring). ``frames``: the rows
    are ``frames`` consecutive frames of m/frames residuals each (long-run covariance; None:
    white noise). ``positions``: (d,) the values in their box (0 = lower, 1 = upper), to flag
    the parameters at a bound. ``untrusted``: a reason every parameter is flagged for (e.g. a
    poor fit, whose errors bound the noise's effect, not the model error's). ``lowers``: (d,)
    the lower bounds (SI); a parameter whose box spans zero has its relative error taken
    relative to its range. ``noise``: the trial's marker noise propagated through the trial
    chain (:mod:`bemore.identify.propagation`): the covariance is then that noise's plus the
    sandwich's model-error part (see the module docstring). ``residuals_at``: the residuals
    (N, m) m of normalised points (N, d), with ``positions`` the optimum and ``bounds`` its box
    (lower, upper; default [0, 1]): every standard error's quadratic form is checked (module
    docstring).
    """
    J = np.asarray(jacobian, dtype=float)
    r = np.asarray(residuals, dtype=float)
    m, d = J.shape
    column_norms = np.linalg.norm(J, axis=0)
    sensitivity_mm = 0.1 * column_norms / np.sqrt(m) * 1e3
    # Pseudo-inverse: a parameter with no effect at all must not break the analysis.
    bread = np.linalg.pinv(J.T @ J)
    bandwidth = 0
    if frames and frames > 1 and m % frames == 0:
        meat, bandwidth = long_run_score_covariance(J, r, frames)
        covariance = bread @ meat @ bread * frames / max(frames - d, 1)
        kind = f"long-run (Newey-West, bandwidth {bandwidth} frames)"
    else:
        covariance = float(r @ r) / max(m - d, 1) * bread
        kind = "white"
    residual_error_n = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    noise_error_n = np.full(d, np.nan)
    model_error_n = np.full(d, np.nan)
    model = covariance
    recipe_error_n = np.full(d, np.nan)
    recipe = np.zeros((d, d))
    if noise is not None and bandwidth_known(frames, m):
        # What the noise alone would put into the sandwich: the copies' residual changes
        # left after their own least-squares response, through the same sandwich.
        changes = noise.residual_changes
        left = changes - (changes @ J) @ bread @ J.T
        meats = bartlett_meats(J, left, frames, bandwidth)
        noise_sandwich = (bread @ meats.mean(axis=0) @ bread * frames / max(frames - d, 1))
        model = positive_part(covariance - noise_sandwich)
        noise_error_n = np.sqrt(np.clip(np.diag(noise.covariance), 0.0, None))
        model_error_n = np.sqrt(np.clip(np.diag(model), 0.0, None))
        covariance = noise.covariance + model
        kind += (f": its part beyond what the marker noise puts into it (model error), plus "
                 f"the marker noise ({noise.noise_m * 1e3:.3g} mm) propagated through the "
                 f"trial chain ({noise.realisations} copies)")
        if noise.recipe_covariance is not None:
            recipe_error_n = np.sqrt(np.clip(np.diag(noise.recipe_covariance), 0.0, None))
            recipe = noise.recipe_covariance
            kind += (", plus the arm-end recipe's form (the two forms' difference as the "
                     "half-width of a rectangular distribution)")
    # The correlations (and the flag they raise) are what the trial tells apart: the noise's
    # and the model error's; the recipe's rank-one systematic part would tie every parameter
    # it dominates to ±1 without saying anything about what the trial shows.
    shown_n = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        correlation = covariance / np.outer(shown_n, shown_n)
    covariance = covariance + recipe
    correlation = np.nan_to_num(correlation, nan=0.0)
    np.fill_diagonal(correlation, 1.0)
    ratios = np.full((d, 2), np.nan)
    if residuals_at is not None and positions is not None:
        low, high = bounds if bounds is not None else (np.zeros(d), np.ones(d))
        ratios = quadratic_ratios(residuals_at, np.asarray(positions, dtype=float), J, r,
                                  covariance, np.asarray(low, dtype=float),
                                  np.asarray(high, dtype=float))
    # The body mass's and the segment table's uncertainties, the force channels' declared
    # errors and the markers' slide on the skin (bemore.identify.propagation, "The body
    # mass", "The segment table", "The force channels", "Soft tissue"): inputs no residual
    # shows, so neither in the correlations nor in the quadratic check (a direction the data
    # cannot see would fail it), only in the standard errors.
    systematic_n = {}
    if noise is not None:
        for part, added, text in (
                ("body_mass", noise.body_mass_covariance,
                 f"the body mass's uncertainty (± {noise.body_mass_uncertainty_kg:.3g} kg, 1 SD)"),
                ("segment_table", noise.table_covariance,
                 f"the segment table's uncertainty ({len(noise.table_values)} values the fit "
                 "holds fixed)"),
                ("force_channels", noise.channel_covariance,
                 "the force channels' declared calibration and timing errors"),
                ("soft_tissue", noise.soft_tissue_covariance,
                 f"the markers' slide on the skin ({len(noise.soft_tissue_members)} members)")):
            if added is not None:
                systematic_n[part] = np.sqrt(np.clip(np.diag(added), 0.0, None))
                covariance = covariance + added
                kind += f", plus {text}"
    missing = np.full(d, np.nan)
    standard_error_n = np.sqrt(np.clip(np.diag(covariance), 0.0, None))
    standard_error = standard_error_n * np.asarray(widths, dtype=float)
    relative = standard_error / np.maximum(np.abs(values), 1e-300)
    # A parameter whose box spans zero (an offset) has no scale of its own: its error is
    # relative to its search range, as the nuisance unknowns' are.
    spans_zero = np.zeros(d, dtype=bool)
    if lowers is not None:
        spans_zero = (np.asarray(lowers) < 0.0) & (np.asarray(lowers) + np.asarray(widths) > 0.0)
    relative = np.where(spans_zero, standard_error_n, relative)
    parameters = d - nuisance
    relative[parameters:] = standard_error_n[parameters:]  # fraction of the search range
    floor = SENSITIVITY_FLOOR * float(sensitivity_mm[:parameters].max()) if parameters else 0.0
    rows = []
    for k, name in enumerate(names):
        others = np.abs(correlation[k]).copy()
        others[k] = -1.0
        partner = int(np.argmax(others)) if d > 1 else k
        reasons = []
        checked = bool(np.all(np.isfinite(ratios[k])))
        quadratic = checked and float(ratios[k].min()) >= MIN_QUADRATIC_RATIO
        if sensitivity_mm[k] <= floor and not quadratic:
            reasons.append(
                f"insensitive: {sensitivity_mm[k]:.3g} mm per 10 % of its range "
                f"(< {SENSITIVITY_FLOOR:.0%} of the most sensitive parameter)"
            )
        if d > 1 and abs(correlation[k, partner]) > MAX_CORRELATION and not quadratic:
            reasons.append(
                f"correlated with {names[partner]} ({correlation[k, partner]:+.3f}): "
                "the trial shows only their combination"
            )
        if checked and not quadratic:
            side = "below" if ratios[k, 0] <= ratios[k, 1] else "above"
            reasons.append(
                f"its standard error understates the error: the cost {CHECK_STEP:g} standard "
                f"errors {side} the value rises {float(ratios[k].min()):.2f} of the quadratic "
                "the error assumes")
        if relative[k] > MAX_RELATIVE_ERROR:
            reasons.append(f"relative standard error {relative[k]:.0%} > {MAX_RELATIVE_ERROR:.0%}")
        if positions is not None and k < parameters and not (
                BOUND_MARGIN < positions[k] < 1.0 - BOUND_MARGIN):
            side = "lower" if positions[k] <= BOUND_MARGIN else "upper"
            reasons.append(f"at its {side} bound: the box, not the trial, set its value")
        if untrusted and k < parameters:
            reasons.append(untrusted)
        rows.append(
            ParameterIdentifiability(
                name=name,
                sensitivity_mm=float(sensitivity_mm[k]),
                standard_error=float(standard_error[k]),
                relative_standard_error=float(relative[k]),
                most_correlated_with=names[partner] if d > 1 else "",
                correlation=float(correlation[k, partner]) if d > 1 else 0.0,
                identifiable=not reasons,
                reasons=reasons,
                standard_error_residuals=float(residual_error_n[k] * widths[k]),
                standard_error_noise=_part(noise_error_n[k] * widths[k]),
                standard_error_model=_part(model_error_n[k] * widths[k]),
                standard_error_recipe=_part(recipe_error_n[k] * widths[k]),
                standard_error_body_mass=_part(
                    systematic_n.get("body_mass", missing)[k] * widths[k]),
                standard_error_segment_table=_part(
                    systematic_n.get("segment_table", missing)[k] * widths[k]),
                standard_error_force_channels=_part(
                    systematic_n.get("force_channels", missing)[k] * widths[k]),
                standard_error_soft_tissue=_part(
                    systematic_n.get("soft_tissue", missing)[k] * widths[k]),
                quadratic_ratio=[float(v) for v in ratios[k]] if checked else None,
            )
        )
    return Identifiability(
        parameters=rows,
        names=list(names),
        correlation_matrix=[[float(value) for value in row] for row in correlation],
        residual_rms_mm=float(np.sqrt(r @ r / max(m, 1))) * 1e3,
        nuisance=list(names[parameters:]),
        covariance=kind,
        bandwidth_frames=bandwidth,
        noise_realisations=noise.realisations if noise is not None else 0,
        unpropagated_covariance=model,
    )


def quadratic_ratios(
    residuals_at: Callable[[np.ndarray], np.ndarray], x: np.ndarray, jacobian: np.ndarray,
    residuals: np.ndarray, covariance: np.ndarray, lower: np.ndarray, upper: np.ndarray,
    step: float = CHECK_STEP,
) -> np.ndarray:
    """(d, 2): for each parameter k, the least-squares cost's rise at ∓``step`` standard errors
    over the rise its Gauss–Newton quadratic predicts there (1: quadratic; NaN: not checked).

    The point is x + t·C[:, k]/C[k, k] with t = ±step·√C[k, k] (normalised units): parameter k
    moved by ``step`` standard errors and the others by their conditional mean under the
    covariance C (d, d), shortened to stay in the box [``lower``, ``upper``] (NaN when it would
    keep less than half the step). Parameters within ``BOUND_MARGIN`` of a bound stay there
    (C conditioned on them; NaN for them). The rise is ‖r(x + δ)‖² − ‖r‖², the quadratic's
    ‖r + Jδ‖² − ‖r‖² (``jacobian`` J (m, d), ``residuals`` r (m,) at x); all 2·d points in one
    ``residuals_at`` call ((N, d) → (N, m)).

    Residuals linear in the parameters give exactly 1:

    >>> J = np.array([[1.0, 0.5], [0.0, 1.0], [1.0, 1.0]])
    >>> r = np.array([0.1, -0.2, 0.05])
    >>> at = lambda X: r + (X - 0.5) @ J.T
    >>> ratios = quadratic_ratios(at, np.full(2, 0.5), J, r, 0.01 * np.eye(2),
    ...                           np.zeros(2), np.ones(2))
    >>> bool(np.allclose(ratios, 1.0))
    True
    """
    d = len(x)
    out = np.full((d, 2), np.nan)
    # A parameter at a bound is held there by the box: the others move as the covariance
    # says given it (the Schur complement), and it is not checked itself.
    margin = BOUND_MARGIN * (upper - lower)
    held = (x <= lower + margin) | (x >= upper - margin)
    free = np.flatnonzero(~held)
    given = covariance.copy()
    if held.any():
        given[:] = 0.0
        bound = np.flatnonzero(held)
        given[np.ix_(free, free)] = covariance[np.ix_(free, free)] - covariance[
            np.ix_(free, bound)] @ np.linalg.pinv(covariance[np.ix_(bound, bound)]) @ covariance[
            np.ix_(bound, free)]
    points, shifts, slots = [], [], []
    for k in free:
        variance = given[k, k]
        if not variance > 0.0:
            continue
        direction = given[:, k] / variance * step * np.sqrt(covariance[k, k])
        for side, sign in enumerate((-1.0, 1.0)):
            delta = sign * direction
            with np.errstate(divide="ignore", invalid="ignore"):
                room = np.where(delta > 0, (upper - x) / delta,
                                np.where(delta < 0, (lower - x) / delta, np.inf))
            scale = min(1.0, float(room.min()))
            if scale < 0.5:
                continue
            points.append(x + scale * delta)
            shifts.append(scale * delta)
            slots.append((k, side))
    if not points:
        return out
    costs = np.sum(np.asarray(residuals_at(np.array(points)), dtype=float) ** 2, axis=1)
    base = float(residuals @ residuals)
    for (k, side), shift, cost in zip(slots, shifts, costs, strict=True):
        moved = jacobian @ shift
        predicted = float(moved @ moved + 2.0 * residuals @ moved)
        if predicted > 0.0:
            out[k, side] = (cost - base) / predicted
    return out


def _part(value: float) -> float | None:
    """A standard error's part (SI), None when it was not computed (NaN)."""
    return float(value) if np.isfinite(value) else None


def bandwidth_known(frames: int | None, rows: int) -> bool:
    """Whether the rows are ``frames`` frames of residuals (the long-run sandwich applies)."""
    return bool(frames and frames > 1 and rows % frames == 0)


def bartlett_meats(jacobian: np.ndarray, residuals: np.ndarray, frames: int, bandwidth: int
                   ) -> np.ndarray:
    """(K, d, d): :func:`long_run_score_covariance`'s middle for each of K residual vectors
    (K, m) at once, with the given ``bandwidth``. The Bartlett sum Σ_l (1 − |l|/(L + 1))·
    Σ_t s_t s_{t+l}ᵀ is Σ_t S_t S_tᵀ / (L + 1) with S_t the sum of the scores over the L + 1
    frames ending at t (all partial windows included).

    >>> rng = np.random.default_rng(1)
    >>> J, r = rng.normal(size=(600, 2)), rng.normal(size=600)
    >>> one = long_run_score_covariance(J, r, 200)[0]
    >>> bool(np.allclose(bartlett_meats(J, r[None], 200, _bandwidth(r.reshape(200, 3)))[0],
    ...                  one))
    True
    """
    m, d = jacobian.shape
    columns = m // frames
    r = np.asarray(residuals, dtype=float).reshape(-1, frames, columns)
    per_frame = jacobian.reshape(frames, columns, d)
    t = np.arange(frames + bandwidth)
    ends, starts = np.minimum(t + 1, frames), np.maximum(t - bandwidth, 0)
    total = np.zeros((frames + 1, d))  # the scores' running sums, 0 before the first frame
    meats = np.empty((r.shape[0], d, d))
    # One residual vector at a time: its windows (≈ 0.2 MB) stay in the cache, and each sum is
    # the one the three-index einsum over all K forms (2.5× faster measured for K = 32).
    for k in range(r.shape[0]):
        np.cumsum(np.einsum("fcd,fc->fd", per_frame, r[k]), axis=0, out=total[1:])
        windows = total[ends] - total[starts]
        np.einsum("td,te->de", windows, windows, out=meats[k])
    return meats / (bandwidth + 1.0)


def positive_part(matrix: np.ndarray) -> np.ndarray:
    """The symmetric ``matrix`` (d, d) with its negative eigenvalues set to 0 (a covariance).

    >>> positive_part(np.array([[1.0, 0.0], [0.0, -2.0]]))
    array([[1., 0.],
           [0., 0.]])
    """
    symmetric = (matrix + matrix.T) / 2.0
    values, vectors = np.linalg.eigh(symmetric)
    return (vectors * np.clip(values, 0.0, None)) @ vectors.T


def long_run_score_covariance(jacobian: np.ndarray, residuals: np.ndarray, frames: int
                              ) -> tuple[np.ndarray, int]:
    """Long-run covariance (d, d) of the per-frame scores ``s_t = J_tᵀ r_t`` and the
    bandwidth (frames) used: Σ over lags |l| ≤ L of (1 − |l|/(L + 1))·Σ_t s_t s_{t+l}ᵀ
    (Newey–West's Bartlett weights: positive semi-definite). L is the first lag at which the
    residuals' autocorrelation, pooled over their columns, falls below
    ``BANDWIDTH_CORRELATION`` (at most a quarter of the frames).

    With independent residuals L = 0 and the sandwich is the white-noise covariance:

    >>> rng = np.random.default_rng(0)
    >>> J, r = rng.normal(size=(4000, 2)), rng.normal(size=4000)
    >>> meat, bandwidth = long_run_score_covariance(J, r, 2000)
    >>> bandwidth
    0
    """
    m, d = jacobian.shape
    columns = m // frames
    r = residuals.reshape(frames, columns)
    scores = np.einsum("fcd,fc->fd", jacobian.reshape(frames, columns, d), r)
    bandwidth = _bandwidth(r)
    meat = scores.T @ scores
    for lag in range(1, bandwidth + 1):
        weight = 1.0 - lag / (bandwidth + 1.0)
        cross = scores[lag:].T @ scores[:-lag]
        meat += weight * (cross + cross.T)
    return meat, bandwidth


def _bandwidth(r: np.ndarray) -> int:
    """First lag (frames) at which the pooled autocorrelation of the columns of ``r``
    (F, C) falls below BANDWIDTH_CORRELATION, at most F // 4."""
    centred = r - r.mean(axis=0)
    frames = centred.shape[0]
    size = 1 << int(np.ceil(np.log2(2 * frames)))
    spectrum = np.fft.rfft(centred, size, axis=0)
    autocovariance = np.fft.irfft(np.abs(spectrum) ** 2, size, axis=0)[:frames].sum(axis=1)
    if autocovariance[0] <= 0.0:
        return 0
    correlation = autocovariance / autocovariance[0]
    below = np.flatnonzero(correlation[1 : frames // 4 + 1] < BANDWIDTH_CORRELATION)
    return int(below[0]) if below.size else frames // 4
