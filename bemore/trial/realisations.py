"""The trial chain run again on copies of a trial's markers: what the marker noise does to it.

:func:`prepare_realisations` takes K versions of the markers the chain uses (e.g. the trial's
filtered markers plus K draws of white noise, :func:`noisy_markers`) and runs on all of them at
once what :func:`bemore.trial.pipeline.prepare_markers` runs after the gap filling: the zero-lag
low-pass, the joint centres, the projection, the arm's end (acromions on the trunk's side: the
recipe calibrated again on each copy), the driven coordinates (with ``[driven_filter]``, from the
unfiltered joint centres at their own cutoffs), the free coordinates, the quintic resampling, the
measured segment lengths and the initial free state. What is kept from the trial: its study
plane and the profile's functional shoulder centre's correction (both estimated once, from the
whole trial or a calibration, whose noise is not propagated), its trimming and its sampling.
Given the trial's own gap-filled markers as the single copy, it gives back the trial's numbers
(tests/trial/test_realisations.py), so it is the same chain.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bemore.errors import DataError
from bemore.trial.acromion import (
    arm_end_recipe,
    place_arm_end,
    place_arm_end_scaled,
    scaled_across_recipe,
)
from bemore.trial.coordinates import DRIVEN_NAMES, driven_from_points, free_from_points
from bemore.trial.filtering import (
    evaluate_spline,
    interpolating_spline,
    low_pass_matrices,
    spline_derivatives,
)
from bemore.trial.markerset import (
    JOINT_CENTRE_INDEX,
    POINT_INDEX,
    POINT_NAMES,
    arm_marker_indices,
    check_required,
)
from bemore.trial.plane import Plane

_COST_INDEX = JOINT_CENTRE_INDEX
_SHOULDER, _ELBOW = POINT_INDEX["shoulder"], POINT_INDEX["elbow"]
_WRIST = DRIVEN_NAMES.index("wrist")


@dataclass
class Realisations:
    """The chain's outputs for K copies of a trial's markers (the trial's own sampling).

    joint_centres: (K, N, 7, 2) m; driven_q, driven_qd, driven_qdd: (K, N, 9) rad or m, per s,
    per s² (``driven_names`` order); free_q0, free_qd0: (K, 5) the initial free state;
    free_seen0: (K, 5) the free coordinates seen at the first frame; segment_lengths_m: K dicts
    (m, as ``Trial.segment_lengths_m``).
    """

    joint_centres: np.ndarray
    driven_q: np.ndarray
    driven_qd: np.ndarray
    driven_qdd: np.ndarray
    free_q0: np.ndarray
    free_qd0: np.ndarray
    free_seen0: np.ndarray
    segment_lengths_m: list[dict[str, float]]

    @property
    def count(self) -> int:
        """K, the number of copies."""
        return int(self.joint_centres.shape[0])


def chain_marker_indices(trial) -> list[int]:
    """Indices in ``trial.markers`` of the markers the chain uses: the required ones, then the
    arm markers present (the order of ``fill_markers``)."""
    markers, markerset = trial.markers, trial.markerset
    indices = check_required(markers, markerset)
    return indices + [index for index in arm_marker_indices(markers, markerset)
                      if index not in indices]


def noisy_markers(trial, count: int, noise_m: float, seed: int) -> np.ndarray:
    """(count, F, M, 3) m: the trial's gap-filled, unfiltered markers the chain uses (M of them,
    :func:`chain_marker_indices`, ``trial.unfiltered``) plus independent white noise of
    ``noise_m`` (m, each coordinate of each sample) drawn with ``seed``."""
    base = trial.unfiltered
    noise = np.random.default_rng(seed).normal(0.0, noise_m, (count, *base.shape))
    return base[None] + noise


def soft_tissue_displacements(trial, uncertainty_mm: dict[str, float]
                              ) -> tuple[tuple[str, ...], np.ndarray] | None:
    """The soft-tissue members of a prepared trial (:func:`bemore.trial.softtissue.
    soft_tissue_members`): (labels, displacements (n, F, M, 3) m of the markers the chain uses,
    :func:`chain_marker_indices` order, each one standard uncertainty), the joint angles from
    the trial's filtered markers; ``uncertainty_mm`` per joint centre (mm). None when none."""
    from bemore.trial.softtissue import soft_tissue_members

    indices = chain_marker_indices(trial)
    weights = _joint_centre_weights(trial, indices)[: len(POINT_NAMES)]
    plane = Plane(trial.plane_origin, *trial.plane_axes)
    filtered = np.asarray(trial.markers.positions, dtype=float)[:, indices]
    centres = plane.project(np.einsum("pm,fmc->fpc", weights, filtered))
    return soft_tissue_members(centres, POINT_NAMES, weights, np.asarray(trial.plane_axes),
                               uncertainty_mm)


