"""Generated, specialised batch kernels: the tree unrolled into straight-line numba code.

For a given compiled tree, :func:`kernel_for` writes the Python source of a numba function that
integrates a batch with the same ROS34PW2 scheme as ``kernels.py`` but with every loop over
frames, bodies and coordinates unrolled, constants folded (fixed lengths, zero offsets, frames
with no driven rotation), no library call in the lane loop (polynomial sine/cosine), the driven
quantities of each step hoisted out of the lane loop, and lanes innermost (unsigned lane
indices) so that LLVM vectorises across population members. The kernel releases the GIL;
:func:`run_threads` splits the population into one group of lanes per core.
The source is cached under ``~/.cache/bemore/kernels`` by content hash, so numba's own cache
(``cache=True``) works across sessions. ``kernels.py`` stays the readable reference; the tests
check that both agree.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from pathlib import Path

import numpy as np

from bemore.model import kernels
from bemore.model.tree import PRISMATIC, REVOLUTE, Tree

Sym = float | str
# Bump when the generated code or the LLVM options change, so cached machine code is rebuilt.
KERNEL_FORMAT = 2


class Emitter:
    """SSA emitter with constant folding of 0, 1 and numeric constants."""

    def __init__(self, prefix: str) -> None:
        self.lines: list[str] = []
        self.prefix = prefix
        self.count = 0

    def new(self, text: str) -> str:
        name = f"{self.prefix}{self.count}"
        self.count += 1
        self.lines.append(f"{name} = {text}")
        return name

    @staticmethod
    def fmt(a: Sym) -> str:
        return f"({a!r})" if isinstance(a, float) else a

    def mul(self, a: Sym, b: Sym) -> Sym:
        if isinstance(a, float) and isinstance(b, float):
            return a * b
        if a == 0.0 or b == 0.0:
            return 0.0
        if a == 1.0:
            return b
        if b == 1.0:
            return a
        if a == -1.0:
            return self.neg(b)
        if b == -1.0:
            return self.neg(a)
        return self.new(f"{self.fmt(a)} * {self.fmt(b)}")

    def add(self, a: Sym, b: Sym) -> Sym:
        if isinstance(a, float) and isinstance(b, float):
            return a + b
        if a == 0.0:
            return b
        if b == 0.0:
            return a
        return self.new(f"{self.fmt(a)} + {self.fmt(b)}")

    def sub(self, a: Sym, b: Sym) -> Sym:
        if isinstance(a, float) and isinstance(b, float):
            return a - b
        if b == 0.0:
            return a
        if a == 0.0:
            return self.neg(b)
        return self.new(f"{self.fmt(a)} - {self.fmt(b)}")

    def neg(self, a: Sym) -> Sym:
        if isinstance(a, float):
            return -a
        return self.new(f"-{a}")

    def sum(self, terms: list[Sym]) -> Sym:
        total: Sym = 0.0
        for term in terms:
            total = self.add(total, term)
        return total

    def dot(self, pairs: list[tuple[Sym, Sym]]) -> Sym:
        return self.sum([self.mul(a, b) for a, b in pairs])

    def sincos(self, x: Sym) -> tuple[Sym, Sym]:
        """sin, cos by range reduction to [−π, π], Taylor on [−π/4, π/4], two doublings."""
        if isinstance(x, float):
            return float(np.sin(x)), float(np.cos(x))
        k = self.new(f"np.floor({x} * {1.0 / (2.0 * np.pi)!r} + 0.5)")
        r = self.new(f"({x} - {k} * 6.283185307179586) - {k} * 2.4492935982947064e-16")
        r4 = self.new(f"0.25 * {r}")
        z = self.new(f"{r4} * {r4}")
        sin_c = [1.0 / np.prod(np.arange(1, 2 * i + 2, dtype=float)) * (-1) ** i
                 for i in range(9)]
        cos_c = [1.0 / np.prod(np.arange(1, 2 * i + 1, dtype=float)) * (-1) ** i
                 for i in range(10)]
        s = _horner(sin_c, z)
        c = _horner(cos_c, z)
        s1 = self.new(f"{r4} * ({s})")
        c1 = self.new(c)
        for _ in range(2):
            s1, c1 = self.new(f"2.0 * {s1} * {c1}"), self.new(f"{c1} * {c1} - {s1} * {s1}")
        return s1, c1


def _horner(coefficients: list[float], z: str) -> str:
    text = repr(coefficients[-1])
    for c in reversed(coefficients[:-1]):
        text = f"{c!r} + {z} * ({text})"
    return text


class _Lane:
    """What one lane's code reads: field values (constants folded), free and driven state."""

    def __init__(self, tree: Tree, em: Emitter) -> None:
        self.tree = tree
        self.em = em
        self.used_fields: set[int] = set()

    def field(self, index: int) -> Sym:
        if not np.any(self.tree.field_matrix[:, index]):
            return float(self.tree.field_offset[index])
        self.used_fields.add(index)
        return f"V{index}"


