"""The batch manifest: which athletes, which trials, and per-athlete setting overrides.

TOML::

    [defaults]                      # optional, for every athlete
    pack = 200
    iterations = 50
    [cluster]                       # optional; `--dask ADDRESS` wins over it
    dask = "tcp://scheduler:8786"
    [[athletes]]
    athlete = "anna"
    trial = "trials/anna.c3d"       # relative to the manifest's folder
    body_mass_kg = 47.5             # or profile = "athletes/anna.toml"
    seed = 3                        # overrides [defaults]

CSV: a header with ``athlete,trial`` and any of the override columns (empty cell = default).
Settings not given anywhere come from ``configs/identification.toml`` ``[optimiser]`` and
``configs/synthesis.toml`` ``[solver]``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from bemore.config import Section, load_toml_model, validate
from bemore.errors import ConfigError

ATHLETE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ItemSettings(Section):
    """Settings an athlete's line may override (None = the default)."""

    algorithm: Literal["gwo", "pso", "de", "cmaes"] | None = None
    pack: int | None = Field(None, ge=2, le=100_000, description="population size")
    iterations: int | None = Field(None, ge=1, description="population evaluations")
    seed: int | None = Field(None, ge=0, description="identification seed")
    polish: bool | None = None
    starts: int | None = Field(None, ge=1, le=1000, description="synthesis starting points")
    synthesis_seed: int | None = Field(None, ge=0)
    identification_config: str | None = Field(None, description="TOML path, manifest-relative")
    synthesis_config: str | None = Field(None, description="TOML path, manifest-relative")
    markerset: str | None = Field(None, description="marker-set TOML path, manifest-relative")
    trial_config: str | None = Field(None, description="trial TOML path, manifest-relative")
    plots: bool | None = Field(None, description="write the PNG plots (default true)")
    model: str | None = Field(None, description="model fitted: a built-in name or a description "
                              "TOML path, manifest-relative (default real_gymnast)")


class AthleteLine(ItemSettings):
    """One athlete of the squad, the trial to identify her from, and her body."""

    athlete: str = Field(pattern=ATHLETE_PATTERN, description="id, also the output folder name")
    trial: str = Field(min_length=1, description="C3D/TRC/CSV path, manifest-relative")
    body_mass_kg: float | None = Field(None, ge=10.0, le=200.0,
                                       description="her body mass (default: her profile's)")
    profile: str | None = Field(None, description="athlete profile TOML, manifest-relative")


class ClusterSettings(Section):
    """Where the batch runs: a Dask scheduler address, or in this process when absent."""

    dask: str | None = None


class ManifestFile(Section):
    """Schema of a TOML manifest."""

    defaults: ItemSettings = ItemSettings()
    cluster: ClusterSettings = ClusterSettings()
    athletes: list[AthleteLine] = Field(min_length=1)


@dataclass(frozen=True)
class ItemSpec:
    """Everything one athlete's run needs (absolute paths; None = the bundled default)."""

    athlete: str
    trial: str
    algorithm: str | None
    pack: int | None
    iterations: int | None
    seed: int | None
    polish: bool | None
    starts: int | None
    synthesis_seed: int | None
    identification_config: str | None
    synthesis_config: str | None
    markerset: str | None = None
    trial_config: str | None = None
    plots: bool = True
    body_mass_kg: float | None = None  # None: the profile's, else the segment table's
    profile: str | None = None
    model: str = "real_gymnast"  # a built-in name or an absolute description path


@dataclass(frozen=True)
class Manifest:
    """A validated manifest: its items in order, and the cluster address it names (if any)."""

    source: str
    items: tuple[ItemSpec, ...]
    dask: str | None


def load_manifest(path: str | Path) -> Manifest:
    """Read a TOML or CSV manifest; any problem is one ConfigError line (file, row/key)."""
    path = Path(path)
    if path.suffix.lower() == ".csv":
        lines, defaults, dask = _csv_lines(path), ItemSettings(), None
    elif path.suffix.lower() == ".toml":
        parsed = load_toml_model(path, ManifestFile)
        lines, defaults, dask = parsed.athletes, parsed.defaults, parsed.cluster.dask
    else:
        raise ConfigError(f"{path}: a manifest is a .toml or a .csv file")
    seen: set[str] = set()
    items = []
    for line in lines:
        if line.athlete in seen:
            raise ConfigError(f"{path}: athlete {line.athlete!r} is listed more than once")
        seen.add(line.athlete)
        items.append(_spec(line, defaults, path.parent))
    return Manifest(source=str(path), items=tuple(items), dask=dask)


def _csv_lines(path: Path) -> list[AthleteLine]:
    """Validate each CSV row as an :class:`AthleteLine` (empty cells are left out)."""
    if not path.is_file():
        raise ConfigError(f"{path}: file not found")
    try:
        rows = list(csv.DictReader(path.read_text(encoding="utf-8").splitlines()))
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    if not rows:
        raise ConfigError(f"{path}: no athlete rows (expected a header with athlete,trial)")
    lines = []
    for number, row in enumerate(rows, start=2):
        if None in row:
            raise ConfigError(f"{path}: row {number}: more cells than header columns")
        data = {key.strip(): value.strip() for key, value in row.items() if value and value.strip()}
        lines.append(validate(data, AthleteLine, source=f"{path}: row {number}"))
    return lines


def _spec(line: AthleteLine, defaults: ItemSettings, folder: Path) -> ItemSpec:
    """The item of one line: its overrides over [defaults], paths made absolute."""

    def pick(name: str):
        value = getattr(line, name)
        return getattr(defaults, name) if value is None else value

    def absolute(value: str | None) -> str | None:
        return None if value is None else str((folder / value).resolve())

    return ItemSpec(
        athlete=line.athlete,
        trial=absolute(line.trial),
        algorithm=pick("algorithm"),
        pack=pick("pack"),
        iterations=pick("iterations"),
        seed=pick("seed"),
        polish=pick("polish"),
        starts=pick("starts"),
        synthesis_seed=pick("synthesis_seed"),
        identification_config=absolute(pick("identification_config")),
        synthesis_config=absolute(pick("synthesis_config")),
        markerset=absolute(pick("markerset")),
        trial_config=absolute(pick("trial_config")),
        plots=pick("plots") is not False,
        body_mass_kg=line.body_mass_kg,
        profile=absolute(line.profile),
        model=_model(pick("model"), folder),
    )


def _model(value: str | None, folder: Path) -> str:
    """A built-in model name as it is; a description path made absolute."""
    from bemore.model.gymnasts import BUILT_IN

    if value is None:
        return "real_gymnast"
    return value if value in BUILT_IN else str((folder / value).resolve())