def prepare_realisations(trial, raw: np.ndarray, recipe_blend: np.ndarray | None = None
                         ) -> Realisations:
    """The chain's outputs (:class:`Realisations`) for ``raw`` (K, F, M, 3) m: K versions of the
    gap-filled, unfiltered markers the chain uses (:func:`chain_marker_indices` order) at the
    trial's marker frames. ``trial`` is a prepared ``bemore.trial.Trial`` (its ``markers``,
    ``markerset`` and ``settings`` set; DataError otherwise). ``recipe_blend``: (K,) per copy,
    on a trunk-side trial, the weight w of the arm-end recipe's alternative form
    (:func:`bemore.trial.acromion.place_arm_end_scaled`, calibrated on the copy too): the arm
    end is (1 − w)·the chain's recipe + w·the alternative (None: w = 0, the chain's)."""
    from bemore.trial.pipeline import _initial_positions, free_rates_from_points

    markers, markerset, settings = trial.markers, trial.markerset, trial.settings
    if markers is None or markerset is None or settings is None:
        raise DataError(f"{trial.source}: the trial does not carry the chain that prepared it")
    indices = chain_marker_indices(trial)
    # The joint centres (and the arm markers' centre) are means of markers and the projection
    # is affine, both linear like the low-pass (unit gain at 0 Hz, quadratic end fits): the
    # K × 11 plane points are filtered instead of the K × M markers (same numbers to rounding).
    weights = _joint_centre_weights(trial, indices)  # (10 or 11, M)
    plane = Plane(trial.plane_origin, *trial.plane_axes)
    centres = np.matmul(weights, np.moveaxis(np.asarray(raw, dtype=float), 0, 1))
    correction = _shoulder_correction(trial)  # (F, 3) m or None
    plain_raw = plane.project(centres)  # (F, K, 10 or 11, 2): frames first
    if correction is not None:
        centres[:, :, _SHOULDER] += correction[:, None]
    raw_points = plane.project(centres)
    frames, count = raw_points.shape[:2]
    filters = _low_pass_filters(frames, markers.rate_hz, settings, trial.source)
    points = filters.pop(None) @ raw_points.reshape(frames, -1)
    points = points.reshape(raw_points.shape)
    has_arm = weights.shape[0] > len(POINT_NAMES)
    arm, raw_arm = (points[:, :, -1], raw_points[:, :, -1]) if has_arm else (None, None)
    points, raw_points = points[:, :, : len(POINT_NAMES)], raw_points[:, :, : len(POINT_NAMES)]
    recipe = alternative = blend = None
    if trial.arm_end is not None:
        recipe = arm_end_recipe(points[:, :, _ELBOW], arm, points[:, :, _SHOULDER])[:2]
        if recipe_blend is not None and np.any(recipe_blend):
            blend = np.asarray(recipe_blend, dtype=float)[:, None]
            alternative = (recipe[0], scaled_across_recipe(points[:, :, _ELBOW], arm,
                                                           points[:, :, _SHOULDER]))
        points[:, :, _SHOULDER] = _arm_end(points[:, :, _ELBOW], arm, recipe,
                                           alternative, blend)
    if settings.driven_filter.enabled:
        if recipe is not None:
            raw_points[:, :, _SHOULDER] = _arm_end(raw_points[:, :, _ELBOW], raw_arm, recipe,
                                                   alternative, blend)
        q = _low_pass_driven(driven_from_points(raw_points), settings, filters)
    else:
        q = driven_from_points(points)
    free = free_from_points(points)
    # Resampled as the chain does (one spline per column); only what the fit uses is evaluated.
    driven_q, driven_qd, driven_qdd = spline_derivatives(markers.t, q, trial.t)
    knots, coefficients = interpolating_spline(markers.t, points.reshape(frames, count, -1), 5)
    all_points = evaluate_spline(knots, coefficients, 5, trial.t).reshape(
        len(trial.t), count, len(POINT_NAMES), 2)
    # The initial rates come from the unfiltered joint centres as the markers give them (no
    # functional centre, no arm end: initial_free_rates); the first resampled frame is the
    # first sample (an interpolating spline).
    free_qd0 = free_rates_from_points(markers.t, plain_raw[:, :, : len(POINT_NAMES)], settings)
    free_seen0 = free[0]
    free_q0 = np.stack([_initial_positions(free_seen0[k], points[0, k], q[0, k, _WRIST], settings)
                        for k in range(count)])
    lengths = _segment_lengths(all_points)
    return Realisations(
        joint_centres=np.moveaxis(all_points[:, :, _COST_INDEX], 1, 0),
        driven_q=np.moveaxis(driven_q, 1, 0),
        driven_qd=np.moveaxis(driven_qd, 1, 0),
        driven_qdd=np.moveaxis(driven_qdd, 1, 0),
        free_q0=free_q0,
        free_qd0=free_qd0,
        free_seen0=free_seen0,
        segment_lengths_m=lengths,
    )


