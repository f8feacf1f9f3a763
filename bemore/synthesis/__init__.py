"""Synthesis of the optimal shoulder gesture for the clear hip circle (docs/synthesis.md).

``gesture``: the two joined 8th-order polynomials; ``athlete``: the identified parameters
(athlete.json or the seed's); ``problem``: design variables, objective, constraints, evaluation
on the exemplary gymnast; ``solve``: multi-start SLSQP / trust-constr; ``pymoo_search``: the
global search; ``synthesize``: the whole run (coarse search, fine polish, verification);
``results`` and ``outputs``: gesture.json, profiles.csv, setpoints.csv, plots, GIF; ``cli``:
``bemore synthesize``.
"""
