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
from bemore.trial import prepare_trial
from bemore.trial.c3d import write_c3d
from bemore.trial.markerset import POINT_NAMES
from bemore.trial.realisations import chain_marker_indices, soft_tissue_displacements
from bemore.trial.softtissue import soft_tissue_members
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
                      required: set[str], config: Path | None = None
                      ) -> tuple[dict, dict[str, float]]:
    """Identify the trial at ``path`` with the default search and polish (athlete.json in
    ``out``; ``config``: the identification file, None: the default): its athlete.json and the
    z of each identifiable estimate against ``truth`` (a synthetic trial's), once the fit is
    "good", the ``required`` parameters among them, every one within 3 standard errors."""
    run_identification(path, out, body_mass_kg=body_mass_kg, overrides=Overrides(seed=1),
                       config=config)
    athlete = json.loads((out / "athlete.json").read_text())
    assert athlete["fit_verdict"]["status"] == "good", athlete["fit_verdict"]["message"]
    z = {name: (row["value"] - truth.parameters[name]) / row["standard_error"]
         for name, row in athlete["parameters"].items()
         if row["identifiable"] and name in truth.parameters}
    assert required <= z.keys(), (path.name, z)
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
    for seed in (1, 2, 3, 4):
        markers, truth = synthesize(SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=seed,
                                                  gaps=3))
        path = tmp_path / f"slid_{seed}.c3d"
        write_c3d(path, _slid_on_the_skin(markers, truth, 1.0), "markers slid on the skin")
        # The slide leaves ≈ 1.2 mm where noise alone leaves ≈ 0.5: the fit still "good".
        athlete, z = covered_estimates(path, tmp_path / f"out_{seed}", truth, body_mass,
                                       {"shoulder.stiffness_ap"})
        z_all += list(z.values())
        rows = {row["name"]: row for row in athlete["identifiability"]["parameters"]}
        ap = rows["shoulder.stiffness_ap"]
        error = abs(athlete["parameters"]["shoulder.stiffness_ap"]["value"]
                    - truth.parameters["shoulder.stiffness_ap"])
        # The slide moved the ap stiffness by more than the rest of its error allows, and
        # its own part says so.
        rest = np.sqrt(ap["standard_error"] ** 2 - ap["standard_error_soft_tissue"] ** 2)
        assert error > 3.0 * rest, (seed, error, rest)
        # Not by much less either: the acromions slid 5 mm, 5/6 of the shoulder's 6 mm budget,
        # so the error, mostly that slide's, is of the size of its part (measured z 0.77-0.90 on
        # seeds 1-6; without the shoulder's members or at half the budget 1.2-1.75).
        assert 0.3 * ap["standard_error"] < error < 1.15 * ap["standard_error"], (
            seed, error, ap["standard_error"])
    assert len(z_all) >= 16
    assert np.mean(np.abs(z_all) <= 2.0) >= 0.9, z_all


