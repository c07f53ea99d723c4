"""Benchmark `scm-xl report` (not a test): page size on the demo's data, generation time at 1,000 rows.

1. Size: `scm-xl demo` measures its two simulated deployments on 127.0.0.1 (24 rows); the
   report of its results CSV is written in both languages and its size recorded (target < 5 MB).
2. Time: 1,000 rows (2 models x concurrency 1..16 x 4 max_tokens x 25 repeats, log-normal
   noise, P95 latency and TTFT) -> `write_report`, timed in one process after a warm-up
   (median of --repeats runs, and its parts: analysis, charts, the whole page), and the CLI
   `scm-xl report` in a fresh process (Python start-up and imports included). Target < 2 s.

Writes benchmarks/results/report.md.

    python benchmarks/bench_report.py [--repeats 5] [--skip-demo]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scm_xl.results import ResultRow, write_results

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "report.md"
TRUE_F = {1: 1.0, 2: 1.9, 4: 3.5, 8: 6.0, 16: 9.0}
TRUE_K = {64: 1.0, 128: 0.95, 256: 0.9, 512: 0.8}
TRUE_C = {"model-a": 1.0, "model-b": 1.7}


def thousand_rows(seed: int = 7, repeats: int = 25) -> list[ResultRow]:
    rng = random.Random(seed)
    rows = []
    for r in range(repeats):
        for model, c_model in TRUE_C.items():
            for c, f in TRUE_F.items():
                for length, k in TRUE_K.items():
                    tps = 40.0 * f * k / c_model * math.exp(rng.gauss(0.0, 0.04))
                    requests = 4 * c
                    tokens = requests * length
                    per_stream = tps / c
                    rows.append(ResultRow(
                        exp_id=f"B{len(rows) + 1:04d}", model=model, concurrency=c, requests_per_slot=4,
                        total_requests=requests, max_tokens=length, total_time_s=round(tokens / tps, 6),
                        total_output_tokens=tokens, repeat=r + 1,
                        latency_p95_s=length / per_stream * (1 + 0.1 * rng.random()),
                        ttft_p95_s=0.05 * math.sqrt(c) * (1 + 0.1 * rng.random())))
    return rows


def demo_sizes(folder: Path) -> dict[str, int]:
    demo = folder / "demo"
    # The demo writes its results CSV before its workbook step; the CSV is what the report needs.
    subprocess.run([sys.executable, "-c", "import sys; from scm_xl.cli import main; sys.exit(main())",
                    "demo", "--out", str(demo)], capture_output=True, text=True, timeout=600)
    csv = demo / "results.csv"
    if not csv.exists():
        raise SystemExit("scm-xl demo wrote no results.csv")
    sizes = {}
    for lang in ("en", "zh"):
        out = folder / f"demo_{lang}.html"
        subprocess.run([sys.executable, "-c", "import sys; from scm_xl.cli import main; sys.exit(main())",
                        "report", str(csv), "-o", str(out), "--lang", lang, "--force"], check=True,
                       capture_output=True, text=True)
        sizes[lang] = out.stat().st_size
    sizes["rows"] = sum(1 for _ in csv.open(encoding="utf-8")) - 1
    return sizes


def timings(folder: Path, repeats: int) -> dict[str, float]:
    from scm_xl.htmlreport import render_report
    from scm_xl.htmlreport.charts import all_charts
    from scm_xl.htmlreport.texts import PAGE
    from scm_xl.lsq import fit
    from scm_xl.model import analyze

    rows = thousand_rows()
    csv = folder / "rows1000.csv"
    write_results(csv, rows)
    render_report(analyze(rows), rows, "en", "warm-up")  # imports, the chart engine's start-up

    whole, analysis_s, charts_s, sizes = [], [], [], []
    for _ in range(repeats):
        start = time.perf_counter()
        analysis = analyze(rows)
        analysis_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        all_charts(analysis, fit(analysis.statuses, analysis.settings), rows, PAGE["en"])
        charts_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        html = render_report(analyze(rows), rows, "en", csv.name)
        whole.append(time.perf_counter() - start)
        sizes.append(len(html.encode("utf-8")))

    cold = []
    for _ in range(max(2, repeats // 2)):
        out = folder / "rows1000.html"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import sys; from scm_xl.cli import main; sys.exit(main())",
                        "report", str(csv), "-o", str(out), "--lang", "en", "--force"], check=True,
                       capture_output=True, text=True)
        cold.append(time.perf_counter() - start)
    return {"rows": len(rows), "warm_median": statistics.median(whole), "warm_min": min(whole),
            "warm_max": max(whole), "analysis": statistics.median(analysis_s),
            "charts": statistics.median(charts_s), "cold_median": statistics.median(cold),
            "cold_min": min(cold), "size": statistics.median(sizes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--skip-demo", action="store_true", help="Only the 1,000-row timing.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="scm-bench-report-") as tmp:
        folder = Path(tmp)
        sizes = None if args.skip_demo else demo_sizes(folder)
        t = timings(folder, args.repeats)
    lines = [
        "# Report benchmark (`python benchmarks/bench_report.py`)",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"shared with other jobs (load average {os.getloadavg()[0]:.1f} at the end of the run), "
        "so timings move between runs.",
        "",
    ]
    if sizes:
        lines += [
            "## Size on the demo's data (target < 5 MB)",
            "",
            "| rows | en | zh |",
            "|---|---|---|",
            f"| {sizes['rows']} | {sizes['en'] / 1e6:.3f} MB | {sizes['zh'] / 1e6:.3f} MB |",
            "",
        ]
    lines += [
        f"## Generation time, {t['rows']:,} rows (target < 2 s)",
        "",
        "| what | seconds |",
        "|---|---|",
        f"| `write_report` in a warm process, median of {args.repeats} (min-max) | "
        f"{t['warm_median']:.2f} ({t['warm_min']:.2f}-{t['warm_max']:.2f}) |",
        f"| of which the analysis (filter, chain, consistency) | {t['analysis']:.2f} |",
        f"| of which the four charts (Altair + vl-convert to SVG) | {t['charts']:.2f} |",
        f"| `scm-xl report` in a fresh process (start-up and imports included), median (min) | "
        f"{t['cold_median']:.2f} ({t['cold_min']:.2f}) |",
        "",
        f"Page size at {t['rows']:,} rows: {t['size'] / 1e6:.2f} MB.",
        "",
        "A fresh process pays for the imports (Altair, the workbook layer) and for starting "
        "vl-convert's JavaScript engine on its first chart (about a second each on this machine); "
        "a warm process, such as `fill --html` after its own work, pays only for the drawing.",
        "",
    ]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
