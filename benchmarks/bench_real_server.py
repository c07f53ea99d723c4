"""scm-xl against a real third-party server: llama.cpp's llama-server on 127.0.0.1 (not a test).

llama_server.py (beside this file) builds llama-server from the llama-cpp-python sdist and writes a small
random-weight llama GGUF (both cached; see ../shared/notes/real-server.md); the server gets a fixed
slot count (-np) and context (-c, so ctx/slots tokens per slot), one thread (-t 1), so the client
keeps the other core. Then:

  1. calibration: `scm-xl collect` over concurrency x max_tokens x prompt length (--prompt-tokens:
     server-counted target prompt lengths; the CSV records prompt_level and the measured prompt_tokens);
  2. unseen configurations: another `scm-xl collect` at concurrency levels, max_tokens and prompt
     lengths that the calibration did not measure (concurrency beyond the slot count included);
  3. one over-long request (prompt longer than a slot's context), to record the server's own refusal;
  4. with the server stopped: `scm-xl predict CALIBRATION.csv --concurrency C --max-tokens L
     --prompt-tokens P --method M --json` for each unseen configuration and method, scored against the
     measured TPS (per-method MAPE and max error), and `scm-xl fill` for the knee, set against the slot
     count (with an empirical knee from the measured rows: the least concurrency within 90% of the best).

Writes benchmarks/results/real_server.md (the CSVs and the server log stay in --work-dir).

    python benchmarks/bench_real_server.py                 # full design, about 12.5 min on 2 cores
    python benchmarks/bench_real_server.py --quick         # smoke run, about 1.5-2 min
    python benchmarks/bench_real_server.py --score-only    # re-score and re-render the CSVs in --work-dir
    # design sizes: --slots --ctx --calib-concurrency --calib-max-tokens --calib-prompts --calib-requests
    #               --unseen-concurrency --unseen-max-tokens --unseen-prompts --unseen-requests --methods
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_server import MODEL_ALIAS, LlamaServer, ModelShape, build, describe, write_model  # noqa: E402

HERE = Path(__file__).resolve().parent
REPORT = HERE / "results" / "real_server.md"
SCM_XL = [sys.executable, "-m", "scm_xl"]

FULL = dict(calib_concurrency="1,2,4,8,16", calib_max_tokens="32,64,128", calib_prompts="32,256,640",
            calib_requests=1, unseen_concurrency="3,6,12,24", unseen_max_tokens="64,128",
            unseen_prompts="32,128,448", unseen_requests=1)
QUICK = dict(calib_concurrency="1,4,8,16", calib_max_tokens="32,64", calib_prompts="32,256",
             calib_requests=1, unseen_concurrency="6,12", unseen_max_tokens="64",
             unseen_prompts="32,128", unseen_requests=1)
# Tokens a chat request adds around the user's text (template, BOS): kept free in each slot's context.
CONTEXT_MARGIN = 16


def ints(text: str) -> list[int]:
    values = [int(v) for v in str(text).split(",") if v.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected a comma list of positive integers, got {text!r}")
    return values


def joined(values: list[int]) -> str:
    return ",".join(str(v) for v in values)


# ------------------------------------------------------------------------------------------- collect

def collect(base_url: str, out: Path, concurrency: list[int], max_tokens: list[int], prompts: list[int],
            requests: int, timeout_s: float) -> dict[str, Any]:
    command = [*SCM_XL, "collect", "--base-url", base_url, "-m", MODEL_ALIAS,
               "-c", joined(concurrency), "--max-tokens", joined(max_tokens), "--prompt-tokens", joined(prompts),
               "-n", str(requests), "-o", str(out), "--force", "--no-progress",
               "--timeout", "120", "--request-timeout", "600"]
    print(f"$ {shlex.join(command)}", flush=True)
    started = time.monotonic()
    run = subprocess.run(command, timeout=timeout_s, env={**os.environ, "NO_PROXY": "127.0.0.1,localhost"})
    seconds = time.monotonic() - started
    if run.returncode not in (0, 1):  # 1: an experiment had no successful request (kept, and shown)
        raise SystemExit(f"scm-xl collect failed (exit {run.returncode}); see above")
    return {"command": command, "seconds": seconds, "exit": run.returncode}


def requests_per_slot(concurrency: list[int], base: int, min_requests: int) -> dict[int, list[int]]:
    """Concurrency levels grouped by requests per slot: at least `base`, and enough that each
    experiment sends at least `min_requests` requests (c=1 gets several, c>=min_requests one)."""
    groups: dict[int, list[int]] = {}
    for c in sorted(concurrency):
        groups.setdefault(max(base, -(-min_requests // c)), []).append(c)
    return groups


def collect_design(base_url: str, out: Path, concurrency: list[int], max_tokens: list[int], prompts: list[int],
                   base: int, min_requests: int, timeout_s: float) -> dict[str, Any]:
    """One `scm-xl collect` per requests-per-slot group, merged into `out` (and its requests CSV), with
    exp_ids renumbered E001... in order."""
    groups = requests_per_slot(concurrency, base, min_requests)
    parts, seconds = [], 0.0
    for n, levels in groups.items():
        part = out.with_name(f"{out.stem}.n{n}.csv")
        seconds += collect(base_url, part, levels, max_tokens, prompts, n, timeout_s)["seconds"]
        parts.append(part)
    merge(parts, out)
    return {"seconds": seconds, "groups": {str(n): levels for n, levels in groups.items()}}


def _requests_csv(results: Path) -> Path:
    return results.with_name(f"{results.stem}.requests.csv")


def merge(parts: list[Path], out: Path) -> None:
    renamed: dict[tuple[int, str], str] = {}
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    for index, part in enumerate(parts):
        with part.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            header = header or list(reader.fieldnames or [])
            for row in reader:
                renamed[(index, row["exp_id"])] = f"E{len(renamed) + 1:03d}"
                rows.append({**row, "exp_id": renamed[(index, row["exp_id"])]})
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header or [])
        writer.writeheader()
        writer.writerows(rows)
    request_header: list[str] | None = None
    request_rows: list[dict[str, str]] = []
    for index, part in enumerate(parts):
        if not _requests_csv(part).exists():
            continue
        with _requests_csv(part).open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            request_header = request_header or list(reader.fieldnames or [])
            request_rows += [{**row, "exp_id": renamed.get((index, row["exp_id"]), row["exp_id"])} for row in reader]
    if request_header:
        with _requests_csv(out).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=request_header)
            writer.writeheader()
            writer.writerows(request_rows)


def read_rows(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        rows: list[dict[str, Any]] = list(csv.DictReader(handle))
    for row in rows:
        for key in ("concurrency", "max_tokens", "prompt_level", "prompt_tokens", "ok_requests",
                    "failed_requests", "total_output_tokens"):
            row[key] = int(float(row[key])) if row.get(key) not in (None, "") else None
        for key in ("tps", "total_time_s", "ttft_p95_s", "latency_p95_s", "mean_itl_s"):
            row[key] = float(row[key]) if row.get(key) not in (None, "") else None
        if row["tps"] is None and row.get("total_time_s") and row.get("total_output_tokens") is not None:
            row["tps"] = row["total_output_tokens"] / row["total_time_s"]
    return rows


def overflow_probe(server: LlamaServer, tokens: int) -> dict[str, Any]:
    """One request whose prompt is longer than a slot's context: the server's own refusal, verbatim."""
    text = " ".join(["the"] * tokens)  # "▁the" is one token in the random model's vocabulary
    body = {"model": MODEL_ALIAS, "messages": [{"role": "user", "content": text}], "max_tokens": 8}
    with httpx.Client(trust_env=False, timeout=120) as client:
        response = client.post(f"{server.base_url}/chat/completions", json=body)
    return {"words": tokens, "status": response.status_code, "body": response.text[:2000]}


# ------------------------------------------------------------------------------------------- score

def predict(calibration: Path, concurrency: int, max_tokens: int, prompt: int, method: str,
            extrapolate: bool) -> tuple[float | None, str]:
    command = [*SCM_XL, "predict", str(calibration), "--concurrency", str(concurrency),
               "--max-tokens", str(max_tokens), "--prompt-tokens", str(prompt), "--method", method, "--json"]
    if extrapolate:
        command.append("--extrapolate")
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        try:  # exit 1 still prints the JSON, with what is missing
            missing = json.loads(run.stdout).get("missing") or []
        except (ValueError, AttributeError):
            missing = []
        message = (run.stderr.strip() or run.stdout.strip()).splitlines()
        return None, f"exit {run.returncode}: " + ("; ".join(map(str, missing)) if missing
                                                   else message[-1] if message else "")
    try:
        answer = json.loads(run.stdout)
        return float(answer["tps"]), ""
    except (ValueError, KeyError, TypeError) as error:
        return None, f"unreadable JSON ({error}): {run.stdout[:200]!r}"


def find_keys(value: Any, word: str, path: str = "") -> list[tuple[str, Any]]:
    """Every (path, value) in a JSON document whose key contains `word`."""
    found: list[tuple[str, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if word in str(key).lower():
                found.append((where, item))
            found += find_keys(item, word, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += find_keys(item, word, f"{path}[{index}]")
    return found


def fill_knee(calibration: Path, work: Path) -> dict[str, Any]:
    report = work / "calibration.fill.json"
    command = [*SCM_XL, "fill", str(calibration), "-o", str(work / "calibration.xlsx"), "--json", str(report),
               "--force", "--no-progress"]
    run = subprocess.run(command, capture_output=True, text=True, timeout=900)
    result: dict[str, Any] = {"command": command, "exit": run.returncode, "knee": [], "best": []}
    if not report.exists():
        result["error"] = (run.stderr.strip() or run.stdout.strip())[-500:]
        return result
    document = json.loads(report.read_text())
    result["knee"] = [(k, v) for k, v in find_keys(document, "knee") if not isinstance(v, (dict, list))
                      or len(json.dumps(v)) < 300]
    result["best"] = [(k, v) for k, v in find_keys(document, "best_concurrency")]
    result["holdout"] = [(k, v) for k, v in find_keys(document, "mape_pct") + find_keys(document, "max_pct")
                         if isinstance(v, (int, float))]
    result["holdout_method"] = (document.get("holdout") or {}).get("method")
    return result


def empirical_knees(rows: list[dict[str, Any]], within: float = 0.9) -> list[dict[str, Any]]:
    """Per (max_tokens, prompt level): the least measured concurrency whose TPS is within `within` of the
    best TPS there."""
    groups: dict[tuple[int, int], dict[int, list[float]]] = {}
    for row in rows:
        if row["tps"] is not None:
            groups.setdefault((row["max_tokens"], row["prompt_level"] or 0), {}).setdefault(
                row["concurrency"], []).append(row["tps"])
    knees = []
    for (length, prompt), by_c in sorted(groups.items()):
        means = {c: statistics.fmean(v) for c, v in by_c.items()}
        best = max(means.values())
        knee = min(c for c, tps in means.items() if tps >= within * best)
        knees.append({"max_tokens": length, "prompt_level": prompt, "knee": knee, "best_tps": best,
                      "best_c": max(means, key=lambda c: means[c])})
    return knees


def score(calibration: Path, unseen: Path, methods: list[str], use_measured_prompt: bool) -> dict[str, Any]:
    calib_rows, unseen_rows = read_rows(calibration), read_rows(unseen)
    calib_c = sorted({r["concurrency"] for r in calib_rows})
    points = []
    for row in unseen_rows:
        if row["tps"] is None or not row["ok_requests"]:
            continue
        prompt = row["prompt_tokens"] if use_measured_prompt and row["prompt_tokens"] else row["prompt_level"]
        point = {"concurrency": row["concurrency"], "max_tokens": row["max_tokens"],
                 "prompt_level": row["prompt_level"], "prompt_tokens": row["prompt_tokens"],
                 "measured": row["tps"], "predicted": {}, "errors": {}, "failures": {}}
        outside = not (calib_c[0] <= row["concurrency"] <= calib_c[-1])
        for method in methods:
            tps, why = predict(calibration, row["concurrency"], row["max_tokens"], prompt, method,
                               extrapolate=outside and method == "lsq")
            if tps is None:
                point["failures"][method] = why
            else:
                point["predicted"][method] = tps
                point["errors"][method] = (tps - row["tps"]) / row["tps"]
        points.append(point)
        print(f"  c={row['concurrency']} L={row['max_tokens']} P={row['prompt_level']}: measured "
              f"{row['tps']:.1f}, " + ", ".join(f"{m} {point['predicted'].get(m, float('nan')):.1f}"
                                                for m in methods), flush=True)
    calibrated_prompts = {r["prompt_level"] for r in calib_rows}
    subsets = {"all": points,
               "calibrated prompt levels": [p for p in points if p["prompt_level"] in calibrated_prompts],
               "new prompt levels": [p for p in points if p["prompt_level"] not in calibrated_prompts]}
    summary: dict[str, Any] = {}
    for method in methods:
        for subset, chosen in subsets.items():
            errors = [abs(p["errors"][method]) for p in chosen if method in p["errors"]]
            entry = {"n": len(errors), "failed": sum(method in p["failures"] for p in chosen),
                     "mape": statistics.fmean(errors) if errors else None, "max": max(errors) if errors else None}
            if subset == "all":
                summary[method] = entry
            elif chosen:
                summary.setdefault("by_subset", {}).setdefault(subset, {})[method] = entry
    return {"points": points, "summary": summary, "calib_rows": calib_rows, "unseen_rows": unseen_rows}


# ------------------------------------------------------------------------------------------- report

def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def describe_groups(groups: dict[str, list[int]] | None) -> str:
    """{"4": [1], "2": [2], "1": [4, 8]} -> "c=1: 4, c=2: 2, c=4,8: 1"."""
    if not groups:
        return "?"
    return ", ".join(f"c={joined(levels)}: {n}" for n, levels in groups.items())


def render(args: argparse.Namespace, meta: dict[str, Any], scored: dict[str, Any], knee: dict[str, Any]) -> str:
    methods = args.methods
    lines = ["# scm-xl against a real server (llama.cpp llama-server, random-weight model)", "",
             "Made by `benchmarks/bench_real_server.py` (not a test); traffic only to 127.0.0.1.", "",
             "```", meta["argv"], *([meta["rescored_by"]] if meta.get("rescored_by") else []), "```", ""]
    info = meta["server"]
    build_info = info.get("build") or {}
    shape = info["shape"]
    lines += [
        f"- Machine: {meta['machine']}; load average before: {meta['load_before']:.2f}"
        + (", after collecting: {:.2f} / {:.2f} / {:.2f} (1 / 5 / 15 min; the server and client add about 2)"
           .format(*meta["load_after"]) if meta.get("load_after") else "") + ".",
        f"- Server: llama-server from llama-cpp-python {build_info.get('llama_cpp_python', '?')} "
        f"({build_info.get('llama_server_version', '?').splitlines()[0] if build_info.get('llama_server_version') else '?'}), "
        f"`-np {args.slots} -c {args.ctx}` ({args.ctx // args.slots} tokens per slot) `-t 1 -tb 1`; build "
        f"{build_info.get('build_seconds', '?')} s with -j{build_info.get('jobs', '?')}.",
        f"- Model: random weights, llama architecture, {shape['layers']} layers, hidden {shape['hidden']}, FFN "
        f"{shape['ffn']}, {shape['heads']} heads / {shape['kv_heads']} KV heads, vocabulary {shape['vocab']}, "
        f"f16, seed {shape['seed']}; end-of-sequence, control and byte tokens never sampled, so every "
        "request runs to max_tokens.",
        f"- Calibration: concurrency {joined(args.calib_concurrency)}, max_tokens {joined(args.calib_max_tokens)}, prompt "
        f"levels {joined(args.calib_prompts)}, requests per slot {describe_groups(meta.get('calib_groups'))} "
        f"({meta.get('calib_seconds', 0):.0f} s).",
        f"- Unseen: concurrency {joined(args.unseen_concurrency)}, max_tokens {joined(args.unseen_max_tokens)}, prompt levels "
        f"{joined(args.unseen_prompts)}, requests per slot {describe_groups(meta.get('unseen_groups'))} "
        f"({meta.get('unseen_seconds', 0):.0f} s).",
        f"- Predictions pass `--prompt-tokens` = the {'measured mean' if args.measured_prompt else 'requested level'}; "
        "lsq gets `--extrapolate` for concurrency outside the calibrated range.",
        f"- Whole run: {meta.get('total_seconds', 0):.0f} s.", ""]

    lines += ["## Calibration (measured TPS)", "",
              "| prompt level (measured) | max_tokens | " + " | ".join(f"c={c}" for c in args.calib_concurrency)
              + " | P95 TTFT at max c |", "|---|---|" + "---|" * len(args.calib_concurrency) + "---|"]
    by_key: dict[tuple[int, int, int], dict[str, Any]] = {}
    for row in scored["calib_rows"]:
        by_key[(row["prompt_level"] or 0, row["max_tokens"], row["concurrency"])] = row
    for prompt in args.calib_prompts:
        for length in args.calib_max_tokens:
            cells = [by_key.get((prompt, length, c)) for c in args.calib_concurrency]
            measured = sorted({r["prompt_tokens"] for r in cells if r and r["prompt_tokens"] is not None})
            last = cells[-1]
            ttft = f"{last['ttft_p95_s']:.2f} s" if last and last["ttft_p95_s"] is not None else "—"
            lines.append(f"| {prompt} ({'/'.join(map(str, measured)) or '?'}) | {length} | "
                         + " | ".join(f"{r['tps']:.1f}" if r and r["tps"] is not None else "—" for r in cells)
                         + f" | {ttft} |")
    lines += ["", "## Unseen configurations: measured and predicted TPS", "",
              "| c | max_tokens | prompt level (measured) | measured | "
              + " | ".join(f"{m} (error)" for m in methods) + " |", "|---|---|---|---|" + "---|" * len(methods)]
    for p in scored["points"]:
        texts: list[str] = []
        for m in methods:
            if m in p["predicted"]:
                texts.append(f"{p['predicted'][m]:.1f} ({100 * p['errors'][m]:+.1f}%)")
            else:
                texts.append(f"— ({p['failures'].get(m, '').removeprefix('exit 1: ')[:90]})")
        lines.append(f"| {p['concurrency']} | {p['max_tokens']} | {p['prompt_level']} ({p['prompt_tokens']}) | "
                     f"{p['measured']:.1f} | " + " | ".join(texts) + " |")
    lines += ["", "## Per method on the unseen set", "",
              "| method | subset | answered | refused | MAPE | max error |", "|---|---|---|---|---|---|"]
    for subset, entries in [("all", {m: scored["summary"][m] for m in methods}),
                            *scored["summary"].get("by_subset", {}).items()]:
        for m in methods:
            s = entries[m]
            lines.append(f"| {m} | {subset} | {s['n']} | {s['failed']} | {pct(s['mape'])} | {pct(s['max'])} |")
    lines += ["", f"## Knee vs the slot count ({args.slots} slots)", ""]
    if knee.get("knee"):
        for k, v in knee["knee"][:6]:
            if isinstance(v, dict) and v.get("concurrency") is not None:
                interval = v.get("interval") or []
                lines.append(f"- `scm-xl fill` JSON `{k}`: {v.get('kind', '')} knee near c={v['concurrency']:g}"
                             + (f" (the data allow {interval[0]:g}-{interval[1]:g})" if len(interval) == 2 else "")
                             + f" vs {args.slots} slots" + (f": {v['text']}" if v.get("text") else ""))
            elif not isinstance(v, dict):
                lines.append(f"- `scm-xl fill` JSON `{k}`: {json.dumps(v)}")
    else:
        lines += [f"- `scm-xl fill` JSON names no knee (exit {knee.get('exit')}"
                  + (f": {knee['error'][-200:]}" if knee.get("error") else "") + ")."]
    if knee.get("best"):
        lines += ["- best_concurrency in the fill JSON: "
                  + "; ".join(f"`{k}` = {json.dumps(v)}" for k, v in knee["best"][:6])]
    if knee.get("holdout"):
        lines += [f"- The fill's own hold-out (leave-one-out on the calibration rows; `holdout` is its "
                  f"{knee.get('holdout_method')} fit): " + "; ".join(f"`{k}` {v:.1f}%" for k, v in knee["holdout"][:8])]
    lines += ["- Empirical (least measured concurrency within 90% of the best TPS at that max_tokens and prompt "
              "level): " + "; ".join(f"L={k['max_tokens']} P={k['prompt_level']}: c={k['knee']} "
                                      f"(best c={k['best_c']}, {k['best_tps']:.1f} TPS)"
                                      for k in empirical_knees(scored["calib_rows"])), ""]
    probe = meta.get("overflow")
    if probe:
        lines += ["## A prompt longer than a slot's context", "",
                  f"{probe['words']} words ('the' repeated; ~1 token each) against {args.ctx // args.slots} tokens "
                  f"per slot: HTTP {probe['status']}:", "", "```", probe["body"].strip(), "```", ""]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a ~3-minute smoke design (options given win)")
    parser.add_argument("--slots", type=int, default=8, help="llama-server -np")
    parser.add_argument("--ctx", type=int, default=8192, help="llama-server -c (context per slot = ctx/slots)")
    for name in FULL:
        kind = int if name.endswith("requests") else ints
        parser.add_argument("--" + name.replace("_", "-"), type=kind, default=None,
                            help=f"default {FULL[name]} (--quick: {QUICK[name]})")
    parser.add_argument("--min-requests", type=int, default=None,
                        help="each experiment sends at least this many requests: low concurrency levels get more "
                             "requests per slot (default 4; --quick: 2)")
    parser.add_argument("--no-prompt-cache", action="store_true",
                        help="llama-server --no-cache-prompt (scm-xl's prompts start with a nonce anyway)")
    parser.add_argument("--methods", type=lambda s: [m for m in s.split(",") if m], default=["chain", "lsq", "latency"])
    parser.add_argument("--measured-prompt", action="store_true",
                        help="predict at the measured mean prompt tokens, not the requested level")
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/scm-xl-real-server"))
    parser.add_argument("--report", type=Path, default=REPORT)
    parser.add_argument("--score-only", action="store_true", help="re-score the CSVs already in --work-dir")
    parser.add_argument("--server-binary", help="an existing llama-server (default: build/cached)")
    parser.add_argument("--collect-timeout", type=float, default=1800, help="seconds one collect may take")
    args = parser.parse_args(argv)
    design = QUICK if args.quick else FULL
    if args.min_requests is None:
        args.min_requests = 2 if args.quick else 4
    for name, default in design.items():
        if getattr(args, name) is None:
            setattr(args, name, ints(default) if isinstance(default, str) else default)

    per_slot = args.ctx // args.slots
    need = max(args.calib_prompts + args.unseen_prompts) + max(args.calib_max_tokens + args.unseen_max_tokens)
    if need + CONTEXT_MARGIN > per_slot:
        parser.error(f"a slot holds {per_slot} tokens (-c {args.ctx} / -np {args.slots}) but the design needs "
                     f"{need} + {CONTEXT_MARGIN} (longest prompt + longest max_tokens + template); raise --ctx")

    work = args.work_dir
    work.mkdir(parents=True, exist_ok=True)
    calibration, unseen = work / "calibration.csv", work / "unseen.csv"
    meta: dict[str, Any] = {"argv": shlex.join(["python", "benchmarks/bench_real_server.py", *(argv or sys.argv[1:])]),
                            "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
                            "load_before": os.getloadavg()[0]}
    meta_file = work / "meta.json"
    started = time.monotonic()
    if not args.score_only:
        binary = Path(args.server_binary) if args.server_binary else build()
        model = write_model(ModelShape())
        with LlamaServer(slots=args.slots, ctx=args.ctx, binary=binary, model=model,
                         log_path=work / "llama-server.log", prompt_cache=not args.no_prompt_cache) as server:
            # One short warm-up run, discarded (first-request effects: page-ins, allocations).
            subprocess.run([*SCM_XL, "collect", "--base-url", server.base_url, "-m", MODEL_ALIAS, "-c", "2",
                            "--max-tokens", "8", "-n", "1", "-o", str(work / "warmup.csv"), "--force", "-q"],
                           timeout=300, check=False)
            print(f"calibration ({len(args.calib_concurrency) * len(args.calib_max_tokens) * len(args.calib_prompts)}"
                  " experiments)", flush=True)
            done = collect_design(server.base_url, calibration, args.calib_concurrency, args.calib_max_tokens,
                                  args.calib_prompts, args.calib_requests, args.min_requests, args.collect_timeout)
            meta["calib_seconds"], meta["calib_groups"] = done["seconds"], done["groups"]
            print(f"unseen ({len(args.unseen_concurrency) * len(args.unseen_max_tokens) * len(args.unseen_prompts)}"
                  " experiments)", flush=True)
            done = collect_design(server.base_url, unseen, args.unseen_concurrency, args.unseen_max_tokens,
                                  args.unseen_prompts, args.unseen_requests, args.min_requests, args.collect_timeout)
            meta["unseen_seconds"], meta["unseen_groups"] = done["seconds"], done["groups"]
            meta["overflow"] = overflow_probe(server, per_slot + 100)
        meta["collect_total_seconds"] = time.monotonic() - started
        meta["load_after"] = os.getloadavg()
        meta_file.write_text(json.dumps(meta, indent=2) + "\n")
    elif meta_file.exists():
        meta["rescored_by"] = meta["argv"]
        meta.update(json.loads(meta_file.read_text()))
    meta["server"] = describe()

    print("scoring (server stopped)", flush=True)
    scoring_started = time.monotonic()
    scored = score(calibration, unseen, args.methods, args.measured_prompt)
    knee = fill_knee(calibration, work)
    meta["score_seconds"] = time.monotonic() - scoring_started
    meta["total_seconds"] = meta.get("collect_total_seconds", 0) + meta["score_seconds"]
    (work / "scored.json").write_text(json.dumps({"points": scored["points"], "summary": scored["summary"],
                                                  "knee": knee}, indent=2, default=str) + "\n")
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(render(args, meta, scored, knee))
    print(f"wrote {args.report}")
    for m in args.methods:
        s = scored["summary"][m]
        print(f"  {m}: {s['n']} points, {s['failed']} failed, MAPE {pct(s['mape'])}, max {pct(s['max'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
