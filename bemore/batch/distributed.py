"""Items of a batch as tasks of a Dask cluster, collected as they finish.

Each item is one task with a key unique to this run. A worker that dies takes its item with it:
the scheduler reschedules it on another worker (up to its ``allowed_failures``); an item that
still comes back lost is resubmitted here, up to ``RESUBMITS`` times, then reported failed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from bemore.batch.item import ItemResult, run_item
from bemore.batch.manifest import ItemSpec
from bemore.evaluate.cluster import lost_errors

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
        submitted.append(client.submit(run_item, spec, key=key, pure=False))
        return submitted[-1]

    futures = as_completed([submit(spec) for spec in todo], loop=client.loop)
    try:
        for future in futures:
            spec = by_key[future.key]
            try:
                result = future.result()
            except lost_errors() as error:
                attempts[spec.athlete] += 1
                if attempts[spec.athlete] <= RESUBMITS:
                    futures.add(submit(spec))
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