def _driven_angle_constant(tree: Tree) -> list[float | None]:
    """Per frame: the driven angle sum if it is a constant (no driven revolute above), else None."""
    out: list[float | None] = []
    for k in range(len(tree.frame_parent)):
        p = tree.frame_parent[k]
        base = 0.0 if p < 0 else out[p]
        if base is None or (tree.frame_kind[k] == REVOLUTE and tree.frame_driven[k] >= 0):
            out.append(None)
        else:
            out.append(base + float(tree.frame_angle[k]))
    return out


def _emit_geometry(lane: _Lane, qf: list[Sym], drv: dict) -> dict:
    """Orientations, hang vectors, prismatic axes and origins of every frame."""
    tree, em = lane.tree, lane.em
    constant = _driven_angle_constant(tree)
    g: dict = {"cA": [], "sA": [], "cP": [], "sP": [], "d": [], "e": [], "O": []}
    for k in range(len(tree.frame_parent)):
        p = tree.frame_parent[k]
        pc, ps = (1.0, 0.0) if p < 0 else (g["cA"][p], g["sA"][p])
        cp, sp = (1.0, 0.0) if p < 0 else (g["cP"][p], g["sP"][p])
        kind, axis = tree.frame_kind[k], int(tree.frame_axis[k])
        if kind == REVOLUTE and tree.frame_free[k] >= 0:
            s, c = em.sincos(em.mul(float(axis), qf[tree.frame_free[k]]))
            cp, sp = em.sub(em.mul(cp, c), em.mul(sp, s)), em.add(em.mul(sp, c), em.mul(cp, s))
        if constant[k] is None:
            cd, sd = drv["cd"][k], drv["sd"][k]
        else:
            cd, sd = float(np.cos(constant[k])), float(np.sin(constant[k]))
        ca = em.sub(em.mul(cp, cd), em.mul(sp, sd))
        sa = em.add(em.mul(sp, cd), em.mul(cp, sd))
        ax, ay = lane.field(tree.frame_at[k, 0]), lane.field(tree.frame_at[k, 1])
        dx = em.sub(em.mul(pc, ax), em.mul(ps, ay))
        dy = em.add(em.mul(ps, ax), em.mul(pc, ay))
        e = (0.0, 0.0)
        if kind == PRISMATIC:
            e = (ca, sa) if axis == 0 else (em.neg(sa), ca)
            qk = qf[tree.frame_free[k]] if tree.frame_free[k] >= 0 else drv["q"][
                tree.frame_driven[k]]
            dx, dy = em.add(dx, em.mul(qk, e[0])), em.add(dy, em.mul(qk, e[1]))
        origin = (dx, dy) if p < 0 else (em.add(g["O"][p][0], dx), em.add(g["O"][p][1], dy))
        for key, value in (("cA", ca), ("sA", sa), ("cP", cp), ("sP", sp), ("d", (dx, dy)),
                           ("e", e), ("O", origin)):
            g[key].append(value)
    return g


