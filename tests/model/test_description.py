"""Description files: refused with a message naming the body and the key; models agree with
the segment table."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from bemore.errors import ModelError
from bemore.model import exemplary_parameters, load_model
from bemore.model.description import load_description, parse_description
from bemore.settings import load_gymnast

BASE = {
    "name": "two links",
    "parameters": {"arm.mass": "2.0 kg"},
    "bodies": {
        "arm": {"parent": "world", "joint": {"type": "revolute", "coordinate": "a"},
                "mass": "arm.mass", "inertia": "0.1 kg·m²", "com": ["0.3 m", 0.0]},
        "leg": {"parent": "arm",
                "joint": {"type": "revolute", "coordinate": "b", "driven": True,
                          "at": ["0.6 m", 0.0]},
                "mass": 3.0, "inertia": 0.2, "com": [0.4, 0.0]},
    },
}


def _refused(change) -> str:
    data = copy.deepcopy(BASE)
    change(data)
    with pytest.raises(ModelError) as info:
        parse_description(data, "test.toml")
    return str(info.value)


def test_a_valid_description_is_accepted():
    description = parse_description(copy.deepcopy(BASE), "test.toml")
    assert description.free_coordinates == ("a",)
    assert description.driven_coordinates == ("b",)
    assert description.parameters == {"arm.mass": 2.0}


def test_cycle_is_refused():
    def cycle(d):
        d["bodies"]["arm"]["parent"] = "leg"
    message = _refused(cycle)
    assert "cycle" in message and "arm" in message and "parent" in message


def test_unknown_parent_is_refused():
    message = _refused(lambda d: d["bodies"]["leg"].update(parent="torso"))
    assert "[bodies.leg] parent = 'torso': unknown parent" in message


def test_non_positive_mass_and_inertia_are_refused():
    assert "[bodies.leg] mass = -3: must be positive" in _refused(
        lambda d: d["bodies"]["leg"].update(mass=-3.0))
    assert "[bodies.leg] inertia = 0: must be positive" in _refused(
        lambda d: d["bodies"]["leg"].update(inertia=0.0))
    assert "[bodies.arm] mass = 0: must be positive" in _refused(
        lambda d: d["parameters"].update({"arm.mass": "0 kg"}))


def test_missing_parameter_is_refused():
    message = _refused(lambda d: d["bodies"]["leg"].update(mass="leg.mass"))
    assert "[bodies.leg] mass = 'leg.mass'" in message and "declared parameter" in message


def test_bad_unit_is_refused():
    message = _refused(lambda d: d["bodies"]["leg"].update(mass="3 m"))
    assert "[bodies.leg] mass = '3 m': bad unit 'm' for a mass" in message
    message = _refused(lambda d: d["bodies"]["leg"].update(com=["40 kg", 0.0]))
    assert "[bodies.leg] com[0]" in message and "bad unit 'kg'" in message


def test_parameter_bound_to_a_field_of_another_dimension_is_refused():
    message = _refused(lambda d: d["bodies"]["leg"].update(com=["arm.mass", 0.0]))
    assert "[bodies.leg] com[0]" in message and "'arm.mass' is in kg" in message


def test_units_are_converted_to_si():
    data = copy.deepcopy(BASE)
    data["bodies"]["leg"]["com"] = ["40 cm", 0.0]
    data["bodies"]["leg"]["joint"]["angle"] = "90 deg"
    description = parse_description(data, "test.toml")
    leg = description.bodies[1]
    assert leg.com_x.offset == pytest.approx(0.4)
    assert leg.joint[0].angle == pytest.approx(np.pi / 2)


def test_missing_file_is_a_model_error(tmp_path):
    with pytest.raises(ModelError, match="file not found"):
        load_description(tmp_path / "nope.toml")


def test_real_gymnast_matches_the_segment_table(real):
    gymnast = load_gymnast()
    bodies = {b.name: b for b in real.description.bodies}
    values = real.default_parameters()
    for name in ("head", "upper_arm", "forearm", "hand", "shank", "foot"):
        segment, body = gymnast.segments[name], bodies[name]
        assert body.mass.evaluate(values) == pytest.approx(segment.total_mass_kg, rel=1e-12)
        assert body.inertia.evaluate(values) == pytest.approx(segment.inertia_kgm2, rel=1e-12)
        assert body.com_x.evaluate(values) == pytest.approx(segment.com_from_proximal_m)
        assert body.length == pytest.approx(segment.length_m)
    total = gymnast.segments["trunk"].total_mass_kg + gymnast.segments["thigh"].total_mass_kg
    for trunk_mass in (5.259, 12.277, 25.433):
        v = dict(values, **{"trunk.mass": trunk_mass})
        thigh = bodies["thigh"].mass.evaluate(v)
        assert bodies["trunk"].mass.evaluate(v) + thigh == pytest.approx(total, rel=1e-12)
        # Radii of gyration of the table are kept.
        assert bodies["thigh"].inertia.evaluate(v) / thigh == pytest.approx(
            gymnast.segments["thigh"].inertia_kgm2 / gymnast.segments["thigh"].total_mass_kg)
        assert bodies["trunk"].inertia.evaluate(v) / trunk_mass == pytest.approx(
            gymnast.segments["trunk"].inertia_kgm2 / gymnast.segments["trunk"].total_mass_kg)


def test_another_body_scales_masses_lengths_and_inertias(real):
    """A body 20 % heavier and 7 % longer than the table's: the bodies' masses add up to her
    body mass (the bar aside), each segment keeps its share, lengths and CoMs scale by 1.07 and
    inertias by 1.2 × 1.07² (the radius of gyration keeps its share of the length)."""
    from bemore.model.body import body_parameters, table_mass_kg

    table = load_gymnast().segments
    mass = 1.2 * table_mass_kg(table)
    lengths = {name: 1.07 * row.length_m for name, row in table.items()}
    values = dict(real.default_parameters(), **body_parameters(table, mass, lengths))
    bodies = {b.name: b for b in real.description.bodies}
    total = sum(body.mass.evaluate(values) for name, body in bodies.items() if name != "bar")
    assert total == pytest.approx(mass, rel=1e-12)
    for name in ("head", "upper_arm", "forearm", "hand", "shank", "foot"):
        segment, body = table[name], bodies[name]
        assert body.mass.evaluate(values) == pytest.approx(1.2 * segment.total_mass_kg)
        assert body.inertia.evaluate(values) == pytest.approx(
            1.2 * 1.07**2 * segment.inertia_kgm2, rel=1e-12)
        assert body.com_x.evaluate(values) == pytest.approx(1.07 * segment.com_from_proximal_m)
    knee = next(e for e in bodies["shank"].joint if e.coordinate == "knee")
    assert knee.at_x.evaluate(values) == pytest.approx(1.07 * table["thigh"].length_m)


def test_products_must_name_two_parameters_and_a_coefficient():
    def bad(data):
        data["bodies"]["arm"]["inertia"] = {"products": [["arm.mass", 0.1]]}

    assert "products: expected [parameter, parameter, coefficient]" in _refused(bad)

    def unknown(data):
        data["bodies"]["arm"]["inertia"] = {"products": [["arm.mass", "arm.k2", 1.0]]}

    assert "parameter 'arm.k2' is not declared" in _refused(unknown)


def test_exemplary_defaults_are_the_lumped_real_gymnast(exemplary):
    lumped = exemplary_parameters()
    defaults = exemplary.default_parameters()
    for name, value in lumped.items():
        assert defaults[name] == pytest.approx(value, rel=1e-12), name
    # Arm CoM from the bar by hand: hand at 0, forearm at 0.075+0.112, upper arm at 0.281+0.123
    assert lumped["arm.com"] == pytest.approx((2.376 * 0.187 + 2.774 * 0.404) / 5.942)
    assert lumped["body.mass"] == pytest.approx(12.277 + (27.433 - 12.277) + 3.565 + 2.178 + 1.98)


def test_unknown_parameter_and_unknown_model_are_refused(real):
    with pytest.raises(ModelError, match=r"unknown parameter .trunk\.masss."):
        real.parameter_matrix([{"trunk.masss": 3.0}])
    with pytest.raises(ModelError, match="unknown model 'giant'"):
        load_model("giant")


def test_seed_defaults_are_read_from_the_identification_file(tmp_path, monkeypatch):
    """configs/identification.toml's seed_value is the one statement of the seed's values: the
    models' defaults written "seed" follow an edit of it."""
    import shutil

    from bemore.model.gymnasts import model_path
    from bemore.paths import configs_dir
    from bemore.settings import load_identification

    identification = load_identification()
    for name in ("real_gymnast", "exemplary_gymnast"):
        defaults = load_description(model_path(name)).parameters
        shared = [item for item in identification.parameters if item.name in defaults]
        assert len(shared) == (13 if name == "real_gymnast" else 9)
        for item in shared:
            assert defaults[item.name] == item.seed_value, (name, item.name)
    copy_dir = tmp_path / "configs"
    shutil.copytree(configs_dir(), copy_dir)
    text = (copy_dir / "identification.toml").read_text()
    assert text.count("seed_value = 15326.0") == 1
    (copy_dir / "identification.toml").write_text(
        text.replace("seed_value = 15326.0", "seed_value = 17000.0"))
    monkeypatch.setenv("BEMORE_CONFIGS", str(copy_dir))
    for name in ("real_gymnast", "exemplary_gymnast"):
        edited = load_description(model_path(name))
        assert edited.parameters["bar.stiffness_x"] == 17000.0
        assert edited.parameter_units["bar.stiffness_x"] == "N/m"
        assert edited.parameters["bar.damping_x"] == 910.0


def test_a_seed_default_not_in_the_identification_file_is_refused():
    def seeded(data):
        data["parameters"]["arm.mass"] = "seed"

    message = _refused(seeded)
    assert 'test.toml: [parameters] "arm.mass" = "seed": not an identified parameter' in message
    assert "identification.toml" in message


def test_the_fields_are_the_sum_of_their_linear_and_product_terms_in_order() -> None:
    """Tree.fields against the definition, term by term: V = P·A + offset, then each product
    c·P[a]·P[b] added to its field in the products' order (the same numbers, bit for bit)."""
    tree = load_model("real_gymnast").tree
    fields = tree.field_products[:, 0]
    assert len(fields) > len(set(fields))  # a field with two products: their order matters
    P = np.random.default_rng(3).uniform(0.5, 2.0, (7, tree.field_matrix.shape[0]))
    expected = P @ tree.field_matrix + tree.field_offset
    for (f, a, b), c in zip(tree.field_products, tree.product_coefficients, strict=True):
        expected[:, f] += c * P[:, a] * P[:, b]
    assert np.array_equal(tree.fields(P), expected)
    assert np.array_equal(tree.fields(P[2]), expected[2])  # one member as a vector
