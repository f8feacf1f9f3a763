"""Items of a batch as tasks of a Dask cluster, collected as they finish.

The workers need bemore installed, not this machine's files: the trial and the configuration
files an item names are read here and sent with its task; the worker writes them into a private
temporary folder and runs the item on those copies. Each item is one task with a key unique to
this run. A worker that dies takes its item with it: the scheduler reschedules it on another
worker (up to its ``allowed_failures``); an item that still comes back lost is resubmitted here,
up to ``RESUBMITS`` times, then reported failed.
"""

from __future__ import annotations

import dataclasses
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bemore.batch.item import ItemResult, run_item
from bemore.batch.manifest import ItemSpec
from bemore.errors import DataError
from bemore.evaluate.cluster import lost_errors

# The fields of an item that name input files.
INPUT_FIELDS = ("trial", "identification_config", "synthesis_config", "markerset", "trial_config")

RESUBMITS = 3

Collect = Callable[[ItemSpec, ItemResult | None, BaseException | None], None]


def run_on_cluster(client: Any, todo: list[ItemSpec], collect: Collect) -> None:
    """Submit every item, hand each one to ``collect`` as soon as it finishes or fails."""
    from distributed import as_completed

    run = uuid.uuid4().hex[:8]
    attempts = {spec.athlete: 0 for spec in todo}
    by_key: dict[str, ItemSpec] = {}
    submitted: list[Any] = []

    def submit(spec: ItemSpec) -> Any:
        key = f"bemore-batch-{run}-{spec.athlete}-{attempts[spec.athlete]}"
        by_key[key] = spec
        submitted.append(client.submit(run_remote, spec, read_inputs(spec), key=key, pure=False))
        return submitted[-1]

    first = []
    for spec in todo:
        try:
            first.append(submit(spec))
        except DataError as error:  # an unreadable trial fails its athlete only
            collect(spec, None, error)
    futures = as_completed(first, loop=client.loop)
    try:
        for future in futures:
            spec = by_key[future.key]
            try:
                result = future.result()
            except lost_errors() as error:
                attempts[spec.athlete] += 1
                if attempts[spec.athlete] <= RESUBMITS:
                    try:
                        futures.add(submit(spec))
                    except DataError as unreadable:
                        collect(spec, None, unreadable)
                else:
                    collect(spec, None, error)
            except Exception as error:  # the item's own failure (bad trial, ...)
                collect(spec, None, error)
            else:
                collect(spec, result, None)
    finally:
        # Ctrl-C or an error here: do not leave the squad running on the cluster.
        unfinished = [future for future in submitted if not future.done()]
        if unfinished:
            client.cancel(unfinished)


def read_inputs(spec: ItemSpec) -> dict[str, tuple[str, bytes]]:
    """The input files of an item: field → (file name, bytes); a missing file is a DataError."""
    inputs = {}
    for name in INPUT_FIELDS:
        value = getattr(spec, name)
        if value is None:
            continue
        try:
            inputs[name] = (Path(value).name, Path(value).read_bytes())
        except OSError as error:
            raise DataError(f"{value}: cannot read {name} ({error.strerror})") from None
    return inputs


def run_remote(spec: ItemSpec, inputs: dict[str, tuple[str, bytes]]) -> ItemResult:
    """Worker side: write the item's input files locally, run it, report the original paths."""
    with tempfile.TemporaryDirectory(prefix="bemore-inputs-") as folder:
        local = {}
        for index, (name, (file_name, content)) in enumerate(sorted(inputs.items())):
            path = Path(folder) / str(index) / file_name  # keeps the name and its suffix
            path.parent.mkdir()
            path.write_bytes(content)
            local[name] = str(path)
        result = run_item(dataclasses.replace(spec, **local))
    result.row["trial"] = spec.trial
    return result
