"""Reading the identified parameters from athlete.json, or the seed's defaults."""

from __future__ import annotations

import json

import pytest

from bemore.errors import DataError
from bemore.settings import load_identification
from bemore.synthesis.athlete import default_parameters, load_athlete

IDENTIFICATION = load_identification()


def _write(tmp_path, parameters) -> str:
    path = tmp_path / "athlete.json"
    path.write_text(json.dumps({"parameters": parameters}))
    return path


def _complete() -> dict:
    return {
        item.name: {
            "value": item.seed_value * 1.1,
            "unit": item.unit,
            "lower": item.lower,
            "upper": item.upper,
        }
        for item in IDENTIFICATION.parameters
    }


def test_defaults_are_the_seed_values() -> None:
    athlete = default_parameters(IDENTIFICATION)
    assert athlete.source == "default"
    assert athlete.values["bar.stiffness_x"] == 15326.0
    assert athlete.values["trunk.com"] == 0.194
    assert len(athlete.values) == 12


def test_athlete_file_is_read(tmp_path) -> None:
    athlete = load_athlete(_write(tmp_path, _complete()), IDENTIFICATION)
    assert athlete.values["bar.mass"] == pytest.approx(0.675 * 1.1)
    assert athlete.source.endswith("athlete.json")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.pop("shoulder.damping_pd"), r"parameters\.shoulder\.damping_pd: missing"),
        (lambda p: p["bar.mass"].update(value="heavy"), r"bar\.mass\.value = 'heavy'"),
        (lambda p: p["bar.mass"].update(value=float("nan")), r"bar\.mass\.value = nan"),
        (lambda p: p["trunk.mass"].update(unit="g"), r"trunk\.mass\.unit = 'g': expected 'kg'"),
    ],
)
def test_bad_athlete_file_is_one_clear_error(tmp_path, change, message) -> None:
    parameters = _complete()
    change(parameters)
    with pytest.raises(DataError, match=message):
        load_athlete(_write(tmp_path, parameters), IDENTIFICATION)


def test_missing_or_malformed_file(tmp_path) -> None:
    with pytest.raises(DataError, match="athlete file not found"):
        load_athlete(tmp_path / "nope.json", IDENTIFICATION)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        load_athlete(bad, IDENTIFICATION)
    bad.write_text("[1, 2]")
    with pytest.raises(DataError, match="missing 'parameters'"):
        load_athlete(bad, IDENTIFICATION)