def _emit_points(lane: _Lane, g: dict, indices: list[int]) -> list[tuple[Sym, Sym]]:
    tree, em = lane.tree, lane.em
    out = []
    for i in indices:
        k = tree.point_frame[i]
        px, py = lane.field(tree.point_fields[i, 0]), lane.field(tree.point_fields[i, 1])
        ca, sa = g["cA"][k], g["sA"][k]
        out.append((em.add(g["O"][k][0], em.sub(em.mul(ca, px), em.mul(sa, py))),
                    em.add(g["O"][k][1], em.add(em.mul(sa, px), em.mul(ca, py)))))
    return out


def _emit_dynamics(lane: _Lane, qf: list[Sym], vf: list[Sym], drv: dict):
    """Free-free mass matrix (lower triangle) and rhs = springs − RNEA(q̈_f = 0)."""
    tree, em = lane.tree, lane.em
    g = _emit_geometry(lane, qf, drv)
    n = len(tree.frame_parent)
    w: list[Sym] = []
    eps: list[Sym] = []
    acc: list[tuple[Sym, Sym]] = []
    for k in range(n):
        p = tree.frame_parent[k]
        wp, ep = (0.0, 0.0) if p < 0 else (w[p], eps[p])
        apx, apy = (0.0, 0.0) if p < 0 else acc[p]
        dx, dy = g["d"][k]
        wp2 = em.mul(wp, wp)
        ax = em.sub(em.sub(apx, em.mul(ep, dy)), em.mul(wp2, dx))
        ay = em.sub(em.add(apy, em.mul(ep, dx)), em.mul(wp2, dy))
        wk, ek = wp, ep
        kind, axis = tree.frame_kind[k], float(tree.frame_axis[k])
        free, driven = tree.frame_free[k], tree.frame_driven[k]
        qdot = vf[free] if free >= 0 else (drv["v"][driven] if driven >= 0 else 0.0)
        qdd = drv["a"][driven] if driven >= 0 else 0.0
        if kind == REVOLUTE:
            wk = em.add(wp, em.mul(axis, qdot))
            ek = em.add(ep, em.mul(axis, qdd))
        elif kind == PRISMATIC:
            ex, ey = g["e"][k]
            cor = em.mul(em.mul(2.0, wp), qdot)
            ax = em.add(em.sub(ax, em.mul(cor, ey)), em.mul(qdd, ex))
            ay = em.add(em.add(ay, em.mul(cor, ex)), em.mul(qdd, ey))
        w.append(wk)
        eps.append(ek)
        acc.append((ax, ay))
    F: list[list[Sym]] = [[0.0, 0.0, 0.0] for _ in range(n)]
    grav = lane.field(tree.gravity_field)
    bodies = []
    for b in range(len(tree.body_frame)):
        k = tree.body_frame[b]
        m, cx, cy, inertia = (lane.field(f) for f in tree.body_fields[b])
        ca, sa = g["cA"][k], g["sA"][k]
        rx = em.sub(em.mul(ca, cx), em.mul(sa, cy))
        ry = em.add(em.mul(sa, cx), em.mul(ca, cy))
        w2 = em.mul(w[k], w[k])
        acx = em.sub(em.sub(acc[k][0], em.mul(eps[k], ry)), em.mul(w2, rx))
        acy = em.sub(em.add(acc[k][1], em.mul(eps[k], rx)), em.mul(w2, ry))
        fx, fy = em.mul(m, acx), em.mul(m, em.add(acy, grav))
        F[k][0] = em.add(F[k][0], fx)
        F[k][1] = em.add(F[k][1], fy)
        moment = em.add(em.mul(inertia, eps[k]), em.sub(em.mul(rx, fy), em.mul(ry, fx)))
        F[k][2] = em.add(F[k][2], moment)
        bodies.append((k, m, inertia, (em.add(g["O"][k][0], rx), em.add(g["O"][k][1], ry))))
    tau: dict[int, Sym] = {}
    for k in range(n - 1, -1, -1):
        if tree.frame_free[k] >= 0:
            if tree.frame_kind[k] == REVOLUTE:
                tau[tree.frame_free[k]] = em.mul(float(tree.frame_axis[k]), F[k][2])
            else:
                tau[tree.frame_free[k]] = em.dot([(g["e"][k][0], F[k][0]),
                                                  (g["e"][k][1], F[k][1])])
        p = tree.frame_parent[k]
        if p >= 0:
            dx, dy = g["d"][k]
            F[p][0] = em.add(F[p][0], F[k][0])
            F[p][1] = em.add(F[p][1], F[k][1])
            F[p][2] = em.add(F[p][2], em.add(F[k][2], em.sub(em.mul(dx, F[k][1]),
                                                             em.mul(dy, F[k][0]))))
    nf = tree.n_free
    rhs = []
    for i in range(nf):
        stiff, damp, rest = tree.spring_fields[i]
        spring: Sym = 0.0
        if stiff >= 0:
            spring = em.neg(em.add(em.mul(lane.field(stiff), em.sub(qf[i], lane.field(rest))),
                                   em.mul(lane.field(damp), vf[i])))
        rhs.append(em.sub(spring, tau[i]))
    # Mass matrix from Jacobian columns: M_ij = Σ_b m J_i·J_j + I Jα_i Jα_j.
    ancestors = []
    for k in range(n):
        chain, p = {k}, tree.frame_parent[k]
        while p >= 0:
            chain.add(p)
            p = tree.frame_parent[p]
        ancestors.append(chain)
    free_frames = [int(np.where(tree.frame_free == i)[0][0]) for i in range(nf)]
    M: dict[tuple[int, int], list[Sym]] = {(i, j): [] for i in range(nf) for j in range(i + 1)}
    for k, m, inertia, (cbx, cby) in bodies:
        columns = {}
        for i, kf in enumerate(free_frames):
            if kf not in ancestors[k]:
                continue
            if tree.frame_kind[kf] == REVOLUTE:
                axis = float(tree.frame_axis[kf])
                rx, ry = em.sub(cbx, g["O"][kf][0]), em.sub(cby, g["O"][kf][1])
                columns[i] = (em.mul(-axis, ry), em.mul(axis, rx), axis)
            else:
                columns[i] = (g["e"][kf][0], g["e"][kf][1], 0.0)
        for i in columns:
            for j in columns:
                if j > i:
                    continue
                ji, jj = columns[i], columns[j]
                term = em.mul(m, em.dot([(ji[0], jj[0]), (ji[1], jj[1])]))
                term = em.add(term, em.mul(inertia, ji[2] * jj[2]))
                M[(i, j)].append(term)
    Msym = {key: em.sum(terms) for key, terms in M.items()}
    return Msym, rhs


