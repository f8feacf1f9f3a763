"""Run a batch: every unfinished item of a manifest, in this process or across a Dask cluster.

Resumable: an item is finished when ``DIR/<athlete>/done.json`` exists and records the same
item (settings and trial content). That marker is written LAST, atomically (write to a
temporary name, then rename), after every other file of the item; an item interrupted at any
point before has no marker and is redone from scratch on the next run, and a finished item is
never redone. The summary (``DIR/summary.csv``) is rebuilt from the markers after every item.

Redoing an athlete removes bemore's own files from her folder first (:func:`own_files`: what
an item writes, ``failed.txt``, ``done.json``), and nothing else: a coach's notes stay. That
happens before her item runs, with the folder shown writable
(:func:`bemore.paths.output_folder`): a folder that cannot be cleared or written fails that
athlete, naming the path, before her fit; the others still run. A fit ``bemore synthesize``
would refuse (poor, unobservable parameters) keeps its identification's files in her folder,
marked so in athlete.json, with ``failed.txt`` saying why and no marker (redone next run).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bemore.batch.item import ItemResult, describe_error, item_outputs, run_item
from bemore.batch.manifest import ItemSpec, Manifest
from bemore.errors import BemoreError, DataError
from bemore.paths import output_folder, write_file

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
    # What a failed athlete's item measured before it stopped (a refused fit's row).
    failed_rows: dict[str, dict[str, Any]] = field(default_factory=dict)


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


def own_files() -> tuple[str, ...]:
    """Relative paths of every file bemore writes in an athlete's folder: ``done.json`` (first:
    removed first), ``failed.txt`` and the item's (:func:`bemore.batch.item.item_outputs`)."""
    return (DONE, FAILED, *item_outputs())


def clear_outputs(folder: Path) -> None:
    """Remove bemore's own files (:func:`own_files`) from an athlete's ``folder``, and its
    subfolders they leave empty; anything else (a coach's notes) stays. A file that cannot be
    removed is a DataError naming its path (the first such; the others are still removed)."""
    problem = None
    for relative in own_files():
        path = folder / relative
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as error:
            problem = problem or DataError(
                f"{path}: cannot remove the previous run's file ({error.strerror})")
    subfolders = {Path(relative).parent for relative in own_files()} - {Path(".")}
    for subfolder in sorted(subfolders, key=lambda path: -len(path.parts)):
        with contextlib.suppress(OSError):  # not there, or holding someone else's files
            (folder / subfolder).rmdir()
    if problem is not None:
        raise problem


def prepare(out_dir: Path, spec: ItemSpec) -> None:
    """Before an athlete's item runs: her folder, if there, shown to be a folder bemore can
    write in (:func:`bemore.paths.output_folder`) and cleared of bemore's files
    (:func:`clear_outputs`); a DataError naming the path otherwise."""
    folder = out_dir / spec.athlete
    if folder.exists() or folder.is_symlink():
        output_folder(folder)
        clear_outputs(folder)


