"""A 2-process Dask LocalCluster on loopback, shared by the scale tests and closed at the end."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def dask_client():
    """A client of ``LocalCluster(n_workers=2, threads_per_worker=1, processes=True)``."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    )
    client = Client(cluster, set_as_default=False)
    client.wait_for_workers(2, timeout=120)
    yield client
    client.close()
    cluster.close()
