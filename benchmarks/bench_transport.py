"""Side by side, in one run: scm-xl's FastTransport against httpx's own transport and against
httpx-aiohttp (a maintained aiohttp transport for httpx), on the same simulator load (not a test).

Every variant runs through the collector's one send path (`run_collection(senders=...)`):

    fast             scm-xl's FastTransport (the default; collect/transport.py)
    httpx            httpx.AsyncClient on httpx's own transport (what `--transport httpx` runs)
    aiohttp-client   httpx.AsyncClient on httpx_aiohttp.AiohttpTransport
    aiohttp-direct   httpx_aiohttp.AiohttpTransport.handle_async_request, no client layer
                     (the same shortcut FastTransport takes)

Load: the built-in simulator in its own process; zero delay, one token per chunk, max_tokens
128 for the bursts at concurrency 64, 256 and 1,000; 20 ms per token at concurrency 128
(paced, about 6.4k tokens/s offered). The collector runs in this process, pinned to one core
and the simulator to the other, so client CPU is what limits it. Figures: output tokens per
second of client CPU (time.process_time over the whole run_collection call, warm-up
included), held concurrency (mean requests in flight = sum of latencies / wall, and the
simulator's maximum of active streams), and added TTFT (the collector's mean TTFT, counted
from when each request was due, minus the simulator's own, from when it had read the request).

Writes benchmarks/results/transport.md. Traffic stays on 127.0.0.1.

    python benchmarks/bench_transport.py [--quick] [--only aiohttp] [--client-core 0] [--server-core 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import httpx

from scm_xl import stats
from scm_xl.collect import CollectConfig, HttpxSender, open_senders, read_requests, run_collection
from scm_xl.collect.send import sender_count
from scm_xl.simulator import new_event_loop
from simulator_process import Simulator, add_core_options, pin_client

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "results" / "transport.md"


@dataclass
class Scenario:
    name: str
    concurrency: int
    requests_per_slot: int
    sim_args: list[str]


@dataclass
class Outcome:
    scenario: Scenario
    variant: str
    tps: float
    cpu_share: float
    tok_per_cpu_s: float
    mean_in_flight: float
    server_max_active: int | None
    ttft_p50_s: float | None
    added_ttft_s: float | None
    failed: int


class DirectSender:
    """httpx-aiohttp's transport called directly, as FastSender calls FastTransport."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    async def prepare(self, request: httpx.Request) -> Any:
        return request

    async def send(self, prepared: Any) -> httpx.Response:
        return await self.transport.handle_async_request(prepared)

    async def aclose(self) -> None:
        await self.transport.aclose()


def _aiohttp_transport(per_client: int) -> Any:
    from httpx_aiohttp import AiohttpTransport

    return AiohttpTransport(trust_env=False, limits=httpx.Limits(max_connections=per_client,
                                                                 max_keepalive_connections=per_client))


