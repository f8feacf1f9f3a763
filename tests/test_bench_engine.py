"""The engine benchmark's operation count follows the cost path through the kernel's branches."""

from __future__ import annotations

from bench.bench_engine import flop_per_step

# The shape of the generated kernel: a step's stages, the new state with the next frame's cost
# at one sample per step (else without), the record's cost only for the first frame then.
_KERNEL = """
def integrate_shared(a, c, d, e, n_steps, n_sub, spp, do_cost, store_points):
    for n in range(n_steps + 1):
        if n < n_steps:
            for b in range(lo, hi):
                x = a * b + c
            for st in range(1, 4):
                for b in range(lo, hi):
                    w = a - b
            if do_cost and spp == 1 and (n + 1) % n_sub == 0:
                for b in range(lo, hi):
                    y = a * b
            else:
                for b in range(lo, hi):
                    y = a * b + c * d + e
        if n % n_sub == 0:
            for j in range(spp if n < n_steps else 1):
                if store_points:
                    for b in range(lo, hi):
                        p = a * b * c * d
                if do_cost and (spp > 1 or n == 0):
                    for b in range(lo, hi):
                        z = a + b
"""


def test_flop_per_step_counts_the_branches_the_cost_path_takes():
    # stage 0: 2, the generic stage 3 × 1, the new state with the next frame's cost: 1.
    assert flop_per_step(_KERNEL) == 2 + 3 * 1 + 1