def _emit_cholesky(em: Emitter, A: dict, n: int) -> dict:
    L: dict = {}
    for i in range(n):
        for j in range(i + 1):
            s = A[(i, j)]
            for k in range(j):
                s = em.sub(s, em.mul(L[(i, k)], L[(j, k)]))
            if i == j:
                L[(i, i)] = em.new(f"np.sqrt({em.fmt(s)})")
                L[("inv", i)] = em.new(f"1.0 / {L[(i, i)]}")
            else:
                L[(i, j)] = em.mul(s, L[("inv", j)])
    return L


def _emit_solve(em: Emitter, L: dict, b: list[Sym], n: int) -> list[Sym]:
    y: list[Sym] = []
    for i in range(n):
        s = b[i]
        for k in range(i):
            s = em.sub(s, em.mul(L[(i, k)], y[k]))
        y.append(em.mul(s, L[("inv", i)]))
    x: list[Sym] = [0.0] * n
    for i in range(n - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, n):
            s = em.sub(s, em.mul(L[(k, i)], x[k]))
        x[i] = em.mul(s, L[("inv", i)])
    return x


def _driven_syms(tree: Tree, tag: str) -> dict:
    nF = len(tree.frame_parent)
    return {"cd": [f"cd{tag}_{k}" for k in range(nF)], "sd": [f"sd{tag}_{k}" for k in range(nF)],
            "q": [f"qd{tag}_{j}" for j in range(tree.n_driven)],
            "v": [f"vd{tag}_{j}" for j in range(tree.n_driven)],
            "a": [f"ad{tag}_{j}" for j in range(tree.n_driven)]}


