"""`scm-xl plan`: write a designed experiment matrix for `scm-xl collect --matrix`."""

from __future__ import annotations

from pathlib import Path

import click

from scm_xl.cli._common import handle_errors
from scm_xl.cli.options import Aliased
from scm_xl.rules import DEFAULT_MODEL


def int_list(ctx, param, value):
    """Click callback: "1,2, 4" -> (1, 2, 4); used by `plan` and `collect`."""
    if value is None:
        return None
    try:
        numbers = tuple(int(part) for part in value.replace(" ", "").split(",") if part)
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from None
    if not numbers:
        raise click.BadParameter("expected at least one integer")
    return numbers


def _models(ctx, param, value):
    names = tuple(part.strip() for item in value for part in item.split(",") if part.strip())
    if not names:
        raise click.BadParameter("expected at least one model name")
    return names


@click.command()
@click.option("--model", "-m", "--models", "models", cls=Aliased, old=("--models",), multiple=True,
              default=(DEFAULT_MODEL,), callback=_models,
              show_default=True, help="Models, comma-separated or repeated; the first is the base model.")
@click.option("--concurrency", "-c", default="1,2,4,8", callback=int_list, show_default=True,
              help="Comma-separated concurrency levels.")
@click.option("--max-tokens", default="50,100,200", callback=int_list, show_default=True,
              help="Comma-separated max_tokens levels.")
@click.option("--prompt-tokens", default=None, callback=int_list,
              help="Comma-separated prompt lengths in tokens (collect --prompt-tokens): a fourth factor "
                   "[default: none, one plain prompt].")
@click.option("--design", type=click.Choice(["ofat", "full", "orthogonal"]), default="orthogonal",
              show_default=True,
              help="ofat: one factor at a time (the article's); full: full factorial; "
                   "orthogonal: the smallest orthogonal array (L9/L16/L25 ...).")
@click.option("--repeats", "-r", type=int, default=3, show_default=True,
              help="Runs of every cell, in randomised blocks.")
@click.option("--requests-per-slot", "-n", type=int, default=10, show_default=True,
              help="Requests each concurrency slot sends (total = n x concurrency).")
@click.option("--seed", type=int, default=None, help="Seed of the run order [default: drawn and recorded].")
@click.option("--tps", type=float, default=100.0, show_default=True,
              help="Assumed output tokens per second, for the time estimate.")
@click.option("--output", "-o", "--out", "path", cls=Aliased, old=("--out",),
              type=click.Path(dir_okay=False, path_type=Path),
              default=Path("matrix.toml"), show_default=True, help="Matrix file to write.")
@click.option("--force", "--overwrite", "overwrite", is_flag=True, cls=Aliased, old=("--overwrite",),
              help="Replace an existing matrix file (otherwise refused).")
@handle_errors
def plan(models, concurrency, max_tokens, prompt_tokens, design, repeats, requests_per_slot, seed, tps, path,
         overwrite):
    """Plan the experiments: which models x concurrency x max_tokens (x prompt
    tokens) cells to measure, how many times, in what (randomised) order. Prints
    the number of experiments and requests and roughly how long the plan takes
    at --tps.

    \b
    The article's next step, a 3x5 design with 5 repeats:
      scm-xl plan -c 1,2,4,8,16 --max-tokens 50,100,200 --repeats 5 -o matrix.toml
      scm-xl collect --matrix matrix.toml
    """
    from scm_xl.errors import UsageError
    from scm_xl.plan import make_plan, write_plan

    if not tps > 0:
        raise UsageError(f"--tps must be positive, got {tps:g}")
    matrix = make_plan(models=models, concurrency=concurrency, max_tokens=max_tokens, design=design,
                       repeats=repeats, requests_per_slot=requests_per_slot, seed=seed,
                       prompt_tokens=prompt_tokens or ())
    write_plan(matrix, path, tps=tps, overwrite=overwrite)
    click.echo(matrix.summary(tps))
    click.echo(f"Wrote {path}: run it with  scm-xl collect --matrix {path}")


commands = [plan]
