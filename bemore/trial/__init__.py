"""Motion-capture trials: readers (C3D, TRC, CSV), the preparation pipeline, synthetic trials.

``prepare_trial(path) -> Trial`` is the entry point the identification uses; see docs/trials.md.
"""

from bemore.trial.markers import Markers
from bemore.trial.pipeline import Trial, prepare_markers, prepare_trial
from bemore.trial.readers import read_markers

__all__ = ["Markers", "Trial", "prepare_markers", "prepare_trial", "read_markers"]
