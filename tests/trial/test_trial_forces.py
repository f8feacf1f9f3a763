"""The bar's force channels: the reader on the real laboratory file (38 analog channels at
2000 Hz), one line for a missing or saturated channel, and the synthetic trial's bar forces read
back through the whole trial chain."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.errors import DataError
from bemore.trial import prepare_trial
from bemore.trial.forces import ForceSettings, bar_forces, read_analogs
from bemore.trial.markerset import load_trial_settings
from bemore.trial.synthetic import SyntheticSpec, write_synthetic_trial


def _settings(use: str = "required", saturation: float = 5.0, **extra) -> ForceSettings:
    """Voltage.1 as a horizontal gauge, Voltage.3 as a vertical one read upside down."""
    return ForceSettings(use=use, channels=[
        dict(label="Voltage.1", axis="X", gain_n_per_unit=1000.0, saturation=saturation),
        dict(label="Voltage.3", axis="Z", gain_n_per_unit=1000.0, offset=0.01, sign=-1,
             saturation=saturation),
        *extra.get("more", []),
    ])


def test_the_lab_files_analog_channels_are_what_ezc3d_reports(real_c3d) -> None:
    import ezc3d

    analogs = read_analogs(real_c3d)
    reference = ezc3d.c3d(str(real_c3d))
    raw = np.asarray(reference["data"]["analogs"])[0]
    assert analogs.samples.shape == (38, 11600) == raw.shape
    assert analogs.rate_hz == 2000.0 and analogs.per_frame == 20  # markers at 100 Hz
    assert analogs.labels[0] == "Voltage.1" and analogs.labels[6] == "Delt_ant.EMG1"
    assert analogs.units[0] == "V"
    np.testing.assert_array_equal(analogs.samples, raw)
    assert analogs.samples[0, 0] == pytest.approx(-0.02205157, abs=1e-8)


def test_channels_are_scaled_signed_offset_and_sampled_at_the_marker_frames(real_c3d) -> None:
    analogs = read_analogs(real_c3d)
    forces = bar_forces(analogs, _settings(), 580)
    raw = analogs.samples
    assert forces.force_lab.shape == (580, 3)
    assert np.all(forces.force_lab[:, 1] == 0.0)  # no channel along Y
    # A low-pass keeps the mean: the frames' mean force is the scaled raw mean.
    assert forces.force_lab[:, 0].mean() == pytest.approx(1000.0 * raw[0].mean(), abs=0.05)
    assert forces.force_lab[:, 2].mean() == pytest.approx(-1000.0 * (raw[2].mean() - 0.01),
                                                          abs=0.05)
    # Sampled at each frame's first analog sample, within the low-pass's smoothing.
    inside = slice(50, 530)
    picked = 1000.0 * raw[0, ::20][inside]
    assert np.sqrt(np.mean((forces.force_lab[inside, 0] - picked) ** 2)) < 3.0
    assert np.isnan(forces.noise_n[1]) and 0.0 < forces.noise_n[0] < 20.0
    assert forces.t[1] == pytest.approx(0.01)


def test_a_saturated_channel_is_one_line(real_c3d) -> None:
    analogs = read_analogs(real_c3d)
    peak = np.abs(analogs.samples[2]).max()  # Voltage.3: 0.3204 V
    with pytest.raises(DataError) as error:
        bar_forces(analogs, _settings(saturation=0.3), 580)
    message = str(error.value)
    assert "Voltage.3 saturated" in message and "\n" not in message
    assert peak >= 0.3 > np.abs(analogs.samples[0]).max()  # Voltage.1 peaks at 0.135 V


def test_a_missing_channel_is_one_line(real_c3d) -> None:
    analogs = read_analogs(real_c3d)
    extra = [dict(label="BarFY", axis="Y", saturation=10.0)]
    for use in ("required", "auto"):  # "auto" with some channels only is refused too
        with pytest.raises(DataError) as error:
            bar_forces(analogs, _settings(use=use, more=extra), 580)
        assert "BarFY missing" in str(error.value) and "\n" not in str(error.value)
    none_there = ForceSettings(use="auto", channels=[dict(label="BarFX", axis="X",
                                                         saturation=1.0)])
    assert bar_forces(analogs, none_there, 580) is None
    required = ForceSettings(use="required", channels=[dict(label="BarFX", axis="X",
                                                            saturation=1.0)])
    with pytest.raises(DataError, match="BarFX missing"):
        bar_forces(analogs, required, 580)


def test_a_trc_file_with_forces_required_is_refused(real_trc, tmp_path) -> None:
    from bemore.trial.pipeline import read_bar_forces

    settings = load_trial_settings()
    assert read_bar_forces(real_trc, settings, 10) is None  # "auto": no forces
    required = settings.model_copy(update={"forces": settings.forces.model_copy(
        update={"use": "required"})})
    with pytest.raises(DataError, match="no analog channels"):
        read_bar_forces(real_trc, required, 10)


@pytest.fixture(scope="module")
def forced_trial(tmp_path_factory):
    spec = SyntheticSpec(duration_s=1.6, bar_forces=True, force_noise_pct=2.0, seed=3)
    path, _, truth = write_synthetic_trial(spec, tmp_path_factory.mktemp("f") / "forces.c3d")
    return path, truth, prepare_trial(path)


def test_the_synthetic_force_is_the_bar_spring_damper_force(forced_trial) -> None:
    _, truth, _ = forced_trial
    p = truth.parameters
    rate = 1.0 / (truth.t[1] - truth.t[0])
    q = truth.free_q[:, :2]
    velocity = np.gradient(q, axis=0) * rate  # 100 Hz central differences of the truth
    expected = np.stack([
        -p["bar.stiffness_x"] * (q[:, 0] - p["bar.rest_x"]) - p["bar.damping_x"] * velocity[:, 0],
        -p["bar.stiffness_y"] * (q[:, 1] - p["bar.rest_y"]) - p["bar.damping_y"] * velocity[:, 1],
    ], axis=1)
    inside = slice(2, -2)
    error = np.abs(truth.bar_force[inside] - expected[inside])
    assert np.max(error) < 0.01 * np.max(np.abs(expected)) + 2.0
    assert np.max(np.abs(truth.bar_force[:, 1])) > 1000.0  # the circle loads the bar


def test_the_synthetic_force_is_read_back_through_the_trial_chain(forced_trial) -> None:
    _, truth, trial = forced_trial
    assert trial.bar_force_rate_hz == 1000.0
    frames = trial.bar_force[:: round(trial.rate_hz / 100.0)]
    assert frames.shape == truth.bar_force.shape
    sigma = 0.02 * np.sqrt(np.mean(truth.bar_force**2, axis=0))  # 2 % of each axis' RMS
    # The noise is estimated from the raw channel within 15 %.
    np.testing.assert_allclose(trial.bar_force_noise_n, sigma, rtol=0.15)
    # After the 20 Hz low-pass the force follows the truth well within one raw σ.
    rms = np.sqrt(np.mean((frames - truth.bar_force) ** 2, axis=0))
    assert np.all(rms < 0.35 * sigma), (rms, sigma)
    assert trial.summary()["bar_force"]["analog_rate_hz"] == 1000.0


def test_synth_cli_writes_bar_forces_and_inspect_shows_them(tmp_path) -> None:
    runner = CliRunner()
    out = tmp_path / "c.c3d"
    result = runner.invoke(cli, ["trial", "synth", str(out), "--duration", "1.6", "--seed", "3",
                                 "--bar-forces", "--force-noise-pct", "2"])
    assert result.exit_code == 0, result.output
    assert "BarFX, BarFZ at 1000 Hz, 2 % noise" in result.output
    analogs = read_analogs(out)
    assert analogs.labels == ("BarFX", "BarFZ") and analogs.per_frame == 10
    result = runner.invoke(cli, ["trial", "inspect", str(out), "--out", str(tmp_path / "i"),
                                 "--no-plot"])
    assert result.exit_code == 0, result.output
    line = next(line for line in result.output.splitlines() if line.startswith("bar force"))
    assert "at 1000 Hz" in line
    bad = runner.invoke(cli, ["trial", "synth", str(tmp_path / "d.c3d"), "--bar-forces",
                              "--analog-per-frame", "3"])
    assert bad.exit_code == 2 and "must divide 1000 Hz" in bad.output
