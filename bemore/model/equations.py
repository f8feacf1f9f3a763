"""Equations a person can read: ``bemore model equations`` writes LaTeX and Markdown.

From the symbolic model (:mod:`bemore.model.symbolic`): the coordinates and parameters, then the
equations of motion ``M(q) q̈ + c(q, q̇) + g(q) = Q(q, q̇) + [0; τ_d]`` term by term — every
non-zero mass-matrix entry, the velocity-product, gravity and spring-damper terms, the driven
efforts — and the named points (joint centres), with common subexpressions named ``x_k`` once
(sympy's ``cse``) instead of repeated; the driven efforts are written as sums of those named
entries. The ``.tex`` is standalone (article, amsmath, geometry:
what Debian's ``texlive-latex-base`` carries) and compiles with pdflatex; the Markdown writes the
same formulas in plain text (sympy's syntax; ``**`` is a power), one per line.
"""

from __future__ import annotations

from pathlib import Path

from bemore.model.symbolic import SymbolicModel, require_sympy, sp
from bemore.paths import write_together

_LINE = 110  # LaTeX source characters per displayed line before a break


def _tex_text(name: str) -> str:
    return name.replace("\\", r"\textbackslash{}").replace("_", r"\_").replace("&", r"\&") \
        .replace("%", r"\%").replace("#", r"\#").replace("$", r"\$")


def _tex_unit(unit: str) -> str:
    """A unit as written (kg·m², N·s/m) in LaTeX without text-companion glyphs."""
    return _tex_text(unit).replace("^2", "²").replace("·", r"$\cdot$").replace("²", r"$^2$")


def _outputs(sym: SymbolicModel) -> list[tuple[str, str, str, object]]:
    """(section, Markdown name, LaTeX name, expression) of every equation, in document order."""
    coords = sym.coordinates
    n = len(coords)
    tex_q = [rf"\mathrm{{{_tex_text(c)}}}" for c in coords]
    out = []
    M = sym.mass_matrix
    for i in range(n):
        for j in range(i + 1):
            if M[i, j] != 0:
                out.append(("mass", f"M[{coords[i]}, {coords[j]}]",
                            rf"M_{{{tex_q[i]},\,{tex_q[j]}}}", M[i, j]))
    for i in range(n):
        if sym.velocity_terms[i] != 0:
            out.append(("velocity", f"c[{coords[i]}]", rf"c_{{{tex_q[i]}}}",
                        sym.velocity_terms[i]))
    for i in range(n):
        if sym.gravity_terms[i] != 0:
            out.append(("gravity", f"g[{coords[i]}]", rf"g_{{{tex_q[i]}}}",
                        sym.gravity_terms[i]))
    for i in range(sym.n_free):
        if sym.spring_terms[i] != 0:
            out.append(("springs", f"Q[{coords[i]}]", rf"Q_{{{tex_q[i]}}}",
                        sym.spring_terms[i]))
    for name, (x, y) in sym.points.items():
        out.append(("points", f"{name}.x", rf"x_{{\mathrm{{{_tex_text(name)}}}}}", x))
        out.append(("points", f"{name}.y", rf"y_{{\mathrm{{{_tex_text(name)}}}}}", y))
    return out


def _driven_rows(sym: SymbolicModel) -> list[tuple[str, list[tuple[str, str]]]]:
    """Per driven coordinate, the terms of τ_d = Σ_j M[d, j] q̈_j + c[d] + g[d] that are not
    zero, each as (plain text, LaTeX), the mass-matrix entries named as in the lower triangle."""
    coords, M = sym.coordinates, sym.mass_matrix
    tex_q = [rf"\mathrm{{{_tex_text(c)}}}" for c in coords]
    rows = []
    for d in range(sym.n_free, len(coords)):
        terms = []
        for j in range(len(coords)):
            i, k = max(d, j), min(d, j)
            if M[i, k] != 0:
                terms.append((f"M[{coords[i]}, {coords[k]}]*{coords[j]}_dd",
                              rf"M_{{{tex_q[i]},\,{tex_q[k]}}}\,\ddot{{{tex_q[j]}}}"))
        if sym.velocity_terms[d] != 0:
            terms.append((f"c[{coords[d]}]", rf"c_{{{tex_q[d]}}}"))
        if sym.gravity_terms[d] != 0:
            terms.append((f"g[{coords[d]}]", rf"g_{{{tex_q[d]}}}"))
        rows.append((coords[d], terms))
    return rows


