"""`scm-xl demo`: the whole pipeline on the built-in simulator, no API key, under a minute.

1. Two simulated deployments on 127.0.0.1 (Qwen2.5-7B and Llama-3.1-8B on an A100 80GB),
   their step times taken from the first-principles roofline at 60% efficiency.
2. A small full-factorial matrix collected from each over real loopback HTTP, the
   collections at once, each against a simulator of its own.
3. The results filled into the calibration workbook, recalculated by the embedded
   engine and verified cell by cell against the Python reference.
4. The coefficients, the consistency verdict, the inverse answer for a target TPS the
   deployment can reach (an unreachable one only when asked), the roofline ceiling and
   the simulator's own expectation beside the measured TPS, and C_model from first
   principles beside the calibrated one.

Everything is built in a temporary folder beside the output folder and moved into place
at the end: an existing output folder is refused unless `force`, and a failed run leaves
it as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import dataclasses
import math
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, cast

from scm_xl.collect import CollectConfig, run_collection
from scm_xl.collect.progress import SharedBars
from scm_xl.latency import LatencyForecast, latency_model
from scm_xl.methods import default_questions
from scm_xl.errors import InputError, UsageError
from scm_xl.model import Solution, solve
from scm_xl.outputs import aside_path
from scm_xl.results import ResultRow, read_results, write_results
from scm_xl.roofline import Deployment, analyze, c_model_from_first_principles, load_catalog
from scm_xl.rules import Lang
from scm_xl.simulator import SimConfig, roofline_timing, running_simulator
from scm_xl.rules import DEFAULT_MODEL
from scm_xl.workbook.fill import WorkbookReport, fill

DEMO_GPU = "a100-80gb"
DEMO_EFFICIENCY = 0.6
# (model served by the simulator, catalog key)
DEMO_MODELS = ((DEFAULT_MODEL, "qwen2.5-7b"), ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"))
DEMO_CONCURRENCY = (1, 2, 4, 8)
DEMO_MAX_TOKENS = (16, 32, 64)
DEMO_REQUESTS_PER_SLOT = 2
# The prompt-length axis: every experiment at a short prompt level, and the base model once more
# at a long one (at the shortest max_tokens, to keep the demo quick).
DEMO_SHORT_PROMPT = 32
DEMO_LONG_PROMPT = 1024
DEMO_CONTEXT = 256
DEMO_FILES = ("results.csv", "requests.csv", "workbook.xlsx")
FAILED_WORKBOOK = aside_path(Path(DEMO_FILES[2]), "failed").name  # what fill leaves when verification fails

Say = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


def sim_config_for(model_key: str, gpu_key: str, *, efficiency: float, served_name: str, seed: int | None = None,
                   context: int = DEMO_CONTEXT) -> SimConfig:
    """A simulator whose step times come from the roofline of model x GPU at an efficiency."""
    return SimConfig(model_name=served_name, seed=seed,
                     **roofline_timing(model_key, gpu_key, efficiency=efficiency, context=context))


def ceiling_tps(model_key: str, gpu_key: str = DEMO_GPU) -> float:
    """Per-stream roofline ceiling (batch 1, 100% efficiency) at the demo's context, tok/s."""
    catalog = load_catalog()
    deployment = Deployment(model=catalog.find_model(model_key), gpu=catalog.find_gpu(gpu_key),
                            context=DEMO_CONTEXT)
    return analyze(deployment).ceiling_tps


def default_target_tps() -> float:
    """A target the simulated deployment reaches: three streams' worth of the first model's
    ceiling at the demo's efficiency, rounded down to 10 (about 250 tok/s), which sits between
    what concurrency 2 and 4 give, so the answer is a recommendation (concurrency 4)."""
    per_stream = DEMO_EFFICIENCY * ceiling_tps(DEMO_MODELS[0][1])
    return float(math.floor(3 * per_stream / 10) * 10)


@dataclass
class DemoReport:
    out_dir: Path
    results_csv: Path
    requests_csv: Path
    workbook: Path
    report: WorkbookReport
    solution: Solution
    target_tps: float
    target_max_tokens: int
    lang: str
    ceilings: dict[str, float]  # model served -> per-stream roofline ceiling, tok/s (100% efficiency)
    expected_stream_tps: dict[str, float]  # model served -> the simulator's own per-stream TPS at c=1, max length
    c_model_first_principles: dict[str, float]  # model served -> weight-bytes-read ratio to the base model
    collect_seconds: float
    total_seconds: float
    unreachable: tuple[float, Solution] | None = None  # (target, answer) when asked
    workload: LatencyForecast | None = None  # the latency model's answer between the measured prompt lengths
    knee: str | None = None
    holdout_mape: dict[str, float | None] = field(default_factory=dict)  # method -> leave-one-out MAPE
    notes: list[str] = field(default_factory=list)


