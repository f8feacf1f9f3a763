"""The athlete profile: the example file loads to the default, bad files give one line."""

from __future__ import annotations

import json

import pytest

from bemore.errors import ConfigError
from bemore.paths import default_config
from bemore.profile import DEFAULT_PROFILE, load_profile


def test_example_profile_matches_the_default_limits():
    profile = load_profile(default_config("athlete.example.toml"))
    assert profile.shoulder_torque_limit_Nm == DEFAULT_PROFILE.shoulder_torque_limit_Nm == 70.0
    assert profile.shoulder_flexion_range_deg == DEFAULT_PROFILE.shoulder_flexion_range_deg
    assert profile.sex == "F"
    assert profile.segment_lengths_m["upper_arm"] == pytest.approx(0.290)
    data = json.loads(json.dumps(profile.to_dict()))
    assert data["shoulder_flexion_range_deg"] == [-10.0, 170.0]
    assert "segment_lengths_m" not in DEFAULT_PROFILE.to_dict()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("sex = 'X'", "sex"),
        ("shoulder_torque_limit_Nm = -3", "shoulder_torque_limit_Nm"),
        ("shoulder_flexion_range_deg = [170, -10]", "shoulder_flexion_range_deg"),
        ("torque = 3", "unknown key"),
    ],
)
def test_a_bad_profile_is_one_line_naming_file_and_key(tmp_path, text, expected):
    base = {
        "name": "'A'",
        "sex": "'F'",
        "body_mass_kg": "40",
        "stature_m": "1.5",
        "shoulder_torque_limit_Nm": "60",
        "shoulder_flexion_range_deg": "[-10, 170]",
    }
    key = text.split("=")[0].strip()
    base[key] = text.split("=", 1)[1].strip()
    path = tmp_path / "profile.toml"
    path.write_text("\n".join(f"{name} = {value}" for name, value in base.items()))
    with pytest.raises(ConfigError) as caught:
        load_profile(path)
    message = str(caught.value)
    assert "\n" not in message
    assert str(path) in message and expected in message
