"""Per-request SLO attainment between the measured concurrency levels, from the latency model.

The SLO is judged request by request (scm_xl.goodput), and requests exist only where they were
measured. Between two measured concurrency levels the latency model (scm_xl.latency) forecasts the
mean TTFT, the mean decode time and the TPS, but not the spread of the requests around those means.
So a level c that was not measured borrows the spread of the nearest measured level c0 of the same
model, max_tokens and prompt level (nearest on a log scale, the higher one on a tie: its tails are
the heavier ones), and the model moves it: every request of c0 is rescaled

    ttft'    = ttft x TTFT(c) / TTFT(c0)
    latency' = ttft' + (latency - ttft) x D(c) / D(c0),      D = latency - TTFT (the decode time)

and the TPS is c0's measured TPS x TPS(c) / TPS(c0) (the forecasts' ratios, so the model's bias at
c0 cancels). A failed request stays a miss. The rescaled requests are then counted against the SLO
exactly as measured ones are (goodput.tally), so TTFT, TPOT and end-to-end thresholds, any subset,
and any attainment target are judged jointly, not one percentile at a time.

What the interval means changes: its Wilson interval counts c0's requests, the sampling error of
the shape that was borrowed, not the model's error in moving it. Every surface labels such a
configuration "predicted" and names the level whose requests it rescaled (SloCell.predicted_from).
Only levels strictly between measured ones are predicted: beyond the measured range the latency
model extrapolates, and an SLO answer there would rest on nothing measured.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from scm_xl import goodput
from scm_xl.goodput import RequestSample, Slo, SloCell
from scm_xl.latency import LatencyModel
from scm_xl.rules import Lang
from scm_xl.slo_texts import Joined, Text

# What a predicted configuration's figures rest on, said once for every surface (a slo_texts.Text:
# English, and slo_texts.say(PREDICTED_NOTE, lang) in another language).
PREDICTED_NOTE = Text("predicted_note")


def predicted_from(cell: SloCell) -> Text:
    """How every surface names where a predicted configuration's figures come from (a Text)."""
    return Text("predicted_from", c=cell.predicted_from)


def predicted_from_words(cell: SloCell, lang: Lang = "en") -> str:
    """predicted_from(cell) in `lang`."""
    return predicted_from(cell).say(lang)


def requests_counted(cell: SloCell) -> Text:
    """What its request count counts: measured requests, or the borrowed ones rescaled (a Text)."""
    return Text("requests" if cell.predicted_from is None else "rescaled_requests")


def requests_word(cell: SloCell, lang: Lang = "en") -> str:
    """requests_counted(cell) in `lang`."""
    return requests_counted(cell).say(lang)


def nearest_measured(concurrency: int, measured: Sequence[int]) -> int:
    """The measured level nearest to `concurrency` on a log scale; the higher one on a tie."""
    return min(measured, key=lambda m: (abs(math.log(concurrency) - math.log(m)), -m))


def rescaled(samples: Sequence[RequestSample], ttft_ratio: float, decode_ratio: float) -> list[RequestSample]:
    """The requests with their TTFT and decode time (latency - TTFT) scaled; failed ones as they are."""
    out = []
    for s in samples:
        if not s.succeeded or s.ttft_s is None:
            out.append(s)
            continue
        ttft = s.ttft_s * ttft_ratio
        latency = None if s.latency_s is None else ttft + (s.latency_s - s.ttft_s) * decode_ratio
        out.append(replace(s, ttft_s=ttft, latency_s=latency))
    return out


def between_cells(measured: Sequence[SloCell], samples: Mapping[str, Sequence[RequestSample]],
                  latency: LatencyModel, slo: Slo) -> tuple[list[SloCell], list[str]]:
    """The configurations strictly between measured concurrency levels (every whole number there),
    predicted as the module docstring says, and why some could not be (one line per reason, each a
    slo_texts.Text: English, said in another language with slo_texts.say)."""
    groups: dict[tuple[str, int, int | None], list[SloCell]] = {}
    for cell in measured:
        groups.setdefault((cell.model.casefold(), cell.max_tokens, cell.prompt_level), []).append(cell)
    predicted: list[SloCell] = []
    unpredicted: dict[str, None] = {}
    for members in groups.values():
        by_level = {cell.concurrency: cell for cell in members}
        levels = sorted(by_level)
        if len(levels) < 2:
            continue
        fit = latency.fit_for(members[0].model)
        if fit is None:
            unpredicted[Text("no_fit", model=members[0].model)] = None
            continue
        for c in range(levels[0] + 1, levels[-1]):
            if c in by_level:
                continue
            source = by_level[nearest_measured(c, levels)]
            t = source.tally
            here = fit.forecast(c, source.max_tokens, t.mean_prompt_tokens, output_tokens=t.mean_output_tokens)
            there = fit.forecast(source.concurrency, source.max_tokens, t.mean_prompt_tokens,
                                 output_tokens=t.mean_output_tokens)
            parts = (here.tps, there.tps, here.ttft_s, there.ttft_s, here.latency_s, there.latency_s)
            if any(v is None or not v > 0 for v in parts) or t.tps <= 0:
                # the latency model's own reasons are in its words (English)
                missing = tuple(here.missing) + tuple(there.missing)
                why = Joined(missing, "reasons_sep") if missing else Text("not_positive")
                unpredicted[Text("not_predicted_at", model=source.model, length=source.max_tokens, why=why)] = None
                continue
            assert here.tps and there.tps and here.ttft_s and there.ttft_s and here.latency_s and there.latency_s
            decode_here, decode_there = here.latency_s - here.ttft_s, there.latency_s - there.ttft_s
            decode_ratio = decode_here / decode_there if decode_there > 0 else 1.0
            requests = [s for exp_id in source.exp_ids for s in samples.get(exp_id, ())]
            moved = rescaled(requests, here.ttft_s / there.ttft_s, decode_ratio)
            tps = t.tps * here.tps / there.tps
            tally = goodput.tally(moved, slo, wall_s=t.output_tokens / tps)
            meets = tally.interval[0] >= slo.attainment
            rejected: tuple[str, ...] = () if meets else (
                (tally.binding,) if tally.binding else (goodput.SAMPLE_SIZE,))
            predicted.append(SloCell(model=source.model, concurrency=c, max_tokens=source.max_tokens,
                                     prompt_level=source.prompt_level, exp_ids=source.exp_ids, tally=tally,
                                     meets=meets, rejected_by=rejected, predicted_from=source.concurrency))
    return sorted(predicted, key=lambda cell: cell.cost), list(unpredicted)
