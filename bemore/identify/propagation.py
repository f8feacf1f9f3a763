"""The trial's marker noise carried through the whole trial chain into the fitted parameters.

The residual sandwich (:mod:`bemore.identify.identifiability`) sees the noise only where it
shows in the residuals at the optimum. The driven motion, the arm's end, the measured segment
lengths and the initial state all come from the same noisy markers, and what their noise does
to the simulation is largely absorbed by the parameters: it does not show in the residuals,
it moves the estimates (errors in the variables). So that part is computed, a parametric
bootstrap of the data pipeline linearised at the optimum:

1. K copies of the trial's gap-filled markers get white noise of the marker noise σ the trial
   estimates (:mod:`bemore.trial.noise`; one σ for every marker coordinate, as estimated),
   drawn with a fixed seed, at :data:`LINEAR_FRACTION` of its size (the first-order response;
   the changes are scaled back); copy 0 gets none, so it is the trial itself. The copies are
   perturbations of the data the fit saw, where J was taken: the clear hip circle is
   near-critical, and a smoother "truth" (the filtered markers, filtered again by the chain)
   moves the simulation at x* by 30 mm on the bundled sample, far from where J holds;
2. the trial chain runs on every copy (:func:`bemore.trial.realisations.prepare_realisations`:
   low-pass, joint centres, arm end, driven motion, free start, segment lengths);
3. the model is simulated at the optimum x* once per copy, each with its own driven motion,
   start and body, in one engine call; r_k is that copy's residual vector at x* (its own
   measured joint centres) — the nuisance unknowns keep their physical values at x*;
4. δr_k = (r_k − r_0) / LINEAR_FRACTION and the parameters' response
   δx_k = −(JᵀJ)⁻¹Jᵀδr_k with the Jacobian J of the fit at x* (normalised units);
5. the noise covariance is the sample covariance of the δx_k (k = 1…K).

It holds target noise and input noise together (δr_k carries both: the copy's measured joint
centres and its simulation change). What it cannot hold is model error, which
:func:`bemore.identify.identifiability.analyse` takes from the residual sandwich.

**The arm-end recipe's form (trunk-side trials only).** The arm end placed from the elbow and
the upper-arm marker (:mod:`bemore.trial.acromion`) rests on a model of how an off-axis marker
projects as the arm turns out of the plane: the across-the-arm part fixed in metres. A second,
equally plausible form scales it with the apparent length as the along part is
(:func:`bemore.trial.acromion.place_arm_end_scaled`). Which form holds no residual can show,
and the choice moves the estimates (GUM type B). One more copy, without noise, runs the chain
with the arm end moved :data:`LINEAR_FRACTION` of the way to the alternative form (calibrated
on the same acromions); δr_recipe = (r_recipe − r_0) / LINEAR_FRACTION, δx_recipe =
−(JᵀJ)⁻¹Jᵀδr_recipe, and the covariance gets δx_recipe δx_recipeᵀ / 3: the estimate's error
from the form taken as rectangular on ±δx_recipe (GUM 4.3.7, variance a²/3 for half-width a).
The alternative form marks how far a plausible form puts the arm end from the chain's, and the
chain's own form's shape error is within that (on the synthetic trunk-side trials it places the
arm end 0.7–1 mm off the truth and the alternative 1.4–2.0 mm, and the noise-free bias it leaves
on shoulder.stiffness_pd is about a third of the two forms' δx); nothing prefers a direction or
a size within it. Taking δx_recipe as one standard uncertainty (a normal reading) would state
the form's error about three times the one measured. Arm-side trials have no recipe and no such
term.

**The body mass** (every trial scaled from the segment table). The fit keeps the table's
segment masses scaled to the body mass it is given (``--body-mass``, her profile; else the
table's total), and nothing in the residuals can show that number wrong: with the markers alone
every mass, stiffness and damping scales with it (a motion is the same for a body s times
heavier on springs s times stiffer); with bar forces the force measures the total (bar + body)
to ≈ 0.1 kg, so the bar mass is what is left of it once the body mass is taken away, and the
trunk values follow (measured: 0.3 kg more body mass put the bar mass 56 % and the trunk mass
7 % low, 3–6 standard errors off while reported identifiable). So one more member, noise-free,
has the body scaled to M + :data:`LINEAR_FRACTION`·σ_M (σ_M:
``problem.body_mass_uncertainty_kg``, :func:`bemore.identify.problem.body_mass_uncertainty`),
δr_M its residual change scaled back, δx_M = −(JᵀJ)⁻¹Jᵀδr_M, and the covariance gets
δx_M δx_Mᵀ: the estimate's error from a body mass off by one standard uncertainty (GUM type B,
normal). :func:`bemore.identify.identifiability.analyse` adds it to the standard errors after
the correlations and the quadratic check, which say what the trial shows.

**The segment table** (every trial scaled from it). The fit holds the table's values fixed
where the trial cannot show them: the masses and centres of mass of the hands, forearms, upper
arms, head, shanks and feet, and every segment's radius of gyration (scaled to her lengths). A
body is not the table: de Leva's female and male tables differ by 9 % in those masses, 4.5 % in
the centres of mass and 9 % in the radii of gyration, and a fit on a body that far off the table
put the shoulder's pd stiffness 2.1–3.6 and the thighs' centre of mass up to 5.0 standard
errors off while it reported them identifiable (measured on synthetic trials of such bodies).
So each of those values is one more noise-free member, moved by :data:`LINEAR_FRACTION` of its
standard uncertainty (``problem.segment_table_uncertainty``: relative, ``identification.toml
[segment_table]``; a mass's change taken from the trunk+thighs budget, the body mass being
counted apart), δr_i its residual change scaled back, and the covariance gets Σ_i δx_i δx_iᵀ
(GUM type B, normal, the values independent), like the body mass's.

**The force channels** (trials with bar forces). Their calibration and timing are inputs no
residual shows either: an offset of the vertical channel is the bar's weight, a gain error
its share of the total, a lag a shift of the force against the motion the markers give. By
default they are fitted (:mod:`bemore.identify.force_channels`: projected out of the force
rows, so the standard errors are the parameters' profile over them). What the lab declares of
those it does not fit (``[forces] offset_uncertainty_n``, ``gain_uncertainty``,
``lag_uncertainty_ms``; 0: taken as exact) enters the same way as the body mass, one residual
change per declared error (:func:`force_channel_changes`: the measured force moved, no
simulation, less what the fitted errors absorb), their responses' outer products added with
the body mass's.

**Soft tissue** (every trial of skin markers). A marker over a joint slides on the skin as the
joint turns, by millimetres over bony landmarks and by centimetres over the thigh; the slide
follows the motion, so the fit follows it with its parameters, and what it leaves in the
residuals stays within the verdict's limit up to about the budget below (on synthetic trials
whose acromions and trochanters slid 3–5 mm with the shoulder and hip, the fit said "good" while
the shoulder's ap stiffness was 15–18 % and 4.9–6.2 standard errors off, reported identifiable:
docs/identify.md, "Soft tissue"). So each joint centre's markers get two more noise-free
members, slid by :data:`LINEAR_FRACTION` of their standard uncertainty
(``problem.soft_tissue_mm``, ``identification.toml [soft_tissue]``) along each axis of the plane
with the angle of the joint they sit over (:mod:`bemore.trial.softtissue`), run through the
chain with the noise copies (in the same engine call), δr_i their residual changes scaled back,
and the covariance gets Σ_i δx_i δx_iᵀ (GUM type B, normal, the members independent), like the
body mass's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

REALISATIONS = 32  # K: copies of the trial's markers (docs/identify.md, "Standard errors")
# The copies' noise is this fraction of σ, and the covariance is scaled back by its inverse
# square: the first-order response (a full-σ copy moves the near-critical circle's simulation
# at x* by ~60 mm on the bundled sample, where the response is far from linear).
LINEAR_FRACTION = 0.01
SEED = 20161  # the noise draws' seed: the same trial gives the same standard errors
# The recipe's form: its δx counted as the half-width of a rectangular distribution, whose
# variance is a²/3 (module docstring).
RECIPE_VARIANCE_FACTOR = 1.0 / 3.0


@dataclass
class PropagatedNoise:
    """The parameters' covariance (d, d) in normalised units from the trial's marker noise
    propagated through the trial chain, with how it was made."""

    covariance: np.ndarray
    realisations: int  # K copies used (members the engine could not simulate left out)
    noise_m: float  # the marker noise σ drawn (m)
    seed: int
    residual_changes: np.ndarray  # (K, m) δr_k per unit of noise (m at the noise σ)
    # The arm-end recipe's form (trunk side; None: no recipe): δr_recipe (m,) m, and the
    # covariance (d, d) it adds, δx_recipe δx_recipeᵀ / 3 (see the module docstring).
    recipe_change: np.ndarray | None = None
    recipe_covariance: np.ndarray | None = None
    # The body mass's uncertainty (None: taken as exact): δr (m,) m per standard uncertainty
    # of the body mass, the covariance (d, d) it adds, δx δxᵀ, and that uncertainty (kg).
    body_mass_change: np.ndarray | None = None
    body_mass_covariance: np.ndarray | None = None
    body_mass_uncertainty_kg: float = 0.0
    # The segment table's values the fit holds fixed (None: taken as exact): δr (n, m) m per
    # standard uncertainty of each, the covariance (d, d) they add, Σ δx δxᵀ, and what each
    # row moves (its model parameter's name).
    table_changes: np.ndarray | None = None
    table_covariance: np.ndarray | None = None
    table_values: tuple[str, ...] = ()
    # The force channels' declared errors (None: taken as exact): δr (n, m) m per standard
    # uncertainty of each (offset and gain per axis, the lag), and the covariance they add.
    channel_changes: np.ndarray | None = None
    channel_covariance: np.ndarray | None = None
    # The fitted force channel errors' direct changes (None: none fitted): for each input
    # above, A δr of its unprojected force residual change at x* (SI per error,
    # ForceChannelErrors.coefficients) — "copies" (K, k), "recipe" (k,), "body_mass" (k,),
    # "table" (n, k), "channels" (n, k), "soft_tissue" (n, k); what θ's standard errors
    # combine with the fit's response (bemore.identify.force_channels.error_covariance).
    channel_direct: dict[str, np.ndarray] | None = None
    # The markers' slide on the skin (None: taken as riding on the bone): δr (n, m) m per
    # standard uncertainty of each member (a joint centre's markers along one axis of the
    # plane, bemore.trial.softtissue), the covariance (d, d) they add, Σ δx δxᵀ, and each
    # member's label ("hip x").
    soft_tissue_changes: np.ndarray | None = None
    soft_tissue_covariance: np.ndarray | None = None
    soft_tissue_members: tuple[str, ...] = ()

    def for_rows(self, select: Any, jacobian: np.ndarray) -> PropagatedNoise:
        """The same copies seen through some rows of the residuals only: ``select`` maps a
        (…, m) residual array to its kept rows, ``jacobian`` (m', dim) is theirs."""
        changes = select(self.residual_changes)
        recipe = None if self.recipe_change is None else select(self.recipe_change)
        body = None if self.body_mass_change is None else select(self.body_mass_change)
        table = None if self.table_changes is None else select(self.table_changes)
        channels = None if self.channel_changes is None else select(self.channel_changes)
        soft = None if self.soft_tissue_changes is None else select(self.soft_tissue_changes)
        return PropagatedNoise(response_covariance(changes, jacobian), self.realisations,
                               self.noise_m, self.seed, changes, recipe,
                               None if recipe is None else recipe_covariance(recipe, jacobian),
                               body, None if body is None else systematic_covariance(
                                   body, jacobian), self.body_mass_uncertainty_kg,
                               table, None if table is None else systematic_covariance(
                                   table, jacobian), self.table_values,
                               channels, None if channels is None else systematic_covariance(
                                   channels, jacobian), self.channel_direct,
                               soft, None if soft is None else systematic_covariance(
                                   soft, jacobian), self.soft_tissue_members)

    def channel_error_members(self, jacobian: np.ndarray
                              ) -> tuple[tuple[np.ndarray, np.ndarray],
                                         tuple[np.ndarray, np.ndarray, np.ndarray]] | None:
        """The inputs' parts for :func:`bemore.identify.force_channels.error_covariance`,
        with the fit's responses δx through ``jacobian`` (m, dim), this noise's rows: (copies'
        (A δr, δx), systematic members' (A δr, δx, variance factor)); None when no channel
        error is fitted."""
        direct = self.channel_direct
        if direct is None:
            return None
        copies = (direct["copies"], responses(self.residual_changes, jacobian))
        members = [(direct[key], change, factor) for key, change, factor in (
            ("recipe", self.recipe_change, RECIPE_VARIANCE_FACTOR),
            ("body_mass", self.body_mass_change, 1.0)) if change is not None]
        if self.table_changes is not None:
            members += [(row, change, 1.0) for row, change
                        in zip(direct["table"], self.table_changes, strict=True)]
        for key, changes in (("channels", self.channel_changes),
                             ("soft_tissue", self.soft_tissue_changes)):
            if changes is not None:
                members += [(row, change, 1.0) for row, change
                            in zip(direct[key], changes, strict=True)]
        k = direct["copies"].shape[1]
        if not members:
            return copies, (np.zeros((0, k)), np.zeros((0, jacobian.shape[1])), np.zeros(0))
        systematic = (np.array([m[0] for m in members]),
                      responses(np.array([m[1] for m in members]), jacobian),
                      np.array([m[2] for m in members]))
        return copies, systematic


def systematic_covariance(change: np.ndarray, jacobian: np.ndarray) -> np.ndarray:
    """(dim, dim): Σ δx δxᵀ of the least-squares responses δx = −(JᵀJ)⁻¹Jᵀδr of residual
    changes ``change`` ((m,) or (n, m), independent inputs), J = ``jacobian`` (m, dim): each
    a systematic input moved by one standard uncertainty (GUM type B, normal).

    >>> systematic_covariance(np.array([1.0, 3.0]), np.ones((2, 1))).tolist()   # δx = −2
    [[4.0]]
    >>> systematic_covariance(np.array([[1.0, 3.0], [1.0, 1.0]]), np.ones((2, 1))).tolist()
    [[5.0]]
    """
    response = responses(np.atleast_2d(np.asarray(change, dtype=float)), jacobian)
    return response.T @ response


def responses(changes: np.ndarray, jacobian: np.ndarray) -> np.ndarray:
    """(n, dim): the least-squares responses δx = −(JᵀJ)⁻¹Jᵀδr of residual changes
    ``changes`` (n, m), J = ``jacobian`` (m, dim).

    >>> responses(np.array([[1.0, 3.0]]), np.ones((2, 1))).tolist()   # minus the mean
    [[-2.0]]
    """
    J = np.asarray(jacobian, dtype=float)
    return -(np.asarray(changes, dtype=float) @ J) @ np.linalg.pinv(J.T @ J)


def recipe_covariance(change: np.ndarray, jacobian: np.ndarray) -> np.ndarray:
    """(dim, dim): δx δxᵀ / 3 of the least-squares response δx = −(JᵀJ)⁻¹Jᵀδr of one residual
    change ``change`` (m,), J = ``jacobian`` (m, dim): a systematic change counted as the
    half-width of a rectangular distribution (:data:`RECIPE_VARIANCE_FACTOR`).

    >>> recipe_covariance(np.array([1.0, 3.0]), np.ones((2, 1))).tolist()     # δx = −2
    [[1.3333333333333333]]
    """
    return RECIPE_VARIANCE_FACTOR * systematic_covariance(change, jacobian)


def force_channel_changes(problem: Any) -> np.ndarray | None:
    """(n, m) m: the residual change per standard uncertainty of each force-channel error
    declared (``problem.force_channel_uncertainty``: offset N, gain fraction, lag ms; [forces]
    of identification.toml): the measured force moved — an offset on each axis, a gain on each
    axis, the whole force late by the lag (F(t − τ) ≈ F − τ·Ḟ) — and the simulation unchanged,
    so δr = −s·δF on the force rows and 0 on the joint centres', less what the fitted channel
    errors absorb (``problem.channel_errors``). None without forces or with nothing declared."""
    declared = declared_channel_members(problem)
    if declared is None:
        return None
    _, moved = declared
    force = np.asarray(problem.bar_force, dtype=float)
    frames, columns = force.shape[0], problem.columns_per_frame
    changes = np.zeros((len(moved), frames, columns))
    fitted = getattr(problem, "channel_errors", None)
    if fitted is not None:
        # What the fitted channel errors absorb moves nothing.
        moved = fitted.project(moved)
    changes[:, :, columns - force.shape[1]:] = moved
    return changes.reshape(len(moved), -1)


def declared_channel_members(problem: Any) -> tuple[list[str], np.ndarray] | None:
    """The declared force-channel errors (:func:`force_channel_changes`) before the fitted
    ones' projection: each member's kind (of ``force_channels.KINDS``) and its scaled
    force-residual change (n, F, 2) m per standard uncertainty; None without forces or with
    nothing declared."""
    from bemore.identify.force_channels import channel_error_columns

    if not getattr(problem, "has_forces", False):
        return None
    offset, gain, lag_ms = getattr(problem, "force_channel_uncertainty", (0.0, 0.0, 0.0))
    sizes = {"offset": offset, "gain": gain, "lag": lag_ms * 1e-3}  # 1 SD, SI
    kinds = tuple(kind for kind, size in sizes.items() if size > 0.0)
    if not kinds:
        return None
    force = np.asarray(problem.bar_force, dtype=float)  # (F, 2) N, as prepared
    # The fitted errors' columns (δr per unit of each), one SD of each: an offset and a gain
    # on each axis, one lag for the whole force (both axes' lag columns together).
    labels, unit = channel_error_columns(force, problem.motion.t, problem.force_scale, kinds)
    lag = [label.startswith("lag") for label in labels]
    members = [-sizes[label.split("_")[0]] * unit[..., k]
               for k, label in enumerate(labels) if not lag[k]]
    member_kinds = [label.split("_")[0] for k, label in enumerate(labels) if not lag[k]]
    if any(lag):
        members.append(-sizes["lag"] * unit[..., lag].sum(axis=-1))
        member_kinds.append("lag")
    return member_kinds, np.asarray(members)


def body_mass_change(problem: Any, x: np.ndarray, project_channels: bool = True
                     ) -> np.ndarray | None:
    """δr (m,) m per standard uncertainty of the body mass (``problem.body_mass_uncertainty_kg``)
    at ``x`` (dim,): the fixed body values (segment masses, the trunk+thighs total) of the
    table scaled to M + :data:`LINEAR_FRACTION`·σ_M instead of M, the trial as it is, the
    change scaled back (module docstring, "The body mass"). None when the body is taken as
    exact (σ_M = 0) or was not scaled from a table. ``project_channels`` False: the force
    rows unprojected (``IdentificationProblem.residuals``)."""
    from bemore.identify.problem import LOCKED_SHOULDER
    from bemore.model.body import body_parameters, table_mass_kg

    sigma = float(getattr(problem, "body_mass_uncertainty_kg", 0.0) or 0.0)
    source = getattr(problem, "body_source", None)
    trial = getattr(problem, "trial", None)
    if sigma <= 0.0 or source is None or trial is None:
        return None
    table, mass = source
    mass = float(mass if mass is not None else table_mass_kg(table))
    # problem.body holds the body at M (the table scaled to it and to the trial's lengths).
    moved = body_parameters(table, mass + LINEAR_FRACTION * sigma, trial.segment_lengths_m)
    names = list(problem.model.parameter_names)
    change = np.zeros((2, len(names)))
    for name, value in problem.body.items():
        if name in moved and name not in LOCKED_SHOULDER:
            change[1, names.index(name)] = moved[name] - value
    # The problem itself, in this process (a Dask wrapper's residuals take no changes: two
    # members).
    inner = getattr(problem, "inner", problem)
    r = inner.residuals(np.repeat(np.asarray(x, dtype=float)[None, :], 2, axis=0),
                        parameter_changes=change, project_channels=project_channels)
    if not np.isfinite(r).all():
        return None
    return (r[1] - r[0]) / LINEAR_FRACTION


def segment_table_members(problem: Any) -> tuple[tuple[str, ...], np.ndarray] | None:
    """The segment table's values the fit holds fixed, each moved by one standard uncertainty
    (``problem.segment_table_uncertainty``: relative mass, centre of mass, radius of gyration):
    (each member's model parameter, the changes (n, n_model_parameters) SI). A mass's change
    comes out of the trunk+thighs budget (the body mass is counted apart); a radius of
    gyration's ρ·(1 ± u) changes ρ² by 2u, to first order. None when nothing is declared or the
    body was not scaled from a table; values the fit estimates are left out.

    >>> from types import SimpleNamespace as Problem
    >>> problem = Problem(segment_table_uncertainty=(0.1, 0.05, 0.1), body_source=({}, None),
    ...     body={"hand.mass": 0.5, "hand.com": 0.04, "trunk_thighs.mass": 25.0,
    ...           "trunk.gyration_sq": 0.01},
    ...     model=Problem(parameter_names=("hand.mass", "hand.com", "trunk_thighs.mass",
    ...                                    "trunk.gyration_sq", "trunk.mass")),
    ...     space=Problem(names=("trunk.mass",)))
    >>> names, changes = segment_table_members(problem)
    >>> names
    ('hand.mass', 'hand.com', 'trunk.gyration_sq')
    >>> changes.round(4).tolist()[0], changes.round(4).tolist()[2]   # −0.05 kg from the budget
    ([0.05, 0.0, -0.05, 0.0, 0.0], [0.0, 0.0, 0.0, 0.002, 0.0])
    """
    from bemore.model.body import GYRATION_SEGMENTS, TABLE_SEGMENTS

    mass, com, gyration = getattr(problem, "segment_table_uncertainty", (0.0, 0.0, 0.0))
    if getattr(problem, "body_source", None) is None or max(mass, com, gyration) <= 0.0:
        return None
    body, fitted = problem.body, set(problem.space.names)
    moves: list[tuple[str, dict[str, float]]] = []
    budget = "trunk_thighs.mass"
    for kind, size, segments in (("mass", mass, TABLE_SEGMENTS), ("com", com, TABLE_SEGMENTS),
                                 ("gyration_sq", 2.0 * gyration, GYRATION_SEGMENTS)):
        for segment in segments:
            name = f"{segment}.{kind}"
            if size <= 0.0 or name not in body or name in fitted:
                continue
            step = size * body[name]
            moved = {name: step}
            if kind == "mass":
                if budget not in body or budget in fitted:
                    continue
                moved[budget] = -step
            moves.append((name, moved))
    if not moves:
        return None
    names = list(problem.model.parameter_names)
    changes = np.zeros((len(moves), len(names)))
    for row, (_, moved) in enumerate(moves):
        for name, step in moved.items():
            changes[row, names.index(name)] = step
    return tuple(name for name, _ in moves), changes


def segment_table_changes(problem: Any, x: np.ndarray, project_channels: bool = True
                          ) -> tuple[tuple[str, ...], np.ndarray] | None:
    """(what each member moves, δr (n, m) m per standard uncertainty of each value of the
    segment table the fit holds fixed) at ``x`` (dim,): the table's value moved by
    :data:`LINEAR_FRACTION` of its standard uncertainty (:func:`segment_table_members`), the
    trial as it is, the change scaled back (module docstring, "The segment table"). None when
    the table is taken as exact or a member cannot be simulated. ``project_channels`` False:
    the force rows unprojected (``IdentificationProblem.residuals``)."""
    members = segment_table_members(problem)
    if members is None:
        return None
    names, moves = members
    changes = np.zeros((len(names) + 1, moves.shape[1]))
    changes[1:] = LINEAR_FRACTION * moves
    inner = getattr(problem, "inner", problem)  # the problem itself, in this process
    X = np.repeat(np.asarray(x, dtype=float)[None, :], len(changes), axis=0)
    r = inner.residuals(X, parameter_changes=changes, project_channels=project_channels)
    if not np.isfinite(r).all():
        return None
    return names, (r[1:] - r[0]) / LINEAR_FRACTION


def response_covariance(changes: np.ndarray, jacobian: np.ndarray) -> np.ndarray:
    """(dim, dim): the sample covariance of the least-squares responses δx_k =
    −(JᵀJ)⁻¹Jᵀδr_k of the residual changes ``changes`` (K, m), J = ``jacobian`` (m, dim).

    A linear model's estimates respond exactly so; with J = 1 (the mean) the response is minus
    the changes' mean:

    >>> changes = np.array([[1.0, 3.0], [-1.0, 1.0], [0.0, -1.0]])
    >>> float(response_covariance(changes, np.ones((2, 1)))[0, 0])    # var of −(2, 0, −0.5)
    1.75
    """
    return np.atleast_2d(np.cov(responses(changes, jacobian), rowvar=False))


def propagates(problem: Any) -> bool:
    """Whether :func:`propagated_noise` can run on ``problem``: it carries a trial chain to
    run again (the prepared trial's markers and its unfiltered recording) and a known marker
    noise (finite, positive, m)."""
    trial = getattr(problem, "trial", None)
    noise = getattr(problem, "marker_noise_m", float("nan"))
    return (trial is not None and getattr(trial, "markers", None) is not None
            and getattr(trial, "unfiltered", None) is not None and bool(np.isfinite(noise))
            and noise > 0)


def propagated_noise(problem: Any, x: np.ndarray, jacobian: np.ndarray,
                     realisations: int = REALISATIONS, seed: int = SEED
                     ) -> PropagatedNoise | None:
    """The marker noise's covariance of the normalised unknowns at ``x`` (dim,), the optimum of
    ``problem`` (a :class:`~bemore.identify.problem.IdentificationProblem` made from a prepared
    trial), ``jacobian`` (m, dim) its Jacobian there (see the module docstring). None when the
    problem carries no trial chain to run again or the trial's noise is unknown."""
    from bemore.trial.realisations import noisy_markers, soft_tissue_displacements

    if not propagates(problem):
        return None
    trial, noise = problem.trial, problem.marker_noise_m
    recipe = getattr(trial, "arm_end", None) is not None
    raw = noisy_markers(trial, realisations + 1, LINEAR_FRACTION * noise, seed)
    raw[0] = trial.unfiltered
    soft = None
    if getattr(problem, "soft_tissue_mm", None):
        soft = soft_tissue_displacements(trial, problem.soft_tissue_mm)
    soft_labels, soft_count = ((), 0) if soft is None else (soft[0], len(soft[0]))
    if soft is not None:  # noise-free copies, each member's slide at LINEAR_FRACTION
        raw = np.concatenate([raw, trial.unfiltered[None] + LINEAR_FRACTION * soft[1]])
    blend = None
    if recipe:  # one more copy, noise-free: the arm end towards the recipe's other form
        raw = np.concatenate([raw, trial.unfiltered[None]])
        blend = np.zeros(raw.shape[0])
        blend[-1] = LINEAR_FRACTION
    fitted = getattr(problem, "channel_errors", None)
    copies, points, force = simulate_copies(problem, x, raw, blend,
                                            project_channels=fitted is None)
    direct = None
    if fitted is not None and force is not None:
        # The fitted channel errors' coefficients of each copy's force, then the projection
        # the fit sees.
        direct = fitted.coefficients(force)
        force = fitted.project(force)
    r = residual_rows(problem, points - copies.joint_centres, force)
    recipe_change = None
    if recipe:
        recipe_change = (r[-1] - r[0]) / LINEAR_FRACTION  # the whole step between the forms
        r = r[:-1]
        if not np.isfinite(recipe_change).all():
            return None
    soft_change = None
    if soft_count:
        soft_change = (r[-soft_count:] - r[0]) / LINEAR_FRACTION
        r = r[:-soft_count]
        if not np.isfinite(soft_change).all():
            return None
    valid = np.isfinite(r).all(axis=1)
    if not valid[0] or valid.sum() < 3:
        return None
    delta = (r[1:][valid[1:]] - r[0]) / LINEAR_FRACTION  # back to the noise's σ
    body = body_mass_change(problem, x, project_channels=fitted is None)
    table_names, table = segment_table_changes(problem, x, project_channels=fitted is None) \
        or ((), None)
    channels = force_channel_changes(problem)
    channel_direct = None
    if direct is not None:
        channel_direct = _channel_direct(problem, fitted, direct, valid, recipe, body, table,
                                         soft_count)
        body = None if body is None else _projected_rows(problem, fitted, body)
        table = None if table is None else _projected_rows(problem, fitted, table)
    return PropagatedNoise(covariance=response_covariance(delta, jacobian),
                           realisations=int(delta.shape[0]), noise_m=float(noise), seed=seed,
                           residual_changes=delta, recipe_change=recipe_change,
                           recipe_covariance=None if recipe_change is None
                           else recipe_covariance(recipe_change, jacobian),
                           body_mass_change=body,
                           body_mass_covariance=None if body is None
                           else systematic_covariance(body, jacobian),
                           body_mass_uncertainty_kg=float(
                               getattr(problem, "body_mass_uncertainty_kg", 0.0) or 0.0),
                           table_changes=table,
                           table_covariance=None if table is None
                           else systematic_covariance(table, jacobian),
                           table_values=table_names,
                           channel_changes=channels,
                           channel_covariance=None if channels is None
                           else systematic_covariance(channels, jacobian),
                           channel_direct=channel_direct,
                           soft_tissue_changes=soft_change,
                           soft_tissue_covariance=None if soft_change is None
                           else systematic_covariance(soft_change, jacobian),
                           soft_tissue_members=soft_labels)


def _channel_direct(problem: Any, fitted: Any, direct: np.ndarray, valid: np.ndarray,
                    recipe: bool, body: np.ndarray | None, table: np.ndarray | None,
                    soft_count: int = 0) -> dict[str, np.ndarray]:
    """:attr:`PropagatedNoise.channel_direct` from the copies' coefficients ``direct``
    (copy 0 the trial, then the noise copies, the ``soft_count`` soft-tissue members, the
    recipe's copy last when ``recipe``), the noise copies kept (``valid``, with copy 0), the
    body mass's unprojected change ``body`` (m,) and the segment table's ``table`` (n, m), or
    None. A declared error of a kind that is fitted is what the fit estimates, not an error of
    it: 0."""
    record = {}
    if recipe:
        record["recipe"] = (direct[-1] - direct[0]) / LINEAR_FRACTION
        direct = direct[:-1]
    if soft_count:
        record["soft_tissue"] = (direct[-soft_count:] - direct[0]) / LINEAR_FRACTION
        direct = direct[:-soft_count]
    record["copies"] = (direct[1:][valid[1:]] - direct[0]) / LINEAR_FRACTION
    if body is not None:
        record["body_mass"] = fitted.coefficients(problem.scaled_force_part(body))
    if table is not None:
        record["table"] = fitted.coefficients(problem.scaled_force_part(table))
    declared = declared_channel_members(problem)
    if declared is not None:
        kinds, moved = declared
        coefficients = fitted.coefficients(moved)
        coefficients[[kind in fitted.kinds for kind in kinds]] = 0.0
        record["channels"] = coefficients
    return record


def _projected_rows(problem: Any, fitted: Any, rows: np.ndarray) -> np.ndarray:
    """Stacked residual rows (…, m) with the force rows' fitted channel errors projected out."""
    projected = np.array(rows, dtype=float)
    force = problem.scaled_force_part(projected)  # a view: written through
    force[...] = fitted.project(force)
    return projected


def simulate_copies(problem: Any, x: np.ndarray, raw: np.ndarray,
                    blend: np.ndarray | None = None, project_channels: bool = True
                    ) -> tuple[Any, np.ndarray, np.ndarray | None]:
    """The trial chain run on ``raw`` (K, F, M, 3) m, versions of the trial's gap-filled
    markers (:func:`bemore.trial.realisations.prepare_realisations`, ``blend`` its recipe
    weights), and the model simulated at ``x`` (dim,) once per copy, each with its own driven
    motion, start and body, in one engine call: (the copies, their simulated cost points
    (K, F, 7, 2) m, their scaled force residuals (K, F, 2) m or None without forces; the
    fitted channel errors' part projected out unless ``project_channels`` is False)."""
    from bemore.model import DrivenMotion, simulate
    from bemore.trial.realisations import prepare_realisations

    trial, model = problem.trial, problem.model
    copies = prepare_realisations(trial, raw, blend)
    columns = [list(trial.driven_names).index(name) for name in model.driven_coordinates]
    motion = DrivenMotion(trial.t, copies.driven_q[..., columns],
                          copies.driven_qd[..., columns], copies.driven_qdd[..., columns])
    P, q0, qd0 = _members(problem, x, copies)
    outputs = ("points", "free_q", "free_qd") if problem.has_forces else ("points",)
    simulation = simulate(model, P, motion, q0, qd0, outputs=outputs)
    index = [model.point_names.index(name) for name in problem.cost_points]
    force = None
    if problem.has_forces:
        force = problem._force_residuals(P, simulation.free_q, simulation.free_qd,
                                         project_channels)
    return copies, simulation.points[:, :, index], force


def residual_rows(problem: Any, difference: np.ndarray, force: np.ndarray | None
                  ) -> np.ndarray:
    """(K, m) rows in the layout of ``problem.residuals``: the joint-centre differences
    (K, F, 7, 2) m (not-seen measurements set to 0, in place) and, with forces, each frame's
    scaled force residuals (K, F, 2) m after its 14 coordinates."""
    difference[:, np.isnan(problem.measured)] = 0.0
    count, frames = difference.shape[:2]
    if force is None:
        return difference.reshape(count, -1)
    return np.concatenate([difference.reshape(count, frames, -1), force],
                          axis=2).reshape(count, -1)


def _members(problem: Any, x: np.ndarray, copies: Any) -> tuple[np.ndarray, ...]:
    """Engine parameters (K, n), free q0 (K, 5) and q̇0 (K, 5) of each copy at ``x``: the
    copy's body (its segment lengths), its prepared start, the nuisance unknowns' values of x."""
    from bemore.identify.problem import LOCKED_SHOULDER
    from bemore.model.body import body_parameters

    model = problem.model
    count = copies.count
    X = np.repeat(np.asarray(x, dtype=float)[None, :], count, axis=0)
    P = problem.parameter_matrix(X)
    if problem.body_source is not None:
        table, body_mass = problem.body_source
        for k, lengths in enumerate(copies.segment_lengths_m):
            body = {name: value for name, value in body_parameters(table, body_mass,
                                                                   lengths).items()
                    if name in problem.body and name not in LOCKED_SHOULDER}
            P[k, [model.parameter_names.index(name) for name in body]] = list(body.values())
        P[:, problem._columns] = problem.parameter_matrix(x[None, :])[0, problem._columns]
    if problem.start is None:
        return P, copies.free_q0, copies.free_qd0
    from bemore.identify.initial import SHOULDER

    P, q0, qd0, _ = problem.start.start(
        model, P, problem.split(X)[1],
        prepared=(copies.free_q0, copies.free_qd0, copies.free_seen0[:, SHOULDER]))
    return P, q0, qd0
