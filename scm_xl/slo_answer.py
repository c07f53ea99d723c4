"""`solve --slo`: the inverse under a per-request SLO, with replicas, cost and rate limits.

Glue between the results rows, the per-request CSV beside them (scm_xl.goodput) and the capacity
plan (scm_xl.capacity); returns data and the lines `solve` prints. The rate limits are the ones
given (`--rpm`, `--tpm`) or, where not given, the ones the provider sent in its headers
(`x-ratelimit-limit-*`, recorded per experiment by the collector: the smallest seen).

When there is no per-request CSV the SLO cannot be judged per request: `SloAnswer.fallback`
says so, and `solve` answers with the per-experiment percentiles instead (P95 latency and TTFT
under the e2el and ttft thresholds, which is the same question at attainment 0.95 for one
threshold at a time; TPOT has no per-experiment figure and is then left out, said).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from scm_xl import capacity, goodput, slo_between
from scm_xl.errors import UsageError
from scm_xl.rules import RATE_LIMIT_WINDOW_S



@dataclass
class SloAnswer:
    slo: goodput.Slo
    target_tps: float
    limits: capacity.RateLimits | None
    limits_source: str  # "given", "the provider's headers", "" (none)
    solution: goodput.SloSolution | None = None
    plan: capacity.CapacityPlan | None = None
    fallback: str | None = None  # why the per-request SLO could not be judged
    unjudged: dict[str, str] = field(default_factory=dict)
    between: bool = False  # concurrency levels between the measured ones were predicted (slo_between)
    between_notes: list[str] = field(default_factory=list)  # what could not be predicted, and why

    @property
    def reachable(self) -> bool:
        return self.plan is not None and self.plan.chosen is not None

    def report(self) -> dict[str, Any]:
        return {"slo": self.slo.describe(), "target_tps": self.target_tps, "fallback": self.fallback,
                "rate_limits": None if self.limits is None else {
                    "rpm": self.limits.rpm, "tpm": self.limits.tpm, "headroom": self.limits.headroom,
                    "source": self.limits_source},
                "solution": self.solution.report() if self.solution else None,
                "capacity": self.plan.report() if self.plan else None,
                "limit_ceiling_tps": (self.limit_ceiling() or (None,))[0],
                "between_levels": self.between, "between_notes": list(self.between_notes),
                "unjudged": dict(self.unjudged)}

    def limit_ceiling(self) -> tuple[float, goodput.SloCell] | None:
        """The most output tokens per second the rate limits let through, over the measured
        configurations' mixes of prompt and output tokens per request, and the configuration whose
        mix gives it (the limits count requests and tokens, so the mix decides); None: no limit."""
        if self.limits is None or not self.limits.any or self.solution is None:
            return None
        best: tuple[float, goodput.SloCell] | None = None
        for cell in self.solution.candidates:
            output, prompt = cell.tally.mean_output_tokens, cell.tally.mean_prompt_tokens
            caps = []
            if self.limits.rpm is not None:
                caps.append(self.limits.headroom * self.limits.rpm / RATE_LIMIT_WINDOW_S * output)
            if self.limits.tpm is not None and prompt is not None and prompt + output > 0:
                caps.append(self.limits.headroom * self.limits.tpm / RATE_LIMIT_WINDOW_S * output / (prompt + output))
            if caps and (best is None or min(caps) > best[0]):
                best = (min(caps), cell)
        return best

    def lines(self) -> list[str]:
        """What `solve` prints, most important first."""
        if self.fallback is not None:
            return [f"SLO {self.slo.describe()}: {self.fallback}"]
        assert self.plan is not None and self.solution is not None
        out = []
        chosen = self.plan.chosen
        if chosen is None:
            out.append(f"no measured configuration serves {self.target_tps:g} TPS under the SLO "
                       f"{self.slo.describe()}")
        else:
            c, t = chosen.cell, chosen.cell.tally
            low, high = t.interval
            out.append(f"{self.target_tps:g} TPS under the SLO {self.slo.describe()}: {chosen.replicas} x "
                       f"{c.model} at concurrency {c.concurrency}, max_tokens {c.max_tokens} "
                       f"({_predicted(c)}{t.tps:.1f} TPS and {t.goodput_tps:.1f} goodput per replica; attainment "
                       f"{t.attainment:.1%}, {goodput.WILSON_CONFIDENCE:.0%} interval {low:.1%}-{high:.1%}, "
                       f"{t.good} of {t.requests} {slo_between.requests_word(c)})")
            if chosen.cost_per_million_output is not None:
                hour = f", {chosen.cost_per_hour:.2f} per hour" if chosen.cost_per_hour is not None else ""
                out.append(f"  cost: {chosen.cost_per_million_output:.2f} per million output tokens{hour}")
            if chosen.rpm is not None:
                out.append(f"  traffic at full load: {chosen.rpm:.0f} requests/min"
                           + (f", {chosen.tpm:.0f} tokens/min" if chosen.tpm is not None else ""))
        if self.limits is not None and self.limits.any:
            given = ", ".join(f"{name} {value:g}" for name, value in (("RPM", self.limits.rpm),
                                                                   ("TPM", self.limits.tpm)) if value)
            out.append(f"  {self.plan.bound}: rate limits {given} ({self.limits_source}; "
                       f"{self.limits.headroom:.0%} of each used)")
        else:
            out.append(f"  {self.plan.bound}: no rate limit given or sent by the provider")
        ceiling = self.limit_ceiling()
        if ceiling is not None:
            cap, cell = ceiling
            out.append(f"  the rate limits let at most {cap:.1f} output tok/s through, whatever the deployment "
                       f"(at the measured mix of prompt and output tokens of max_tokens {cell.max_tokens}, the "
                       "most of any configuration)")
        if self.plan.binding:
            out.append(f"  binding: {capacity.describe_reasons(self.plan.binding)}")
        best = self.solution.best
        if best is not None:
            out.append(f"  most goodput under the SLO: {best.tally.goodput_tps:.1f} tok/s at concurrency "
                       f"{best.concurrency}, max_tokens {best.max_tokens} ({best.model}"
                       + (f"; {_predicted(best).rstrip(': ')}" if best.predicted_from is not None else "") + ")")
        # the SLO search is per replica: its "no configuration reaches the target" is not the plan's word
        solution_notes = [n for n in self.solution.notes if not n.startswith("no measured configuration reaches")]
        if self.between:
            shown = [cell for cell in (chosen.cell if chosen else None, best) if cell is not None]
            if any(cell.predicted_from is not None for cell in shown):
                solution_notes.append(slo_between.PREDICTED_NOTE)
            solution_notes += [f"not predicted between levels: {why}" for why in self.between_notes]
        out += [f"  note: {note}" for note in solution_notes + self.plan.notes]
        if self.unjudged:
            out.append(f"  {len(self.unjudged)} experiment(s) not judged: "
                       + "; ".join(list(self.unjudged.values())[:3]))
        return out


def _predicted(cell: goodput.SloCell) -> str:
    """The label a configuration predicted between measured levels carries, "" for a measured one."""
    return "" if cell.predicted_from is None else slo_between.predicted_from_words(cell) + ": "


def provider_limits(rows: Sequence[Any]) -> tuple[float | None, float | None]:
    """The smallest rate limits per minute the provider's headers announced, over the rows."""
    rpm = [r.ratelimit_limit_requests for r in rows if getattr(r, "ratelimit_limit_requests", None)]
    tpm = [r.ratelimit_limit_tokens for r in rows if getattr(r, "ratelimit_limit_tokens", None)]
    return (float(min(rpm)) if rpm else None, float(min(tpm)) if tpm else None)


