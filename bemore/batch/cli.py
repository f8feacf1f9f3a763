"""``bemore batch``: identify and synthesize a whole squad from a manifest, resumably."""

from __future__ import annotations

import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import click

from bemore.errors import ConfigError

# Summary columns printed (the CSV holds every parameter): (header, row key, format).
SHOWN = (
    ("athlete", "athlete", "{}"),
    ("status", "status", "{}"),
    ("cost m²", "cost_m2", "{:.4g}"),
    ("mean dist mm", "mean_distance_mm", "{:.1f}"),
    ("trunk mass kg", "trunk.mass (kg)", "{:.2f}"),
    ("bar k_x N/m", "bar.stiffness_x (N/m)", "{:.0f}"),
    ("t_f s", "final_time_s", "{:.3f}"),
    ("t_flexmax s", "flexion_end_time_s", "{:.3f}"),
    ("φ_max deg", "max_flexion_deg", "{:.1f}"),
    ("feasible", "feasible", "{}"),
    ("time s", "total_s", "{:.1f}"),
)


@click.command("batch")
@click.argument("manifest", type=click.Path(path_type=Path))
@click.option("--out", type=click.Path(path_type=Path), default=Path("out/batch"),
              show_default=True, help="Output folder (created if needed).")
@click.option(
    "--dask",
    "dask_address",
    default=None,
    help="Dask scheduler address, e.g. tcp://scheduler:8786 (default: the manifest's "
    "[cluster] dask, else in this process).",
)
@click.option(
    "--local-cluster",
    type=click.IntRange(0, 256),
    default=0,
    show_default=True,
    help="Start a Dask cluster of N worker processes on this machine (loopback) for the batch "
    "(0: none).",
)
def batch_command(
    manifest: Path, out: Path, dask_address: str | None, local_cluster: int
) -> None:
    """Identify and synthesize every athlete of MANIFEST (TOML or CSV), in parallel, resumably.

    \b
    Reads:  MANIFEST (athlete id, trial path, optional overrides: pack, iterations, seed,
            algorithm, polish, starts, synthesis_seed, identification_config, synthesis_config;
            see configs/batch.example.toml), each trial, the bundled configs.
    Writes: OUT/<athlete>/ (athlete.json, convergence.csv, summary.txt, plots, gesture/ with
            gesture.json, profiles.csv, setpoints.csv, plots/), OUT/<athlete>/done.json last,
            OUT/summary.csv (one row per athlete: parameters, fit, gesture, time).
    Finished athletes (done.json, same settings and trial) are skipped when run again; the
    others are redone, bemore's own files in their folders removed first (other files stay).
    Exit code 1 if an athlete failed (OUT/<athlete>/failed.txt says why; so does the summary):
    bad input, a folder of hers that cannot be cleared or written (found before her fit), or a
    poor fit (kept, marked poor, not synthesized). The others still run.
    Example:
        bemore batch configs/batch.example.toml --out out/squad --local-cluster 2
    """
    from bemore.batch.manifest import load_manifest
    from bemore.batch.run import SUMMARY, run_batch
    from bemore.paths import check_output_folder

    parsed = load_manifest(manifest)
    address = dask_address or parsed.dask
    if address and local_cluster:
        raise ConfigError("--local-cluster and a Dask address (--dask or [cluster] dask): pick one")
    # A folder or summary.csv it cannot write: said now, before any cluster starts.
    check_output_folder(out, (SUMMARY,))
    with ExitStack() as stack:
        client = _client(stack, address, local_cluster)
        where = "in-process" if client is None else f"Dask {client.scheduler.address}"
        click.echo(f"batch of {len(parsed.items)} athlete(s) from {manifest} ({where})")
        report = _run_with_progress(parsed, out, client, run_batch)
    _print_table(report.rows)
    click.echo(
        f"{len(report.finished)} done, {len(report.skipped)} already finished (skipped), "
        f"{len(report.failed)} failed in {report.elapsed_s:.1f} s; wrote {out / SUMMARY}"
    )
    for athlete, message in report.failed.items():
        click.echo(f"bemore: {athlete}: {message}", err=True)
    if report.failed:
        sys.exit(1)


def _client(stack: ExitStack, address: str | None, local_workers: int) -> Any:
    """A Dask client (closed with ``stack``), or None to run in this process."""
    if local_workers:
        from bemore.evaluate.cluster import require_distributed

        distributed = require_distributed("--local-cluster")
        Client, LocalCluster = distributed.Client, distributed.LocalCluster

        cluster = stack.enter_context(
            LocalCluster(
                n_workers=local_workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            )
        )
        return stack.enter_context(Client(cluster, set_as_default=False))
    if address:
        from bemore.evaluate.cluster import connect

        client = connect(address)
        stack.callback(client.close)
        return client
    return None


def _run_with_progress(manifest: Any, out: Path, client: Any, run_batch: Any) -> Any:
    """Run with a rich progress bar over the athletes (done, skipped, failed)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[last]}"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, transient=False) as progress:
        task = progress.add_task("athletes", total=len(manifest.items), last="")

        def listener(athlete: str, status: str, row: dict | None) -> None:
            progress.update(task, advance=1, last=f"{athlete}: {status}")

        return run_batch(manifest, out, client=client, listener=listener)


def _print_table(rows: list[dict[str, Any]]) -> None:
    """The summary as a rich table (a selection of the CSV's columns)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="batch summary")
    for header, _, _ in SHOWN:
        table.add_column(header, justify="left" if header in ("athlete", "status") else "right")
    for row in rows:
        cells = []
        for _, key, form in SHOWN:
            value = row.get(key)
            cells.append("-" if value is None or value == "" else form.format(value))
        table.add_row(*cells)
    Console().print(table)

