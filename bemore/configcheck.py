"""``bemore config check``: validate bundled or given configuration files.

Every kind of configuration file has one entry in :data:`KINDS`: the name a bundled file of that
kind has in ``configs/`` and the loader that validates it (the one the program itself uses, so
that a file that passes the check is a file the program accepts). A file's kind is told by its
name (or, for model descriptions, by its ``models/`` folder); ``--kind`` names it for a renamed
copy. Loaders are imported only when a file needs them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bemore import filekinds
from bemore.config import load_toml_model
from bemore.errors import ConfigError
from bemore.paths import configs_dir, default_config
from bemore.settings import CONFIG_SCHEMAS


@dataclass(frozen=True)
class Kind:
    """One kind of configuration file: its bundled name ("models/*.toml" for the folder of
    model descriptions), its loader (a function of the path) or pydantic schema (loaded with
    :func:`bemore.config.load_toml_model`), either one or as "module:attribute" to import
    when needed, and what the check reports it as."""

    bundled: str
    loader: str | type
    what: str

    def load(self) -> Callable[[Path], Any]:
        """The function that reads and validates a file of this kind."""
        target = self.loader
        if isinstance(target, str):
            module, _, attribute = target.partition(":")
            target = getattr(importlib.import_module(module), attribute)
        if isinstance(target, type):
            return lambda path: load_toml_model(path, target)
        return target


# What `config check` reads, in its refusal of a file of another kind
CONFIGURATION = filekinds.Kind("a configuration file", None, like="configs/*.toml",
                               names=("*.toml",))

# Kind name → Kind, in the order `config check` lists the bundled files.
KINDS: dict[str, Kind] = {
    **{name.removesuffix(".toml"): Kind(name, schema, schema.__name__)
       for name, schema in CONFIG_SCHEMAS.items()},
    # An athlete's profile (what --profile reads).
    "profile": Kind("athlete.example.toml", "bemore.profile:ProfileFile", "ProfileFile"),
    "markerset": Kind("markerset.toml", "bemore.trial.markerset:MarkerSet", "MarkerSet"),
    "trial": Kind("trial.toml", "bemore.trial.markerset:TrialSettings", "TrialSettings"),
    # The simulated bench's plant and gains, validated by the bench side's own loader.
    "bench_sim": Kind("bench_sim.toml", "controller.simbench:load_sim_config", "SimBenchConfig"),
    "batch": Kind("batch.example.toml", "bemore.batch.manifest:load_manifest",
                  "batch manifest"),
    "model": Kind("models/*.toml", "bemore.model:load_model", "model description"),
}


def kind_of(path: Path) -> str:
    """The kind name of ``path`` from its file name (or its ``models/`` folder); a folder, or a
    file bemore writes (an athlete.json…), is refused as such."""
    for name, kind in KINDS.items():
        if kind.bundled == path.name:
            return name
    if path.parent.name == "models":
        return "model"
    found = filekinds.kind_of_file(path)
    configurations = [kind for kind, _ in filekinds.CONFIGURATIONS]
    line = filekinds.misplaced(path, CONFIGURATION)
    if line is not None and found not in configurations:
        raise ConfigError(line)  # a folder, another command's output, a motion-capture trial
    raise ConfigError(
        f"{path}: unknown kind of configuration file; name it with --kind "
        f"({', '.join(KINDS)})"
    )


def bundled_files() -> list[Path]:
    """Every bundled configuration file: one per kind (the bench's from the bench side's package
    data), and every model description."""
    folder = configs_dir()
    files = [default_config(kind.bundled) for kind in KINDS.values() if "*" not in kind.bundled]
    return files + sorted((folder / "models").glob("*.toml"))


def check_files(files: list[Path], kind: str | None = None) -> list[str]:
    """Validate ``files`` (default: every bundled configuration file); return one line per file.

    ``kind`` (a key of :data:`KINDS`) applies to every file given, for copies whose name does
    not tell their kind. Raises ConfigError at the first invalid file, naming the file, the key
    and what is allowed.
    """
    if kind is not None and kind not in KINDS:
        raise ConfigError(f"--kind {kind}: unknown kind (known: {', '.join(KINDS)})")
    lines = []
    for path in files or bundled_files():
        path = Path(path)
        name = kind or kind_of(path)
        KINDS[name].load()(path)
        lines.append(f"{path}: ok ({KINDS[name].what})")
    return lines
