"""Where bemore finds its bundled files (configs, sample data).

The scientific side's defaults live in the repository's top-level ``configs/`` folder;
``BEMORE_CONFIGS`` overrides that location, e.g. for a lab that keeps its own copies elsewhere.
The bench's defaults (``bench.toml``, ``bench_sim.toml``) ship with the bench side as package
data (``controller/configs/``, reached through ``controller.cli``).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from bemore.errors import ConfigError, DataError
from controller.cli import BENCH_CONFIG_FILES, default_bench_config

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


def output_folder(folder: str | Path, files: Iterable[str] = ()) -> Path:
    """``folder`` made (with its parents) for a command's outputs, shown writable, and returned.

    A path that exists and is not a folder, one the system will not make (no such parent, no
    permission, a read-only file system) or a folder it will not let a file be written in is a
    DataError naming it, in one line; so is any of ``files`` (names of the outputs in the
    folder) that exists and will not open for writing (a folder in its place, a read-only
    file). Writing is tested for real, a temporary file written and removed (permission bits
    do not tell: root ignores them, a read-only mount does not show in them); the existing
    files are opened for writing, not changed. A command calls this before its work, so that
    a folder it cannot write is said at once rather than after the work is done.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DataError(f"{folder}: output folder exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(f"{folder}: cannot create the output folder ({error.strerror})") from None
    try:
        handle, probe = tempfile.mkstemp(prefix=".bemore-write-test-", dir=folder)
    except OSError as error:
        raise DataError(f"{folder}: cannot write in the output folder ({error.strerror})"
                        ) from None
    os.close(handle)
    os.unlink(probe)
    for name in files:
        path = folder / name
        if not path.exists():
            continue
        try:
            with open(path, "r+b"):  # opened for writing, nothing written
                pass
        except OSError as error:
            raise DataError(f"{path}: cannot write the output file ({error.strerror})"
                            ) from None
    return folder
