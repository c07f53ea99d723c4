"""What a person sees while and after collecting: one progress bar for the run, the summary table.

The bar (rich, on stderr) counts the run's measured requests; its label names the experiment
running and its rate is that experiment's tokens so far over its time so far, which settles
instead of flickering to 0 between request ends. Several runs at once (the demo's collections)
share one display, `SharedBars`, a bar each: rich nests live displays on one console only one
inside another, and several side by side would take each other's place and leave frozen lines.

`CollectionReport` is what a run did, the table's source. The summary table fits 80 columns: units
sit in the headers, values are never cut (they wrap if a terminal is narrower still), and
several models are named m1, m2... with a legend. With prompt levels it gains a column of
the requested level; that still fits 80 columns for one model at the widest figures, and for
several at c <= 256, max_tokens <= 4096 and TTFT under 10 s (beyond, cells wrap).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Sequence

from scm_xl.collect.matrix import MatrixPoint
from scm_xl.collect.records import RERUN_FAILED_SHARE
from scm_xl.results import ResultRow


@dataclass(kw_only=True)
class CollectionReport:
    """What a collection run did. `rows` are the experiments run now, in order."""

    results_path: Path
    requests_path: Path
    rows: list[ResultRow] = field(default_factory=list)
    skipped: list[MatrixPoint] = field(default_factory=list)
    rerun: list[str] = field(default_factory=list)  # all-failed experiments of an earlier run, run again
    # experiments of an earlier run with more than RERUN_FAILED_SHARE failed, run again -> (failed, total)
    rerun_failing: dict[str, tuple[int, int]] = field(default_factory=dict)
    superseded: dict[str, str] = field(default_factory=dict)  # their earlier request rows' exp_id now
    dropped_line: int | None = None  # a half-written last line of the results CSV, dropped on resume
    failed_experiments: dict[str, Counter[str]] = field(default_factory=dict)  # exp_id -> error classes
    wall_s: float = 0.0
    prompt_warnings: list[str] = field(default_factory=list)  # prompt levels the pre-flight could not hit

    def problems(self) -> list[str]:
        """Lines for people: experiments in which no request succeeded, resume repairs, prompt levels
        missed."""
        lines: list[str] = list(self.prompt_warnings)
        if self.dropped_line is not None:
            lines.append(f"Resume: dropped the half-written last line ({self.results_path}:{self.dropped_line}).")
        if self.rerun:
            lines.append(f"Resume: ran again {len(self.rerun)} experiment(s) in which every request had failed: "
                         f"{', '.join(self.rerun)}.")
        if self.rerun_failing:
            which = ", ".join(f"{exp_id} ({failed} of {total} failed)"
                              for exp_id, (failed, total) in self.rerun_failing.items())
            kept = ", ".join(self.superseded[exp_id] for exp_id in self.rerun_failing if exp_id in self.superseded)
            lines.append(f"Resume: ran again {len(self.rerun_failing)} experiment(s) in which more than "
                         f"{RERUN_FAILED_SHARE:.0%} of the requests had failed: {which}; the new results rows "
                         f"replace theirs, and their earlier request rows stay in {self.requests_path} as {kept}.")
        for exp_id, classes in self.failed_experiments.items():
            detail = ", ".join(f"{name} {count}" for name, count in sorted(classes.items()))
            lines.append(f"{exp_id}: all {sum(classes.values())} requests failed ({detail}).")
        if self.failed_experiments:
            lines.append(f"{len(self.failed_experiments)} of {len(self.rows)} experiment(s) have no successful "
                         "request: their rows are not measurements (see the notes column and requests CSV); "
                         "--resume runs them again.")
        return lines

    @property
    def total_requests(self) -> int:
        return sum(row.total_requests for row in self.rows)

    @property
    def failed_requests(self) -> int:
        return sum(row.failed_requests or 0 for row in self.rows)

    @property
    def rate_limited_requests(self) -> int:
        return sum(row.rate_limited_requests or 0 for row in self.rows)


class RunCounters:
    """Counters the request path bumps (cheap); the bar's ticker reads them."""

    __slots__ = ("requests", "tokens")

    def __init__(self) -> None:
        self.requests = 0
        self.tokens = 0


class SharedBars:
    """One display for several runs at once, a bar each (`slot(name)`, handed to run_collection as
    `progress_slot`), shown while the block runs. `console`: the rich Console a caller shows its
    status line on; the bars then draw under it and go at the end. Without it they have a stderr
    console of their own and stay on screen."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        # no time column, a shorter bar: room in 80 columns for a label that names the run
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(bar_width=12), MofNCompleteColumn(),
            TextColumn("requests {task.fields[rate]}"),
            console=console if console is not None else Console(stderr=True), transient=console is not None,
        )

    def slot(self, name: str) -> BarSlot:
        """A run's bar, placed now: the bars stand in the order their slots were taken."""
        return BarSlot(self, name, self.progress.add_task(f"{name}: starting", total=None, rate=""))

    def __enter__(self) -> SharedBars:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


@dataclass(frozen=True)
class BarSlot:
    """A run's place on a SharedBars display (its rich task); its bar's label names it by `name`."""

    bars: SharedBars
    name: str
    task: Any