def check_out_dir(out_dir: str | Path, *, force: bool) -> Path:
    """Refuse an existing, non-empty output folder unless force (UsageError, exit 2, nothing done)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError("exists and is not a folder", path=str(out))
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UsageError(f"the output folder {out} already exists: pass --force to replace its "
                         f"{', '.join(DEMO_FILES)}, or choose another with --output")
    return out


def run_demo(out_dir: str | Path = "scm-demo", *, target_tps: float | None = None,
             target_max_tokens: int | None = None, engine: str = "auto", lang: str = "en",
             force: bool = False, show_unreachable: bool = False, quiet: bool = True,
             say: Say | None = None, console: Any = None) -> DemoReport:
    """Run the demo into `out_dir`. `target_tps` None: `default_target_tps()`; `show_unreachable`
    adds the inverse answer for a target above what the measured levels reach. `console`: the rich
    Console `say` draws its status line on, so the collection's progress bar draws under it."""
    if lang not in ("zh", "en"):
        raise UsageError(f"unknown language {lang!r}: zh or en")
    tell = say or _quiet
    start = time.perf_counter()
    out = check_out_dir(out_dir, force=force)
    parent = out.parent if str(out.parent) else Path(".")
    parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=parent))
    try:
        demo = _run_in(staging, start, target_tps=default_target_tps() if target_tps is None else target_tps,
                       target_max_tokens=target_max_tokens, engine=engine, lang=lang,
                       show_unreachable=show_unreachable, quiet=quiet, tell=tell, console=console)
        _put_in_place(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # a workbook that failed verification was set aside as workbook.failed.xlsx: say that one
    workbook = DEMO_FILES[2] if demo.report.verification.ok else FAILED_WORKBOOK
    return dataclasses.replace(demo, out_dir=out, results_csv=out / DEMO_FILES[0], requests_csv=out / DEMO_FILES[1],
                               workbook=out / workbook, total_seconds=time.perf_counter() - start)


def _put_in_place(staging: Path, out: Path) -> None:
    """Move this run's files into `out`. With --force into an existing folder the demo's own files
    are replaced and anything else is left alone; a demo file this run did not make (the workbook of
    a run whose verification failed: it is workbook.failed.xlsx instead) is removed, so the folder
    never pairs new results with an old workbook."""
    if not out.exists():
        os.replace(staging, out)
        staging.mkdir()  # for the caller's cleanup
        return
    for name in (*DEMO_FILES, FAILED_WORKBOOK):
        if (staging / name).exists():
            os.replace(staging / name, out / name)
        else:
            (out / name).unlink(missing_ok=True)


def _run_in(folder: Path, start: float, *, target_tps: float, target_max_tokens: int | None, engine: str,
            lang: str, show_unreachable: bool, quiet: bool, tell: Say, console: Any = None) -> DemoReport:
    results_csv, requests_csv, workbook = (folder / name for name in DEMO_FILES)
    rows: list[ResultRow] = []
    request_rows: list[dict[str, str]] = []
    request_fields: list[str] = []
    expected: dict[str, float] = {}
    # (model index, served, catalog key, max_tokens levels, prompt level)
    runs: list[tuple[int, str, str, tuple[int, ...], int]] = [
        (i, served, key, DEMO_MAX_TOKENS, DEMO_SHORT_PROMPT) for i, (served, key) in enumerate(DEMO_MODELS)]
    runs.append((0, DEMO_MODELS[0][0], DEMO_MODELS[0][1], DEMO_MAX_TOKENS[:1], DEMO_LONG_PROMPT))
    with tempfile.TemporaryDirectory(prefix="scm-demo-") as tmp, contextlib.ExitStack() as simulators:
        # Each collection against a simulator of its own, all at once: a simulator keeps its own step
        # clock (absolute deadlines) and the client waits on it, not on a core, so each measures what
        # it would alone. The rows are then taken in the runs' order, as one after another gave them.
        collects: list[CollectConfig] = []
        for part_no, (i, served, key, lengths, prompt_level) in enumerate(runs):
            config = sim_config_for(key, DEMO_GPU, efficiency=DEMO_EFFICIENCY, served_name=served, seed=i)
            if prompt_level == DEMO_SHORT_PROMPT:
                expected[served] = config.expected_stream(DEMO_SHORT_PROMPT, max(DEMO_MAX_TOKENS))["tps"]
            base_url = simulators.enter_context(running_simulator(config))
            collects.append(CollectConfig(
                base_url=base_url, models=(served,), concurrency=DEMO_CONCURRENCY, max_tokens=lengths,
                requests_per_slot=DEMO_REQUESTS_PER_SLOT, results_path=Path(tmp) / f"results-{part_no}.csv",
                overwrite=True, gpu=DEMO_GPU, ignore_eos=True, prompt_tokens=(prompt_level,),
            ))
        experiments = sum(len(DEMO_CONCURRENCY) * len(lengths) for _, _, _, lengths, _ in runs)
        tell(f"collect from {len(runs)} simulated deployments at once ({experiments} experiments)")
        names = [f"{key} p{prompt_level}" for _, _, key, _, prompt_level in runs]
        stopped = asyncio.run(_collect_at_once(collects, names, progress=not quiet, console=console))
        if stopped is not None:  # raised here, out of the loop: see _collect_at_once
            raise stopped
        simulators.close()  # all three stop here, or on the way out of an error or an interruption
        for collect in collects:
            renamed: dict[str, str] = {}
            for row in read_results(collect.results_path).rows:
                new_id = f"E{len(rows) + 1:03d}"
                renamed[row.exp_id] = new_id
                rows.append(dataclasses.replace(row, exp_id=new_id, line=0))
            with open(collect.requests_csv, newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                request_fields = list(reader.fieldnames or request_fields)
                for record in reader:
                    record["exp_id"] = renamed.get(record["exp_id"], record["exp_id"])
                    request_rows.append(record)
    collect_seconds = time.perf_counter() - start
    write_results(results_csv, rows)
    _write_requests(requests_csv, request_fields, request_rows)

    # The question every surface asks by default (methods.default_questions), at the demo's target:
    # the workbook, `scm-xl solve`, the report's calculator and this summary give one answer.
    questions = default_questions(rows)
    length = target_max_tokens or int(questions["inverse"]["max_tokens"])
    derivation: dict[str, dict[str, object]] = {
        "forward": {**questions["forward"], "model": None},
        "inverse": {"target_tps": target_tps, "max_tokens": length, "model": None},
    }
    report = fill(results_csv, output=workbook, engine=engine, lang=cast(Lang, lang),  # checked in run_demo
                  method=questions["method"], derivation=derivation, progress=tell)
    cal = report.analysis.calibration
    solution = solve(cal, target_tps, length)
    unreachable = None
    if show_unreachable:
        best = solution.best_tps or max((s.tps for s in report.analysis.statuses), default=target_tps)
        beyond = float(math.ceil(1.5 * best / 100) * 100)
        unreachable = (beyond, solve(cal, beyond, length))
    base_key = DEMO_MODELS[0][1]
    latency = latency_model(rows)
    lsq_report = report.holdout  # fill's least-squares analysis (with the chain's hold-out)
    holdout_mape = {"chain": (lsq_report.get("chain_holdout") or {}).get("loo_mape_pct"),
                    "lsq": lsq_report.get("loo_mape_pct"), "latency": latency.holdout.mape_pct}
    workload = latency.forecast(DEMO_CONCURRENCY[1] + 1, DEMO_MAX_TOKENS[0], DEMO_MODELS[0][0],
                                (DEMO_SHORT_PROMPT + DEMO_LONG_PROMPT) // 2) if latency.available else None
    return DemoReport(
        out_dir=folder, results_csv=results_csv, requests_csv=requests_csv, workbook=workbook, report=report,
        solution=solution, target_tps=target_tps, target_max_tokens=length, lang=lang,
        ceilings={served: ceiling_tps(key) for served, key in DEMO_MODELS},
        expected_stream_tps=expected,
        c_model_first_principles={served: c_model_from_first_principles(base_key, key) for served, key in DEMO_MODELS},
        collect_seconds=collect_seconds, total_seconds=time.perf_counter() - start, unreachable=unreachable,
        workload=workload, knee=latency.knee_text(), holdout_mape=holdout_mape,
    )


class _Stopped(Exception):
    """A SIGTERM's Terminated (SystemExit) or a KeyboardInterrupt that landed inside one collection,
    carried as an ordinary exception: asyncio re-raises those two out of the event loop from every
    task they pass through, even while it is cancelling the others at the end, and the tasks it
    then leaves pending run their cleanup after the loop has closed (a traceback, not a clean end)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(repr(original))
        self.original = original


async def _guarded(collection: Any) -> Any:
    try:
        return await collection
    except (KeyboardInterrupt, SystemExit) as exc:
        raise _Stopped(exc) from None


async def _collect_at_once(collects: list[CollectConfig], names: list[str], *, progress: bool,
                           console: Any) -> BaseException | None:
    """Run the collections side by side; with `progress`, a bar each (named by `names`) on one display
    under the caller's status line on `console`. The first failure, or an interruption, stops them all;
    an interruption is returned once every collection has ended, for the caller to raise outside the
    event loop. (Raised in here, it escaped from this task while `asyncio.run` was cancelling the
    others after a signal had already left the loop through one of their requests: asyncio then
    logged "Task exception was never retrieved" with a traceback.)"""
    stopped: BaseException | None = None
    with SharedBars(console) if progress else contextlib.nullcontext() as bars:
        tasks = [asyncio.ensure_future(_guarded(run_collection(collect, progress=progress,
                                                               progress_slot=bars.slot(name) if bars else None)))
                 for collect, name in zip(collects, names)]
        try:
            await asyncio.gather(*tasks)
        except _Stopped as stop:
            stopped = stop.original
        finally:  # gather leaves the others running when one fails: stop them before the display goes
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return stopped


def _write_requests(path: Path, fields: list[str], rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


TEXTS: dict[str, dict[str, Any]] = {
    "en": {
        "deployments": "Simulated deployments on 127.0.0.1: {models} on {gpu}, step times from the roofline at "
                       "{eff} efficiency.",
        "collected": "Collected {n} experiments in {s:.1f} s.",
        "headers": ["model", "ceiling", "expected", "best", "of ceiling", "C_model physics", "C_model fit"],
        "legend": "Per stream, tok/s: ceiling = roofline at 100% efficiency; expected = the simulator's own at "
                  "concurrency 1, {mt} tokens; best = best measured. C_model: first principles (weight bytes "
                  "read per token) and calibrated.",
        "warnings": "physics warnings: {w} of {n} rows",
        "reachable": "Inverse: {t:g} TPS at max_tokens {mt} needs concurrency {c} (predicted {p:.1f} TPS).",
        "unreachable": "Inverse: {t:g} TPS at max_tokens {mt} is unreachable with the measured levels{best}.",
        "best": "; best reachable {p:.1f} TPS at concurrency {c}",
        "best_excluded": " (measured there at {m:.1f} TPS, row {row}, and excluded: that best is the model's, "
                         "not the measurement)",
        "wrote": "Wrote {files} ({s:.1f} s in all).",
        "starting": "Running the demo on the built-in simulator (127.0.0.1 only, no API key) ...",
        "workload": "Workload: a {p}-token prompt at concurrency {c}, max_tokens {mt} (neither measured): "
                    "{tps:.1f} TPS, TTFT {ttft:.3f} s (latency model; prompts measured at {short} and {long} tokens).",
        "holdout": "Leave-one-out error: chain {chain}, least squares {lsq}, latency model {latency}. A long prompt "
                   "costs more at higher concurrency (its prefill stalls the batch), which the separable chain "
                   "cannot say; the latency model can.",
    },
    "zh": {
        "deployments": "127.0.0.1 上的模拟部署：{models}，GPU {gpu}，每步时间取自 roofline，效率 {eff}。",
        "collected": "已采集 {n} 个实验，用时 {s:.1f} 秒。",
        "headers": ["模型", "上限", "预期", "实测最佳", "占上限", "C_model 物理", "C_model 标定"],
        "legend": "单流 tok/s：上限 = 效率 100% 的 roofline；预期 = 模拟器自身在并发 1、{mt} token 下的值；"
                  "实测最佳 = 实测最高值。C_model：第一性原理（每 token 读取的权重字节）与标定值。",
        "warnings": "物理检查警告：{n} 行中 {w} 行",
        "reachable": "反推：max_tokens {mt} 下要达到 {t:g} TPS，需要并发 {c}（预测 {p:.1f} TPS）。",
        "unreachable": "反推：max_tokens {mt} 下 {t:g} TPS 在已测并发水平内无法达到{best}。",
        "best": "；可达最高 {p:.1f} TPS（并发 {c}）",
        "best_excluded": "（该配置实测 {m:.1f} TPS，行 {row}，已剔除：这个最高值来自模型，不是实测）",
        "wrote": "已写入 {files}（共 {s:.1f} 秒）。",
        "starting": "正在内置模拟器上运行演示（只用 127.0.0.1，无需 API 密钥）……",
        "workload": "工作负载：提示 {p} Token、并发 {c}、max_tokens {mt}（均未实测）：{tps:.1f} TPS，首字时间 {ttft:.3f} 秒"
                    "（延迟模型；实测提示为 {short} 与 {long} Token）。",
        "holdout": "留一法误差：链式 {chain}，最小二乘 {lsq}，延迟模型 {latency}。长提示在高并发下代价更大（其预填充会阻塞整批），"
                   "可分离的链式模型表达不了，延迟模型可以。",
    },
}


def _catalog_key(served: str) -> str:
    return dict(DEMO_MODELS).get(served, served)


def _inverse_line(t: dict[str, Any], target: float, length: int, sol: Solution, analysis: Any) -> str:
    from scm_xl.report import measured_rows_at

    if sol.reachable:
        return t["reachable"].format(t=target, mt=length, c=sol.concurrency, p=sol.tps)
    best = t["best"].format(p=sol.best_tps, c=sol.best_concurrency) if sol.best_tps else ""
    if sol.best_tps and sol.best_concurrency is not None:  # the best reachable was measured and excluded
        best += "".join(t["best_excluded"].format(m=ch.status.tps, row=ch.status.exp_id)
                        for ch in measured_rows_at(analysis, sol.best_concurrency, length, sol.model)
                        if not ch.status.included)
    return t["unreachable"].format(t=target, mt=length, best=best)


def starting_line(lang: str) -> str:
    """What the demo says before it starts, in its language."""
    return TEXTS.get(lang, TEXTS["en"])["starting"]


def render(demo: DemoReport) -> str:
    from scm_xl.report import _fmt, render_coefficients, render_consistency, render_verification
    from scm_xl.terminal import table, wrapped

    t = TEXTS.get(demo.lang, TEXTS["en"])
    lang: Lang = "zh" if demo.lang == "zh" else "en"
    analysis = demo.report.analysis
    cal = analysis.calibration
    lines = [
        wrapped(t["deployments"].format(models=", ".join(m for m, _ in DEMO_MODELS), gpu=DEMO_GPU,
                                        eff=f"{DEMO_EFFICIENCY:.0%}")),
        t["collected"].format(n=len(analysis.statuses), s=demo.collect_seconds),
        "",
        render_coefficients(analysis, lang=lang),
        "",
        render_consistency(analysis, lang=lang),
        "",
    ]
    physics_rows = []
    for served, ceiling in demo.ceilings.items():
        statuses = [s for s in analysis.statuses if s.model == served]
        best = max((s.tps / s.concurrency for s in statuses), default=None)
        calibrated = cal.c_model(served)
        physics_rows.append([_catalog_key(served), _fmt(ceiling, 1), _fmt(demo.expected_stream_tps.get(served), 1), _fmt(best, 1),
                             f"{best / ceiling:.0%}" if best else "n/a",
                             _fmt(demo.c_model_first_principles[served], 3), _fmt(calibrated, 3)])
    lines.append(table(t["headers"], physics_rows))
    lines.append(wrapped(t["legend"].format(mt=max(DEMO_MAX_TOKENS))))
    warned = sum(1 for s in analysis.statuses if s.physics.count)
    lines.append(t["warnings"].format(w=warned, n=len(analysis.statuses)))
    lines.append("")
    lines.append(_inverse_line(t, demo.target_tps, demo.target_max_tokens, demo.solution, analysis))
    if demo.unreachable is not None:
        lines.append(_inverse_line(t, demo.unreachable[0], demo.target_max_tokens, demo.unreachable[1], analysis))
    w = demo.workload
    if w is not None and w.tps is not None and w.ttft_s is not None:
        lines.append(wrapped(t["workload"].format(p=int(w.prompt_tokens), c=int(w.concurrency), mt=w.max_tokens,
                                                  tps=w.tps, ttft=w.ttft_s, short=DEMO_SHORT_PROMPT,
                                                  long=DEMO_LONG_PROMPT)))
    if demo.holdout_mape:
        errors = {k: "n/a" if v is None else f"{v:.1f}%" for k, v in demo.holdout_mape.items()}
        lines.append(wrapped(t["holdout"].format(**errors)))
    lines.append(render_verification(demo.report.verification, lang=lang))
    lines.append("")
    lines.append(wrapped(t["wrote"].format(files=", ".join(str(p) for p in (demo.results_csv, demo.requests_csv,
                                                                             demo.workbook)),
                                           s=demo.total_seconds)))
    return "\n".join(lines)
