"""A writer process for the records' reliability tests.

``python -m tests.records.writer DB TAG COUNT`` records COUNT runs (COUNT 0: until killed) of
athlete TAG through the repository API, each with three files and a body-mass row, one
transaction each, and prints ``TAG INDEX`` after each commit (flushed): what it printed is
committed.
"""

from __future__ import annotations

import contextlib
import itertools
import sys

from bemore.errors import DataError
from bemore.records import store
from bemore.records.db import connect, transaction
from bemore.records.store import FileRef


def main(db: str, tag: str, count: int) -> None:
    """Write ``count`` runs (0: forever) under athlete ``tag``; print each index once committed."""
    connection = connect(db)
    with contextlib.suppress(DataError):  # already there from an earlier writer
        store.add_athlete(connection, tag, "F", 41.1, 1.48)
    indices = range(count) if count else itertools.count()
    for index in indices:
        files = [FileRef("read", "trial", f"/trials/{tag}/{index}.c3d", f"{index:064x}", index),
                 FileRef("read", "config:identification", "/configs/id.toml", "0" * 64, 10),
                 FileRef("wrote", "athlete", f"/out/{tag}/{index}/athlete.json", "1" * 64, 20)]
        store.record_run(connection, "identify", tag, store.utc_now(), {"index": index},
                         "good", files)
        with transaction(connection):
            connection.execute(
                "INSERT INTO body_mass (athlete_id, measured_on, kg, recorded_utc) VALUES "
                "((SELECT id FROM athlete WHERE name = ?), ?, ?, ?)",
                (tag, f"2026-01-01+{index}", 40.0 + index * 1e-3, store.utc_now()))
        print(tag, index, flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