class ProgressBar:
    """One rich progress bar on stderr for the whole run, refreshed a few times a second."""

    def __init__(self, points: Sequence[MatrixPoint], requests_per_slot: int, counters: RunCounters,
                 console: Any = None, slot: BarSlot | None = None) -> None:
        """`console`: a rich Console a caller already shows a live status on; the bar then draws
        under that status (rich nests live displays on one console) and goes when the run ends.
        Without it the bar has a stderr console of its own and stays on screen. `slot`: the bar is
        one of several on a display the caller shows (SharedBars), and `console` is not used."""
        self.counters = counters
        self.experiments = len(points)
        self.several_models = len({point.model for point in points}) > 1
        self.done = 0
        self.name = slot.name if slot is not None else None
        self.label = "starting" if self.name is None else f"{self.name}: starting"
        self.started_at = time.perf_counter()
        self.requests_at_start = 0
        self.tokens_at_start = 0
        if slot is not None:
            self.progress = slot.bars.progress
            self.owned = False  # SharedBars starts and stops the display
        else:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.progress = Progress(
                TextColumn("{task.description}"), BarColumn(bar_width=20), MofNCompleteColumn(),
                TextColumn("requests {task.fields[rate]}"), TimeElapsedColumn(),
                console=console if console is not None else Console(stderr=True), transient=console is not None,
            )
            self.owned = True
        total = sum(point.concurrency * requests_per_slot for point in points)
        if slot is not None:
            self.task = slot.task
            self.progress.update(self.task, total=total, description=self.label, rate="")
        else:
            self.task = self.progress.add_task(self.label, total=total, rate="")
        self.ticker: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.owned:
            self.progress.start()
        self.ticker = asyncio.create_task(self._tick())

    def begin(self, point: MatrixPoint) -> None:
        """An experiment starts: its label, and the counters its rate is taken from."""
        model = f" {point.model}" if self.several_models else ""
        prompt = "" if point.prompt_level is None else f" prompt={point.prompt_level}"
        if self.name is not None:  # one of several bars: the run's name, and what sets the experiment apart
            self.label = f"[{self.done + 1}/{self.experiments}] {self.name} c={point.concurrency} " \
                         f"max_tokens={point.max_tokens}"
        else:
            self.label = f"[{self.done + 1}/{self.experiments}] {point.exp_id}{model} c={point.concurrency} " \
                         f"max_tokens={point.max_tokens}{prompt}"
        self.started_at = time.perf_counter()
        self.requests_at_start = self.counters.requests
        self.tokens_at_start = self.counters.tokens
        self._refresh()

    def rate(self) -> str:
        """The running experiment's output tokens per second so far (blank until a request ended)."""
        tokens = self.counters.tokens - self.tokens_at_start
        elapsed = time.perf_counter() - self.started_at
        if self.counters.requests == self.requests_at_start or elapsed <= 0:
            return ""
        return f"{tokens / elapsed:,.0f} tok/s"

    def _refresh(self) -> None:
        self.progress.update(self.task, completed=self.counters.requests, description=self.label, rate=self.rate())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.25)
            self._refresh()

    def finished(self, row: ResultRow) -> None:
        self.done += 1

    async def stop(self) -> None:
        if self.ticker is not None:
            self.ticker.cancel()
            await asyncio.gather(self.ticker, return_exceptions=True)
        done = f"done: {self.done}/{self.experiments} experiments"
        self.progress.update(self.task, completed=self.counters.requests, rate="",
                             description=done if self.name is None else f"{self.name} {done}")
        if self.owned:
            self.progress.stop()


# Header (units on the second line), and how a row fills it.
_COLUMNS: tuple[tuple[str, Literal["left", "right"]], ...] = (
    ("exp", "left"), ("c", "right"), ("max\ntokens", "right"), ("TPS\ntok/s", "right"),
    ("latency\np50/p99 s", "right"), ("TTFT\np50/p99 ms", "right"), ("ITL\nms", "right"),
    ("requests\nok/fail/429", "right"),
)


def summary_table(report: CollectionReport) -> Any:
    """A rich Table of the experiments run (TPS, latency and TTFT tails, request outcomes)."""
    from rich import box
    from rich.table import Table

    models = list(dict.fromkeys(row.model for row in report.rows))
    title = f"scm-xl collect: {len(report.rows)} experiment(s) in {report.wall_s:.1f} s"
    if report.skipped:
        title += f", {len(report.skipped)} already done"
    caption = [f"results: {report.results_path}", f"requests: {report.requests_path}"]
    if len(models) == 1:
        title += f"\nmodel: {models[0]}"
    else:
        caption = [f"m{i} = {name}" for i, name in enumerate(models, start=1)] + caption
    table = Table(title=title, caption="\n".join(caption), box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=0, caption_justify="left")  # the box puts one space between columns
    names = list(_COLUMNS)
    levels = any(row.prompt_level is not None for row in report.rows)
    if levels:  # the requested level; results.csv's prompt_tokens has the server's count
        names.insert(3, ("prompt\ntokens", "right"))
    if len(models) > 1:
        names.insert(1, ("model", "left"))
    for header, justify in names:
        table.add_column(header, justify=justify, overflow="fold")
    for row in report.rows:
        prompt = ["-" if row.prompt_level is None else str(row.prompt_level)] if levels else []
        cells = [row.exp_id] + ([f"m{models.index(row.model) + 1}"] if len(models) > 1 else []) + [
            str(row.concurrency), str(row.max_tokens), *prompt, figure(row.tps),
            f"{figure(row.latency_p50_s)}/{figure(row.latency_p99_s)}",
            f"{figure(row.ttft_p50_s, 1000.0)}/{figure(row.ttft_p99_s, 1000.0)}",
            figure(row.mean_itl_s, 1000.0),
            f"{row.ok_requests}/{row.failed_requests}/{row.rate_limited_requests}"]
        table.add_row(*cells)
    return table


def figure(value: float | None, scale: float = 1.0) -> str:
    """A measured figure in its column's unit, to about three significant digits ("-" for none):
    6,388 / 74.5 / 7.45. The CSVs keep every digit."""
    if value is None:
        return "-"
    value *= scale
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"
