"""The markers' slide on the skin in the standard errors (docs/identify.md, "Soft tissue";
bemore.identify.propagation, bemore.trial.softtissue).

A marker that slides with the joint it sits over leaves no residual the fit cannot follow: the
fit moves its parameters instead. Two checks that do not take the code's word for it:

* against a refit: the response the propagation states for one member (a joint centre's
  markers slid along one axis of the plane with its joint's angle) and what a polish does when
  the markers of the C3D file really are slid that way, from the same optimum;
* against an artefact of another form than the term's: synthetic trials whose trochanters,
  knee markers and acromions slide along their segments with the hip's and the shoulder's
  driven angles (about their means, with a quadratic part), identified through the whole chain.
  Before this term their fits said "good" while shoulder.stiffness_ap was 5.2–5.9 standard
  errors off on these seeds (2 and 3), reported identifiable (the coverage test fails on the
  previous code: 5.9).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from bemore.identify.pipeline import Overrides, build_problem, run_identification
from bemore.identify.propagation import propagated_noise, responses
from bemore.identify.space import ParameterSpace
from bemore.model.body import table_mass_kg
from bemore.optimize.polish import polish_many
from bemore.paths import default_config
from bemore.settings import load_gymnast, load_identification
from bemore.trial.c3d import write_c3d
from bemore.trial.markerset import POINT_NAMES
from bemore.trial.realisations import chain_marker_indices, soft_tissue_displacements
from bemore.trial.synthetic import SyntheticSpec, synthesize

QUARTER = 0.25  # of a standard uncertainty: the refit's real slide


def markers_on_the_bone_config(folder: Path) -> Path:
    """A copy of configs/identification.toml in ``folder`` whose ``[soft_tissue]`` takes the
    markers as riding on the bone (every slide 0): for synthetic trials whose markers do, in a
    test of another term."""
    text = default_config("identification.toml").read_text()
    head, section = text.split("[soft_tissue]", 1)
    body, rest = section.split("\n[", 1)
    zeroed = re.sub(r"^(\w+_mm)\s*=\s*[0-9.]+", r"\1 = 0.0", body, flags=re.MULTILINE)
    assert zeroed.count(" = 0.0") == 7, zeroed  # every joint centre's slide
    path = folder / "identification.toml"
    path.write_text(head + "[soft_tissue]" + zeroed + "\n[" + rest)
    return path


def covered_estimates(path: Path, out: Path, truth, body_mass_kg: float,
                      config: Path | None = None) -> tuple[dict, dict[str, float]]:
    """Identify the trial at ``path`` with the default search and polish (athlete.json in
    ``out``; ``config``: the identification file, None: the default): its athlete.json and the
    z of each identifiable estimate against ``truth`` (a synthetic trial's), once the fit is
    "good", the bar's stiffnesses and the shoulder's pd stiffness among them, every one within
    3 standard errors."""
    run_identification(path, out, body_mass_kg=body_mass_kg, overrides=Overrides(seed=1),
                       config=config)
    athlete = json.loads((out / "athlete.json").read_text())
    assert athlete["fit_verdict"]["status"] == "good", athlete["fit_verdict"]["message"]
    z = {name: (row["value"] - truth.parameters[name]) / row["standard_error"]
         for name, row in athlete["parameters"].items()
         if row["identifiable"] and name in truth.parameters}
    assert {"bar.stiffness_x", "bar.stiffness_y", "shoulder.stiffness_pd"} <= z.keys()
    assert max(abs(v) for v in z.values()) <= 3.0, (path.name, z)
    return athlete, z


def _fit_from_truth(path, truth, body_mass_kg):
    space = ParameterSpace.from_config(load_identification(), load_gymnast(),
                                       body_mass_kg=body_mass_kg)
    problem, _ = build_problem(path, space, body_mass_kg=body_mass_kg)
    start = np.r_[space.to_normalised(np.array([truth.parameters[n] for n in space.names])),
                  np.full(problem.dim - space.dim, 0.5)]
    x = polish_many(problem.residuals, start[None, :], problem.lower, problem.upper,
                    max_iterations=40, jacobian=problem.jacobian)[0].result.x
    return space, problem, x


@pytest.mark.slow
def test_the_soft_tissue_term_is_the_shift_a_real_slide_makes(tmp_path) -> None:
    spec = SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=4, gaps=0)
    markers, truth = synthesize(spec)
    path = tmp_path / "trial.c3d"
    write_c3d(path, markers, "soft tissue refit")
    body_mass = table_mass_kg(load_gymnast().segments)
    space, problem, x = _fit_from_truth(path, truth, body_mass)
    J = problem.jacobian(x[None, :])[1][0]
    noise = propagated_noise(problem, x, J)
    labels, moves = soft_tissue_displacements(problem.trial, problem.soft_tissue_mm)
    assert noise.soft_tissue_members == labels and len(labels) == 14  # 7 joint centres × x, y
    predicted = responses(noise.soft_tissue_changes, J)  # (14, dim) per standard uncertainty
    trial = problem.trial
    assert trial.markers.n_frames == markers.n_frames  # nothing trimmed: frames match the file
    columns = [markers.find(trial.markers.labels[i]) for i in chain_marker_indices(trial)]
    # (The bar stiffnesses' stated responses are first order in a valley the refit bends:
    # the acromions' slide moves trunk.com by 15 mm at a quarter of its uncertainty, and the
    # refit moves bar.stiffness_y by −0.5 times the stated response, bar.stiffness_x by −0.04:
    # their soft-tissue parts overstate, docs/identify.md "Soft tissue".)
    for name in ("shoulder.stiffness_ap", "shoulder.stiffness_pd", "thigh.com"):
        i = list(space.names).index(name)
        worst = int(np.argmax(np.abs(predicted[:, i])))
        slid = markers.positions.copy()
        slid[:, columns] += QUARTER * moves[worst]
        moved_path = tmp_path / f"slid_{worst}.c3d"
        write_c3d(moved_path, markers.with_positions(slid, "slid"), "soft tissue refit, slid")
        moved_problem, _ = build_problem(moved_path, space, body_mass_kg=body_mass)
        refit = polish_many(moved_problem.residuals, x[None, :], moved_problem.lower,
                            moved_problem.upper, max_iterations=40,
                            jacobian=moved_problem.jacobian)[0].result.x
        shift = refit[i] - x[i]
        # A shift well beyond where the polish stops, as stated to within 20 % (the slid
        # file runs the whole chain again: the filter's ends, the start state, the lengths).
        assert abs(shift) > 1e-3, (name, labels[worst], shift)
        assert QUARTER * predicted[worst, i] == pytest.approx(shift, rel=0.2), (
            name, labels[worst], QUARTER * predicted[worst, i], shift)


def _slid_on_the_skin(markers, truth, scale: float):
    """The markers of ``markers`` slid as the test's own artefact model says (not the term's
    form): along the thigh with the hip's driven angle for the trochanters (5 mm) and the knee
    markers (3 mm), along the trunk with the shoulder's flexion for the acromions (5 mm); each
    pattern the angle about its mean over half its range, plus a quadratic part."""
    points = truth.points  # (F, 10, 2) model plane; the synthetic lab has X = x, Z = y + bar

    def along(a: str, b: str) -> np.ndarray:
        d = points[:, POINT_NAMES.index(b)] - points[:, POINT_NAMES.index(a)]
        return d / np.linalg.norm(d, axis=1, keepdims=True)

    def pattern(angle: np.ndarray) -> np.ndarray:
        n = (angle - angle.mean()) / (0.5 * np.ptp(angle))
        return n + 0.3 * (n * n - np.mean(n * n))

    hip, flexion = truth.driven_seen[:, 6], truth.driven_seen[:, 4]
    slides = {"TROCHANTER": (along("hip", "knee"), 0.005 * pattern(hip)),
              "KNEE": (along("hip", "knee"), 0.003 * pattern(hip)),
              "ACROMION": (along("neck", "hip"), 0.005 * pattern(flexion))}
    positions = markers.positions.copy()
    for k, label in enumerate(markers.labels):
        for key, (direction, size) in slides.items():
            if key in label:
                positions[:, k, 0] += scale * size * direction[:, 0]
                positions[:, k, 2] += scale * size * direction[:, 1]
    return markers.with_positions(positions, "slid on the skin")


@pytest.mark.slow
def test_markers_sliding_on_the_skin_are_within_the_standard_errors(tmp_path) -> None:
    body_mass = table_mass_kg(load_gymnast().segments)
    z_all = []
    for seed in (2, 3):
        markers, truth = synthesize(SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=seed,
                                                  gaps=3))
        path = tmp_path / f"slid_{seed}.c3d"
        write_c3d(path, _slid_on_the_skin(markers, truth, 1.0), "markers slid on the skin")
        # The slide leaves ≈ 1.2 mm where noise alone leaves ≈ 0.5: the fit still "good".
        athlete, z = covered_estimates(path, tmp_path / f"out_{seed}", truth, body_mass)
        z_all += list(z.values())
        rows = {row["name"]: row for row in athlete["identifiability"]["parameters"]}
        ap = rows["shoulder.stiffness_ap"]
        error = abs(athlete["parameters"]["shoulder.stiffness_ap"]["value"]
                    - truth.parameters["shoulder.stiffness_ap"])
        # The slide moved the ap stiffness by more than the rest of its error allows, and
        # its own part says so.
        rest = np.sqrt(ap["standard_error"] ** 2 - ap["standard_error_soft_tissue"] ** 2)
        assert error > 3.0 * rest, (seed, error, rest)
        assert error <= 2.0 * ap["standard_error"], (seed, error, ap["standard_error"])
    assert len(z_all) >= 8
    assert np.mean(np.abs(z_all) <= 2.0) >= 0.9, z_all
