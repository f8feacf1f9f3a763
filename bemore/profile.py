"""The athlete profile: who the gymnast is and what her shoulders can take.

One schema for the profile TOML, read by both sides: it is defined by the bench side
(``controller.profile``: the bench enforces her limits and installs without the scientific
stack) and re-exported here through ``controller.cli``, the scientific side's one door to the
bench. See ``controller/profile.py`` for the keys, their bounds and :data:`DEFAULT_PROFILE`.
"""

from __future__ import annotations

from controller.cli import DEFAULT_PROFILE, AthleteProfile, ProfileFile, load_profile

__all__ = ["DEFAULT_PROFILE", "AthleteProfile", "ProfileFile", "load_profile"]
