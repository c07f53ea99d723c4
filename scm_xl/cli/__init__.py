"""The scm-xl command line: a thin click layer over the library.

Each submodule holds the commands of one area and lists them in `commands`.
"""

from __future__ import annotations

import click

from scm_xl import __version__
from scm_xl.cli import collect as _collect
from scm_xl.cli import demo as _demo
from scm_xl.cli import plan as _plan
from scm_xl.cli import report as _report
from scm_xl.cli import roofline as _roofline
from scm_xl.cli import workbook as _workbook
from scm_xl.cli._common import ScmXlGroup


@click.group(cls=ScmXlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="scm-xl")
def main() -> None:
    """Measure an OpenAI-compatible LLM endpoint and calibrate a readable
    throughput model, TPS = BaseTPS x f(concurrency) x K_len / C_model,
    in an Excel workbook of live formulas."""


for _module in (_demo, _workbook, _report, _collect, _plan, _roofline):
    for _command in _module.commands:
        main.add_command(_command)
