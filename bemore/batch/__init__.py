"""Whole-squad batches (``bemore batch``): a manifest of athletes → identification + synthesis.

:func:`~bemore.batch.manifest.load_manifest` (TOML or CSV), :func:`~bemore.batch.run.run_batch`
(resumable; in-process or on a Dask cluster), :func:`~bemore.batch.item.run_item` (one athlete).
"""

from bemore.batch.manifest import ItemSpec, Manifest, load_manifest
from bemore.batch.run import BatchReport, run_batch

__all__ = ["BatchReport", "ItemSpec", "Manifest", "load_manifest", "run_batch"]
