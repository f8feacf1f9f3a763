"""`bemore model export-c`: the C compiles under strict C99 with gcc and clang, and the host
build agrees with the engine to 1e-12 (relative to the terms' magnitude, as in
tests/model/test_symbolic.py) at random states and parameters of the three descriptions."""

from __future__ import annotations

import re
import subprocess

import numpy as np
import pytest
from click.testing import CliRunner

from bemore.cli import cli
from bemore.model.symbolic import NumericModel
from tests.model.export_c_support import STRICT, ExportedModel, build_shared, write_c
from tests.model.symbolic_support import (
    MODELS,
    model_id,
    random_parameters,
    random_state,
    symbolic,
)

TOLERANCE = 1e-12


@pytest.fixture(scope="module", params=MODELS, ids=model_id)
def exported(request, tmp_path_factory):
    model, sym = symbolic(request.param)
    out = tmp_path_factory.mktemp(model_id(request.param))
    prefix, header, source = write_c(sym, out)
    return model, sym, prefix, header, source


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_strict_c99_compiles(exported, compiler):
    _, _, _, header, source = exported
    result = subprocess.run([compiler, *STRICT, "-c", str(source), "-o",
                             str(source.with_suffix(f".{compiler}.o"))],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    includes = set(re.findall(r"#include\s+[<\"]([^>\"]+)", source.read_text()
                              + header.read_text()))
    assert includes == {"math.h", header.name}


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_host_build_agrees_with_the_engine(exported, compiler):
    model, sym, prefix, _, source = exported
    library = source.with_suffix(f".{compiler}.so")
    build_shared(compiler, source, library)
    c = ExportedModel(library, prefix, model)
    np.testing.assert_array_equal(c.default_parameters(), model.parameter_matrix([{}])[0])
    oracle = NumericModel(sym, model.parameter_names)  # only for the terms' magnitudes
    nf = model.n_free
    rng = np.random.default_rng(23)
    worst = dict.fromkeys(("M", "tau", "acc", "effort", "points"), 0.0)
    for _ in range(25):
        P = random_parameters(model, rng)
        q, v, a = random_state(model, rng)
        p = c.parameters(P[0])
        M_engine, tau_engine = model.mass_matrix_and_inverse_dynamics(P, q, v, a)
        M_sym, c_sym, g_sym, springs = oracle.terms(P[0], q, v)
        terms = np.abs(M_sym) @ np.abs(a) + np.abs(c_sym) + np.abs(g_sym)
        worst["M"] = max(worst["M"], np.max(np.abs(c.mass_matrix(p, q) - M_engine))
                         / np.max(np.abs(M_engine)))
        worst["tau"] = max(worst["tau"], np.max(np.abs(c.inverse_dynamics(p, q, v, a)
                                                       - tau_engine)) / np.max(terms),
                           np.max(np.abs(c.driven_efforts(p, q, v, a) - tau_engine[nf:]))
                           / np.max(terms))
        status, af, effort = c.hybrid_dynamics(p, q[:nf], v[:nf], q[nf:], v[nf:], a[nf:])
        assert status == 0
        acc_engine, eff_engine = model.hybrid(P, q[None, :nf], v[None, :nf], q[None, nf:],
                                              v[None, nf:], a[None, nf:])
        acc_scale = np.max(np.abs(np.linalg.inv(M_sym[:nf, :nf]))
                           @ (np.abs(springs) + terms[:nf]))
        worst["acc"] = max(worst["acc"], np.max(np.abs(af - acc_engine[0])) / acc_scale)
        effort_terms = (np.abs(M_sym[nf:, :nf]) @ (np.abs(af) + acc_scale)
                        + np.abs(M_sym[nf:, nf:]) @ np.abs(a[nf:]) + np.abs(c_sym[nf:])
                        + np.abs(g_sym[nf:]))
        worst["effort"] = max(worst["effort"], np.max(np.abs(effort - eff_engine[0]))
                              / np.max(effort_terms))
        points = model.point_positions(P, q)[0]
        worst["points"] = max(worst["points"], np.max(np.abs(c.points(p, q) - points))
                              / np.max(np.abs(points)))
    print(model_id(str(model.description.source)), compiler,
          {k: f"{v:.1e}" for k, v in worst.items()})
    assert all(value < TOLERANCE for value in worst.values()), worst


def test_not_positive_definite_is_refused(exported, tmp_path):
    """A parameter set with a negative mass gives −1, outputs untouched (no NaN guess)."""
    model, _, prefix, _, source = exported
    library = tmp_path / "lib.so"
    build_shared("gcc", source, library)
    c = ExportedModel(library, prefix, model)
    P = model.parameter_matrix([{}])
    P[0] = -np.abs(P[0])  # every mass negative
    nf = model.n_free
    q, v, a = random_state(model, np.random.default_rng(1))
    status, af, effort = c.hybrid_dynamics(c.parameters(P[0]), q[:nf], v[:nf], q[nf:], v[nf:],
                                           a[nf:])
    assert status == -1
    assert not af.any() and not effort.any()


def test_cli_writes_header_and_source(tmp_path):
    result = CliRunner().invoke(cli, ["model", "export-c", "exemplary_gymnast", "--out",
                                      str(tmp_path), "--prefix", "ex"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "ex.h").read_text().count("ex_hybrid_dynamics") == 1
    assert "ex_parameters" in (tmp_path / "ex.c").read_text()


def test_a_model_without_driven_coordinates_is_refused_in_one_line(tmp_path):
    description = tmp_path / "pendulum.toml"
    description.write_text(
        'name = "pendulum"\n[parameters]\n"m" = "1 kg"\n[bodies.bob]\nparent = "world"\n'
        'joint = { type = "revolute", coordinate = "swing" }\nmass = "m"\n'
        'inertia = "0.01 kg*m^2"\ncom = ["0.5 m", 0.0]\n')
    result = CliRunner().invoke(cli, ["model", "export-c", str(description), "--out",
                                      str(tmp_path / "c")])
    assert result.exit_code == 2
    assert "export-c needs at least one free and one driven coordinate" in result.output
    assert len(result.output.strip().splitlines()) == 1
