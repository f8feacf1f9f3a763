"""Synthesis of the optimal shoulder gesture for the clear hip circle (DESIGN §3).

``gesture`` holds the two joined polynomials, ``exemplary`` builds the 3-solid model from an
athlete, ``problem`` evaluates gestures in batches, ``solve`` runs the optimisers, ``outputs``
writes gesture.json, profiles.csv, setpoints.csv, plots and the GIF; ``cli`` is the command.
"""
