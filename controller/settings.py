"""The bench configuration: its schema, and where the bench side's default files are.

``controller/configs/bench.toml`` (the machine's limits and how the host streams) and
``controller/configs/bench_sim.toml`` (the simulated bench's plant) ship inside this package as
package data, so an installed bench side finds them without a repository checkout. The athlete's
limits are not here: they are in her profile (:mod:`controller.profile`).
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, PositiveFloat, model_validator

from controller import filekinds
from controller.config import Section, load_toml_model

#: Folder of the bench side's default configuration files (package data).
CONFIGS_DIR = Path(__file__).resolve().parent / "configs"
#: The default files in that folder.
BENCH_CONFIG_FILES = ("bench.toml", "bench_sim.toml")


def default_bench_config(name: str) -> Path:
    """Path of a default bench configuration file shipped with the package, e.g. "bench.toml"."""
    return CONFIGS_DIR / name


class BenchLimits(Section):
    """Absolute limits of the bench axis, per shoulder, checked before arming."""

    max_torque_nm: PositiveFloat
    max_velocity_deg_s: PositiveFloat
    min_angle_deg: float
    max_angle_deg: float
    max_torque_rate_nm_s: PositiveFloat

    @model_validator(mode="after")
    def _range(self) -> BenchLimits:
        if not self.min_angle_deg < self.max_angle_deg:
            raise ValueError("min_angle_deg must be below max_angle_deg")
        return self


class Streaming(Section):
    """How the host streams setpoints."""

    rate_hz: float = Field(gt=0, le=1000)
    watchdog_ms: float = Field(ge=10, le=500)
    max_tracking_error_deg: PositiveFloat
    ramp_down_s: float = Field(gt=0, le=5)
    # setpoints leave the host this long before they are due at the firmware (its queue absorbs
    # host stalls shorter than this); bounded by the firmware's queue depth and watchdog
    lead_ms: int = Field(default=20, ge=1, le=100)


class Bench(Section):
    """The bench configuration: the machine's limits and streaming settings."""

    limits: BenchLimits
    streaming: Streaming


BENCH_WANTED = filekinds.BENCH_CONFIG.wanted()  # "a bench configuration (a TOML file like …)"


def load_bench(path: str | Path | None = None) -> Bench:
    """Bench limits and streaming settings (default: the packaged ``configs/bench.toml``)."""
    return load_toml_model(path or default_bench_config("bench.toml"), Bench, BENCH_WANTED)
