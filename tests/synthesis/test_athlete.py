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
    assert len(athlete.values) == 13  # the seed's twelve and the neck convention


def test_athlete_file_is_read(tmp_path) -> None:
    athlete = load_athlete(_write(tmp_path, _complete()), IDENTIFICATION)
    assert athlete.values["bar.mass"] == pytest.approx(0.675 * 1.1)
    assert athlete.source.endswith("athlete.json")


def test_athlete_file_re_saved_with_a_byte_order_mark_is_read(tmp_path) -> None:
    # a spreadsheet's or an editor's UTF-8 re-save (before: "not valid JSON (Unexpected UTF-8
    # BOM (decode using utf-8-sig): line 1 column 1 (char 0))")
    path = _write(tmp_path, _complete())
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_athlete(path, IDENTIFICATION).values["bar.mass"] == pytest.approx(0.675 * 1.1)


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


def _body_com_from_shoulder(trunk_mass: float, trunk_com: float, thigh_com: float) -> float:
    """Lumped body CoM (m from the shoulder, along the straight body, feet pointed), by hand
    from the segment table: head above the shoulder, trunk 0.428 m, thighs 0.419 m, shanks
    0.362 m, feet in line; the thighs take 27.433 kg − trunk mass."""
    parts = [
        (3.565, -0.081),
        (trunk_mass, trunk_com),
        (27.433 - trunk_mass, 0.428 + thigh_com),
        (2 * 1.089, 0.428 + 0.419 + 0.160),
        (2 * 0.990, 0.428 + 0.419 + 0.362 + 0.035),
    ]
    return sum(m * x for m, x in parts) / sum(m for m, _ in parts)


def test_segments_identified_or_from_the_table() -> None:
    from bemore.synthesis.synthesize import exemplary_matrix

    athlete = default_parameters(load_identification())
    _, _, identified = exemplary_matrix(athlete, "identified")
    _, _, table = exemplary_matrix(athlete, "table")
    assert identified["body.com"] == pytest.approx(_body_com_from_shoulder(12.277, 0.194, 0.124))
    assert table["body.com"] == pytest.approx(_body_com_from_shoulder(17.529, 0.178, 0.151))
    assert table["body.mass"] == pytest.approx(identified["body.mass"]) == pytest.approx(35.156)
    for name in ("bar.mass", "bar.stiffness_y", "shoulder.damping_ap", "shoulder.stiffness_pd"):
        assert table[name] == identified[name] == athlete.values[name]