def _names(sym: SymbolicModel) -> dict:
    """LaTeX names of the model's symbols (the plain-text names are the symbols' own)."""
    tex = {}
    for name, symbol in sym.parameters.items():
        tex[symbol] = rf"\mathrm{{{_tex_text(name)}}}"
    for i, name in enumerate(sym.coordinates):
        base = rf"\mathrm{{{_tex_text(name)}}}"
        tex[sym.q[i]], tex[sym.qd[i]], tex[sym.qdd[i]] = base, rf"\dot{{{base}}}", \
            rf"\ddot{{{base}}}"
    for symbol in sym.constants:
        tex[symbol] = str(symbol)
    return tex


def _tex_equation(lhs: str, expr, names: dict) -> str:
    """``lhs &= expr`` as align* rows, broken between terms every ~_LINE characters."""
    terms = sp.Add.make_args(expr) if isinstance(expr, sp.Add) else (expr,)
    rows: list[str] = []
    current = ""
    for k, term in enumerate(terms):
        piece = sp.latex(term, symbol_names=names, mul_symbol="dot")
        sign, body = ("-", piece[1:].lstrip()) if piece.startswith("-") else ("+", piece)
        if k == 0:
            current = piece
        elif len(current) + len(body) > _LINE:
            rows.append(current)
            current = f"{sign} {body}"
        else:
            current += f" {sign} {body}"
    rows.append(current)
    return f"{lhs} &= " + r" \\ &\quad ".join(rows)


def equation_files(name: str) -> tuple[str, str]:
    """The names of the LaTeX and Markdown files :func:`write_equations` writes for the model
    ``name``.

    >>> equation_files("exemplary_gymnast")
    ('exemplary_gymnast_equations.tex', 'exemplary_gymnast_equations.md')
    """
    return f"{name}_equations.tex", f"{name}_equations.md"


