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
from scm_xl.rules import RATE_LIMIT_WINDOW_S, Lang
from scm_xl.slo_texts import Joined, Text, say, words


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

    def lines(self, lang: Lang = "en") -> list[str]:
        """What `solve` prints, most important first, in `lang` (slo_texts, the one home of both)."""
        w = words(lang)
        if self.fallback is not None:
            return [w["fallback_line"].format(slo=self.slo.describe(), fallback=say(self.fallback, lang))]
        assert self.plan is not None and self.solution is not None
        out = []
        chosen = self.plan.chosen
        if chosen is None:
            out.append(w["no_serves"].format(target=self.target_tps, slo=self.slo.describe()))
        else:
            c, t = chosen.cell, chosen.cell.tally
            low, high = t.interval
            out.append(w["serves"].format(
                target=self.target_tps, slo=self.slo.describe(), replicas=chosen.replicas, model=c.model,
                c=c.concurrency, length=c.max_tokens, predicted=_predicted(c, lang), tps=t.tps,
                goodput=t.goodput_tps, attainment=t.attainment, conf=goodput.WILSON_CONFIDENCE, low=low, high=high,
                good=t.good, requests=t.requests, counted=slo_between.requests_word(c, lang)))
            if chosen.cost_per_million_output is not None:
                hour = w["cost_hour"].format(hour=chosen.cost_per_hour) if chosen.cost_per_hour is not None else ""
                out.append(w["cost"].format(million=chosen.cost_per_million_output, hour=hour))
            if chosen.rpm is not None:
                out.append(w["traffic"].format(
                    rpm=chosen.rpm, tpm=w["traffic_tpm"].format(tpm=chosen.tpm) if chosen.tpm is not None else ""))
        bound = w.get(self.plan.bound, self.plan.bound)
        if self.limits is not None and self.limits.any:
            given = w["list_sep"].join(
                w["limit_given"].format(name=name, value=value)
                for name, value in (("RPM", self.limits.rpm), ("TPM", self.limits.tpm)) if value)
            out.append(w["bound_limits"].format(bound=bound, given=given, source=say(self.limits_source, lang),
                                                headroom=self.limits.headroom))
        else:
            out.append(w["bound_none"].format(bound=bound))
        ceiling = self.limit_ceiling()
        if ceiling is not None:
            cap, cell = ceiling
            out.append(w["ceiling"].format(cap=cap, length=cell.max_tokens))
        if self.plan.binding:
            out.append(w["binding"].format(reasons=capacity.describe_reasons(self.plan.binding, lang)))
        best = self.solution.best
        if best is not None:
            tail = (w["predicted_tail"].format(words=slo_between.predicted_from_words(best, lang))
                    if best.predicted_from is not None else "")
            out.append(w["most_goodput"].format(goodput=best.tally.goodput_tps, c=best.concurrency,
                                                length=best.max_tokens, model=best.model, predicted=tail))
        # the SLO search is per replica: its "no configuration reaches the target" is not the plan's word
        solution_notes: list[str] = [n for n in self.solution.notes if getattr(n, "key", None) != "none_reaches"
                                     and not n.startswith("no measured configuration reaches")]
        if self.between:
            shown = [cell for cell in (chosen.cell if chosen else None, best) if cell is not None]
            if any(cell.predicted_from is not None for cell in shown):
                solution_notes.append(slo_between.PREDICTED_NOTE)
            solution_notes += [Text("not_predicted", why=why) for why in self.between_notes]
        out += [w["note"].format(text=say(note, lang)) for note in solution_notes + self.plan.notes]
        if self.unjudged:
            out.append(w["unjudged"].format(n=len(self.unjudged), reasons=Joined(
                tuple(list(self.unjudged.values())[:3]), "reasons_sep").say(lang)))
        return out


def _predicted(cell: goodput.SloCell, lang: Lang = "en") -> str:
    """The label a configuration predicted between measured levels carries, "" for a measured one."""
    if cell.predicted_from is None:
        return ""
    return words(lang)["predicted_label"].format(words=slo_between.predicted_from_words(cell, lang))


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
    sources = [Text("source_one_given" if mine is not None else "source_one_sent", name=name)
               for name, mine, used in (("RPM", rpm, use_rpm), ("TPM", tpm, use_tpm)) if used]
    source: str = ((Text("source_given") if all(s.key == "source_one_given" for s in sources)
                    else Text("source_headers") if all(s.key == "source_one_sent" for s in sources)
                    else Text("joined", items=Joined(tuple(sources)))) if sources else "")
    answer = SloAnswer(slo=slo, target_tps=target_tps, limits=limits, limits_source=source)
    samples = goodput.read_samples(results_path)
    table = goodput.evaluate(rows, samples, slo)
    answer.unjudged = dict(table.unjudged)
    if not table.experiments:
        answer.fallback = Text("fallback", reason=table.reason or Text("none_judgeable"),
                               tpot=Text("fallback_tpot") if slo.tpot_s else "")
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
            answer.between_notes.append(Text("no_latency_model"))
        else:
            predicted, answer.between_notes = slo_between.between_cells(cells, samples.by_exp, fitted, slo)
            cells = sorted(cells + predicted, key=lambda cell: cell.cost)
    answer.solution = goodput.solve_slo(cells, target_tps, slo)
    answer.plan = capacity.plan(cells, target_tps, slo, pricing=pricing, limits=limits, minimise=minimise)
    return answer