def _hoist(tree: Tree, tag: str, stage: str, used: set[str]) -> list[str]:
    lines = []
    nF, nd = len(tree.frame_parent), tree.n_driven
    for prefix, array, count in (("cd", "cd_s", nF), ("sd", "sd_s", nF), ("qd", "qd_s", nd),
                                 ("vd", "vd_s", nd), ("ad", "ad_s", nd)):
        for j in range(count):
            name = f"{prefix}{tag}_{j}"
            if name in used:
                lines.append(f"{name} = {array}[n, {stage}, {j}]")
    return lines


def _stored(em: Emitter, value: Sym, array: str, row: int, stores: list[str]) -> Sym:
    """Store ``value`` to ``array[row, b]`` for a later lane loop; return how to read it there."""
    if isinstance(value, float):
        return value
    stores.append(f"{array}[{row}, b] = {value}")
    return f"{array}_{row}"


def generate_source(tree: Tree, n_points: int) -> str:
    """Python source of the specialised kernel ``integrate`` for ``tree``.

    One ROS34PW2 step is four lane loops (one per stage, each small enough for LLVM to
    vectorise); what a later stage needs (M₀, the factor of W, the stage increments) goes
    through per-lane arrays MX, U0, U1, U2.
    """
    nf = tree.n_free
    q = [f"q{i}" for i in range(nf)]
    v = [f"v{i}" for i in range(nf)]
    Uq: list[list[Sym]] = []
    Uv: list[list[Sym]] = []
    M0: dict = {}
    L_W: dict = {}
    stages = []  # (lines, used fields, loads)
    all_fields: set[int] = set()
    for s in range(4):
        em = Emitter(f"s{s}_")
        lane = _Lane(tree, em)
        stores: list[str] = []
        Kf = [lane.field(tree.spring_fields[i, 0]) if tree.spring_fields[i, 0] >= 0 else 0.0
              for i in range(nf)]
        Cf = [lane.field(tree.spring_fields[i, 1]) if tree.spring_fields[i, 1] >= 0 else 0.0
              for i in range(nf)]
        Yq = [em.sum([q[i]] + [em.mul(float(kernels.A_T[s, j]), Uq[j][i]) for j in range(s)])
              for i in range(nf)]
        Yv = [em.sum([v[i]] + [em.mul(float(kernels.A_T[s, j]), Uv[j][i]) for j in range(s)])
              for i in range(nf)]
        M, rhs = _emit_dynamics(lane, Yq, Yv, _driven_syms(tree, str(s)))
        if s == 0:
            W = dict(M)
            for i in range(nf):
                W[(i, i)] = em.add(W[(i, i)], em.add(em.mul("hg", Cf[i]), em.mul("hg2", Kf[i])))
            L = _emit_cholesky(em, W, nf)
            M0acc = rhs
            M0_here, L_here = M, L
            for row, key in enumerate(sorted(M, key=str)):
                M0[key] = _stored(em, M[key], "MX", row, stores)
            offset = len(M)
            for row, key in enumerate(sorted(L, key=str)):
                L_W[key] = _stored(em, L[key], "MX", offset + row, stores)
        else:
            M0_here, L_here = M0, L_W
            L = _emit_cholesky(em, M, nf)
            acc = _emit_solve(em, L, rhs, nf)
            M0acc = [em.dot([(M0[(max(i, j), min(i, j))], acc[j]) for j in range(nf)])
                     for i in range(nf)]
        rq = [em.sum([Yv[i]] + [em.mul(f"ch{s}{j}", Uq[j][i]) for j in range(s)])
              for i in range(nf)]
        cv = [em.sum([em.mul(f"ch{s}{j}", Uv[j][i]) for j in range(s)]) for i in range(nf)]
        M0cv = [em.dot([(M0_here[(max(i, j), min(i, j))], cv[j]) for j in range(nf)])
                for i in range(nf)]
        b = [em.sub(em.mul("hg", em.add(M0acc[i], M0cv[i])), em.mul("hg2", em.mul(Kf[i], rq[i])))
             for i in range(nf)]
        uv = _emit_solve(em, L_here, b, nf)
        uq = [em.mul("hg", em.add(rq[i], uv[i])) for i in range(nf)]
        if s < 3:
            Uq.append([_stored(em, uq[i], f"U{s}", i, stores) for i in range(nf)])
            Uv.append([_stored(em, uv[i], f"U{s}", nf + i, stores) for i in range(nf)])
        else:
            Uq.append(uq)
            Uv.append(uv)
            new_q = [em.sum([q[i]] + [em.mul(float(kernels.M_T[j]), Uq[j][i]) for j in range(4)])
                     for i in range(nf)]
            new_v = [em.sum([v[i]] + [em.mul(float(kernels.M_T[j]), Uv[j][i]) for j in range(4)])
                     for i in range(nf)]
            ok = " & ".join(f"(abs({Emitter.fmt(x)}) < max_abs)" for x in new_q + new_v)
            stores += [f"S[{i}, b] = {Emitter.fmt(x)}" for i, x in enumerate(new_q)]
            stores += [f"S[{nf + i}, b] = {Emitter.fmt(x)}" for i, x in enumerate(new_v)]
            stores += [f"alive[b] = alive[b] * (1.0 if ({ok}) else 0.0)"]
        stages.append((em.lines + stores, lane.used_fields))
        all_fields |= lane.used_fields
    step_lines = [line for lines, _ in stages for line in lines]
    lane = _Lane(tree, Emitter("unused"))
    lane.used_fields = all_fields
    # ---- kinematics of the points at a frame time
    pem = Emitter("p")
    plane = _Lane(tree, pem)
    plane.used_fields = lane.used_fields
    geometry = _emit_geometry(plane, q, _driven_syms(tree, "f"))
    points = _emit_points(plane, geometry, list(range(n_points)))
    text = "\n".join(step_lines) + "\n" + "\n".join(pem.lines)
    for char in "()*,-+/":
        text = text.replace(char, " ")
    used_names = set(text.split())
    fields = sorted(lane.used_fields)
    out = [f"# generated by bemore.model.codegen (kernel format {KERNEL_FORMAT})",
           "import numpy as np", "from numba import njit", "",
           "@njit(cache=True, nogil=True, error_model='numpy', fastmath={'contract'})",
           "def integrate(Vt, S, MX, U0, U1, U2, qd_s, vd_s, ad_s, cd_s, sd_s, h, n_sub, lane_lo,",
           "              lane_hi, meas, wts, store_state, store_points, do_cost, max_abs,",
           "              out_state, out_pts, cost, alive):",
           "    n_steps = qd_s.shape[0] - 1",
           f"    hg = h * {kernels.GAMMA!r}",
           "    hg2 = hg * hg"]
    for s in range(4):
        for j in range(s):
            out.append(f"    ch{s}{j} = {float(kernels.C_T[s, j])!r} / h")
    out += ["    if True:",
            "        lo = np.uint64(lane_lo)",
            "        hi = np.uint64(lane_hi)",
            "        for n in range(n_steps + 1):",
            "            if n % n_sub == 0:",
            "                f = n // n_sub"]
    out += ["                " + line for line in _hoist(tree, "f", "0", used_names)]
    out += ["                if store_state:",
            "                    for b in range(lo, hi):"]
    out += [f"                        out_state[f, {i}, b] = S[{i}, b]" for i in range(2 * nf)]
    out += ["                if store_points or do_cost:",
            "                    for b in range(lo, hi):"]
    body = [f"V{i} = Vt[{i}, b]" for i in fields] + [f"q{i} = S[{i}, b]" for i in range(nf)]
    body += pem.lines
    body += ["if store_points:"]
    body += [f"    out_pts[f, {i}, 0, b] = {Emitter.fmt(x)}\n"
             f"    out_pts[f, {i}, 1, b] = {Emitter.fmt(y)}" for i, (x, y) in enumerate(points)]
    body += ["if do_cost:", "    err = 0.0"]
    body += [f"    dx = {Emitter.fmt(x)} - meas[f, {i}, 0]\n"
             f"    dy = {Emitter.fmt(y)} - meas[f, {i}, 1]\n"
             f"    err += wts[f, {i}] * (dx * dx + dy * dy)" for i, (x, y) in enumerate(points)]
    body += ["    cost[b] += err"]
    out += ["                        " + line for chunk in body for line in chunk.split("\n")]
    out += ["            if n == n_steps:", "                break"]
    for s in range(4):
        out += ["            " + line for line in _hoist(tree, str(s), str(s), used_names)]
    for lines, used in stages:
        text = " ".join(lines)
        for char in "()*,-+/=":
            text = text.replace(char, " ")
        names = set(text.split())
        body = [f"V{i} = Vt[{i}, b]" for i in sorted(used)]
        body += [f"q{i} = S[{i}, b]" for i in range(nf) if f"q{i}" in names]
        body += [f"v{i} = S[{nf + i}, b]" for i in range(nf) if f"v{i}" in names]
        for name in sorted(names):
            array, _, row = name.partition("_")
            if array in ("MX", "U0", "U1", "U2") and row.isdigit():
                body.append(f"{name} = {array}[{row}, b]")
        out += ["            for b in range(lo, hi):"]
        out += ["                " + line for line in body + lines]
    return "\n".join(out) + "\n"