def aiohttp_senders(direct: bool) -> Callable[[CollectConfig, int], list[Any]]:
    def factory(config: CollectConfig, max_concurrency: int) -> list[Any]:
        count = sender_count(config, max_concurrency)
        per_client = -(-max_concurrency // count) + 1
        if direct:
            return [DirectSender(_aiohttp_transport(per_client)) for _ in range(count)]
        return [HttpxSender(httpx.AsyncClient(transport=_aiohttp_transport(per_client), trust_env=False,
                                              timeout=httpx.Timeout(config.timeout_s, pool=None)))
                for _ in range(count)]
    return factory


VARIANTS: dict[str, tuple[str, Callable[..., Any]]] = {
    "fast": ("fast", open_senders),
    "httpx": ("httpx", open_senders),
    "aiohttp-client": ("httpx", aiohttp_senders(direct=False)),
    "aiohttp-direct": ("httpx", aiohttp_senders(direct=True)),
}


def scenarios(quick: bool) -> list[Scenario]:
    scale = 0.5 if quick else 1.0
    n = lambda value: max(1, round(value * scale))  # noqa: E731
    zero = ["--zero-delay", "--seed", "1"]
    return [
        Scenario("burst c64", 64, n(10), zero),
        Scenario("burst c256", 256, n(4), zero),
        Scenario("burst c1000", 1000, 1, zero),
        Scenario("paced c128 (20 ms/token)", 128, n(2), ["--ttft-s", "0.02", "--itl-s", "0.02"]),
    ]


def run_one(scenario: Scenario, variant: str, server_core: int | None, workdir: Path) -> Outcome:
    transport, factory = VARIANTS[variant]
    simulator = Simulator(scenario.sim_args, server_core)
    try:
        out = workdir / variant / scenario.name.split(" ")[1]
        out.mkdir(parents=True, exist_ok=True)
        config = CollectConfig(
            base_url=simulator.base_url, models=("sim",), concurrency=(scenario.concurrency,), max_tokens=(128,),
            requests_per_slot=scenario.requests_per_slot, warmup=scenario.concurrency, ignore_eos=True,
            results_path=out / "results.csv", overwrite=True, transport=transport,
        )
        with asyncio.Runner(loop_factory=new_event_loop) as runner:
            cpu_before = time.process_time()
            wall_before = time.perf_counter()
            report = runner.run(run_collection(config, progress=False, senders=factory, check_first=False))
            wall = time.perf_counter() - wall_before
            cpu = time.process_time() - cpu_before
        server = simulator.get("/sim/stats")
        row = report.rows[0]
        measured = sorted(simulator.get("/sim/requests"), key=lambda r: r["received_at"])[-row.total_requests:]
    finally:
        simulator.stop()
    every = read_requests(config.requests_csv)
    records = [r for r in every if r["warmup"] == "false"]
    ok = [r for r in records if r["status"] == "ok"]
    ttfts = [float(r["ttft_s"]) for r in ok if r["ttft_s"]]
    truth_ttft = stats.mean(r["first_token_at"] - r["received_at"] for r in measured if r["tokens"])
    mean_ttft = stats.mean(ttfts)
    run_tokens = sum(int(r["completion_tokens"]) for r in every)
    return Outcome(
        scenario=scenario, variant=variant, tps=row.tps, cpu_share=cpu / wall, tok_per_cpu_s=run_tokens / cpu,
        mean_in_flight=sum(float(r["latency_s"]) for r in records if r["latency_s"]) / row.total_time_s,
        server_max_active=server.get("max_active"),
        ttft_p50_s=stats.percentiles(ttfts, (50,))[0] if ttfts else None,
        added_ttft_s=None if mean_ttft is None or truth_ttft is None else mean_ttft - truth_ttft,
        failed=(row.failed_requests or 0) + (row.rate_limited_requests or 0),
    )


def report_markdown(outcomes: list[Outcome], args: argparse.Namespace, decision: list[str]) -> str:
    import httpx_aiohttp  # noqa: F401
    from importlib.metadata import version

    lines = [
        "# HTTP transport: scm-xl's FastTransport against httpx and httpx-aiohttp",
        "",
        f"Generated by `benchmarks/bench_transport.py{' --quick' if args.quick else ''}` on "
        f"{time.strftime('%Y-%m-%d %H:%M')} (Python {platform.python_version()}, httpx {httpx.__version__}, "
        f"httpx-aiohttp {version('httpx-aiohttp')}, aiohttp {version('aiohttp')}, uvloop event loop, "
        f"{os.cpu_count()} CPUs). Collector pinned to core {args.client_core}, simulator to core "
        f"{args.server_core}; all on 127.0.0.1. The machine is shared with other jobs (load average "
        f"{args.load_before:.2f} before the run, {os.getloadavg()[0]:.2f} after): figures vary by 10-20% "
        "between runs, so read ratios within one run rather than absolute numbers.",
        "",
        "Every variant runs through the collector's one send path (`run_collection(senders=...)`), one "
        "warm-up request per slot first. Zero-delay simulator (one token per chunk), max_tokens 128 for the "
        "bursts; 20 ms per token for the paced run (about 6.4k tok/s offered). tok/CPU-s: output tokens per "
        "second of collector CPU over the whole run (warm-up and CSV writing included). Held: mean requests "
        "in flight (sum of latencies / wall) and the simulator's maximum of active streams. Added TTFT: the "
        "collector's mean TTFT (from when a request was due) minus the simulator's own.",
        "",
        "| scenario | transport | tok/s | client CPU | tok/CPU-s | vs fast | held (mean / server max) | "
        "TTFT p50 (ms) | added TTFT (ms) | failed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for o in outcomes:
        base = next((b for b in outcomes if b.scenario is o.scenario and b.variant == "fast"), None)
        ratio = f"{o.tok_per_cpu_s / base.tok_per_cpu_s:.0%}" if base else "-"
        lines.append(
            f"| {o.scenario.name} | {o.variant} | {o.tps:,.0f} | {o.cpu_share:.0%} | {o.tok_per_cpu_s:,.0f} | "
            f"{ratio} | {o.mean_in_flight:,.1f} / {o.server_max_active} of {o.scenario.concurrency} | "
            f"{'-' if o.ttft_p50_s is None else f'{o.ttft_p50_s * 1000:,.1f}'} | "
            f"{'-' if o.added_ttft_s is None else f'{o.added_ttft_s * 1000:,.2f}'} | {o.failed} |")
    lines += ["", "## Decision", "", *decision, ""]
    return "\n".join(lines)


def decide(outcomes: list[Outcome]) -> list[str]:
    """The issue's rule: a maintained transport within 20% of ours (tok/CPU-s) replaces ours."""
    lines = []
    worst: dict[str, float] = {}
    for o in outcomes:
        base = next((b for b in outcomes if b.scenario is o.scenario and b.variant == "fast"), None)
        if base is None or o.variant == "fast":
            continue
        share = o.tok_per_cpu_s / base.tok_per_cpu_s
        worst[o.variant] = min(worst.get(o.variant, share), share)
    close = [name for name, share in worst.items() if share >= 0.8 and name.startswith("aiohttp")]
    for name, share in worst.items():
        lines.append(f"- {name}: at worst {share:.0%} of FastTransport's tokens per CPU-second.")
    if close:
        lines.append(f"- Rule (a maintained transport within 20% replaces ours): {', '.join(close)} qualifies.")
    else:
        lines.append("- Rule (a maintained transport within 20% replaces ours): none qualifies in every scenario.")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="half the requests (a smoke run)")
    add_core_options(parser)
    parser.add_argument("--only", default=None, help="run only variants whose name contains this")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    pin_client(args)
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="scm-xl-bench-") as temp:
        for scenario in scenarios(args.quick):
            for variant in VARIANTS:  # interleaved, so slow drift of the machine hits every variant alike
                if args.only and args.only not in variant and variant != "fast":
                    continue
                outcome = run_one(scenario, variant, args.server_core, Path(temp))
                outcomes.append(outcome)
                print(f"{scenario.name} {variant}: {outcome.tok_per_cpu_s:,.0f} tok/CPU-s, {outcome.tps:,.0f} tok/s, "
                      f"held {outcome.mean_in_flight:.1f}, added TTFT "
                      f"{outcome.added_ttft_s and outcome.added_ttft_s * 1000:.2f} ms", file=sys.stderr)
    text = report_markdown(outcomes, args, decide(outcomes))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