def _write(path: Path, content: bytes) -> None:
    """Write ``content`` at ``path`` (its folder made), atomically (:func:`bemore.paths.
    write_file`); an OSError is a DataError naming it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DataError(f"{error.filename or path.parent}: cannot make the folder "
                        f"({error.strerror})") from None
    write_file(path, content)


def store(out_dir: Path, spec: ItemSpec, result: ItemResult) -> None:
    """Write one item's files into ``DIR/<athlete>/`` (bemore's previous files there removed
    first), then its marker, atomically, last; a refused fit (``result.refused``) gets no
    marker. A file that cannot be written is a DataError naming its path."""
    folder = out_dir / spec.athlete
    if folder.is_dir():
        clear_outputs(folder)  # left by an interrupted or changed item
    for relative, content in result.files.items():
        _write(folder / relative, content)
    if result.refused is not None:
        return
    marker = {"athlete": spec.athlete, "digest": item_digest(spec), "row": result.row,
              "completed_unix_s": time.time(), "spec": asdict(spec)}
    _write(folder / DONE, (json.dumps(marker, indent=2) + "\n").encode())


def store_failure(out_dir: Path, spec: ItemSpec, message: str, keep: bool = False) -> None:
    """Leave ``DIR/<athlete>/failed.txt`` (no marker: the next run tries again), bemore's other
    files there removed unless ``keep`` (a refused fit's, for the coach to inspect). A folder
    that cannot be written is a DataError naming the path."""
    folder = out_dir / spec.athlete
    if folder.is_dir() and not keep:
        with contextlib.suppress(DataError):  # what cannot be removed: said by ``message``
            clear_outputs(folder)
    _write(folder / FAILED, (message + "\n").encode())


def refusal(out_dir: Path, spec: ItemSpec, result: ItemResult) -> str:
    """The one line of an athlete whose fit was not synthesized: her athlete.json, why, and
    what the coach can do (the batch has no flag to synthesize it all the same)."""
    folder = out_dir / spec.athlete
    marked = ("marked poor" if _refused_status(result.row) == "poor"
              else "its unobservable parameters listed")
    return (f"{folder / 'athlete.json'}: {result.refused}; kept in {folder} ({marked}) "
            f"and not synthesized: inspect it, then change her "
            f"manifest line and run the batch again, or synthesize it all the same with "
            f"`bemore synthesize {folder / 'athlete.json'} --accept-poor-fit`")


def summary_rows(out_dir: Path, manifest: Manifest, failed: dict[str, str],
                 failed_rows: dict[str, dict[str, Any]] | None = None) -> list[dict]:
    """One row per athlete in manifest order: finished ones from their markers, others' status;
    a failed athlete's row holds what her item measured (``failed_rows``: a refused fit's,
    whose status is then its fit's, e.g. "poor") and the error."""
    rows = []
    for spec in manifest.items:
        row = finished_row(out_dir, spec)
        if row is not None:
            rows.append({"status": "done", **row})
        elif spec.athlete in failed:
            measured = (failed_rows or {}).get(spec.athlete, {})
            status = _refused_status(measured) if measured else "failed"
            rows.append({"athlete": spec.athlete, "trial": spec.trial, "status": status,
                         **measured, "error": failed[spec.athlete]})
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
    return write_file(out_dir / SUMMARY, buffer.getvalue())


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
    out_dir = output_folder(out_dir, (SUMMARY,))  # before any item: said now if refused
    report = BatchReport()

    def collect(spec: ItemSpec, result: ItemResult | None, error: BaseException | None) -> None:
        if error is None:
            try:
                store(out_dir, spec, result)
            except BemoreError as unwritable:
                error = unwritable
        if error is None and result.refused is None:
            report.finished.append(spec.athlete)
            _tell(listener, spec.athlete, "done", result.row)
        else:
            refused = error is None
            message = refusal(out_dir, spec, result) if refused else describe_error(error)
            try:
                store_failure(out_dir, spec, message, keep=refused)
            except BemoreError as unwritable:
                message += f" ({FAILED} not written: {unwritable})"
            report.failed[spec.athlete] = message
            if refused:
                report.failed_rows[spec.athlete] = {
                    key: value for key, value in result.row.items()
                    if key not in ("athlete", "trial")}
            _tell(listener, spec.athlete, "failed", {"error": message})
        write_summary(out_dir, summary_rows(out_dir, manifest, report.failed,
                                            report.failed_rows))

    todo = []
    for spec in manifest.items:
        if finished_row(out_dir, spec) is not None:
            report.skipped.append(spec.athlete)
            _tell(listener, spec.athlete, "skipped", None)
            continue
        try:
            prepare(out_dir, spec)  # her folder cleared and shown writable before her fit
        except BemoreError as unwritable:
            collect(spec, None, unwritable)
        else:
            todo.append(spec)

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
    report.rows = summary_rows(out_dir, manifest, report.failed, report.failed_rows)
    write_summary(out_dir, report.rows)
    report.elapsed_s = time.perf_counter() - start
    return report


def _refused_status(measured: dict[str, Any]) -> str:
    """The summary status of a refused fit: "poor", else "unobservable" (parameters the
    trial cannot determine, :func:`bemore.synthesis.athlete.fit_record`)."""
    return "poor" if measured.get("fit") == "poor" else "unobservable"


def _tell(listener: Listener | None, athlete: str, status: str, row: dict | None) -> None:
    if listener is not None:
        listener(athlete, status, row)
