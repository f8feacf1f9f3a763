"""Issue 4's round trip: synthetic trial → C3D → reader → pipeline, against the simulated truth.

Criterion: joint centres within the added noise of the simulated ones, driven coordinates within
0.5° (lengths within 2 mm) after filtering. Checked on engine-simulated circles (`bemore trial
synth`, seeds 0-2) and on the docs-kinematics circle (seeds 7-9). With 1 mm marker noise the
driven coordinates hold it from 0.1 s to the end − 0.1 s but not at the wrist's first/last
frames; with 0.5 mm at every frame. The numbers (and those of held-out seeds), and why the
ends cannot be held to 0.5° with 1 mm noise, are in docs/trials.md ("Accuracy").
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import kinematic_trial

from bemore.trial.c3d import write_c3d
from bemore.trial.coordinates import DRIVEN_NAMES, driven_from_points
from bemore.trial.filtering import low_pass
from bemore.trial.markerset import joint_centres_3d, load_markerset, load_trial_settings
from bemore.trial.pipeline import fill_markers, find_plane, low_pass_markers, prepare_trial
from bemore.trial.synthetic import SyntheticSpec, synthesize

DEG = np.pi / 180
NOISE_M = 1e-3
ANGLES = [i for i, name in enumerate(DRIVEN_NAMES) if not name.endswith("_length")]
LENGTHS = [i for i, name in enumerate(DRIVEN_NAMES) if name.endswith("_length")]
WRIST = DRIVEN_NAMES.index("wrist")
END_S = 0.1  # the first and last 0.1 s: one-sided data (see test_ends_are_noise_limited)


def _settings(initial_bar, driven_filter: bool):
    settings = load_trial_settings()
    plane = settings.plane.model_copy(update={"initial_bar_displacement_m": tuple(initial_bar)})
    driven = settings.driven_filter.model_copy(update={"enabled": driven_filter})
    return settings.model_copy(update={"plane": plane, "driven_filter": driven})


def _round_trip(tmp_path, kind: str, seed: int, driven_filter: bool = True,
                noise_m: float = NOISE_M):
    """(t, errors of the points (F, 10, 2) m, errors of the driven coordinates (F, 9))."""
    if kind == "engine":
        spec = SyntheticSpec(duration_s=1.6, seed=seed, noise_mm=noise_m * 1e3)
        markers, truth = synthesize(spec)
        t, points, driven, bar0 = truth.t, truth.points, truth.driven_seen, truth.free_q0[:2]
    else:
        markers, t, free, driven, points = kinematic_trial(noise_m=noise_m, seed=seed)
        bar0 = free[0, :2]
    path = tmp_path / f"{kind}{seed}.c3d"
    write_c3d(path, markers, "synthetic round-trip trial")
    trial = prepare_trial(path, settings=_settings(bar0, driven_filter))
    frames = np.round(t * 1000).astype(int)
    return t, trial.points[frames] - points, trial.driven_q[frames] - driven


TRIALS = [("engine", 0), ("engine", 1), ("engine", 2), ("kinematic", 7), ("kinematic", 8),
          ("kinematic", 9)]


def _inside(t: np.ndarray) -> np.ndarray:
    """Frames from 0.1 s to the end − 0.1 s (bool mask)."""
    return (t >= END_S - 1e-9) & (t <= t[-1] - END_S + 1e-9)


def test_the_driven_filter_is_on_by_default():
    settings = load_trial_settings()
    assert settings.driven_filter.enabled
    cutoffs = settings.driven_filter.cutoff_hz
    assert (cutoffs.wrist, cutoffs.forearm_length, cutoffs.upper_arm_length) == (3.0, 4.0, 4.0)
    assert cutoffs.shoulder_flexion == cutoffs.hip == settings.filter.cutoff_hz == 6.0


@pytest.mark.parametrize(("kind", "seed"), TRIALS)
def test_round_trip_meets_the_criterion_inside_the_trial(tmp_path, kind, seed):
    """Default settings, 1 mm noise: joint centres within the noise (RMS per coordinate,
    0.56 mm at most; worst frame within 3.5 mm: even without noise the 6 Hz filter lags the
    feet by 2.8 mm at their fastest); every driven coordinate within 0.5° / 2 mm as an RMS
    over the whole trial, ends included, as the joint centres are compared with the noise
    (measured: 0.19° and 0.35 mm at most on 20 held-out trials); every driven angle within
    0.5° at EVERY frame from 0.1 s to the end − 0.1 s (measured: 0.47° at worst, the elbow of
    kinematic seed 7), every length within 2 mm at EVERY frame, ends included (measured
    0.93 mm), the ends' angles within 0.75° (measured 0.62°, the wrist: per frame, the
    first and last 0.1 s do not hold 0.5° at this noise, see test_ends_are_noise_limited)."""
    t, point_error, q_error = _round_trip(tmp_path, kind, seed)
    assert np.sqrt(np.mean(point_error**2)) < NOISE_M
    rms = np.sqrt(np.mean(q_error**2, axis=0))
    assert rms[ANGLES].max() < 0.5 * DEG
    assert rms[LENGTHS].max() < 2e-3
    assert np.abs(point_error).max() < 3.5e-3
    angles = np.abs(q_error[:, ANGLES])
    assert angles[_inside(t)].max() < 0.5 * DEG
    assert angles[~_inside(t)].max() < 0.75 * DEG
    assert np.abs(q_error[:, LENGTHS]).max() < 2e-3


@pytest.mark.parametrize(("kind", "seed"), TRIALS)
def test_round_trip_meets_the_criterion_at_every_frame_with_half_a_millimetre(tmp_path, kind,
                                                                               seed):
    """Default settings, 0.5 mm noise: every driven coordinate at every frame, ends included:
    angles within 0.5° (measured 0.33° at worst), lengths within 2 mm (0.46 mm). The joint
    centres are not asserted here: at this noise their RMS (0.47-0.49 mm on these seeds,
    0.51 mm on a held-out one) is the 6 Hz filter's lag of the feet and of the bar's
    vibration, not the noise (docs/trials.md)."""
    _t, _point_error, q_error = _round_trip(tmp_path, kind, seed, noise_m=0.5e-3)
    assert np.abs(q_error[:, ANGLES]).max() < 0.5 * DEG
    assert np.abs(q_error[:, LENGTHS]).max() < 2e-3


@pytest.mark.parametrize(("kind", "seed"), TRIALS)
def test_round_trip_without_the_driven_filter(tmp_path, kind, seed):
    """``[driven_filter] enabled = false`` (the driven coordinates from the 6 Hz joint
    centres, one low-pass fewer per coordinate), 1 mm noise: every angle but the wrist within
    0.5° at every frame inside the trial (0.46°); the wrist 0.24° RMS at most (0.17° at most
    with the filter on) and 0.58° at its worst frame; lengths within 2 mm (1.44 mm, 0.93 mm with
    it on)."""
    t, point_error, q_error = _round_trip(tmp_path, kind, seed, driven_filter=False)
    assert np.sqrt(np.mean(point_error**2)) < NOISE_M
    others = [i for i in ANGLES if i != WRIST]
    assert np.abs(q_error[_inside(t)][:, others]).max() < 0.5 * DEG
    assert np.sqrt(np.mean(q_error[:, WRIST] ** 2)) < 0.3 * DEG
    assert np.abs(q_error[:, WRIST]).max() < 1.0 * DEG
    assert np.abs(q_error[:, LENGTHS]).max() < 2e-3


def test_the_wrist_angle_carries_more_than_half_a_degree_of_noise_per_frame():
    """Why the wrist needs more filtering than the others: 1 mm per marker coordinate gives the
    4-marker wrist centre 0.5 mm and the 12-marker bar 0.29 mm; on the 75 mm hand (and the
    240 mm forearm) that is 0.57° per frame before filtering, above the 0.5° criterion."""
    markers, _t, _free, driven, _points = kinematic_trial(noise_m=NOISE_M, seed=3)
    markerset, settings = load_markerset(), load_trial_settings()
    filled, indices = fill_markers(markers, markerset, settings)
    plane = find_plane(low_pass_markers(filled, indices, settings), markerset, settings)
    raw = driven_from_points(plane.project(joint_centres_3d(filled, markerset)))
    noise = raw[:, WRIST] - driven[:, WRIST]
    assert 0.5 * DEG < noise.std() < 0.65 * DEG


def test_ends_are_noise_limited():
    """A zero-lag filter's end value is a one-sided fit: on white noise (σ = 1, 100 Hz, 6 Hz,
    4000 draws) the first and last samples keep 0.67σ with the 0.15 s end fits, twice the
    0.33σ inside; a 0.2 s fit gives 0.61σ. So with the wrist's 0.57° per frame at 6 Hz the
    ends keep ≈ 0.38° (1σ) while the inside keeps 0.19°: 0.5° at an end is a 1.3σ event, on
    about one trial end in five, whatever the padding (a longer end fit needs the motion to
    stay quadratic over it)."""
    noise = np.random.default_rng(0).normal(0.0, 1.0, (151, 4000))
    filtered = low_pass(noise, 100.0, 6.0, 4, edge_cycles=0.9)
    inside = filtered[75].std()
    assert inside == pytest.approx(0.33, abs=0.02)
    for end in (filtered[0], filtered[-1]):
        assert end.std() == pytest.approx(0.67, abs=0.03)
    longer = low_pass(noise, 100.0, 6.0, 4, edge_cycles=1.2)
    assert longer[0].std() < 0.63


def test_filter_keeps_a_quadratic_including_its_ends():
    """The end padding continues a quadratic exactly (60 µm over a 1.5 s parabola of amplitude
    1: the IIR filter's start-up inside the padding)."""
    t = np.arange(151) / 100.0
    x = 0.3 + 0.8 * t - 1.1 * t**2
    assert np.abs(low_pass(x, 100.0, 6.0, 4) - x).max() < 1e-4
