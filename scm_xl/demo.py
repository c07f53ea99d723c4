"""`scm-xl demo`: the whole pipeline on the built-in simulator, no API key, under a minute.

1. Two simulated deployments on 127.0.0.1 (Qwen2.5-7B and Llama-3.1-8B on an A100 80GB),
   their step times taken from the first-principles roofline at 60% efficiency.
2. A small full-factorial matrix collected from each over real loopback HTTP.
3. The results filled into the calibration workbook, recalculated by the embedded
   engine and verified cell by cell against the Python reference.
4. The coefficients, the consistency verdict, the inverse answer for a target TPS,
   the roofline ceiling beside the measured TPS, and C_model from first principles
   beside the calibrated one.
"""

from __future__ import annotations

import asyncio
import csv
import dataclasses
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scm_xl.collect import CollectConfig, run_collection
from scm_xl.model import Solution, solve
from scm_xl.results import ResultRow, read_results, write_results
from scm_xl.roofline import Deployment, c_model_from_first_principles, load_catalog, simulator_params
from scm_xl.simulator import SimConfig, roofline_timing, running_simulator
from scm_xl.workbook.fill import WorkbookReport, fill

DEMO_GPU = "a100-80gb"
DEMO_EFFICIENCY = 0.6
# (model served by the simulator, catalog key)
DEMO_MODELS = (("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"), ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"))
DEMO_CONCURRENCY = (1, 2, 4, 8)
DEMO_MAX_TOKENS = (16, 32, 64)
DEMO_REQUESTS_PER_SLOT = 2
DEMO_CONTEXT = 256
DEFAULT_TARGET_TPS = 500.0


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
    ceilings: dict[str, float]  # model served -> per-stream roofline ceiling, tok/s (100% efficiency)
    c_model_first_principles: dict[str, float]  # model served -> weight-bytes ratio to the base model
    collect_seconds: float
    total_seconds: float
    notes: list[str] = field(default_factory=list)


def sim_config_for(model_key: str, gpu_key: str, *, efficiency: float, served_name: str, seed: int | None = None,
                   context: int = DEMO_CONTEXT) -> SimConfig:
    """A simulator whose step times come from the roofline of model x GPU at an efficiency."""
    return SimConfig(model_name=served_name, seed=seed,
                     **roofline_timing(model_key, gpu_key, efficiency=efficiency, context=context))


def _ceiling(model_key: str, gpu_key: str) -> float:
    catalog = load_catalog()
    deployment = Deployment(model=catalog.find_model(model_key), gpu=catalog.find_gpu(gpu_key),
                            context=DEMO_CONTEXT)
    return 1.0 / float(simulator_params(deployment)["base_step_seconds"])


def run_demo(out_dir: str | Path = "scm-demo", *, target_tps: float = DEFAULT_TARGET_TPS,
             target_max_tokens: int | None = None, engine: str = "formulas", quiet: bool = True) -> DemoReport:
    start = time.perf_counter()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results_csv, requests_csv, workbook = out / "results.csv", out / "requests.csv", out / "workbook.xlsx"
    rows: list[ResultRow] = []
    request_rows: list[dict[str, str]] = []
    request_fields: list[str] = []
    with tempfile.TemporaryDirectory(prefix="scm-demo-") as tmp:
        for i, (served, key) in enumerate(DEMO_MODELS):
            config = sim_config_for(key, DEMO_GPU, efficiency=DEMO_EFFICIENCY, served_name=served, seed=i)
            part = Path(tmp) / f"results-{i}.csv"
            with running_simulator(config) as base_url:
                collect = CollectConfig(
                    base_url=base_url, models=(served,), concurrency=DEMO_CONCURRENCY, max_tokens=DEMO_MAX_TOKENS,
                    requests_per_slot=DEMO_REQUESTS_PER_SLOT, results_path=part, overwrite=True, gpu=DEMO_GPU,
                    ignore_eos=True,
                )
                asyncio.run(run_collection(collect, progress=not quiet))
            renamed: dict[str, str] = {}
            for row in read_results(part).rows:
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

    length = target_max_tokens or DEMO_MAX_TOKENS[-1]
    derivation = {
        "forward": {"concurrency": DEMO_CONCURRENCY[1], "max_tokens": DEMO_MAX_TOKENS[1], "model": None},
        "inverse": {"target_tps": target_tps, "max_tokens": length, "model": None},
    }
    report = fill(results_csv, output=workbook, engine=engine, lang="en", force=True, derivation=derivation)
    solution = solve(report.analysis.calibration, target_tps, length)
    base_key = DEMO_MODELS[0][1]
    return DemoReport(
        out_dir=out, results_csv=results_csv, requests_csv=requests_csv, workbook=workbook, report=report,
        solution=solution, target_tps=target_tps, target_max_tokens=length,
        ceilings={served: _ceiling(key, DEMO_GPU) for served, key in DEMO_MODELS},
        c_model_first_principles={served: c_model_from_first_principles(base_key, key) for served, key in DEMO_MODELS},
        collect_seconds=collect_seconds, total_seconds=time.perf_counter() - start,
    )


def _write_requests(path: Path, fields: list[str], rows: list[dict[str, Any]]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    shutil.move(str(tmp), path)


def render(demo: DemoReport) -> str:
    from scm_xl.report import _fmt, render_coefficients, render_consistency, render_verification, table

    analysis = demo.report.analysis
    cal = analysis.calibration
    lines = [
        f"Simulated deployments on 127.0.0.1: {', '.join(m for m, _ in DEMO_MODELS)} on {DEMO_GPU}, "
        f"step times from the roofline at {DEMO_EFFICIENCY:.0%} efficiency.",
        f"Collected {len(analysis.statuses)} experiments in {demo.collect_seconds:.1f} s.",
        "",
        render_coefficients(analysis),
        "",
        render_consistency(analysis),
        "",
    ]
    physics_rows = []
    for served, ceiling in demo.ceilings.items():
        statuses = [s for s in analysis.statuses if s.model == served]
        best = max((s.tps / s.concurrency for s in statuses), default=None)
        calibrated = cal.c_model(served)
        physics_rows.append([served, _fmt(ceiling, 1), _fmt(best, 1),
                             f"{best / ceiling:.0%}" if best else "-",
                             _fmt(demo.c_model_first_principles[served], 3), _fmt(calibrated, 3)])
    lines.append(table(["model", "roofline ceiling tok/s/stream", "best measured tok/s/stream", "of ceiling",
                        "C_model first principles", "C_model calibrated"], physics_rows))
    warned = sum(1 for s in analysis.statuses if s.physics.count)
    lines.append(f"physics warnings: {warned} of {len(analysis.statuses)} rows")
    lines.append("")
    sol = demo.solution
    if sol.reachable:
        lines.append(f"Inverse: {demo.target_tps:g} TPS at max_tokens {demo.target_max_tokens} needs concurrency "
                     f"{sol.concurrency} (predicted {sol.tps:.1f} TPS).")
    else:
        best = f"; best reachable {sol.best_tps:.1f} TPS at concurrency {sol.best_concurrency}" if sol.best_tps else ""
        lines.append(f"Inverse: {demo.target_tps:g} TPS at max_tokens {demo.target_max_tokens} is unreachable "
                     f"with the measured levels{best}.")
    lines.append(render_verification(demo.report.verification))
    lines.append("")
    lines.append(f"Wrote {demo.results_csv}, {demo.requests_csv} and {demo.workbook} "
                 f"({demo.total_seconds:.1f} s in all).")
    return "\n".join(lines)
