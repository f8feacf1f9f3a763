"""Run a batch: every unfinished item of a manifest, in this process or across a Dask cluster.

Resumable: an item is finished when ``DIR/<athlete>/done.json`` exists and records the same
item (settings and trial content). That marker is written LAST, atomically (write to a
temporary name, then rename), after every other file of the item; an item interrupted at any
point before has no marker and is redone from scratch on the next run, and a finished item is
never redone. The summary (``DIR/summary.csv``) is rebuilt from the markers after every item.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bemore.batch.item import ItemResult, describe_error, run_item
from bemore.batch.manifest import ItemSpec, Manifest
from bemore.paths import output_folder

DONE = "done.json"
FAILED = "failed.txt"
SUMMARY = "summary.csv"

Listener = Callable[[str, str, dict[str, Any] | None], None]  # (athlete, status, row)


@dataclass
class BatchReport:
    """What a run did: items finished now, skipped as already finished, failed (with why)."""

    finished: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    rows: list[dict[str, Any]] = field(default_factory=list)
    elapsed_s: float = 0.0


def item_digest(spec: ItemSpec) -> str:
    """SHA-256 of the item's settings and of its trial file's bytes (what makes it 'the same')."""
    digest = hashlib.sha256(json.dumps(asdict(spec), sort_keys=True).encode())
    trial = Path(spec.trial)
    if trial.is_file():
        digest.update(trial.read_bytes())
    return digest.hexdigest()


def finished_row(out_dir: Path, spec: ItemSpec) -> dict[str, Any] | None:
    """The summary row of a finished item, or None if it has to be (re)done."""
    marker = out_dir / spec.athlete / DONE
    try:
        done = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if done.get("digest") != item_digest(spec):
        return None
    return done.get("row")


def store(out_dir: Path, spec: ItemSpec, result: ItemResult) -> None:
    """Write one item's files into ``DIR/<athlete>/``, then its marker, atomically, last."""
    folder = out_dir / spec.athlete
    if folder.exists():
        shutil.rmtree(folder)  # left by an interrupted or changed item
    folder.mkdir(parents=True)
    for relative, content in result.files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    marker = {"athlete": spec.athlete, "digest": item_digest(spec), "row": result.row,
              "completed_unix_s": time.time(), "spec": asdict(spec)}
    temporary = folder / f".{DONE}.tmp"
    temporary.write_text(json.dumps(marker, indent=2) + "\n", encoding="utf-8")
    temporary.replace(folder / DONE)


def store_failure(out_dir: Path, spec: ItemSpec, message: str) -> None:
    """Leave ``DIR/<athlete>/failed.txt`` (no marker: the next run tries again)."""
    folder = out_dir / spec.athlete
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / FAILED).write_text(message + "\n", encoding="utf-8")


def summary_rows(out_dir: Path, manifest: Manifest, failed: dict[str, str]) -> list[dict]:
    """One row per athlete in manifest order: finished ones from their markers, others' status."""
    rows = []
    for spec in manifest.items:
        row = finished_row(out_dir, spec)
        if row is not None:
            rows.append({"status": "done", **row})
        elif spec.athlete in failed:
            rows.append({"athlete": spec.athlete, "trial": spec.trial, "status": "failed",
                         "error": failed[spec.athlete]})
        else:
            rows.append({"athlete": spec.athlete, "trial": spec.trial, "status": "pending"})
    return rows


def write_summary(out_dir: Path, rows: list[dict[str, Any]]) -> Path:
    """``DIR/summary.csv``: the union of the rows' columns, in first-seen order."""
    columns: list[str] = []
    for row in rows:
        columns += [key for key in row if key not in columns]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path = out_dir / SUMMARY
    temporary = out_dir / f".{SUMMARY}.tmp"
    temporary.write_text(buffer.getvalue(), encoding="utf-8")
    temporary.replace(path)
    return path


def run_batch(
    manifest: Manifest,
    out_dir: str | Path,
    client: Any = None,
    listener: Listener | None = None,
) -> BatchReport:
    """Run every unfinished item of ``manifest`` into ``out_dir``; see the module docstring.

    With a ``distributed.Client``, items run in parallel on its workers (each worker evaluates
    its item's populations in-process); without, one after the other in this process.
    ``listener(athlete, status, row)`` hears "skipped", "done" and "failed" for every item.
    """
    start = time.perf_counter()
    out_dir = output_folder(out_dir)  # before any item: a folder it cannot write is said now
    report = BatchReport()
    todo = []
    for spec in manifest.items:
        if finished_row(out_dir, spec) is not None:
            report.skipped.append(spec.athlete)
            _tell(listener, spec.athlete, "skipped", None)
        else:
            todo.append(spec)

    def collect(spec: ItemSpec, result: ItemResult | None, error: BaseException | None) -> None:
        if error is None:
            store(out_dir, spec, result)
            report.finished.append(spec.athlete)
            _tell(listener, spec.athlete, "done", result.row)
        else:
            message = describe_error(error)
            store_failure(out_dir, spec, message)
            report.failed[spec.athlete] = message
            _tell(listener, spec.athlete, "failed", {"error": message})
        write_summary(out_dir, summary_rows(out_dir, manifest, report.failed))

    if client is None:
        for spec in todo:
            try:
                result = run_item(spec)
            except Exception as error:  # one athlete's bad input must not stop the squad
                collect(spec, None, error)
            else:
                collect(spec, result, None)
    else:
        from bemore.batch.distributed import run_on_cluster

        run_on_cluster(client, todo, collect)
    report.rows = summary_rows(out_dir, manifest, report.failed)
    write_summary(out_dir, report.rows)
    report.elapsed_s = time.perf_counter() - start
    return report


def _tell(listener: Listener | None, athlete: str, status: str, row: dict | None) -> None:
    if listener is not None:
        listener(athlete, status, row)
