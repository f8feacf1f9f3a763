"""``bemore model equations|export-c``: the model compiler's readable and portable outputs."""

from __future__ import annotations

from pathlib import Path

import click

from bemore.model.gymnasts import load_model
from bemore.paths import check_output_folder, output_folder, write_together

_MODEL_HELP = "real_gymnast (default), exemplary_gymnast, or a model description TOML file."


@click.group("model")
def model_group() -> None:
    """A model's equations of motion for people (LaTeX, Markdown) and as portable C."""


@model_group.command("equations")
@click.argument("model_name", metavar="[MODEL]", default="real_gymnast")
@click.option("--out", "out_dir", default="out/equations", show_default=True,
              type=click.Path(path_type=Path), help="Output folder.")
def equations_command(model_name: str, out_dir: Path) -> None:
    """Write a model's equations of motion as LaTeX and Markdown.

    \b
    Reads:  MODEL, a built-in name or a description TOML (docs/model.md §4).
    Writes: OUT/<name>_equations.tex (standalone; compiles with pdflatex) and
            OUT/<name>_equations.md: mass-matrix entries, velocity-product, gravity,
            spring-damper and driven-effort terms, named points, with common subexpressions
            named x<k>. Needs sympy (pip install 'bemore[model]').
    Example:
        bemore model equations exemplary_gymnast --out out/equations
    """
    from bemore.model.equations import equation_files, write_equations
    from bemore.model.symbolic import derive, require_sympy

    require_sympy()
    model = load_model(model_name)
    # Before the derivation (seconds): a folder or file it cannot write is said at once.
    check_output_folder(out_dir, equation_files(model.description.name))
    tex, md = write_equations(derive(model.description), out_dir)
    click.echo(f"wrote {tex}, {md}")


@model_group.command("export-c")
@click.argument("model_name", metavar="[MODEL]", default="real_gymnast")
@click.option("--out", "out_dir", default="out/c", show_default=True,
              type=click.Path(path_type=Path), help="Output folder.")
@click.option("--prefix", default=None, help="C name prefix (default: the model's name).")
def export_c_command(model_name: str, out_dir: Path, prefix: str | None) -> None:
    """Write a model's dynamics as one portable C99 source and header (only <math.h>).

    \b
    Reads:  MODEL, a built-in name or a description TOML (docs/model.md §4).
    Writes: OUT/<prefix>.h and OUT/<prefix>.c: a parameter struct (one field per parameter),
            the hybrid forward dynamics (free accelerations and driven efforts), the inverse
            dynamics, the mass matrix and the named points. Needs sympy
            (pip install 'bemore[model]').
    Example:
        bemore model export-c exemplary_gymnast --out out/c
    """
    from bemore.model.export_c import c_files, c_identifier, export_c
    from bemore.model.symbolic import derive, require_sympy

    require_sympy()
    model = load_model(model_name)
    # Before the derivation (seconds): a folder or file it cannot write is said at once.
    check_output_folder(out_dir, c_files(c_identifier(prefix or model.description.name)))
    name, header, source = export_c(derive(model.description), prefix)
    header_name, source_name = c_files(name)
    output_folder(out_dir)
    write_together({out_dir / header_name: header, out_dir / source_name: source})
    click.echo(f"wrote {out_dir / header_name}, {out_dir / source_name}")
