"""The report's "Under an SLO" section and the calculator's per-configuration tallies (no I/O but
reading the per-request CSV through scm_xl.goodput).

Everything here is goodput.py's and slo_answer.py's (the one home of attainment, its Wilson
interval, goodput and the SLO answer `solve --slo` gives); this module only lays their results
out for the page. The page's calculator repeats capacity.py's arithmetic (replicas, cost per
million output tokens, rate limits) on the tallies below, as `solve --slo` does in Python.

With no SLO given the section says so (a results CSV has no SLO of its own; `--slo` gives one):
attainment is a property of an SLO, and the page invents none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from scm_xl import capacity, goodput
from scm_xl.errors import UsageError
from scm_xl.rules import RATE_LIMIT_WINDOW_S, Lang
from scm_xl.slo_texts import reason_words, say

NO_REQUESTS, NO_SLO, JUDGED = "no_requests", "no_slo", "judged"


def _pct(value: float) -> str:
    return f"{value:.1%}"


def _cell_payload(cell: goodput.SloCell, planned: bool) -> dict[str, Any]:
    """What capacity.option reads of a cell, as the page's calculator reads it."""
    t = cell.tally
    low, high = t.interval
    return {"model": cell.model, "key": cell.model.casefold(), "concurrency": cell.concurrency,
            "max_tokens": cell.max_tokens, "prompt_level": cell.prompt_level, "requests": t.requests,
            "good": t.good, "attainment": t.attainment, "interval": [low, high], "tps": t.tps,
            "goodput_tps": t.goodput_tps, "binding": t.binding, "meets": cell.meets,
            "rejected_by": list(cell.rejected_by), "mean_latency_s": t.mean_latency_s,
            "mean_prompt_tokens": t.mean_prompt_tokens, "mean_output_tokens": t.mean_output_tokens,
            "planned": planned}


def slo_section(results_path: str | Path | None, rows: Sequence[Any], slo: goodput.Slo | None,
                target_tps: float, texts: dict[str, Any], lang: Lang = "en"
                ) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the section's context, the calculator's payload or None) for the page, its sentences in `lang`."""
    words = texts["slo"]
    conf = f"{goodput.WILSON_CONFIDENCE:.0%}"
    reason: str | None
    if results_path is None:
        samples = None
        reason = words["no_results_csv"]
    else:
        samples = goodput.read_samples(results_path)
        reason = say(samples.reason or words["no_measured"], lang) if not samples.by_exp else None
    if reason is not None:
        return {"state": NO_REQUESTS, "line": words["no_requests"].format(reason=reason)}, None
    if slo is None:
        return {"state": NO_SLO, "line": words["no_slo"]}, None
    assert samples is not None and results_path is not None
    table = goodput.evaluate(rows, samples, slo)
    if not table.experiments:
        return {"state": NO_REQUESTS, "line": words["no_requests"].format(reason=say(table.reason, lang))}, None
    shown = goodput.cells(table.experiments, slo)
    words_of = reason_words(goodput.REASON_WORDS, lang)
    plan_error = None
    try:  # the cells `solve --slo` plans over (one prompt level), and its answer
        planned_keys = {(c.model.casefold(), c.concurrency, c.max_tokens, c.prompt_level)
                        for c in goodput.select_cells(table.experiments, slo)}
        answer = _answer(results_path, rows, slo, target_tps)
    except UsageError as exc:
        plan_error, answer, planned_keys = str(say(exc.args[0] if exc.args else str(exc), lang)), None, set()
    rows_out = [{"model": c.model, "concurrency": c.concurrency, "max_tokens": c.max_tokens,
                 "prompt_level": "" if c.prompt_level is None else c.prompt_level, "requests": c.tally.requests,
                 "good": c.tally.good, "attainment": _pct(c.tally.attainment),
                 "interval": f"{_pct(c.tally.interval[0])} – {_pct(c.tally.interval[1])}",
                 "tps": f"{c.tally.tps:.2f}", "goodput": f"{c.tally.goodput_tps:.2f}",
                 "binding": words_of.get(c.tally.binding, c.tally.binding) if c.tally.binding
                 else words["nothing"], "meets": c.meets} for c in shown]
    binds = ""
    if answer is not None and answer.plan is not None:
        binds = capacity.describe_reasons(answer.plan.binding, lang) or capacity.describe_reasons(
            answer.solution.binding if answer.solution else (), lang) or words["nothing"]
    context = {
        "state": JUDGED, "slo": slo.describe(), "cells": rows_out, "conf": conf,
        "answer_title": words["answer"].format(target=f"{target_tps:g}"),
        "answer_lines": answer.lines(lang) if answer is not None else [plan_error],
        "binds": binds, "unjudged": [f"{k}: {say(v, lang)}" for k, v in table.unjudged.items()],
    }
    sent_rpm, sent_tpm = _provider_limits(rows)
    payload = {
        "slo": slo.describe(), "attainment": slo.attainment, "confidence": conf, "target": target_tps,
        "window_s": RATE_LIMIT_WINDOW_S, "headroom": capacity.RATE_LIMIT_HEADROOM,
        "provider_rpm": sent_rpm, "provider_tpm": sent_tpm, "plan_error": plan_error,
        "cells": [_cell_payload(c, (c.model.casefold(), c.concurrency, c.max_tokens, c.prompt_level)
                                in planned_keys) for c in shown],
        "reason_words": {**words_of, **reason_words(capacity.REASON_WORDS, lang)},
    }
    return context, payload


def _answer(results_path: str | Path, rows: Sequence[Any], slo: goodput.Slo, target_tps: float) -> Any:
    from scm_xl.slo_answer import slo_answer

    return slo_answer(results_path, list(rows), target_tps=target_tps, slo=slo)


def _provider_limits(rows: Sequence[Any]) -> tuple[float | None, float | None]:
    from scm_xl.slo_answer import provider_limits

    return provider_limits(rows)
