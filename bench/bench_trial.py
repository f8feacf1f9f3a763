"""Reading and preparing a 1.5 s, 100 Hz trial (target: well under a second).

bemore's figure: ``prepare_trial`` on the bundled synthetic sample trimmed to 1.5 s (guarded C3D
read, gap filling, zero-lag filter, plane, joint centres, driven coordinates, 1 kHz resampling,
initial state), with the default settings (driven coordinates low-passed each at its own
cutoff) and with ``[driven_filter] enabled = false`` (driven coordinates from the 6 Hz joint
centres).
Baseline, same file, same run: ezc3d's bare read of the C3D (what any pipeline pays at least).
"""

from __future__ import annotations

from bench.common import Measurement, median_time


def run(smoke: bool) -> list[Measurement]:
    """Median times (s) of bemore's read + prepare and read alone, next to ezc3d's bare read."""
    import ezc3d

    from bemore.paths import data_dir
    from bemore.trial.markerset import load_markerset, load_trial_settings
    from bemore.trial.pipeline import prepare_markers
    from bemore.trial.readers import read_markers

    sample = data_dir() / "sample_trial.c3d"
    markerset = load_markerset()
    settings = load_trial_settings()
    settings = settings.model_copy(
        update={"trim": settings.trim.model_copy(update={"start_s": 0.0, "end_s": 1.5})}
    )
    repeats = 2 if smoke else 21

    def bare_read() -> object:
        return ezc3d.c3d(str(sample))["data"]["points"]

    # [driven_filter] enabled = false: the driven coordinates from the filtered joint centres
    # (the chain without a driven filter), one low-pass fewer per driven coordinate.
    chain = settings.model_copy(update={
        "driven_filter": settings.driven_filter.model_copy(update={"enabled": False})})

    def prepare() -> object:
        return prepare_markers(read_markers(sample), markerset, settings)

    def prepare_chain() -> object:
        return prepare_markers(read_markers(sample), markerset, chain)

    prepare()  # warm imports and caches
    baseline = median_time(bare_read, repeats)
    return [
        Measurement("read + prepare 1.5 s @ 100 Hz → 1 kHz", "s",
                    median_time(prepare, repeats), baseline, "ezc3d bare read", "< 1 s"),
        Measurement("read + prepare, [driven_filter] enabled = false", "s",
                    median_time(prepare_chain, repeats), baseline, "ezc3d bare read", "< 1 s"),
        Measurement("guarded C3D read (bemore read_markers)", "s",
                    median_time(lambda: read_markers(sample), repeats), baseline,
                    "ezc3d bare read"),
    ]