def slo_answer(results_path: str | Path, rows: Sequence[Any], *, target_tps: float, slo: goodput.Slo,
               model: str | None = None, prompt_level: int | None = None,
               pricing: capacity.Pricing | None = None, rpm: float | None = None, tpm: float | None = None,
               minimise: str = capacity.MINIMISE_CONCURRENCY, between: bool = False) -> SloAnswer:
    """The capacity plan for `target_tps` under `slo` on the measured configurations, and with
    `between` on the concurrency levels between them too (predicted: scm_xl.slo_between)."""
    sent_rpm, sent_tpm = provider_limits(rows)
    use_rpm = rpm if rpm is not None else sent_rpm  # each limit on its own: one given keeps the other sent
    use_tpm = tpm if tpm is not None else sent_tpm
    limits = capacity.RateLimits(rpm=use_rpm, tpm=use_tpm) if (use_rpm or use_tpm) else None
    sources = [f"{name} {'given' if mine is not None else 'from the provider'}"
               for name, mine, used in (("RPM", rpm, use_rpm), ("TPM", tpm, use_tpm)) if used]
    source = ("given" if all("given" in s for s in sources) else "the provider's headers"
              if all("provider" in s for s in sources) else ", ".join(sources)) if sources else ""
    answer = SloAnswer(slo=slo, target_tps=target_tps, limits=limits, limits_source=source)
    samples = goodput.read_samples(results_path)
    table = goodput.evaluate(rows, samples, slo)
    answer.unjudged = dict(table.unjudged)
    if not table.experiments:
        answer.fallback = (f"{table.reason or 'no experiment could be judged per request'}; "
                           "answering with the per-experiment P95s instead"
                           + (" (tpot has no per-experiment figure and is left out)" if slo.tpot_s else ""))
        return answer
    models = sorted({e.model for e in table.experiments})
    if model is not None and model.casefold() not in {m.casefold() for m in models}:
        raise UsageError(f"--model {model!r} was not measured (measured: {', '.join(models)})")
    if prompt_level is not None:
        levels = sorted({e.prompt_level for e in table.experiments if e.prompt_level is not None})
        near = [level for level in levels if abs(level - prompt_level) <= 0.05 * level]
        if not near:
            raise UsageError(f"--prompt-tokens {prompt_level}: the SLO is judged on measured requests, and the "
                             "measured prompt levels are "
                             + (", ".join(str(v) for v in levels) if levels else "none (one prompt): leave it out"))
        prompt_level = near[0]
    cells = goodput.select_cells(table.experiments, slo, model=model, prompt_level=prompt_level)
    if between:
        from scm_xl.latency import latency_model

        answer.between = True
        fitted = latency_model(rows)
        if not fitted.available:
            answer.between_notes.append("no experiment has TTFT, latency and ITL recorded, so there is no "
                                        "latency model")
        else:
            predicted, answer.between_notes = slo_between.between_cells(cells, samples.by_exp, fitted, slo)
            cells = sorted(cells + predicted, key=lambda cell: cell.cost)
    answer.solution = goodput.solve_slo(cells, target_tps, slo)
    answer.plan = capacity.plan(cells, target_tps, slo, pricing=pricing, limits=limits, minimise=minimise)
    return answer