def test_the_members_slide_the_markers_of_the_joint_they_sit_over(tmp_path) -> None:
    # Checked against angles and markers found here from the labels, not from the code's
    # recipes: the hip's members move the trochanters, and only them, by ± the budget at the
    # ends of the hip angle's range, along the plane's axes, in step with the angle between
    # the trunk and the thigh; the shoulder's move the acromions with the trunk-arm angle.
    markers, _ = synthesize(SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=1, gaps=0))
    path = tmp_path / "trial.c3d"
    write_c3d(path, markers, "soft tissue members")
    trial = prepare_trial(path)
    labels, moves = soft_tissue_displacements(trial, {"hip": 8.0, "shoulder": 6.0})
    assert labels == ("shoulder x", "shoulder y", "hip x", "hip y")
    names = [trial.markers.labels[i].split(":")[-1] for i in chain_marker_indices(trial)]
    filtered = trial.markers.positions[:, chain_marker_indices(trial)]

    def centre(*keys: str) -> np.ndarray:
        return filtered[:, [k for k, name in enumerate(names)
                            if any(key == name for key in keys)]].mean(axis=1)

    def angle(a: np.ndarray, joint: np.ndarray, b: np.ndarray) -> np.ndarray:
        u, v = a - joint, b - joint
        return np.arccos(np.sum(u * v, axis=1) / np.linalg.norm(u, axis=1)
                         / np.linalg.norm(v, axis=1))

    neck, hip = centre("C7", "STERNUM"), centre("R_TROCHANTER", "L_TROCHANTER")
    knee = centre("R_KNEE_LAT", "R_KNEE_MED", "L_KNEE_LAT", "L_KNEE_MED")
    elbow = centre("R_ELBOW", "L_ELBOW")
    for member, riders, budget_m, joint_angle in (
            (2, ("R_TROCHANTER", "L_TROCHANTER"), 0.008, angle(neck, hip, knee)),
            (0, ("R_ACROMION", "L_ACROMION"), 0.006, angle(hip, neck, elbow))):
        for axis in (0, 1):
            move = moves[member + axis]
            moved = [name for k, name in enumerate(names) if np.any(move[:, k] != 0.0)]
            assert sorted(moved) == sorted(riders), (labels[member + axis], moved)
            along = move[:, names.index(riders[0])] @ trial.plane_axes[axis]  # (F,) m
            assert np.allclose(move[:, names.index(riders[0])],
                               along[:, None] * trial.plane_axes[axis], atol=1e-15)
            assert max(along) == pytest.approx(budget_m) and min(along) == pytest.approx(
                -budget_m)
            assert abs(np.corrcoef(along, joint_angle)[0, 1]) > 0.999


def test_each_joint_centre_follows_its_own_joint() -> None:
    # The synthetic trials drive every joint with one time profile (their angles' patterns
    # are the same), so this is checked on points whose joints turn each their own way: the
    # hip's members follow the neck-hip-knee angle, the knee's the hip-knee-ankle angle, the
    # shoulder's the hip-neck-elbow angle, whatever the others do.
    t = np.linspace(0.0, 1.0, 201)
    names = POINT_NAMES
    points = np.zeros((t.size, len(names), 2))

    def place(name: str, origin: np.ndarray, length: float, heading: np.ndarray) -> None:
        points[:, names.index(name)] = origin + length * np.c_[np.cos(heading),
                                                                np.sin(heading)]

    trunk = np.pi / 2 + 0.3 * np.sin(2 * np.pi * t)  # hip → neck
    place("neck", 0.0, 0.5, trunk)
    place("knee", 0.0, 0.4, trunk + np.pi - 1.2 * t**2)  # the hip angle: 1.2 t² off straight
    place("ankle", points[:, names.index("knee")], 0.4,
          trunk + np.pi - 1.2 * t**2 + 0.8 * np.sin(3 * t))  # the knee: its own turn
    place("elbow", points[:, names.index("neck")], 0.3, trunk + 0.2 + 1.5 * t)  # the shoulder
    budget = {"hip": 8.0, "knee": 5.0, "shoulder": 6.0}
    labels, moves = soft_tissue_members(points, names, np.eye(len(names)), np.eye(3), budget)
    assert labels == ("shoulder x", "shoulder y", "hip x", "hip y", "knee x", "knee y")
    expected = {"hip": np.pi - 1.2 * t**2, "knee": np.pi - 0.8 * np.sin(3 * t),
                "shoulder": np.pi - 0.2 - 1.5 * t}  # the unsigned angles between the segments
    for k, label in enumerate(labels):
        point = label.split()[0]
        along = moves[k, :, names.index(point), int(label.endswith("y"))]  # m
        assert np.count_nonzero(moves[k]) == t.size  # one point, one axis
        pattern = expected[point]
        scaled = (pattern - pattern.min()) / np.ptp(pattern) * 2.0 - 1.0
        assert np.allclose(np.abs(along), 1e-3 * budget[point] * np.abs(scaled), atol=1e-12)
        assert abs(np.corrcoef(along, pattern)[0, 1]) > 1.0 - 1e-12, label
