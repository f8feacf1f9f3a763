"""Portable C99 of a model description: ``bemore model export-c``.

One header and one source with nothing beyond ``<math.h>``, written from the symbolic model
(:mod:`bemore.model.symbolic`, sympy's common subexpressions, sympy's C99 printer with integer
powers as products and π as a literal so that ``-std=c99 -pedantic`` needs no ``M_PI``):

* ``<prefix>_parameters``: a struct with one ``double`` per description parameter (``trunk.mass``
  → ``trunk_mass``), and ``<prefix>_default_parameters`` filling it with the description's values;
* ``<prefix>_points``: the named points (joint centres), m;
* ``<prefix>_mass_matrix`` and ``<prefix>_inverse_dynamics`` (τ = M q̈ + c + g, no springs),
  ``<prefix>_driven_efforts`` (its driven rows only: what a bench's feed-forward needs);
* ``<prefix>_hybrid_dynamics``: what the engine's model computes — the free accelerations given
  the driven coordinates' motion (spring-dampers included; a Cholesky solve of the free-free
  mass matrix) and the driven efforts that motion needs.

Coordinates are ordered free then driven, as ``model.coordinates``; SI units. On a target whose
``double`` is 32 bits (avr-gcc) the same code computes in single precision.
"""

from __future__ import annotations

import re
from pathlib import Path

from bemore.errors import ModelError
from bemore.model.symbolic import SymbolicModel, require_sympy, sp

_C_WORDS = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
            "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
            "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct",
            "switch", "typedef", "union", "unsigned", "void", "volatile", "while"}


def _ascii(unit: str) -> str:
    """A unit as written, in ASCII (N·s/m → N*s/m, kg·m² → kg*m^2)."""
    return unit.replace("·", "*").replace("²", "^2")


def _comment(items: list[str], indent: str = "") -> str:
    """``items`` joined by commas as lines of a C block comment (" * …"), broken between items
    at 96 characters."""
    lines, current = [], ""
    for item in items:
        if current and len(current) + len(item) + 2 > 92 - len(indent):
            lines.append(current + ",")
            current = item
        else:
            current = f"{current}, {item}" if current else item
    lines.append(current)
    return "\n".join(f" * {indent}{line}" for line in lines)


def c_files(prefix: str) -> tuple[str, str]:
    """The header and source names ``bemore model export-c`` writes for a C ``prefix``."""
    return f"{prefix}.h", f"{prefix}.c"


def c_identifier(name: str) -> str:
    """A C identifier for a description name: every character outside [A-Za-z0-9_] → '_'."""
    text = re.sub(r"\W", "_", name)
    return f"_{text}" if text[:1].isdigit() else text


def _printer(names: dict):
    """sympy's C99 printer with the model's names, x·x for small powers, π as a literal."""
    from sympy.printing.c import C99CodePrinter

    class Printer(C99CodePrinter):
        def _print_Symbol(self, expr):  # noqa: N802 (sympy's printer protocol)
            return names.get(expr, super()._print_Symbol(expr))

        def _print_Float(self, expr):  # noqa: N802 (sympy's printer protocol)
            return repr(float(expr))  # the shortest text of the same double: 0.571

        def _print_Pi(self, expr):  # noqa: N802 (sympy's printer protocol)
            return "3.14159265358979323846"

        def _print_Pow(self, expr):  # noqa: N802 (sympy's printer protocol)
            base, exponent = expr.as_base_exp()
            if exponent.is_Integer and 2 <= int(exponent) <= 4:
                text = self.parenthesize(base, 100)
                return "*".join([text] * int(exponent))
            if exponent == -1:
                return f"1.0/{self.parenthesize(base, 100)}"
            return super()._print_Pow(expr)

    return Printer({"precision": 17, "math_macros": {}})