def write_equations(sym: SymbolicModel, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``<name>_equations.tex`` and ``<name>_equations.md`` into ``out_dir``; return them."""
    require_sympy()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    desc = sym.description
    outputs = _outputs(sym)
    temporaries, reduced = sp.cse([e for *_, e in outputs], symbols=sp.numbered_symbols("x"),
                                  order="none")
    tex_names = _names(sym)
    for symbol, _ in temporaries:
        index = str(symbol)[1:]
        tex_names[symbol] = f"x_{{{index}}}"
    constants = ", ".join(f"{s} = {v:g}" for s, v in sym.constants.items())
    titles = {"mass": "Mass matrix $M(q)$ (symmetric; lower triangle, non-zero entries)",
              "velocity": r"Velocity-product terms $c(q, \dot q)$ (centrifugal, Coriolis)",
              "gravity": "Gravity terms $g(q) = \\partial V / \\partial q$",
              "springs": r"Spring-damper forces $Q(q, \dot q)$ on the free coordinates",
              "points": "Named points (joint centres), world frame, m"}
    md_titles = {"mass": "Mass matrix M(q) (symmetric; lower triangle, non-zero entries)",
                 "velocity": "Velocity-product terms c(q, q') (centrifugal, Coriolis)",
                 "gravity": "Gravity terms g(q) = dV/dq",
                 "springs": "Spring-damper forces Q(q, q') on the free coordinates",
                 "points": "Named points (joint centres), world frame, m"}
    free, driven = sym.free, sym.driven
    # ---------------------------------------------------------------- Markdown
    md = [f"# Equations of motion: {desc.name}", "",
          f"Written by `bemore model equations` from `{Path(desc.source).name}` "
          "(derived with sympy from the "
          "description: positions of the planar chain, Lagrange's equations). SI units.", "",
          "    M(q) q'' + c(q, q') + g(q) = Q(q, q') + [0; tau_d]", "",
          f"Free coordinates (integrated): {', '.join(free)}. Driven coordinates (prescribed): "
          f"{', '.join(driven)}. A coordinate's velocity is `<name>_d`, its acceleration "
          "`<name>_dd`; the free rows give the free accelerations, the driven rows the driven "
          "efforts tau_d (N or N·m): tau_d = sum_j M[d, j] q''_j + c[d] + g[d].", ""]
    if constants:
        md += [f"Constants: {constants} (m/s²).", ""]
    md += ["| parameter | default (SI) | unit as written |", "|---|---|---|"]
    md += [f"| `{name}` | {value:.10g} | {desc.parameter_units.get(name, '')} |"
           for name, value in desc.parameters.items()]
    md += ["", f"## Common subexpressions ({len(temporaries)})", "", "```"]
    md += [f"{s} = {sp.sstr(v)}" for s, v in temporaries]
    md += ["```"]
    section = None
    for (kind, name, _, _), value in zip(outputs, reduced, strict=True):
        if kind != section:
            if section is not None:
                md.append("```")
            md += ["", f"## {md_titles[kind]}", "", "```"]
            section = kind
        md.append(f"{name} = {sp.sstr(value)}")
    md.append("```")
    driven_rows = _driven_rows(sym)
    if driven_rows:
        md += ["", "## Driven efforts tau_d (N or N·m; the free accelerations from the free "
               "rows)", "", "```"]
        md += [f"tau[{d}] = " + (" + ".join(text for text, _ in terms) or "0")
               for d, terms in driven_rows]
        md.append("```")
    md_text = "\n".join(md) + "\n"
    # ---------------------------------------------------------------- LaTeX
    tex = [r"\documentclass[10pt]{article}",
           r"\usepackage[a4paper,landscape,margin=1.5cm]{geometry}",
           r"\usepackage{amsmath}", r"\allowdisplaybreaks", r"\setlength{\parindent}{0pt}",
           r"\begin{document}",
           rf"\section*{{Equations of motion: {_tex_text(desc.name)}}}",
           rf"Written by \texttt{{bemore model equations}} from "
           rf"\texttt{{{_tex_text(Path(desc.source).name)}}}"
           r" (derived with sympy from the description: positions of the planar chain, "
           r"Lagrange's equations). SI units.",
           r"\[ M(q)\,\ddot q + c(q, \dot q) + g(q) = Q(q, \dot q) + \begin{pmatrix} 0 \\ "
           r"\tau_d \end{pmatrix}, \qquad \tau_d = \sum_j M_{d,j}\,\ddot q_j + c_d + g_d \]",
           "Free coordinates (integrated): " + ", ".join(
               rf"$\mathrm{{{_tex_text(c)}}}$" for c in free) + ". Driven coordinates "
           "(prescribed): " + ", ".join(rf"$\mathrm{{{_tex_text(c)}}}$" for c in driven) + ".",
           ""]
    if constants:
        tex += [rf"Constants: ${constants.replace('=', '=')}$ m/s$^2$.", ""]
    tex += [r"\subsection*{Parameters (defaults of the description, SI)}",
            r"\begin{tabular}{lrl}", r"parameter & default & unit as written \\ \hline"]
    tex += [rf"$\mathrm{{{_tex_text(name)}}}$ & {value:.10g} & "
            rf"{_tex_unit(desc.parameter_units.get(name, ''))} \\"
            for name, value in desc.parameters.items()]
    tex += [r"\end{tabular}", "",
            rf"\subsection*{{Common subexpressions ({len(temporaries)})}}"]
    if temporaries:
        tex.append(r"\begin{align*}")
        tex += [_tex_equation(tex_names[s], v, tex_names) + r" \\" for s, v in temporaries]
        tex.append(r"\end{align*}")
    section = None
    for (kind, _, lhs, _), value in zip(outputs, reduced, strict=True):
        if kind != section:
            if section is not None:
                tex.append(r"\end{align*}")
            tex += [rf"\subsection*{{{titles[kind]}}}", r"\begin{align*}"]
            section = kind
        tex.append(_tex_equation(lhs, value, tex_names) + r" \\")
    tex.append(r"\end{align*}")
    if driven_rows:
        tex += [r"\subsection*{Driven efforts $\tau_d$ (the free accelerations from the free "
                r"rows)}", r"\begin{align*}"]
    for d, terms in driven_rows:
        rows, current = [], ""
        for _, piece in terms:
            if current and len(current) + len(piece) > _LINE:
                rows.append(current)
                current = f"+ {piece}"
            else:
                current = f"{current} + {piece}" if current else piece
        rows.append(current or "0")
        tex.append(rf"\tau_{{\mathrm{{{_tex_text(d)}}}}} &= " + r" \\ &\quad ".join(rows)
                   + r" \\")
    if driven_rows:
        tex.append(r"\end{align*}")
    tex.append(r"\end{document}")
    tex_text = "\n".join(tex) + "\n"
    tex_name, md_name = equation_files(desc.name)
    tex_path, md_path = out / tex_name, out / md_name
    write_together({tex_path: tex_text, md_path: md_text})
    return tex_path, md_path