_loaded: dict[str, object] = {}


_by_tree: dict[tuple[int, int], tuple[Tree, object]] = {}


def kernel_for(tree: Tree, n_points: int):
    """The compiled specialised kernel for ``tree`` (source cached on disk by hash)."""
    known = _by_tree.get((id(tree), n_points))
    if known is not None and known[0] is tree:
        return known[1]
    kernel = _kernel_for_source(generate_source(tree, n_points))
    _by_tree[(id(tree), n_points)] = (tree, kernel)
    return kernel


def _allow_vectorisation() -> None:
    """Let LLVM emit enough runtime alias checks to vectorise the lane loops.

    Each stage loop reads and writes several per-lane arrays; LLVM's default limit of 8 runtime
    memory checks makes it give up ("too many memory checks needed"). Raising it only changes
    how hard the loop vectoriser tries.
    """
    import llvmlite.binding as llvm

    llvm.set_option("", "--runtime-memory-check-threshold=100000")
    llvm.set_option("", "--memory-check-merge-threshold=100000")
    llvm.set_option("", "--vectorize-memory-check-threshold=100000")
    llvm.set_option("", "--pragma-vectorize-memory-check-threshold=100000")


def _kernel_for_source(source: str):
    """Import (and so compile or load from numba's cache) the kernel of ``source``."""
    _allow_vectorisation()
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    if digest in _loaded:
        return _loaded[digest]
    folder = Path(os.environ.get("BEMORE_KERNEL_CACHE", Path.home() / ".cache/bemore/kernels"))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # e.g. a read-only home: fall back to the temporary folder
        import tempfile

        folder = Path(tempfile.gettempdir()) / "bemore-kernels"
        folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"tree_{digest}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(source)
        tmp.replace(path)
    name = f"bemore_kernel_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _loaded[digest] = module.integrate
    return module.integrate


def run_threads(kernel, n_lanes: int, threads: int, args_before: tuple, args_after: tuple) -> None:
    """Run ``kernel(*args_before, lo, hi, *args_after)`` on ``threads`` disjoint lane groups."""
    from concurrent.futures import ThreadPoolExecutor

    threads = max(1, min(threads, n_lanes))
    bounds = [(g * n_lanes) // threads for g in range(threads + 1)]
    if threads == 1:
        kernel(*args_before, 0, n_lanes, *args_after)
        return
    with ThreadPoolExecutor(threads) as pool:
        futures = [pool.submit(kernel, *args_before, bounds[g], bounds[g + 1], *args_after)
                   for g in range(threads)]
        for future in futures:
            future.result()
