"""The acromion side (docs/trials.md, "Acromion side"): the markers' check says which side of the
shoulder spring-dampers the acromions ride on, the trunk side's arm end comes from the elbow and
the arm-fixed markers, and without such a marker the springs are unobservable.

Trials come from the synthetic generator, whose acromions ride on either side and whose upper-arm
markers (TRICEPS) ride on the arm itself; the springs deflect by several centimetres in a clear
hip circle (up to 77 mm proximo-distally on these trials), so the wrong side is far off.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.paths import default_config
from bemore.trial import prepare_trial
from bemore.trial.c3d import write_c3d
from bemore.trial.coordinates import DRIVEN_NAMES, arm_end
from bemore.trial.filtering import low_pass
from bemore.trial.markers import Markers
from bemore.trial.markerset import POINT_NAMES, load_markerset
from bemore.trial.noise import NOISE_CEILING_M
from bemore.trial.synthetic import SyntheticSpec, synthesize, write_synthetic_trial


def declared(side: str, arm_markers: list[str] | None = None):
    """The bundled marker set with ``[conventions] acromion_side = side``."""
    markerset = load_markerset()
    update = {"acromion_side": side}
    if arm_markers is not None:
        update["arm_markers"] = arm_markers
    return markerset.model_copy(update={"conventions": markerset.conventions.model_copy(
        update=update)})


@pytest.fixture(scope="module")
def trials(tmp_path_factory) -> dict[tuple[str, int], tuple[Path, object]]:
    """(acromion side, noise seed) → (C3D path, truth), 1 mm of noise."""
    folder = tmp_path_factory.mktemp("acromion")
    made = {}
    for side in ("arm", "trunk"):
        for seed in (1, 2):
            made[side, seed] = write_synthetic_trial(
                SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=seed, acromion_side=side),
                folder / f"{side}{seed}.c3d")[::2]
    return made


@pytest.mark.parametrize("side", ["arm", "trunk"])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_check_finds_the_side_the_acromions_ride_on(trials, side, seed) -> None:
    path, _ = trials[side, seed]
    other = "trunk" if side == "arm" else "arm"
    for claimed in (side, other):
        check = prepare_trial(path, declared(claimed)).acromion_check
        assert check.supported == side, check.message
        assert check.contradicts is (claimed != side)
        # Measured: the right side's spread 0.4-1.2 mm, the wrong one's 35-37 mm, limit 4.2 mm.
        right = check.arm_spread_mm if side == "arm" else check.trunk_spread_mm
        wrong = check.trunk_spread_mm if side == "arm" else check.arm_spread_mm
        assert right < 0.5 * check.limit_mm and wrong > 5 * check.limit_mm
        assert 3.5 < check.limit_mm < 5.5  # 4 × the estimated marker noise (1 mm added)


@pytest.mark.parametrize("side", ["arm", "trunk"])
def test_markers_low_passed_before_export_still_show_their_side(side, tmp_path) -> None:
    # 1 mm of noise low-passed at 8 Hz by the "lab": the noise estimated from the recording is
    # a lower bound (0.18-0.24 mm), whose 4 × made the arm side's 0.9-1.1 mm spread read
    # "neither" (seeds 1-3). The stated 2 mm ceiling's limit tells the sides apart.
    markers, _ = synthesize(SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=1,
                                          acromion_side=side, gaps=0))
    smooth = markers.with_positions(low_pass(markers.positions, markers.rate_hz, 8.0, 4),
                                    "low-passed at 8 Hz")
    path = tmp_path / "smooth.c3d"
    write_c3d(path, smooth, "exported low-passed")
    trial = prepare_trial(path, declared(side))
    assert trial.marker_noise.lower_bound and trial.marker_noise_m < 0.5e-3
    check = trial.acromion_check
    assert check.supported == side, check.message
    assert check.limit_mm == pytest.approx(4 * NOISE_CEILING_M * 1e3)
    assert "lower bound" in check.message


def test_the_trunk_sides_arm_end_is_the_arm_end_up_to_the_springs_median_deflection(
        trials) -> None:
    path, truth = trials["trunk", 1]
    trial = prepare_trial(path, declared("trunk"))
    assert trial.arm_end is not None and trial.shoulder_springs_observable
    frames = np.round(truth.t * trial.rate_hz).astype(int)
    origin = truth.free_q0[:2]  # the prepared trial's origin: the bar at its first frame
    elbow = truth.points[:, POINT_NAMES.index("elbow")] - origin
    end = arm_end(truth.points, truth.free_q, truth.driven_q) - origin
    error = trial.points[frames, POINT_NAMES.index("shoulder")] - end
    axis = (end - elbow) / np.linalg.norm(end - elbow, axis=1)[:, None]
    along = np.sum(error * axis, axis=1)
    across = axis[:, 0] * error[:, 1] - axis[:, 1] * error[:, 0]
    # The recipe is calibrated at the springs' median deflection (ap across, pd along; here
    # -4.3 and -0.6 mm): that constant is its bias, fitted as the springs' rest by identify.
    # Measured: along -1.6 ± 1.0 mm, across -5.4 ± 0.4 mm.
    assert np.mean(along) == pytest.approx(np.median(truth.free_q[:, 4]), abs=2e-3)
    assert np.mean(across) == pytest.approx(np.median(truth.free_q[:, 3]), abs=2e-3)
    assert np.std(along) < 1.5e-3 and np.std(across) < 1.5e-3
    # The trunk side's shoulder point itself would count the deflection in the arm (77 mm).
    naive = prepare_trial(path, declared("arm"))
    length = DRIVEN_NAMES.index("upper_arm_length")
    assert np.ptp(naive.driven_q[:, length]) > 0.06
    assert np.ptp(trial.driven_q[:, length]) < 0.02  # the profile's own 15 mm


def test_without_an_arm_marker_the_springs_are_unobservable(trials, tmp_path) -> None:
    path, _ = trials["trunk", 1]
    trial = prepare_trial(path, declared("trunk", arm_markers=[]))
    assert not trial.shoulder_springs_observable and trial.arm_end is None
    assert trial.acromion_check.arm_spread_mm is None
    assert trial.acromion_check.supported == "trunk"
    assert trial.conventions()["shoulder_springs_observable"] is False
    # The same when the marker set names arm markers that the file does not hold.
    markers, _ = synthesize(SyntheticSpec(duration_s=1.6, noise_mm=1.0, seed=1,
                                          acromion_side="trunk"))
    keep = [k for k, label in enumerate(markers.labels) if "TRICEPS" not in label]
    bare = tmp_path / "no_arm_markers.c3d"
    write_c3d(bare, Markers(markers.t, markers.positions[:, keep],
                            tuple(markers.labels[k] for k in keep), markers.rate_hz,
                            markers.source, markers.unit_in_file, markers.notes), "test")
    assert not prepare_trial(bare, declared("trunk")).shoulder_springs_observable


def test_inspect_prints_the_check_and_the_arm_end(trials, tmp_path) -> None:
    path, _ = trials["trunk", 2]
    markerset = tmp_path / "markerset.toml"
    markerset.write_text(default_config("markerset.toml").read_text()
                         .replace('acromion_side = "arm"', 'acromion_side = "trunk"'))
    result = CliRunner().invoke(cli, ["trial", "inspect", str(path), "--markerset-config",
                                      str(markerset)])
    assert result.exit_code == 0, result.output
    assert "acromion side: the markers support trunk" in result.output
    assert "arm end from the elbow and R_TRICEPS, L_TRICEPS" in result.output
    contradicted = CliRunner().invoke(cli, ["trial", "inspect", str(path)])
    assert "declared arm: CONTRADICTED" in contradicted.output


def test_the_generators_arm_markers_ride_on_the_arm_on_either_side() -> None:
    # Noise-free: the TRICEPS centre sits at the same place in the frame elbow → arm end, its
    # distance along the arm a constant share of the arm's apparent length, whichever side the
    # acromions ride on.
    for side in ("arm", "trunk"):
        spec = SyntheticSpec(duration_s=1.6, noise_mm=0.0, gaps=0, acromion_side=side)
        markers, truth = synthesize(spec)
        rows = [k for k, label in enumerate(markers.labels) if label.endswith("TRICEPS")]
        lab = np.mean(markers.positions[:, rows], axis=1)
        centre = np.stack([lab[:, 0], lab[:, 2] - spec.bar_height_m], axis=-1)  # model plane
        elbow = truth.points[:, POINT_NAMES.index("elbow")]
        d = arm_end(truth.points, truth.free_q, truth.driven_q) - elbow
        s = centre - elbow
        length = np.linalg.norm(d, axis=1)
        along = np.sum(s * d, axis=1) / length**2
        across = (d[:, 0] * s[:, 1] - d[:, 1] * s[:, 0]) / length
        assert np.ptp(along) < 1e-9 and np.ptp(across) < 1e-9, side
        assert np.ptp(length) > 0.01  # the apparent length does change (the profile's 15 mm)
        acromion = truth.points[:, POINT_NAMES.index("shoulder")] - elbow
        moved = np.max(np.linalg.norm(acromion - d, axis=1))
        assert (moved < 1e-9) if side == "arm" else (moved > 0.05), side


@pytest.mark.parametrize(("scale", "body_mass", "neck"), [(0.9, 35.0, 0.03), (1.1, 60.0, 0.07)])
def test_the_generator_makes_other_bodies_and_necks(scale, body_mass, neck, tmp_path) -> None:
    from bemore.model.body import body_parameters
    from bemore.settings import load_gymnast

    table = load_gymnast().segments
    lengths = {name: scale * row.length_m for name, row in table.items()}
    lengths["trunk.neck_to_hip"] = scale * table["trunk"].length_m + neck
    parameters = {**body_parameters(table, body_mass, lengths), "neck.offset": neck}
    starts = {"forearm_length": scale * 0.206, "upper_arm_length": scale * 0.290}
    path, _, truth = write_synthetic_trial(
        SyntheticSpec(duration_s=1.7, parameters=parameters, starts=starts, noise_mm=1.0,
                      seed=3, acromion_side="trunk"), tmp_path / "body.c3d")
    assert truth.parameters["neck.offset"] == neck
    others = [f"{name}.mass" for name in table if name not in ("trunk", "thigh")]
    assert sum(truth.parameters[name] for name in others) + truth.parameters[
        "trunk_thighs.mass"] == pytest.approx(body_mass, rel=1e-9)
    trial = prepare_trial(path, declared("trunk"))
    for name in ("trunk.neck_to_hip", "thigh", "shank", "head"):
        key = name if "." in name else f"{name}.length"
        assert trial.segment_lengths_m[name] == pytest.approx(truth.parameters[key], abs=1e-3)
    assert trial.acromion_check.supported == "trunk"


def test_the_arm_ends_error_does_not_depend_on_the_neck() -> None:
    # Noise-free trunk-side trials, the neck 3 or 7 cm beyond the shoulder joint, nothing else
    # changed: the recipe (calibrated on the acromions, as the chain does) against the
    # generator's arm end, in the arm's frame. Beyond its constant bias (the springs' median
    # deflection, fitted as their rest) its error is the same for both necks: 0.80 mm RMS,
    # 1.14 mm at most, all along the arm and following the arm's apparent length. The recipe
    # keeps the arm end's offset across the elbow–marker line constant, while the generator's
    # TRICEPS keep their depth across the ARM (40 mm) constant as the arm shortens: the line's
    # angle to the arm changes with the length. The neck never enters the arm end.
    from bemore.trial.acromion import calibrate_arm_end
    from bemore.trial.markerplacement import model_marker_positions

    varying = {}
    for neck in (0.03, 0.07):
        spec = SyntheticSpec(duration_s=1.6, parameters={"neck.offset": neck}, noise_mm=0.0,
                             gaps=0, acromion_side="trunk")
        _, truth = synthesize(spec)
        points = truth.points
        end = arm_end(points, truth.free_q, truth.driven_q)
        labels, positions = model_marker_positions(points, end)
        rows = [labels.index("R_TRICEPS"), labels.index("L_TRICEPS")]
        markers = np.mean(positions[:, rows, :2], axis=1)
        elbow = points[:, POINT_NAMES.index("elbow")]
        acromion = points[:, POINT_NAMES.index("shoulder")]
        error = calibrate_arm_end(elbow, markers, acromion).place(elbow, markers) - end
        length = np.linalg.norm(end - elbow, axis=1)
        axis = (end - elbow) / length[:, None]
        along = np.sum(error * axis, axis=1)
        across = axis[:, 0] * error[:, 1] - axis[:, 1] * error[:, 0]
        varying[neck] = np.hypot(along - along.mean(), across - across.mean())
        assert np.std(across) < 0.2e-3 < 0.5e-3 < np.std(along) < 1e-3, neck
        assert abs(np.corrcoef(along, length)[0, 1]) > 0.99, neck
    assert np.max(np.abs(varying[0.03] - varying[0.07])) < 0.05e-3
