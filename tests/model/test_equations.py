"""`bemore model equations`: the .tex compiles with pdflatex, the Markdown's formulas are the
model's (parsed back and evaluated against the engine), and without sympy one clear line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import sympy as sp
from click.testing import CliRunner

from bemore.cli import cli
from bemore.model.equations import write_equations
from tests.model.symbolic_support import (
    MODELS,
    model_id,
    random_parameters,
    random_state,
    symbolic,
)


@pytest.mark.parametrize("name", MODELS, ids=model_id)
def test_tex_compiles_with_pdflatex(name, tmp_path):
    assert shutil.which("pdflatex"), "no pdflatex: texlive-latex-base (tools/system-packages.txt)"
    _, sym = symbolic(name)
    tex, md = write_equations(sym, tmp_path)
    result = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", tex.name],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:]
    pdf = tex.with_suffix(".pdf")
    assert pdf.stat().st_size > 10_000
    log = tex.with_suffix(".log").read_text(errors="replace")
    assert "Undefined control sequence" not in log and "Missing $" not in log
    text = md.read_text()
    # named after the description: every coordinate and every parameter the equations use
    for coordinate in sym.coordinates:
        assert coordinate in text
    used = set().union(*(e.free_symbols for e in sym.mass_matrix)) & set(sym.parameters.values())
    for symbol in used:
        assert f"`{symbol}`" in text and str(symbol) in text.split("## Common subexpressions")[1]
    assert re.search(r"^x0 = ", text, re.M)  # common subexpressions are named


def _parse_markdown(text: str, sym) -> dict:
    """The Markdown's equations (name → value expression), parsed with sympy: dotted parameter
    names become identifiers, subexpressions x<k> are substituted in order."""
    names = {str(s): s for s in (*sym.parameters.values(), *sym.q, *sym.qd, *sym.constants)}
    locals_ = {name.replace(".", "__"): symbol for name, symbol in names.items()}
    dotted = sorted((n for n in names if "." in n), key=len, reverse=True)
    locals_.update({f"{n}_dd": s for n, s in zip(sym.coordinates, sym.qdd, strict=True)})
    values: dict = {}
    for block in re.findall(r"```\n(.*?)```", text, re.S):
        for line in block.strip().splitlines():
            lhs, rhs = line.split(" = ", 1)
            for name in dotted:
                rhs = rhs.replace(name, name.replace(".", "__"))
            # a driven effort names entries written above: M[a, b], c[a], g[a]
            references = {}
            for k, ref in enumerate(dict.fromkeys(re.findall(r"[Mcg]\[[^\]]*\]", rhs))):
                references[f"ref{k}"] = values[ref]
                rhs = rhs.replace(ref, f"ref{k}")
            values[lhs] = sp.parse_expr(rhs, local_dict={**locals_, **values, **references})
    return values


@pytest.mark.parametrize("name", ["exemplary_gymnast", str(MODELS[2])], ids=model_id)
def test_markdown_formulas_are_the_engine_s(name, tmp_path):
    """What a person reads is what the engine computes: the written M, c, g, Q, driven efforts
    and points, parsed back from the Markdown, evaluated at a random state, equal the engine's
    (the hybrid dynamics solved from the written terms at 1e-10: the solve's rounding)."""
    model, sym = symbolic(name)
    _, md = write_equations(sym, tmp_path)
    written = _parse_markdown(md.read_text(), sym)
    rng = np.random.default_rng(7)
    P = random_parameters(model, rng)
    q, v, a = random_state(model, rng)
    subs = {sym.parameters[n]: P[0, j] for j, n in enumerate(model.parameter_names)}
    subs.update(zip(sym.q, q, strict=True))
    subs.update(zip(sym.qd, v, strict=True))
    subs.update(sym.constants)
    n, c = len(sym.coordinates), sym.coordinates
    value = lambda key: float(written[key].subs(subs)) if key in written else 0.0  # noqa: E731
    M = np.array([[value(f"M[{c[max(i, j)]}, {c[min(i, j)]}]") for j in range(n)]
                  for i in range(n)])
    bias = np.array([value(f"c[{c[i]}]") + value(f"g[{c[i]}]") for i in range(n)])
    M_engine, tau_engine = model.mass_matrix_and_inverse_dynamics(P, q, v, a)
    np.testing.assert_allclose(M, M_engine, rtol=0, atol=1e-12 * np.max(np.abs(M_engine)))
    np.testing.assert_allclose(M @ a + bias, tau_engine, rtol=0,
                               atol=1e-12 * np.max(np.abs(M) @ np.abs(a) + np.abs(bias)))
    # the spring-damper forces and the driven efforts: the hybrid dynamics from the text
    nf = model.n_free
    springs = np.array([value(f"Q[{c[i]}]") for i in range(nf)])
    af = np.linalg.solve(M[:nf, :nf], springs - bias[:nf] - M[:nf, nf:] @ a[nf:])
    subs.update(zip(sym.qdd, [*af, *a[nf:]], strict=True))
    effort = np.array([value(f"tau[{c[d]}]") for d in range(nf, n)])
    acc_engine, eff_engine = model.hybrid(P, q[None, :nf], v[None, :nf], q[None, nf:],
                                          v[None, nf:], a[None, nf:])
    np.testing.assert_allclose(af, acc_engine[0], rtol=1e-10)
    np.testing.assert_allclose(effort, eff_engine[0], rtol=1e-10)
    points = np.array([[value(f"{p}.x"), value(f"{p}.y")] for p in model.point_names])
    np.testing.assert_allclose(points, model.point_positions(P, q)[0], rtol=0, atol=1e-12)


def test_cli_writes_both_files(tmp_path):
    result = CliRunner().invoke(cli, ["model", "equations", "exemplary_gymnast", "--out",
                                      str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "exemplary_gymnast_equations.tex").exists()
    assert (tmp_path / "exemplary_gymnast_equations.md").exists()
    assert "wrote" in result.output


@pytest.mark.parametrize("command", ["equations", "export-c"])
def test_without_sympy_one_clear_line(command, tmp_path):
    """sympy is the 'model' extra: without it the commands say so in one line, exit 2."""
    code = ("import sys; sys.modules['sympy'] = None; sys.argv = ['bemore', 'model', "
            f"'{command}', 'exemplary_gymnast', '--out', {str(tmp_path)!r}]; "
            "from bemore.cli import main; main()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "sympy is not installed" in lines[0] and "bemore[model]" in lines[0]
