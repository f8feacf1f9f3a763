"""The generated batch kernel: program assembly, the driven-value table, loading, threads.

:func:`generate_program` turns a compiled tree into the Python source of two functions
that integrate a batch with ROS34PW2 (``kernels.py`` is the readable reference), compiled by
clang after translation to C (:mod:`bemore.model.native`) or, without a C compiler, by numba:
``integrate_shared`` (one driven motion for every lane: the driven values of a stage are read
once per step, outside the lane loops) and ``integrate_members`` (one driven motion per lane:
the same values are read inside the lane loops). Both read the driven state from one table
``D`` whose columns (*slots*) are only the driven quantities the code uses: cos/sin of the
distinct driven angle sums and the driven q, q̇, q̈ that appear (see :func:`driven_table`).
Frame times can also store the driven efforts (hybrid dynamics, then inverse dynamics).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import itertools
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bemore.model import native, rosenbrock
from bemore.model.codegen import (
    Emitter,
    Sym,
    _emit_cholesky,
    _emit_dynamics,
    _emit_geometry,
    _emit_points,
    _emit_solve,
    _Lane,
    emit_efforts,
)
from bemore.model.tree import REVOLUTE, Tree

# Bump when the generated code or the LLVM options change, so cached machine code is rebuilt.
KERNEL_FORMAT = 12
_DRIVEN_NAME = re.compile(r"^(cd|sd|qd|vd|ad)([fgx0-3])_(\d+)$")
# The kernels' arguments in order, each with its kind (scalar type, or rank of a float64
# array; D is (steps, rows, slots) for one shared motion, with a last axis of members
# otherwise): the Python signature, and what the C backend needs.
_KINDS = {"Vt": 2, "S": 2, "S0": 2, "MX": 2, "U": 3, "UN": 2, "R": 2, "CO": 2, "D": 3,
          "h": "float", "n_sub": "int", "spp": "int", "lane_lo": "int", "lane_hi": "int",
          "meas": 3, "wts": 2, "store_state": "int", "store_points": "int", "do_cost": "int",
          "max_abs": "float", "out_q": 3, "out_v": 3, "out_pts": 4, "out_eff": 3, "cost": 1,
          "alive": 1}
_ARGS = ", ".join(_KINDS)
LANE_LO_ARG = list(_KINDS).index("lane_lo")  # position of the lane range in the arguments


def angle_representatives(tree: Tree) -> list[int]:
    """Per frame, the frame whose driven angle sum it shares (itself if it adds an angle)."""
    rep: list[int] = []
    for k in range(len(tree.frame_parent)):
        p = tree.frame_parent[k]
        adds = tree.frame_angle[k] != 0.0 or (tree.frame_kind[k] == REVOLUTE
                                               and tree.frame_driven[k] >= 0)
        rep.append(rep[p] if p >= 0 and not adds else k)
    return rep


def angle_terms(tree: Tree) -> tuple[np.ndarray, np.ndarray]:
    """Driven angle sum of every frame as const (nF,) rad + coef (nF, n_driven) @ q_driven."""
    nF = len(tree.frame_parent)
    const = np.zeros(nF)
    coef = np.zeros((nF, tree.n_driven))
    for k in range(nF):
        p = tree.frame_parent[k]
        if p >= 0:
            const[k], coef[k] = const[p], coef[p]
        const[k] += tree.frame_angle[k]
        if tree.frame_kind[k] == REVOLUTE and tree.frame_driven[k] >= 0:
            coef[k, tree.frame_driven[k]] += tree.frame_axis[k]
    return const, coef


def driven_syms(tree: Tree, tag: str) -> dict:
    """Names of the driven values at one stage (``tag``: f = frame time, x = the next step's
    start, 0-3 = stage)."""
    rep = angle_representatives(tree)
    return {"cd": [f"cd{tag}_{rep[k]}" for k in range(len(rep))],
            "sd": [f"sd{tag}_{rep[k]}" for k in range(len(rep))],
            "q": [f"qd{tag}_{j}" for j in range(tree.n_driven)],
            "v": [f"vd{tag}_{j}" for j in range(tree.n_driven)],
            "a": [f"ad{tag}_{j}" for j in range(tree.n_driven)]}


def _names(lines: list[str]) -> set[str]:
    text = " ".join(lines)
    for char in "()*,-+/=[]":
        text = text.replace(char, " ")
    return set(text.split())


_ASSIGNED = re.compile(r"^([A-Za-z_]\w*) = (.*)$")
_WORDS = re.compile(r"[A-Za-z_]\w*")


def _live(lines: list[str]) -> list[str]:
    """``lines`` without the assignments nothing reads (e.g. the driven coordinates' forces
    of a stage's RNEA): LLVM would drop them anyway, but numba pays for every line first."""
    live: set[str] = set()
    out: list[str] = []
    for line in reversed(lines):
        match = _ASSIGNED.match(line)
        if match is not None:
            if match[1] not in live:
                continue
            line_words = _WORDS.findall(match[2])
        else:
            line_words = _WORDS.findall(line)
        live.update(line_words)
        out.append(line)
    return out[::-1]


def _demand_order(lines: list[str]) -> list[str]:
    """The straight-line ``lines`` of a lane loop reordered so that each value is computed
    just before the first line that needs it: the stores (lines assigning to an array
    element) keep their order, and each is preceded by the values it needs not computed yet,
    depth first, in the order its expression reads them. A value nothing stores is dropped.

    The generator writes the model pass by pass (geometry of every frame, then the RNEA's
    forward pass, the bodies, the backward pass, the mass matrix): many values are live from
    the first pass to the last, more than the 32 vector registers, and the compiler, which
    keeps the source order closely, spills them. Computed where they are needed, fewer values
    are live at once. A read of an array is never moved past a store to that array."""
    defs: dict[str, tuple[str, list[str]]] = {}
    fixed: list[str] = []
    for line in lines:
        match = _ASSIGNED.match(line)
        if match is not None:
            defs[match[1]] = (line, _WORDS.findall(match[2]))
        else:
            fixed.append(line)
    out: list[str] = []
    done: set[str] = set()

    def need(name: str) -> None:
        stack = [(name, False)]
        while stack:
            item, expanded = stack.pop()
            if item in done or item not in defs:
                continue
            if expanded:
                done.add(item)
                out.append(defs[item][0])
                continue
            stack.append((item, True))
            stack += [(word, False) for word in reversed(defs[item][1])
                      if word not in done and word in defs]

    for line in fixed:
        target, _, value = line.partition("=")
        array = target.split("[", 1)[0].strip()
        # Reads of this array first (their values, not the stored ones).
        reads_array = re.compile(rf"(?<![\w.]){re.escape(array)}\[")
        for name, (text, _) in defs.items():
            if name not in done and reads_array.search(text.partition(" = ")[2]):
                need(name)
        for word in _WORDS.findall(value + " " + target.partition("[")[2]):
            need(word)
        out.append(line)
    return out


def _stored(value: Sym, array: str, row: int, stores: list[str]) -> Sym:
    """Store ``value`` to ``array[row, b]`` for a later lane loop; return how to read it there."""
    if isinstance(value, float):
        return value
    stores.append(f"{array}[{row}, b] = {value}")
    return f"{array}_{row}"


@dataclass(frozen=True)
class Program:
    """Source of the two kernels and the slots of their driven table ``D``.

    ``slots[i]`` (shared kernel) is (kind, index): kind ``cd``/``sd`` = cos/sin of the driven
    angle sum of frame ``index`` (see :func:`angle_terms`), ``qd``/``vd``/``ad`` = driven
    coordinate ``index``'s value (m or rad), rate, acceleration. ``member_slots`` (per-member
    kernel) has ``an`` (the angle sum itself, rad) instead of ``cd``/``sd``.
    """

    source: str
    slots: tuple[tuple[str, int], ...]
    member_slots: tuple[tuple[str, int], ...]


def _stage_code(tree: Tree) -> tuple[tuple, tuple, tuple, list[Sym]]:
    """ROS34PW2 as straight-line lane code (lines, fields used, shared names): stage 0 (which
    also factors W), one generic stage run for stages 1-3, and the final combination.

    The generic stage reads its coefficients from names set by the stage loop (``cfa{j}`` =
    A_T[s, j], ``cfc{j}`` = C_T[s, j] / h, zero for j ≥ s) and stores its increment to
    ``U[st, ·, b]``: one copy of the stage code instead of three (compile time is roughly
    proportional to the code size; the zero terms cost a few % of a stage's flops). Last, the
    new free positions (symbols of the final combination's code).
    """
    nf = tree.n_free
    q = [f"q{i}" for i in range(nf)]
    v = [f"v{i}" for i in range(nf)]

    def springs(lane: _Lane) -> tuple[list[Sym], list[Sym]]:
        fields = tree.spring_fields
        return ([lane.field(fields[i, 0]) if fields[i, 0] >= 0 else 0.0 for i in range(nf)],
                [lane.field(fields[i, 1]) if fields[i, 1] >= 0 else 0.0 for i in range(nf)])

    # Stage 0: dynamics at the step start, W = M + hγC + h²γ²K and its factor, increment 0.
    em = Emitter("s0_")
    lane = _Lane(tree, em)
    stores: list[str] = []
    Kf, Cf = springs(lane)
    M, rhs = _emit_dynamics(lane, q, v, driven_syms(tree, "0"))
    W = dict(M)
    for i in range(nf):
        W[(i, i)] = em.add(W[(i, i)], em.add(em.mul("hg", Cf[i]), em.mul("hg2", Kf[i])))
    L = _emit_cholesky(em, W, nf)
    M0: dict = {}
    L_W: dict = {}
    for row, key in enumerate(sorted(M, key=str)):
        M0[key] = _stored(M[key], "MX", row, stores)
    for row, key in enumerate(sorted(L, key=str)):
        L_W[key] = _stored(L[key], "MX", len(M) + row, stores)
    # M0 · acc = rhs exactly at the step start; no earlier increments (rq = v, cv = 0).
    b = [em.sub(em.mul("hg", rhs[i]), em.mul("hg2", em.mul(Kf[i], v[i]))) for i in range(nf)]
    uv = _emit_solve(em, L, b, nf)
    uq = [em.mul("hg", em.add(v[i], uv[i])) for i in range(nf)]
    stores += [f"U[0, {i}, b] = {Emitter.fmt(x)}" for i, x in enumerate(uq + uv)]
    # The step start for the frames recorded inside the step (the lanes' S0, see _function).
    stores = [f"S0[{i}, b] = {x}" for i, x in enumerate(q + v)] + stores
    stage0 = (_live(em.lines + stores), lane.used_fields, em.shared_names())

    # Stages 1-3: Y = y + Σ_j a_sj U_j; M(Y) acc = rhs(Y); M0 (acc + Σ c_sj U^v_j) … solved by W.
    em = Emitter("sg_")
    lane = _Lane(tree, em)
    Kf, _ = springs(lane)
    Uq = [[f"U{j}_{i}" for i in range(nf)] for j in range(3)]
    Uv = [[f"U{j}_{nf + i}" for i in range(nf)] for j in range(3)]
    Yq = [em.sum([q[i]] + [em.mul(f"cfa{j}", Uq[j][i]) for j in range(3)]) for i in range(nf)]
    Yv = [em.sum([v[i]] + [em.mul(f"cfa{j}", Uv[j][i]) for j in range(3)]) for i in range(nf)]
    M, rhs = _emit_dynamics(lane, Yq, Yv, driven_syms(tree, "g"))
    acc = _emit_solve(em, _emit_cholesky(em, M, nf), rhs, nf)
    rq = [em.sum([Yv[i]] + [em.mul(f"cfc{j}", Uq[j][i]) for j in range(3)]) for i in range(nf)]
    accv = [em.sum([acc[i]] + [em.mul(f"cfc{j}", Uv[j][i]) for j in range(3)])
            for i in range(nf)]
    M0accv = [em.dot([(M0[(max(i, j), min(i, j))], accv[j]) for j in range(nf)])
              for i in range(nf)]
    b = [em.sub(em.mul("hg", M0accv[i]), em.mul("hg2", em.mul(Kf[i], rq[i])))
         for i in range(nf)]
    uv = _emit_solve(em, L_W, b, nf)
    uq = [em.mul("hg", em.add(rq[i], uv[i])) for i in range(nf)]
    # To UN, not U[st]: a store to U at a run-time row next to reads of U kept LLVM from
    # vectorising the loop ("unsafe indirect dependence"); the caller copies UN to U[st].
    stores = [f"UN[{i}, b] = {Emitter.fmt(x)}" for i, x in enumerate(uq + uv)]
    generic = (_live(em.lines + stores), lane.used_fields, em.shared_names())

    # New state y + Σ m_j U_j; a lane whose state leaves ±max_abs (or is NaN) dies.
    em = Emitter("sf_")
    # U₃ is read where stage 3 left it, UN (see _function).
    new = [em.sum([x] + [em.mul(float(rosenbrock.M_T[j]),
                                f"U{j}_{i + nf * part}" if j < 3 else f"UN_{i + nf * part}")
                         for j in range(4)])
           for part, names in enumerate((q, v)) for i, x in enumerate(names)]
    ok = " & ".join(f"(abs({Emitter.fmt(x)}) < max_abs)" for x in new)
    stores = [f"S[{i}, b] = {Emitter.fmt(x)}" for i, x in enumerate(new)]
    stores += [f"alive[b] = alive[b] * (1.0 if ({ok}) else 0.0)"]
    final = (em.lines + stores, set(), em.shared_names())
    return stage0, generic, final, new[:nf]


def _record_code(tree: Tree, stored_points: tuple[int, ...], cost_points: tuple[int, ...]
                 ) -> tuple[tuple, ...]:
    """Lane code at a frame time: the points ``stored_points`` stored (model point indices, in
    that order); the cost of the points ``cost_points`` (model point indices; ``meas``/``wts``
    columns in that order); the driven efforts.

    The stored points and the cost are two blocks, each its own lane loop with no branch
    inside (a branch on ``store_points`` inside one loop kept LLVM from vectorising it)."""
    nf = tree.n_free
    q = [f"q{i}" for i in range(nf)]
    v = [f"v{i}" for i in range(nf)]
    pem = Emitter("p")
    plane = _Lane(tree, pem)
    points = _emit_points(plane, _emit_geometry(plane, q, driven_syms(tree, "f")),
                          list(stored_points))
    body = [*pem.lines]
    body += [f"R[{2 * i + axis}, b] = {Emitter.fmt(xy[axis])}"
             for i, xy in enumerate(points) for axis in (0, 1)]
    cost = _cost_code(tree, q, "f", cost_points)
    eem = Emitter("e")
    elane = _Lane(tree, eem)
    efforts = emit_efforts(elane, q, v, driven_syms(tree, "f"))
    ebody = _live([*eem.lines, *(f"R[{j}, b] = {Emitter.fmt(x)}"
                                 for j, x in enumerate(efforts))])
    return ((body, plane.used_fields, pem.shared_names()),
            cost, (ebody, elane.used_fields, eem.shared_names()))


def _cost_code(tree: Tree, q: list[Sym], tag: str, cost_points: tuple[int, ...]) -> tuple:
    """Lane code adding frame f's cost of the points ``cost_points`` at the free positions
    ``q`` (driven values of ``tag``, see :func:`driven_syms`) to ``cost[b]``."""
    cem = Emitter("k")  # not "c": c00 … c11 are the Hermite weights
    cem.lane.update(x for x in q if isinstance(x, str))  # lane values, whatever their names
    clane = _Lane(tree, cem)
    chosen = _emit_points(clane, _emit_geometry(clane, q, driven_syms(tree, tag)),
                          list(cost_points))
    # One name per value (dx0, dy0, err0 …): a name assigned twice costs numba's SSA pass.
    cbody = [*cem.lines]
    for i, (x, y) in enumerate(chosen):
        cbody += [f"dx{i} = {Emitter.fmt(x)} - meas[f, {i}, 0]",
                  f"dy{i} = {Emitter.fmt(y)} - meas[f, {i}, 1]",
                  f"err{i} = {f'err{i - 1} + ' if i else ''}"
                  f"wts[f, {i}] * (dx{i} * dx{i} + dy{i} * dy{i})"]
    cbody += [f"cost[b] += {f'err{len(chosen) - 1}' if chosen else '0.0'}"]
    return (_live(cbody), clane.used_fields, cem.shared_names())


class _Assembler:
    """Writes one kernel function (shared or per-member driven values)."""

    def __init__(self, nf: int, slot_of: dict[tuple[str, int], int], per_member: bool) -> None:
        self.nf = nf
        self.slot_of = slot_of
        self.per_member = per_member
        self.blocks = 0  # blocks written so far: each gets its own names

    def driven_loads(self, names: set[str], lane: bool) -> list[str]:
        lines = []
        angles_done: set[tuple[str, int]] = set()
        for name in sorted(names):
            match = _DRIVEN_NAME.match(name)
            if match is None:
                continue
            tag, kind, k = match[2], match[1], int(match[3])
            # rf: the table row of the frame time; st: of the generic stage (1-3); x: the
            # next step's start (row 0 of step n + 1)
            step, stage = {"f": ("n", "rf"), "g": ("n", "st"), "x": ("n + 1", "0")}.get(
                tag, ("n", tag))
            if lane and kind in ("cd", "sd"):
                # Per member: the table holds the angle; its sine and cosine are computed in
                # the lane loop (vectorised polynomial) rather than by numpy per table entry.
                if (tag, k) in angles_done:
                    continue
                angles_done.add((tag, k))
                em = Emitter(f"z{tag}_{k}_")
                angle = em.new(f"D[{step}, {stage}, {self.slot_of[('an', k)]}, b]")
                sin, cos = em.sincos(angle)
                lines += [*em.lines, f"cd{tag}_{k} = {cos}", f"sd{tag}_{k} = {sin}"]
                continue
            index = f"{step}, {stage}, {self.slot_of[(kind, k)]}"
            lines.append(f"{name} = D[{index}, b]" if lane else f"{name} = D[{index}]")
        return lines

    def block(self, lines: list[str], fields: set[int], shared: set[str],
              between: bool = False) -> list[str]:
        """Code running ``lines`` for every lane: in the shared kernel, the driven values it
        reads and its shared values first (once), then the lane loop; ``between``: the free
        state is the cubic Hermite interpolant between the step start S0 and end S (weights
        c00… set by the caller)."""
        names = _names(lines)
        out: list[str] = []
        if not self.per_member:
            out = self.driven_loads(names, lane=False)
            out += [line for line in lines if line.split(" = ", 1)[0] in shared]
            lines = [line for line in lines if line.split(" = ", 1)[0] not in shared]
        nf = self.nf
        body = [f"V{i} = Vt[{i}, b]" for i in sorted(fields)]
        for i in range(nf):
            for sym, w in ((f"q{i}", "c"), (f"v{i}", "d")):
                if sym not in names:
                    continue
                if between:
                    body.append(f"{sym} = {w}00 * S0[{i}, b] + {w}10 * S0[{nf + i}, b] + "
                                f"{w}01 * S[{i}, b] + {w}11 * S[{nf + i}, b]")
                else:
                    body.append(f"{sym} = S[{i if w == 'c' else nf + i}, b]")
        for name in sorted(names):
            array, _, row = name.partition("_")
            if array == "MX" and row.isdigit():
                body.append(f"{name} = MX[{row}, b]")
            elif re.fullmatch(r"U\d", array) and row.isdigit():
                body.append(f"{name} = U[{array[1]}, {row}, b]")
            elif array == "UN" and row.isdigit():
                body.append(f"{name} = UN[{row}, b]")
        if self.per_member:
            body += self.driven_loads(names, lane=True)
        self.blocks += 1
        # A block that stores nothing (no cost points, say) keeps its dead reads: a loop needs
        # a statement the C translation knows.
        ordered = _demand_order(body + lines) or body + lines or ["pass"]
        return _single_assignment([*out, "for b in range(lo, hi):"]
                                  + ["    " + line for line in ordered], f"_{self.blocks}")

    def scatter(self, targets: list[str]) -> list[str]:
        """A lane loop copying R[row, lane] to ``targets[row]`` (``#`` stands for the lane)."""
        if not targets:
            return []
        self.blocks += 1
        lane = f"b_{self.blocks}"
        return [f"for {lane} in range(lo, hi):"] + [
            f"    {target.replace('#', lane)} = R[{row}, {lane}]"
            for row, target in enumerate(targets)]


_TARGET = re.compile(r"^\s*(?:for )?([A-Za-z_]\w*)(?: = | in )")
_WORD = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def _single_assignment(lines: list[str], suffix: str) -> list[str]:
    """``lines`` with every name they assign (loop variable included) renamed ``name+suffix``.

    Blocks reuse names (q0, V4, b …): numba rebuilds SSA form for every name assigned at more
    than one place, in time that grows with the function's size for each such name — with a few
    thousand of them it was most of an 80 s compilation. A block reads only its own names and
    the kernel's arguments and loop state, so renaming inside it changes nothing else.
    """
    assigned = {match[1] for match in map(_TARGET.match, lines) if match}
    if not assigned:
        return lines
    rename = {name: name + suffix for name in assigned}
    return [_WORD.sub(lambda m: rename.get(m[0], m[0]), line) for line in lines]


def _indent(lines: list[str], depth: int) -> list[str]:
    return ["    " * depth + line for line in lines]


def _function(name: str, asm: _Assembler, stages, record) -> list[str]:
    """One kernel: per step, copy the state to S0, run the stages, then record the frames of
    the step (all through the cubic Hermite of the step's ends: weights 1, 0 at a step start
    reproduce S0 exactly, so one copy of the record code serves every frame). At one sample per
    step, a frame's cost but the first is added by the lane loop of the step before's new state,
    from that state (the same values: docs/speed.md, "The engine: fewer passes over the lanes
    per step")."""
    nf = asm.nf
    stage0, generic, final, final_cost = stages
    out = ["@njit(cache=True, nogil=True, error_model='numpy', fastmath={'contract'})",
           f"def {name}({_ARGS}):",
           "    n_steps = D.shape[0] - 1",
           f"    hg = h * {rosenbrock.GAMMA!r}",
           "    hg2 = hg * hg",
           "    lo = np.uint64(lane_lo)", "    hi = np.uint64(lane_hi)",
           "    for n in range(n_steps + 1):",
           # Stage 0 copies the state to S0 as it reads it; the last frame has no stage 0.
           "        if n == n_steps:",
           "            for b in range(lo, hi):"]
    out += [f"                S0[{i}, b] = S[{i}, b]" for i in range(2 * nf)]
    out += ["        if n < n_steps:"]
    out += _indent(asm.block(*stage0), 3)
    out += ["            for st in range(1, 4):"]
    out += [f"                cfa{j} = CO[st, {j}]" for j in range(3)]
    out += [f"                cfc{j} = CO[st, {3 + j}]" for j in range(3)]
    out += _indent(asm.block(*generic), 4)
    # Stages 1-2's increments are read by the later stages from U; stage 3's only by the
    # new state, which reads it from UN.
    out += ["                if st < 3:", "                    for b in range(lo, hi):"]
    out += [f"                        U[st, {i}, b] = UN[{i}, b]" for i in range(2 * nf)]
    # At one sample per step, the next frame's cost (its free positions those of the new state,
    # its driven values those of the next step's start) is added with the new state: its lane
    # loop does not read the state again. The frames' costs are summed in the same order.
    out += ["            if do_cost and spp == 1 and (n + 1) % n_sub == 0:",
            "                f = (n + 1) // n_sub"]
    out += _indent(asm.block(*final_cost), 4)
    out += ["            else:"]
    out += _indent(asm.block(*final), 4)
    # Frames of this step: its start (driven row 0) and, with several samples per step, the
    # samples inside it (driven rows 4…).
    out += ["        if n % n_sub == 0:",
            "            for j in range(spp if n < n_steps else 1):",
            "                f = (n // n_sub) * spp + j",
            "                rf = 3 + j if j > 0 else 0",
            "                x = j / spp",
            "                c00 = 2.0 * x**3 - 3.0 * x**2 + 1.0",
            "                c10 = (x**3 - 2.0 * x**2 + x) * h",
            "                c01 = 3.0 * x**2 - 2.0 * x**3",
            "                c11 = (x**3 - x**2) * h",
            "                d00 = (6.0 * x**2 - 6.0 * x) / h",
            "                d10 = 3.0 * x**2 - 4.0 * x + 1.0",
            "                d01 = (6.0 * x - 6.0 * x**2) / h",
            "                d11 = 3.0 * x**2 - 2.0 * x"]
    out += _indent(_record(asm, *record), 4)
    return out


def _record(asm: _Assembler, points, cost, efforts) -> list[str]:
    """Store the state, points, cost (and efforts if given) of frame f (driven values from
    table row rf)."""
    nf = asm.nf
    store = [f"R[{i}, b] = q{i}" for i in range(nf)]
    store += [f"R[{nf + i}, b] = v{i}" for i in range(nf)]
    # The outputs are member-major (B, F, n), as the caller returns them (no transposed copy
    # afterwards): a lane loop storing there would need scatters and stays scalar, so each
    # block computes into R[row, lane] (vectorised) and a short loop scatters R.
    out = ["if store_state:", *_indent(asm.block(store, set(), set(), True), 1),
           *_indent(asm.scatter([f"out_q[#, f, {i}]" for i in range(nf)]
                                + [f"out_v[#, f, {i}]" for i in range(nf)]), 1)]
    n_points = sum(1 for line in points[0] if line.startswith("R[")) // 2
    out += ["if store_points:", *_indent(asm.block(*points, True), 1),
            *_indent(asm.scatter([f"out_pts[#, f, {i}, {axis}]" for i in range(n_points)
                                  for axis in (0, 1)]), 1)]
    # (At one sample per step, a frame after the first was costed with the step before's new
    # state.)
    out += ["if do_cost and (spp > 1 or n == 0):", *_indent(asm.block(*cost, True), 1)]
    if efforts is not None:
        n_driven = sum(1 for line in efforts[0] if line.startswith("R["))
        out += asm.block(*efforts, True)
        out += asm.scatter([f"out_eff[#, f, {j}]" for j in range(n_driven)])
    return out


def generate_program(tree: Tree, n_points: int, cost_points: tuple[int, ...] = (),
                     stored_points: tuple[int, ...] | None = None) -> Program:
    """Source of the kernels for ``tree`` (see module doc): ``integrate_shared`` and
    ``integrate_members`` and, storing the driven efforts too, ``integrate_shared_efforts`` and
    ``integrate_members_efforts``. numba compiles a function at its first call, so a caller
    that never asks for efforts never compiles their code. The kernels store the points
    ``stored_points`` (model point indices, in that order; None: all ``n_points``).

    A ROS34PW2 step is three lane loops (stage 0, the generic stage run for stages 1-3, the new
    state), each small enough for LLVM to vectorise; what a later stage needs (M₀, the factor
    of W, the stage increments) goes through per-lane arrays MX and U.
    """
    stage0, generic, final, new_q = _stage_code(tree)
    # The new state and, at one sample per step, the next frame's cost from it (see _function).
    cost_next = _cost_code(tree, new_q, "x", cost_points)
    final_cost = (final[0] + cost_next[0], cost_next[1], final[2] | cost_next[2])
    stages = (stage0, generic, final, final_cost)
    stored = tuple(range(n_points)) if stored_points is None else tuple(stored_points)
    points, cost, efforts = _record_code(tree, stored, cost_points)
    used = _names([line for lines, _, _ in (*stages, points, cost, efforts) for line in lines])
    keys = {(m[1], int(m[3])) for m in map(_DRIVEN_NAME.match, used) if m}
    slots = tuple(sorted(keys))
    member_slots = tuple(sorted({("an", k) if kind in ("cd", "sd") else (kind, k)
                                 for kind, k in keys}))
    out = [f"# generated by bemore.model.generated (kernel format {KERNEL_FORMAT})",
           "import numpy as np", "from numba import njit", ""]
    for name, table in (("integrate_shared", slots), ("integrate_members", member_slots)):
        for suffix, extra in (("", None), ("_efforts", efforts)):
            slot_of = {key: i for i, key in enumerate(table)}
            asm = _Assembler(tree.n_free, slot_of, table is member_slots)
            out += [*_function(name + suffix, asm, stages, (points, cost, extra)), ""]
    return Program("\n".join(out) + "\n", slots, member_slots)


_by_tree: dict[tuple, tuple[Tree, Program, dict]] = {}


def kernel_for(tree: Tree, n_points: int, per_member: bool = False, efforts: bool = False,
               cost_points: tuple[int, ...] = (), stored_points: tuple[int, ...] | None = None):
    """(compiled kernel, its :class:`Program`) for ``tree`` (source cached on disk by hash):
    the per-member or shared-motion kernel, the one that also stores efforts or not; its cost
    sums over the points ``cost_points`` (indices; a module per selection); it stores the
    points ``stored_points`` (indices, in that order; None: all ``n_points``).

    The kernel is the C translation compiled by clang when a compiler is found
    (:mod:`bemore.model.native`), else numba's compilation of the Python source; each is
    built at its first use and cached on disk."""
    program, kernels_built = _program_and_kernels(tree, n_points, cost_points, stored_points)
    name = ("integrate_members" if per_member else "integrate_shared") + (
        "_efforts" if efforts else "")
    if name not in kernels_built:
        kernels_built[name] = _build(program.source, name)
    return kernels_built[name], program


def program_for(tree: Tree, n_points: int, cost_points: tuple[int, ...] = (),
                stored_points: tuple[int, ...] | None = None) -> Program:
    """The :class:`Program` :func:`kernel_for` compiles its kernels from, without compiling any
    (e.g. for the tangent kernels, made from its source: a kernel of it built and never called
    cost ≈ 2.7 s of clang on a first run)."""
    return _program_and_kernels(tree, n_points, cost_points, stored_points)[0]


def _program_and_kernels(tree: Tree, n_points: int, cost_points: tuple[int, ...],
                         stored_points: tuple[int, ...] | None) -> tuple[Program, dict]:
    """The program of (tree, points costed and stored), memoised in this process and on disk,
    with the kernels built from it so far (name → kernel). Every point stored in model order is
    the same program as ``stored_points`` None."""
    cost_points = tuple(int(i) for i in cost_points)
    if stored_points is not None:
        stored_points = tuple(int(i) for i in stored_points)
        if stored_points == tuple(range(n_points)):
            stored_points = None
    key = (id(tree), n_points, cost_points, stored_points)
    known = _by_tree.get(key)
    if known is None or known[0] is not tree:
        known = (tree, _cached_program(tree, n_points, cost_points, stored_points), {})
        _by_tree[key] = known
    return known[1], known[2]


def backend() -> str:
    """What builds the engine kernels in this process: the C compiler's path, or "numba"
    (no compiler found, or ``BEMORE_CC=none``; see :func:`bemore.model.native.compiler`)."""
    return native.compiler() or "numba"


_warned_numba = False


def _build(source: str, name: str):
    """Kernel ``name`` of the generated ``source``, from the C backend or numba."""
    global _warned_numba
    cc = native.compiler()
    if cc is None:
        if not _warned_numba and not os.environ.get("BEMORE_CC"):
            _warned_numba = True
            print("bemore: clang not found; the engine's kernels compile with numba instead "
                  "(about 20 s each the first time; install clang to make that 2 s)",
                  file=sys.stderr)
        return getattr(_load_module(source), name)
    # Keyed on the Python source, so a cached library is found without translating again.
    kinds = dict(_KINDS, D=4) if name.startswith("integrate_members") else _KINDS
    return native.cached(f"{name}\n{source}", name, lambda: native.translate(source, name, kinds),
                         cc)


def _tree_key(tree: Tree, n_points: int, cost_points: tuple[int, ...],
              stored_points: tuple[int, ...] | None = None) -> str:
    """Digest of everything the generated source depends on: the tree's arrays, the number of
    points, the points costed and stored, and the generator's own code."""
    digest = hashlib.sha1(f"{KERNEL_FORMAT} {n_points} {cost_points} {stored_points}".encode())
    for value in (tree.frame_parent, tree.frame_kind, tree.frame_axis, tree.frame_free,
                  tree.frame_driven, tree.frame_at, tree.frame_angle, tree.body_frame,
                  tree.body_fields, tree.spring_fields, tree.point_frame, tree.point_fields,
                  np.array([tree.gravity_field, tree.n_free, tree.n_driven]),
                  tree.field_offset, tree.field_matrix, tree.field_products,
                  tree.product_coefficients):
        digest.update(np.ascontiguousarray(value).tobytes())
    for module in (sys.modules[__name__], sys.modules[Emitter.__module__]):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _cached_program(tree: Tree, n_points: int, cost_points: tuple[int, ...],
                    stored_points: tuple[int, ...] | None = None) -> Program:
    """:func:`generate_program`, memoised on disk (generation takes ~0.1 s of start-up)."""
    key = _tree_key(tree, n_points, cost_points, stored_points)
    path = native.cache_folder() / f"program_{key}.json"
    try:
        data = json.loads(path.read_text())
        return Program(data["source"], tuple(map(tuple, data["slots"])),
                       tuple(map(tuple, data["member_slots"])))
    except (OSError, ValueError, KeyError):
        pass
    program = generate_program(tree, n_points, cost_points, stored_points)
    tmp = path.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
    try:
        tmp.write_text(json.dumps({"source": program.source, "slots": program.slots,
                                   "member_slots": program.member_slots}))
        tmp.replace(path)
    except OSError:  # a read-only cache only costs the generation time
        pass
    return program


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


_modules: dict[str, object] = {}


def _load_module(source: str):
    """Import (and so compile or load from numba's cache) the module of ``source``."""
    _allow_vectorisation()
    digest = hashlib.sha1(source.encode()).hexdigest()[:16]
    if digest in _modules:
        return _modules[digest]
    path = native.cache_folder() / f"tree_{digest}.py"
    if not path.exists() or path.read_text() != source:
        tmp = path.with_suffix(f".tmp{os.getpid()}-{threading.get_ident()}")
        tmp.write_text(source)
        tmp.replace(path)
    name = f"bemore_kernel_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    _modules[digest] = module
    return module


_pool: ThreadPoolExecutor | None = None
LANE_ALIGN = 8  # lanes per vector register (AVX-512 doubles): groups start on a multiple


@functools.cache
def l1_data_cache_bytes() -> int | None:
    """Size (bytes) of a core's level-1 data cache, as POSIX ``getconf LEVEL1_DCACHE_SIZE``
    reports it (glibc answers from the CPU itself); None where it does not (another system,
    no getconf, 0). Asked once per process, at the first chunked kernel call (≈ 2 ms)."""
    try:
        done = subprocess.run(["getconf", "LEVEL1_DCACHE_SIZE"], capture_output=True,
                              text=True, timeout=5.0, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return cache_bytes(done.stdout) if done.returncode == 0 else None


def cache_bytes(text: str) -> int | None:
    """A cache size as getconf prints it (bytes), None when it says nothing usable.

    >>> cache_bytes("32768\\n"), cache_bytes("0\\n"), cache_bytes("undefined"), cache_bytes("")
    (32768, None, None, None)
    """
    text = text.strip()
    return int(text) if text.isdigit() and int(text) > 0 else None


def _lane_chunk(l1_bytes: int | None) -> int | None:
    """Lanes a kernel call integrates together over the whole trial (a multiple of
    LANE_ALIGN), None for all of a thread's lanes at once; see LANE_CHUNK.

    >>> _lane_chunk(48 * 1024), _lane_chunk(None), _lane_chunk(32 * 1024)
    (16, 16, None)
    """
    return 16 if l1_bytes is None or l1_bytes >= 48 * 1024 else None


# Lanes integrated together over the whole trial by one kernel call. Each lane loop of a step
# broadcasts the step's driven values to vectors and spills them on entry (≈ 100 cycles), then
# runs its lanes through ≈ 250 rows of per-lane arrays (fields, state, M₀ and the factor of W,
# the stage increments; ≈ 26 kB for 16 lanes) and a ≈ 16 kB spill area. With a 48 kB L1 data
# cache (Intel Xeon, Sapphire Rapids) 16 lanes keep both in L1 from stage to stage: 1.2× faster
# than a thread's 100 lanes streaming through L2. With 32 kB (AMD Zen 4) they do not fit, and a
# thread's lanes in one call, the loop entries paid once per step instead of once per 16 lanes,
# measured 1.13× less CPU than 16 (docs/speed.md). The numbers are the same either way.
# AUTO: chosen from the core's L1 data cache (:func:`_lane_chunk`) at the first chunked call; a
# number or None (a thread's lanes at once) sets it.
AUTO = "auto"
LANE_CHUNK: int | str | None = AUTO


def lane_groups(n_lanes: int, threads: int) -> list[tuple[int, int]]:
    """Split lanes 0..n_lanes into at most ``threads`` contiguous groups of near-equal size,
    boundaries on multiples of LANE_ALIGN when the batch is big enough."""
    threads = max(1, min(threads, n_lanes))
    bounds = [0]
    for g in range(1, threads):
        cut = (g * n_lanes) // threads
        if n_lanes >= 2 * LANE_ALIGN * threads:
            cut = round(cut / LANE_ALIGN) * LANE_ALIGN
        bounds.append(cut)
    bounds.append(n_lanes)
    return [(lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo]


# A batch of fewer lanes than a vector but at least this many runs as one whole vector on one
# thread, its extra lanes copies of a real one: the sample's members' points at 2 samples per
# step (AMD EPYC Zen 4, docs/speed.md) took 2.58 ms for 3 members and 2.70 ms for 5 on one
# thread, against 2.79 and 3.65 ms (1.6–2× the CPU) as scalar lanes split between two threads.
# Larger batches are not padded (35 lanes padded to 40 measured 0.86×: their scalar remainder
# runs beside whole vectors).
PAD_FROM_LANES = 3


def padded_lane_groups(n_lanes: int, threads: int) -> tuple[int, list[tuple[int, int]]]:
    """The lanes a batch of ``n_lanes`` runs with and their split among at most ``threads``
    threads. PAD_FROM_LANES to LANE_ALIGN − 1 lanes become one whole vector on one thread (the
    caller fills the extra lanes with copies of a real one and drops their outputs); one or two
    lanes are split by :func:`lane_groups` (a lane per thread, with two threads or more); more
    are split by it among at most one thread per whole vector (a group of fewer lanes than a
    vector runs them all as scalar code: 8 members' points at 2 samples per step took 4.33 ms
    split between two threads, 2.64 ms on one; docs/speed.md).

    >>> padded_lane_groups(2, 2), padded_lane_groups(5, 2), padded_lane_groups(12, 2)
    ((2, [(0, 1), (1, 2)]), (8, [(0, 8)]), (12, [(0, 12)]))
    >>> padded_lane_groups(20, 2), padded_lane_groups(200, 2)
    ((20, [(0, 10), (10, 20)]), (200, [(0, 96), (96, 200)]))
    """
    if PAD_FROM_LANES <= n_lanes < LANE_ALIGN:
        return LANE_ALIGN, [(0, LANE_ALIGN)]
    return n_lanes, lane_groups(n_lanes, max(1, min(threads, n_lanes // LANE_ALIGN))
                                if n_lanes >= LANE_ALIGN else threads)


def run_threads(kernel, n_lanes: int, threads: int, args_before: tuple, args_after: tuple) -> None:
    """Run ``kernel(*args_before, lo, hi, *args_after)`` on disjoint lane groups, one per thread
    (the kernel releases the GIL; the pool lives as long as the process)."""
    run_calls(kernel, [(*args_before, lo, hi, *args_after)
                       for lo, hi in lane_groups(n_lanes, threads)])


def in_chunks(kernel, lo_index: int):
    """``kernel`` run on its lanes LANE_CHUNK at a time (all at once when it is None; AUTO:
    as the L1 data cache says): a callable taking the kernel's arguments, whose lane range
    ``args[lo_index]``, ``args[lo_index + 1]`` it cuts into calls of at most that many lanes,
    one after the other. A lane's numbers do not depend on the lanes it runs with (each lane
    reads and writes its own columns)."""

    def run(*args):
        lo, hi = args[lo_index], args[lo_index + 1]
        chunk = _lane_chunk(l1_data_cache_bytes()) if LANE_CHUNK == AUTO else LANE_CHUNK
        chunk = chunk or max(hi - lo, 1)
        for start in range(lo, hi, chunk):
            kernel(*args[:lo_index], start, min(start + chunk, hi), *args[lo_index + 2:])

    return run


def run_calls(kernel, calls: list[tuple]) -> None:
    """Run ``kernel(*args)`` for every ``args`` of ``calls``, one per thread, the first on this
    thread (the kernel releases the GIL; the pool lives as long as the process)."""
    run_call_lists(kernel, [[args] for args in calls])


_beside: ThreadPoolExecutor | None = None
_BESIDE_THREAD = "engine-beside"


def run_beside(first: Callable[[], Any], second: Callable[[], Any]) -> tuple[Any, Any]:
    """``first()`` on a thread of its own while ``second()`` runs on this one; both results.
    For two engine calls of one request whose threads would otherwise wait for each other (the
    kernels release the GIL). An exception of ``second`` (a Ctrl-C included) is raised once
    ``first`` has ended, whatever ``first`` did; else one of ``first`` is raised. Called from
    ``first`` itself, both run here, one after the other."""
    global _beside
    if threading.current_thread().name.startswith(_BESIDE_THREAD):
        return first(), second()
    if _beside is None:
        _beside = ThreadPoolExecutor(1, thread_name_prefix=_BESIDE_THREAD)
    future = _beside.submit(first)
    try:
        second_result = second()
    except BaseException:
        wait([future])
        raise
    return future.result(), second_result


def run_call_lists(kernel, lists: list[list[tuple]]) -> None:
    """Run the calls of each list of ``lists`` one after the other, each list on a thread of
    its own, the first on this thread (the kernel releases the GIL; the pool lives as long as
    the process)."""
    global _pool

    def run(calls: list[tuple]) -> None:
        for args in calls:
            kernel(*args)

    if len(lists) <= 1:  # no calls (an empty batch), or all on this thread
        for calls in lists:
            run(calls)
        return
    if _pool is None or _pool._max_workers < len(lists) - 1:
        _pool = ThreadPoolExecutor(max(len(lists) - 1, os.cpu_count() or 1))
    futures = [_pool.submit(run, calls) for calls in lists[1:]]
    run(lists[0])
    for future in futures:
        future.result()
