"""``bemore config check``: validate bundled or given configuration files.

The kind of a file is told by its name (the bundled names) or, for model descriptions, by its
folder (``models/``). Schemas of capability modules are imported only when a file needs them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bemore.config import load_toml_model
from bemore.errors import ConfigError
from bemore.paths import configs_dir
from bemore.settings import CONFIG_SCHEMAS

# File name → "module:schema class" of the capabilities that own them.
CAPABILITY_SCHEMAS = {
    "athlete.example.toml": "bemore.profile:ProfileFile",
    "markerset.toml": "bemore.trial.markerset:MarkerSet",
    "trial.toml": "bemore.trial.markerset:TrialSettings",
}


def _checker(path: Path) -> tuple[str, Callable[[Path], Any]]:
    """(kind, function that loads and validates ``path``) for a configuration file."""
    name = path.name
    if name in CONFIG_SCHEMAS:
        schema = CONFIG_SCHEMAS[name]
        return schema.__name__, lambda target: load_toml_model(target, schema)
    if name in CAPABILITY_SCHEMAS:
        module, _, attribute = CAPABILITY_SCHEMAS[name].partition(":")
        schema = getattr(importlib.import_module(module), attribute)
        return attribute, lambda target: load_toml_model(target, schema)
    if path.parent.name == "models":
        from bemore.model import load_model

        return "model description", load_model
    known = ", ".join([*CONFIG_SCHEMAS, *CAPABILITY_SCHEMAS, "models/*.toml"])
    raise ConfigError(f"{path}: unknown kind of configuration (known: {known})")


def bundled_files() -> list[Path]:
    """Every bundled configuration file that has a schema."""
    folder = configs_dir()
    names = sorted([*CONFIG_SCHEMAS, *CAPABILITY_SCHEMAS])
    return [folder / name for name in names] + sorted((folder / "models").glob("*.toml"))


def check_files(files: list[Path]) -> list[str]:
    """Validate ``files`` (default: every bundled config); return one line per file.

    Raises ConfigError at the first invalid file, naming the file, the key and what is allowed.
    """
    lines = []
    for path in files or bundled_files():
        kind, check = _checker(Path(path))
        check(Path(path))
        lines.append(f"{path}: ok ({kind})")
    return lines
