"""Benchmark the collector against the built-in simulator (not a test).

Client overhead: the simulator runs with zero delay (one token per chunk) in its
own process pinned to one core; the collector runs in this process pinned to
another, so client CPU is what limits it. We measure output tokens per second of
collector CPU (time.process_time) and requests/s:
  - burst at concurrency 64, 256 and 1000 (max_tokens 128);
  - paced at concurrency 128, 20 ms per token (about 6.4k tokens/s offered).
Measurement accuracy: the simulator in fixed-delay mode (50 ms TTFT, 10 ms per
token) at concurrency 16 and 256; the collector's figures are compared with the
known delays and with what the simulator itself measured (/sim/stats).

Writes benchmarks/results/collector.md. Traffic stays on 127.0.0.1.

    python benchmarks/bench_collector.py [--quick] [--client-core 0] [--server-core 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from scm_xl import stats
from scm_xl.collect import CollectConfig, read_requests, run_collection
from scm_xl.simulator import new_event_loop
from simulator_process import Simulator, add_core_options, pin_client

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "collector.md"


@dataclass
class Scenario:
    name: str
    kind: str  # "burst", "paced" or "accuracy"
    concurrency: int
    requests_per_slot: int
    max_tokens: int
    sim_args: list[str]
    ttft_s: float | None = None
    itl_s: float | None = None


@dataclass
class Outcome:
    scenario: Scenario
    wall_s: float
    cpu_s: float  # collector CPU for the whole run, warm-up included
    run_wall_s: float  # the whole run, warm-up included
    run_tokens: int  # output tokens of the whole run, warm-up included
    tokens: int
    requests: int
    failed: int
    row_tps: float
    ttft: tuple[float, ...] | None
    mean_ttft_s: float | None
    mean_ttft_from_send_s: float | None
    mean_itl_s: float | None
    max_send_lag_s: float
    mean_in_flight: float
    server: dict = field(default_factory=dict)
    truth: dict = field(default_factory=dict)


def simulator_truth(simulator: Simulator, last: int) -> dict:
    """What the simulator measured for the last `last` requests it received (the measured ones:
    every warm-up request is received before the first measured one)."""
    records = sorted(simulator.get("/sim/requests"), key=lambda r: r["received_at"])[-last:]
    with_tokens = [r for r in records if r["tokens"]]
    gaps = sum(r["tokens"] - 1 for r in with_tokens)
    return {
        "requests": len(records),
        "tokens": sum(r["tokens"] for r in records),
        "mean_ttft_s": stats.mean(r["first_token_at"] - r["received_at"] for r in with_tokens),
        "mean_itl_s": sum(r["last_token_at"] - r["first_token_at"] for r in with_tokens) / gaps if gaps else None,
        "tps": sum(r["tokens"] for r in records)
        / (max(r["last_token_at"] or r["received_at"] for r in records) - min(r["received_at"] for r in records)),
    }


def scenarios(quick: bool) -> list[Scenario]:
    scale = 0.25 if quick else 1.0
    n = lambda value: max(1, round(value * scale))  # noqa: E731
    zero = ["--zero-delay", "--seed", "1"]
    return [
        Scenario("burst c64", "burst", 64, n(40), 128, zero),
        Scenario("burst c256", "burst", 256, n(10), 128, zero),
        Scenario("burst c1000", "burst", 1000, n(3), 128, zero),
        Scenario("paced c128 (20 ms/token)", "paced", 128, n(3), 128,
                 ["--ttft-s", "0.02", "--itl-s", "0.02"], ttft_s=0.02, itl_s=0.02),
        Scenario("accuracy c16", "accuracy", 16, n(5), 100,
                 ["--ttft-s", "0.05", "--itl-s", "0.01"], ttft_s=0.05, itl_s=0.01),
        Scenario("accuracy c256", "accuracy", 256, n(5), 100,
                 ["--ttft-s", "0.05", "--itl-s", "0.01"], ttft_s=0.05, itl_s=0.01),
    ]


def run_scenario(scenario: Scenario, server_core: int | None, workdir: Path) -> Outcome:
    simulator = Simulator(scenario.sim_args, server_core)
    try:
        out = workdir / scenario.name.split(" ")[0] / f"c{scenario.concurrency}"
        out.mkdir(parents=True, exist_ok=True)
        config = CollectConfig(
            base_url=simulator.base_url, models=("sim",), concurrency=(scenario.concurrency,),
            max_tokens=(scenario.max_tokens,), requests_per_slot=scenario.requests_per_slot,
            warmup=scenario.concurrency, results_path=out / "results.csv", overwrite=True, ignore_eos=True,
        )
        # Warm-up requests open the connections; server truth then counts the measured part only.
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            cpu_before = time.process_time()
            wall_before = time.perf_counter()
            report = runner.run(run_collection(config, progress=False))
            wall = time.perf_counter() - wall_before
            cpu = time.process_time() - cpu_before
        server = simulator.get("/sim/stats")
        truth = simulator_truth(simulator, report.rows[0].total_requests)
    finally:
        simulator.stop()
    row = report.rows[0]
    every = read_requests(config.requests_csv)
    records = [r for r in every if r["warmup"] == "false"]
    ok = [r for r in records if r["status"] == "ok"]
    ttfts = [float(r["ttft_s"]) for r in ok if r["ttft_s"]]
    ttfts_from_send = [float(r["ttft_s"]) - (float(r["sent_s"]) - float(r["scheduled_s"])) for r in ok if r["ttft_s"]]
    lags = [float(r["sent_s"]) - float(r["scheduled_s"]) for r in records]
    in_flight = sum(float(r["latency_s"]) for r in records if r["latency_s"]) / row.total_time_s
    return Outcome(
        scenario=scenario, wall_s=row.total_time_s, cpu_s=cpu, run_wall_s=wall,
        run_tokens=sum(int(r["completion_tokens"]) for r in every), tokens=row.total_output_tokens,
        requests=row.total_requests, failed=(row.failed_requests or 0) + (row.rate_limited_requests or 0),
        row_tps=row.tps, ttft=stats.percentiles(ttfts, (50, 99, 100)), mean_ttft_s=stats.mean(ttfts),
        mean_ttft_from_send_s=stats.mean(ttfts_from_send),
        mean_itl_s=row.mean_itl_s, max_send_lag_s=max(lags) if lags else 0.0, mean_in_flight=in_flight,
        server=server, truth=truth,
    )


def pct(value: float) -> str:
    return f"{value * 100:+.2f}%"


def report_markdown(outcomes: list[Outcome], args: argparse.Namespace) -> str:
    lines = [
        "# Collector benchmark",
        "",
        f"Generated by `benchmarks/bench_collector.py` on {time.strftime('%Y-%m-%d')} "
        f"(Python {platform.python_version()}, httpx {httpx.__version__}, "
        f"{'uvloop' if _has_uvloop() else 'asyncio'} event loop, {os.cpu_count()} CPUs). "
        f"Collector pinned to core {args.client_core}, simulator to core {args.server_core}; all on 127.0.0.1. "
        f"Load average before the run: {args.load_before:.2f} (other jobs on the machine make figures vary "
        "by roughly 10-20% between runs).",
        "",
        "## Client overhead",
        "",
        "Zero-delay simulator, one token per chunk (one socket write per token), max_tokens 128 (burst); "
        "20 ms per token (paced). tok/s and req/s are the measured experiment's (first send to last byte). "
        "Client CPU and tok/CPU-s cover the whole `run_collection` call: the collector process's CPU time "
        "(`time.process_time`), warm-up requests (one per slot) and CSV writing included, over all the "
        "tokens it received. Held concurrency: the mean number of requests in flight (sum of latencies / "
        "wall time) and the simulator's maximum of active streams. TTFT counts from when a request was due.",
        "",
        "| scenario | tok/s | req/s | client CPU | tok/CPU-s | held concurrency (mean / server max) | "
        "TTFT p50 / p99 / max (ms) | max send lag (ms) | failed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        if o.scenario.kind not in ("burst", "paced"):
            continue
        ttft = " / ".join(f"{v * 1000:.1f}" for v in o.ttft) if o.ttft else "-"
        lines.append(
            f"| {o.scenario.name} | {o.row_tps:,.0f} | {o.requests / o.wall_s:,.0f} | {o.cpu_s / o.run_wall_s:.0%} | "
            f"{o.run_tokens / o.cpu_s:,.0f} | {o.mean_in_flight:,.1f} / {o.server.get('max_active')} "
            f"of {o.scenario.concurrency} | {ttft} | {o.max_send_lag_s * 1000:.1f} | {o.failed} |")
    paced = next((o for o in outcomes if o.scenario.kind == "paced"), None)
    if paced is not None and paced.mean_itl_s:
        lines += ["", f"Paced: measured mean ITL {paced.mean_itl_s * 1000:.3f} ms against 20 ms offered "
                      f"(simulator measured {paced.server['mean_itl_s'] * 1000:.3f} ms): "
                      + ("the collector kept up." if paced.mean_itl_s < 0.0205 else "the collector fell behind.")]
    lines += [
        "",
        "## Measurement accuracy",
        "",
        "Fixed-delay simulator: TTFT 50 ms, 10 ms per token, max_tokens 100 (ignore_eos), one warm-up request "
        "per slot. Truth is what the simulator measured itself for the measured requests (`/sim/requests`). "
        "ITL error: the collector's token-weighted mean ITL against the simulator's (and against the nominal "
        "10 ms). Added TTFT: the collector's mean TTFT minus the simulator's (from when it had read the "
        "request to its first token); the collector's clock starts when a request was due, so this includes "
        "client-side queueing when many requests fall due at once; 'from send' starts the clock when the "
        "collector began sending instead. TPS error: the collector's TPS (tokens / first send to last byte) "
        "against the simulator's (tokens / first request received to last token written).",
        "",
        "| scenario | ITL error vs simulator (vs nominal) | added TTFT (ms) | added TTFT from send (ms) | "
        "simulator TTFT (ms) | TPS error | failed |",
        "|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        if o.scenario.kind != "accuracy":
            continue
        truth = o.truth
        itl_vs_truth = o.mean_itl_s / truth["mean_itl_s"] - 1
        itl_vs_nominal = o.mean_itl_s / o.scenario.itl_s - 1
        lines.append(
            f"| {o.scenario.name} | {pct(itl_vs_truth)} ({pct(itl_vs_nominal)}) | "
            f"{(o.mean_ttft_s - truth['mean_ttft_s']) * 1000:.2f} | "
            f"{(o.mean_ttft_from_send_s - truth['mean_ttft_s']) * 1000:.2f} | {truth['mean_ttft_s'] * 1000:.2f} | "
            f"{pct(o.row_tps / truth['tps'] - 1)} | {o.failed} |")
    lines += [
        "",
        "GuideLLM was not run side by side here (it needs torch and a local tokenizer; see "
        "`../shared/notes/load-clients.md` for its figures measured on this kind of machine: about "
        "14k tok/CPU-s burst at c64 holding 21 of 64 streams, 5.5k paced).",
        "",
    ]
    return "\n".join(lines)


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the requests (a smoke run)")
    add_core_options(parser)
    parser.add_argument("--only", default=None, help="run only scenarios whose name contains this")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    pin_client(args)
    outcomes = []
    with tempfile.TemporaryDirectory(prefix="scm-xl-bench-") as temp:
        for scenario in scenarios(args.quick):
            if args.only and args.only not in scenario.name:
                continue
            outcome = run_scenario(scenario, args.server_core, Path(temp))
            outcomes.append(outcome)
            print(f"{scenario.name}: {outcome.row_tps:,.0f} tok/s, {outcome.run_tokens / outcome.cpu_s:,.0f} tok/CPU-s, "
                  f"mean ITL {outcome.mean_itl_s and outcome.mean_itl_s * 1000:.3f} ms, "
                  f"mean TTFT {outcome.mean_ttft_s and outcome.mean_ttft_s * 1000:.2f} ms, "
                  f"truth {json.dumps(outcome.truth)}",
                  file=sys.stderr)
    text = report_markdown(outcomes, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