class _Names:
    """C names of a model's symbols: parameters ``p->x``, coordinates ``q_x``, ``v_x``,
    ``a_x`` (position, velocity, acceleration), temporaries ``t<k>``."""

    def __init__(self, sym: SymbolicModel) -> None:
        self.fields = {name: c_identifier(name) for name in sym.parameters}
        seen: dict[str, str] = {}
        for name, ident in self.fields.items():
            if ident in seen or ident in _C_WORDS:
                raise ModelError(f"{sym.description.source}: parameters {seen.get(ident, ident)!r}"
                                 f" and {name!r} give the same C name {ident!r}")
            seen[ident] = name
        self.map: dict = {s: f"p->{self.fields[n]}" for n, s in sym.parameters.items()}
        for const, value in sym.constants.items():
            self.map[const] = repr(float(value))
        self.local: dict = {}
        idents = [c_identifier(name) for name in sym.coordinates]
        for ident in idents:
            if idents.count(ident) > 1:
                twins = [n for n, i in zip(sym.coordinates, idents, strict=True) if i == ident]
                raise ModelError(f"{sym.description.source}: coordinates {twins[0]!r} and "
                                 f"{twins[1]!r} give the same C name {ident!r}")
        for i, name in enumerate(sym.coordinates):
            ident = c_identifier(name)
            for prefix, symbol in (("q", sym.q[i]), ("v", sym.qd[i]), ("a", sym.qdd[i])):
                self.map[symbol] = f"{prefix}_{ident}"
                self.local[symbol] = f"{prefix}_{ident}"


def _block(outputs: list[tuple[str, object, str]], names: _Names, loads: dict,
           indent: str = "    ") -> list[str]:
    """C lines computing ``outputs`` (target, expression, comment) with common subexpressions
    as ``const double t<k>``; ``loads`` maps a state symbol to the array element it comes from."""
    exprs = [e for _, e, _ in outputs]
    temporaries, reduced = sp.cse(exprs, symbols=sp.numbered_symbols("t"))
    mapping = dict(names.map)
    for symbol, _ in temporaries:
        mapping[symbol] = str(symbol)
    printer = _printer(mapping)
    used = set().union(*(e.free_symbols for e in exprs)) if exprs else set()
    lines = [f"{indent}const double {names.local[s]} = {loads[s]};"
             for s in loads if s in used]
    for symbol, value in temporaries:
        lines.append(f"{indent}const double {symbol} = {printer.doprint(value)};")
    for (target, _, comment), value in zip(outputs, reduced, strict=True):
        text = printer.doprint(value)
        lines.append(f"{indent}{target} = {text};" + (f"  /* {comment} */" if comment else ""))
    return lines


