"""The marker set lives in configs/markerset.toml: a lab with other labels edits the file."""

from __future__ import annotations

import pytest

from bemore.errors import ConfigError, DataError
from bemore.paths import default_config
from bemore.trial.markers import Markers
from bemore.trial.markerset import (
    JOINT_CENTRE_NAMES,
    POINT_NAMES,
    load_markerset,
    load_trial_settings,
)
from bemore.trial.pipeline import prepare_trial


def test_bundled_marker_set_matches_the_spec():
    markerset = load_markerset()
    assert markerset.joint_centres["wrist"] == ["R_RADIUS", "R_ULNA", "L_RADIUS", "L_ULNA"]
    assert markerset.joint_centres["neck"] == ["C7", "STERNUM"]
    assert len(markerset.plane.bar_markers) == 12
    assert len(markerset.required_markers()) == 37
    assert set(JOINT_CENTRE_NAMES) < set(POINT_NAMES)


def test_bundled_trial_settings():
    settings = load_trial_settings()
    assert (settings.filter.cutoff_hz, settings.filter.order) == (6.0, 4)
    assert settings.gaps.max_gap_s == 0.1 and settings.resample.rate_hz == 1000.0


def test_renamed_label_through_the_config(write_trial, tmp_path):
    def rename(markers):
        labels = tuple("Gymnast:CV7" if label == "Gymnast:C7" else label
                       for label in markers.labels)
        return Markers(markers.t, markers.positions, labels, markers.rate_hz, markers.source)

    path, *_ = write_trial(edit=rename)
    text = default_config("markerset.toml").read_text()
    renamed = tmp_path / "markerset.toml"
    renamed.write_text(text.replace("[labels]\n", '[labels]\nC7 = "CV7"\n'))
    trial = prepare_trial(path, markerset=renamed)
    assert trial.joint_centres.shape == (2001, 7, 2)
    with pytest.raises(DataError, match=r"required marker\(s\) missing from the file: C7$"):
        prepare_trial(path)


def test_bad_marker_set_names_file_and_key(tmp_path):
    text = default_config("markerset.toml").read_text()
    bad = tmp_path / "markerset.toml"
    bad.write_text(text.replace('head_top = ["HEAD_TOP"]', 'head = ["HEAD_TOP"]'))
    with pytest.raises(ConfigError) as error:
        load_markerset(bad)
    assert str(error.value) == f"{bad}: joint_centres: missing head_top"


def test_bad_trial_setting_names_file_key_and_range(tmp_path):
    bad = tmp_path / "trial.toml"
    bad.write_text(default_config("trial.toml").read_text().replace("order = 4", "order = 12"))
    with pytest.raises(ConfigError) as error:
        load_trial_settings(bad)
    assert str(error.value) == f"{bad}: [filter] order = 12: must be less than or equal to 8"


def test_driven_filter_settings_name_the_key(tmp_path):
    """[driven_filter.cutoff_hz] only takes the nine driven coordinates, each a positive Hz."""
    text = default_config("trial.toml").read_text()
    bad = tmp_path / "trial.toml"
    bad.write_text(text.replace("wrist = 3.0", "wrsit = 3.0"))
    with pytest.raises(ConfigError) as error:
        load_trial_settings(bad)
    assert str(error.value).startswith(f"{bad}: [driven_filter.cutoff_hz] wrsit: unknown key")
    bad.write_text(text.replace("wrist = 3.0", "wrist = -3.0"))
    with pytest.raises(ConfigError) as error:
        load_trial_settings(bad)
    assert str(error.value) == (f"{bad}: [driven_filter.cutoff_hz] wrist = -3.0: "
                                "must be greater than 0")


def test_driven_cutoff_above_nyquist_names_the_coordinate(write_trial, tmp_path):
    path, *_ = write_trial()
    text = default_config("trial.toml").read_text()
    bad = tmp_path / "trial.toml"
    assert "knee = 6.0" in text
    bad.write_text(text.replace("knee = 6.0", "knee = 60.0"))
    with pytest.raises(DataError) as error:
        prepare_trial(path, settings=bad)
    assert str(error.value) == (f"{path}: filter cutoff 60 Hz must be below the Nyquist frequency "
                                "50 Hz ([driven_filter.cutoff_hz] knee)")