def _arm_end(elbow: np.ndarray, arm: np.ndarray, recipe: tuple, alternative: tuple | None,
             blend: np.ndarray | None) -> np.ndarray:
    """(F, K, 2) arm end (m): the chain's ``recipe`` (along, across_m), blended per copy with
    weight ``blend`` (K, 1) with the ``alternative`` form's (along, across) when given."""
    placed = place_arm_end(elbow, arm, *recipe)
    if alternative is None:
        return placed
    return placed + blend * (place_arm_end_scaled(elbow, arm, *alternative) - placed)


def _joint_centre_weights(trial, indices: list[int]) -> np.ndarray:
    """(10, M) or (11, M): each joint centre (POINT_NAMES order) as the mean of its recipe's
    markers, then the arm markers' centre if any is present; columns the chain's ``indices``."""
    markers, markerset = trial.markers, trial.markerset
    arm = arm_marker_indices(markers, markerset)
    weights = np.zeros((len(POINT_NAMES) + (1 if arm else 0), len(indices)))
    for p, name in enumerate(POINT_NAMES):
        recipe = markerset.joint_centres[name]
        for label in recipe:
            weights[p, indices.index(markers.find(markerset.label(label)))] += 1.0 / len(recipe)
    for index in arm:
        weights[-1, indices.index(index)] = 1.0 / len(arm)
    return weights


def _low_pass_filters(frames: int, rate_hz: float, settings, source: str
                      ) -> dict[float | None, np.ndarray]:
    """The chain's low-passes (:func:`bemore.trial.filtering.low_pass`) as (frames, frames)
    matrices (:func:`bemore.trial.filtering.low_pass_matrices`, all in one pass): the markers'
    ``[filter]`` under the key None, and with ``[driven_filter]`` on, each of its cutoffs (Hz)
    under its value."""
    filtering, driven = settings.filter, settings.driven_filter
    cutoffs = sorted(set(driven.cutoff_hz.model_dump().values())) if driven.enabled else []
    specifications = [(filtering.cutoff_hz, filtering.edge_cycles)] + [
        (cutoff, driven.edge_cycles) for cutoff in cutoffs]
    matrices = low_pass_matrices(frames, rate_hz, specifications, filtering.order, source)
    return dict(zip([None, *cutoffs], matrices, strict=True))


def _low_pass_driven(q: np.ndarray, settings, filters: dict[float | None, np.ndarray]
                     ) -> np.ndarray:
    """(F, K, 9) driven coordinates each low-passed at its ``[driven_filter.cutoff_hz]``, as
    :func:`bemore.trial.pipeline.low_pass_driven` does (by the matrices of ``filters``,
    :func:`_low_pass_filters`)."""
    frames = q.shape[0]
    out = np.empty_like(q)
    cutoffs = settings.driven_filter.cutoff_hz.model_dump()
    for cutoff in sorted(set(cutoffs.values())):
        columns = [DRIVEN_NAMES.index(name) for name, value in cutoffs.items() if value == cutoff]
        out[..., columns] = (filters[cutoff] @ q[..., columns].reshape(frames, -1)).reshape(
            q[..., columns].shape)
    return out


def _segment_lengths(points: np.ndarray) -> list[dict[str, float]]:
    """Each copy's segment lengths (m): the median over the frames of (N, K, 10, 2) points,
    as :func:`bemore.trial.pipeline.segment_lengths` measures them."""
    from bemore.trial.pipeline import SEGMENT_ENDS

    starts = [POINT_NAMES.index(start) for start, _ in SEGMENT_ENDS.values()]
    ends = [POINT_NAMES.index(end) for _, end in SEGMENT_ENDS.values()]
    d = np.take(points, ends, axis=-2) - np.take(points, starts, axis=-2)  # (N, K, 8, 2)
    lengths = np.hypot(d[..., 0], d[..., 1])
    middle = lengths.shape[0] // 2
    if lengths.shape[0] % 2:
        # An odd count's median is its middle element, which np.percentile's interpolation
        # returns exactly (weight 0 on the next): the partition alone, 5× faster.
        medians = np.partition(lengths, middle, axis=0)[middle]  # (K, 8)
    else:
        medians = np.percentile(lengths, 50.0, axis=0)
    return [{name: float(value) for name, value in zip(SEGMENT_ENDS, row, strict=True)}
            for row in medians]


def _shoulder_correction(trial) -> np.ndarray | None:
    """(F, 3) m: the functional shoulder centre's correction of the acromions on the trial's
    filtered markers (None without one)."""
    if trial.shoulder_centre is None:
        return None
    from bemore.trial.score import acromion_correction

    return acromion_correction(trial.markers, trial.shoulder_centre)