def export_c(sym: SymbolicModel, prefix: str | None = None) -> tuple[str, str, str]:
    """(prefix, header text, source text) of the portable C of ``sym`` (see the module doc)."""
    require_sympy()
    if not sym.free or not sym.driven:
        raise ModelError(f"{sym.description.source}: export-c needs at least one free and one "
                         f"driven coordinate (this model has {len(sym.free)} free, "
                         f"{len(sym.driven)} driven): C has no empty arrays")
    prefix = c_identifier(prefix or sym.description.name)
    names = _Names(sym)
    n, nf = len(sym.coordinates), sym.n_free
    nd, points = n - nf, list(sym.points)
    up = prefix.upper()
    desc = sym.description
    coords = sym.coordinates
    fields = "\n".join(
        f"    double {ident};  /* {name}"
        f"{', ' + _ascii(desc.parameter_units[name]) if desc.parameter_units.get(name) else ''} */"
        for name, ident in names.fields.items())
    pad = " " * (len(prefix) + 13)
    # Without named points there is no points function (C has no empty arrays).
    points_h = (f"/* Named points (x, y) in m at the coordinates q ({up}_N: free then driven). */\n"
                f"void {prefix}_points(const {prefix}_parameters *p, const double q[{up}_N],\n"
                f"{pad}double xy[{up}_N_POINTS][2]);\n\n") if points else ""
    header = f"""/* {prefix}.h - equations of motion of the model description "{desc.name}"
 * ({Path(desc.source).name}), written by `bemore model export-c`.
 * Portable C99, needs only <math.h>.
 * SI units (m, rad, kg, N, N*m). Coordinates, free then driven:
{_comment([f"{i}: {c}" for i, c in enumerate(coords)], "  ")}
{_comment(["Named points: " + points[0], *points[1:]]) if points else " * No named points."}
 * On a target whose double is 32 bits (avr-gcc) everything is computed in single precision. */
#ifndef {up}_H
#define {up}_H

#define {up}_N {n}         /* coordinates */
#define {up}_N_FREE {nf}    /* free coordinates (integrated) */
#define {up}_N_DRIVEN {nd}  /* driven coordinates (prescribed) */
#define {up}_N_POINTS {len(points)}

/* The description's parameters (its defaults: {prefix}_default_parameters). */
typedef struct {{
{fields}
}} {prefix}_parameters;

/* The description's default parameter values. */
void {prefix}_default_parameters({prefix}_parameters *p);

{points_h}/* Mass matrix M(q) ({up}_N x {up}_N, symmetric). */
void {prefix}_mass_matrix(const {prefix}_parameters *p, const double q[{up}_N],
{" " * (len(prefix) + 18)}double M[{up}_N][{up}_N]);

/* Inverse dynamics tau = M(q) qdd + c(q, qd) + g(q) of every coordinate (N or N*m), springs not
 * included. */
void {prefix}_inverse_dynamics(const {prefix}_parameters *p, const double q[{up}_N],
{" " * (len(prefix) + 24)}const double v[{up}_N], const double a[{up}_N],
{" " * (len(prefix) + 24)}double tau[{up}_N]);

/* Driven efforts tau_d = M_d(q) qdd + c_d(q, qd) + g_d(q) (N or N*m): the driven rows of the
 * inverse dynamics, every acceleration given (the free ones measured or estimated). */
void {prefix}_driven_efforts(const {prefix}_parameters *p, const double q[{up}_N],
{" " * (len(prefix) + 21)}const double v[{up}_N], const double a[{up}_N],
{" " * (len(prefix) + 21)}double effort[{up}_N_DRIVEN]);

/* Hybrid dynamics: free accelerations af given the free state (qf, vf) and the driven motion
 * (qd, vd, ad), spring-dampers included, and the driven efforts (N or N*m) that motion needs.
 * Returns 0, or -1 (outputs untouched) when the free mass matrix is not positive definite. */
int {prefix}_hybrid_dynamics(const {prefix}_parameters *p, const double qf[{up}_N_FREE],
{" " * (len(prefix) + 21)}const double vf[{up}_N_FREE], const double qd[{up}_N_DRIVEN],
{" " * (len(prefix) + 21)}const double vd[{up}_N_DRIVEN], const double ad[{up}_N_DRIVEN],
{" " * (len(prefix) + 21)}double af[{up}_N_FREE], double effort[{up}_N_DRIVEN]);

#endif /* {up}_H */
"""
    loads_q = {sym.q[i]: f"q[{i}]" for i in range(n)}
    loads_v = {sym.qd[i]: f"v[{i}]" for i in range(n)}
    loads_a = {sym.qdd[i]: f"a[{i}]" for i in range(n)}
    defaults = "\n".join(f"    p->{ident} = {float(desc.parameters[name])!r};"
                         for name, ident in names.fields.items())
    point_out = []
    for k, (name, (x, y)) in enumerate(sym.points.items()):
        point_out += [(f"xy[{k}][0]", x, f"{name} x"), (f"xy[{k}][1]", y, f"{name} y")]
    M = sym.mass_matrix
    mass_out = [(f"M[{i}][{j}]", M[i, j], f"{coords[i]}, {coords[j]}")
                for i in range(n) for j in range(i + 1)]
    mirror = [f"    M[{j}][{i}] = M[{i}][{j}];" for i in range(n) for j in range(i)]
    tau = sym.inverse_dynamics()
    inverse_out = [(f"tau[{i}]", tau[i], coords[i]) for i in range(n)]
    driven_out = [(f"effort[{d}]", tau[nf + d], coords[nf + d]) for d in range(nd)]
    # Hybrid: M_ff af = Q_f - (M_fd ad + b_f);  effort = M_df af + (M_dd ad + b_d).
    bias = sym.bias()
    hybrid_out = [(f"A[{i}][{j}]", M[i, j], f"M {coords[i]}, {coords[j]}")
                  for i in range(nf) for j in range(i + 1)]
    for i in range(nf):
        rhs = sym.spring_terms[i] - bias[i] - sum(
            (M[i, nf + d] * sym.qdd[nf + d] for d in range(nd)), sp.Integer(0))
        hybrid_out.append((f"b[{i}]", rhs, f"{coords[i]}: springs - bias - M_fd qdd_d"))
    for d in range(nd):
        for j in range(nf):
            hybrid_out.append((f"C[{d}][{j}]", M[nf + d, j], f"M {coords[nf + d]}, {coords[j]}"))
        rest = bias[nf + d] + sum((M[nf + d, nf + e] * sym.qdd[nf + e] for e in range(nd)),
                                  sp.Integer(0))
        hybrid_out.append((f"e[{d}]", rest, f"{coords[nf + d]}: bias + M_dd qdd_d"))
    loads_h = {sym.q[i]: f"qf[{i}]" for i in range(nf)}
    loads_h.update({sym.qd[i]: f"vf[{i}]" for i in range(nf)})
    loads_h.update({sym.q[nf + d]: f"qd[{d}]" for d in range(nd)})
    loads_h.update({sym.qd[nf + d]: f"vd[{d}]" for d in range(nd)})
    loads_h.update({sym.qdd[nf + d]: f"ad[{d}]" for d in range(nd)})

    def body(lines: list[str]) -> str:
        return "\n".join(lines)

    unused_p = "    (void)p;\n"
    points_c = (f"void {prefix}_points(const {prefix}_parameters *p, const double q[{up}_N],\n"
                f"{pad}double xy[{up}_N_POINTS][2])\n{{\n{unused_p}"
                f"{body(_block(point_out, names, loads_q))}\n}}\n\n") if points else ""
    source = f"""/* {prefix}.c - equations of motion of the model description "{desc.name}"
 * ({Path(desc.source).name}), written by `bemore model export-c` from its symbolic
 * model (sympy; the same equations as `bemore model equations`). t<k>: common
 * subexpressions. */
#include <math.h>

#include "{prefix}.h"

void {prefix}_default_parameters({prefix}_parameters *p)
{{
{defaults}
}}

{points_c}void {prefix}_mass_matrix(const {prefix}_parameters *p, const double q[{up}_N],
{" " * (len(prefix) + 18)}double M[{up}_N][{up}_N])
{{
{unused_p}{body(_block(mass_out, names, loads_q))}
{body(mirror)}
}}

void {prefix}_inverse_dynamics(const {prefix}_parameters *p, const double q[{up}_N],
{" " * (len(prefix) + 24)}const double v[{up}_N], const double a[{up}_N],
{" " * (len(prefix) + 24)}double tau[{up}_N])
{{
{unused_p}{body(_block(inverse_out, names, {**loads_q, **loads_v, **loads_a}))}
}}

void {prefix}_driven_efforts(const {prefix}_parameters *p, const double q[{up}_N],
{" " * (len(prefix) + 21)}const double v[{up}_N], const double a[{up}_N],
{" " * (len(prefix) + 21)}double effort[{up}_N_DRIVEN])
{{
{unused_p}{body(_block(driven_out, names, {**loads_q, **loads_v, **loads_a}))}
}}

int {prefix}_hybrid_dynamics(const {prefix}_parameters *p, const double qf[{up}_N_FREE],
{" " * (len(prefix) + 21)}const double vf[{up}_N_FREE], const double qd[{up}_N_DRIVEN],
{" " * (len(prefix) + 21)}const double vd[{up}_N_DRIVEN], const double ad[{up}_N_DRIVEN],
{" " * (len(prefix) + 21)}double af[{up}_N_FREE], double effort[{up}_N_DRIVEN])
{{
    double A[{up}_N_FREE][{up}_N_FREE]; /* free-free mass matrix, lower triangle, then its
                                           Cholesky factor L (A = L L^T) */
    double b[{up}_N_FREE];              /* right-hand side, then the solution */
    double C[{up}_N_DRIVEN][{up}_N_FREE]; /* driven-free block of the mass matrix */
    double e[{up}_N_DRIVEN];            /* driven efforts at zero free acceleration */
    int i, j, k;
{unused_p}{body(_block(hybrid_out, names, loads_h))}
    for (j = 0; j < {up}_N_FREE; ++j) {{
        double s = A[j][j];
        for (k = 0; k < j; ++k) {{
            s -= A[j][k] * A[j][k];
        }}
        if (!(s > 0.0)) {{
            return -1;
        }}
        A[j][j] = sqrt(s);
        for (i = j + 1; i < {up}_N_FREE; ++i) {{
            double t = A[i][j];
            for (k = 0; k < j; ++k) {{
                t -= A[i][k] * A[j][k];
            }}
            A[i][j] = t / A[j][j];
        }}
    }}
    for (i = 0; i < {up}_N_FREE; ++i) {{ /* L y = b */
        double s = b[i];
        for (k = 0; k < i; ++k) {{
            s -= A[i][k] * b[k];
        }}
        b[i] = s / A[i][i];
    }}
    for (i = {up}_N_FREE - 1; i >= 0; --i) {{ /* L^T x = y */
        double s = b[i];
        for (k = i + 1; k < {up}_N_FREE; ++k) {{
            s -= A[k][i] * b[k];
        }}
        b[i] = s / A[i][i];
    }}
    for (i = 0; i < {up}_N_FREE; ++i) {{
        af[i] = b[i];
    }}
    for (i = 0; i < {up}_N_DRIVEN; ++i) {{
        double s = e[i];
        for (k = 0; k < {up}_N_FREE; ++k) {{
            s += C[i][k] * b[k];
        }}
        effort[i] = s;
    }}
    return 0;
}}
"""
    return prefix, header, source