def measured_slo(source: str | Path, rows: Sequence[Any], slo: goodput.Slo, concurrency: float, max_tokens: int,
                 model: str | None, prompt_tokens: float | None, latency: Any = None) -> dict[str, Any]:
    """predict --slo: the measured attainment at this configuration when it was measured; between
    measured concurrency levels the one scm_xl.slo_between predicts (labelled) with `latency`, the
    latency model predict fitted (fitted here when it had none); else (no per-request CSV) the
    measured per-experiment P95s there, each labelled for what it is. Its "text" is a slo_texts.Text
    (English in the JSON; `measured_slo_line(answer, lang)` words it in `lang`)."""
    from scm_xl.constrained import measured_percentiles

    key = ((model or "").casefold(), int(concurrency) if float(concurrency).is_integer() else None, max_tokens)
    out: dict[str, Any] = {"slo": slo.describe(), "predicted": False, "source": None}
    samples = goodput.read_samples(source)
    table = goodput.evaluate(rows, samples, slo)
    if table.experiments:
        level = None if prompt_tokens is None else int(round(prompt_tokens))

        def here(cells: list[Any]) -> list[Any]:
            return [c for c in cells if (c.model.casefold(), c.concurrency, c.max_tokens) == key
                    and (level is None or c.prompt_level is None or abs(c.prompt_level - level) <= 0.05 * c.prompt_level)]

        measured = goodput.cells(table.experiments, slo)
        found = here(measured)
        why_not: Any = ""
        if not found and key[1] is not None:
            from scm_xl.latency import latency_model

            fitted = latency if latency is not None else latency_model(list(rows))
            if fitted.available:
                predicted, reasons = slo_between.between_cells(measured, samples.by_exp, fitted, slo)
                found = here(predicted)
                why_not = Joined(tuple(reasons), "reasons_sep") if reasons else ""
            else:
                why_not = Text("no_latency_model_short")
        if not found:
            out["text"] = Text("no_requests_here", why=Text("why_not", why=why_not) if why_not else "")
            return out
        cell = found[0]
        t = cell.tally
        low, high = t.interval
        out.update(source="requests" if cell.predicted_from is None else "predicted_between_levels", **cell.as_dict())
        out["predicted"] = cell.predicted_from is not None
        out["text"] = Text("attainment_here", where=Text("measured_here") if cell.predicted_from is None
                           else slo_between.predicted_from(cell), attainment=t.attainment,
                           conf=goodput.WILSON_CONFIDENCE, low=low, high=high, good=t.good, requests=t.requests,
                           counted=slo_between.requests_counted(cell), goodput=t.goodput_tps,
                           meets=Text("meets" if cell.meets else "does_not_meet"), slo=slo.describe())
        return out
    cell_p95 = measured_percentiles(rows).get((key[0], key[1] or -1, key[2]))
    why = table.reason or Text("none_judgeable")
    if cell_p95 is None or (cell_p95.latency_p95_s is None and cell_p95.ttft_p95_s is None):
        out["text"] = Text("no_p95_here", why=why)
        return out
    out.update(source="per_experiment_p95", latency_p95_s=cell_p95.latency_p95_s, ttft_p95_s=cell_p95.ttft_p95_s)
    parts = tuple(Text("p95_part", name=Text(name), value=value, limit=limit) for name, value, limit in
                  (("p95_ttft", cell_p95.ttft_p95_s, slo.ttft_s), ("p95_latency", cell_p95.latency_p95_s, slo.e2el_s))
                  if value is not None and limit is not None)
    out["text"] = Text("p95_here", why=why, parts=Joined(parts, "reasons_sep") if parts else Text("p95_none"))
    return out


def measured_slo_line(answer: dict[str, Any], lang: Lang = "en") -> str:
    """predict's line for measured_slo's answer, in `lang`: "SLO: measured here: attainment ..."."""
    return words(lang)["slo_line"].format(text=say(answer["text"], lang))
