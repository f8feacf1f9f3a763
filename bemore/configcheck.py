"""``bemore config check``: validate bundled or given configuration files."""

from __future__ import annotations

from pathlib import Path

from bemore.config import load_toml_model
from bemore.errors import ConfigError
from bemore.paths import configs_dir
from bemore.settings import CONFIG_SCHEMAS


def check_files(files: list[Path]) -> list[str]:
    """Validate ``files`` (default: every bundled top-level config); return one line per file.

    Raises ConfigError at the first invalid file, naming the file, the key and what is allowed.
    """
    targets = files or sorted(configs_dir() / name for name in CONFIG_SCHEMAS)
    lines = []
    for path in targets:
        schema = CONFIG_SCHEMAS.get(Path(path).name)
        if schema is None:
            known = ", ".join(CONFIG_SCHEMAS)
            raise ConfigError(f"{path}: unknown kind of configuration (known file names: {known})")
        load_toml_model(path, schema)
        lines.append(f"{path}: ok ({schema.__name__})")
    return lines
