"""Where bemore finds its bundled files (configs, sample data).

The defaults live in the repository's top-level ``configs/`` folder. ``BEMORE_CONFIGS`` overrides
that location, e.g. for a lab that keeps its own copies elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

from bemore.errors import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parent
REPOSITORY_DIR = PACKAGE_DIR.parent


def configs_dir() -> Path:
    """Return the folder holding the default TOML configurations."""
    override = os.environ.get("BEMORE_CONFIGS")
    folder = Path(override) if override else REPOSITORY_DIR / "configs"
    if not folder.is_dir():
        raise ConfigError(
            f"{folder}: configuration folder not found (set BEMORE_CONFIGS to the folder that "
            "holds gymnast.toml, identification.toml, synthesis.toml and bench.toml)"
        )
    return folder


def default_config(name: str) -> Path:
    """Path of a bundled configuration file, e.g. ``default_config("bench.toml")``."""
    return configs_dir() / name


def data_dir() -> Path:
    """Folder of the bundled sample data (the synthetic sample trial)."""
    return REPOSITORY_DIR / "data"
