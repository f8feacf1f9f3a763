"""Where bemore finds its bundled files (configs, sample data).

The scientific side's defaults live in the repository's top-level ``configs/`` folder;
``BEMORE_CONFIGS`` overrides that location, e.g. for a lab that keeps its own copies elsewhere.
The bench's defaults (``bench.toml``, ``bench_sim.toml``) ship with the bench side as package
data (``controller/configs/``, reached through ``controller.cli``).
"""

from __future__ import annotations

import os
from pathlib import Path

from bemore.errors import ConfigError
from controller.cli import (
    BENCH_CONFIG_FILES,
    PARTIAL_PREFIX,
    WRITE_PROBE_PREFIX,
    check_output_folder,
    ctrl_c_held,
    default_bench_config,
    discard,
    on_interrupt,
    output_folder,
    put_in_place,
    stage,
    write_file,
    write_together,
)

# The output folders' check and the atomic writing of the outputs are the bench side's
# (``replay --plot`` writes in one too): one definition for every command, re-exported here for
# the scientific side.
__all__ = ["PACKAGE_DIR", "PARTIAL_PREFIX", "REPOSITORY_DIR", "WRITE_PROBE_PREFIX",
           "check_output_folder", "configs_dir", "ctrl_c_held", "data_dir", "default_config",
           "discard", "on_interrupt", "output_folder", "put_in_place", "stage", "write_file",
           "write_together"]

PACKAGE_DIR = Path(__file__).resolve().parent
REPOSITORY_DIR = PACKAGE_DIR.parent


def configs_dir() -> Path:
    """Return the folder holding the default TOML configurations."""
    override = os.environ.get("BEMORE_CONFIGS")
    folder = Path(override) if override else REPOSITORY_DIR / "configs"
    if not folder.is_dir():
        raise ConfigError(
            f"{folder}: configuration folder not found (set BEMORE_CONFIGS to the folder that "
            "holds gymnast.toml, identification.toml and synthesis.toml)"
        )
    return folder


def default_config(name: str) -> Path:
    """Path of a bundled configuration file, e.g. ``default_config("synthesis.toml")``; the
    bench's files (``bench.toml``, ``bench_sim.toml``) are the bench side's packaged ones."""
    if name in BENCH_CONFIG_FILES:
        return default_bench_config(name)
    return configs_dir() / name


def data_dir() -> Path:
    """Folder of the bundled sample data (the synthetic sample trial)."""
    return REPOSITORY_DIR / "data"
