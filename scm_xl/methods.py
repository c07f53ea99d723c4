"""Which method answers: chain, least squares or the latency model, chosen on hold-out error (no I/O).

Every forward and inverse answer names its method and why. `auto` takes the method with the
lowest leave-one-out MAPE over at least MIN_HOLDOUT_ROWS rows among those that can answer the
question. Chain and least squares answer at another prompt length through K_in(P) when the data
have prompt levels; with one plain prompt only the latency model can (it reads the server-counted
prompt of every row). With no hold-out to judge on, the article's chain answers, as it always has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from scm_xl.latency import PROMPT_LEVEL_RATIO
from scm_xl.rules import DEFAULT_FORWARD, DEFAULT_METHOD, DEFAULT_TARGET

if TYPE_CHECKING:
    from scm_xl.latency import LatencyModel
    from scm_xl.model import Analysis

METHODS: tuple[str, ...] = ("chain", "lsq", "latency")
METHOD_CHOICES: tuple[str, ...] = ("auto", *METHODS)
MIN_HOLDOUT_ROWS = 3


@dataclass(frozen=True)
class MethodChoice:
    method: str
    why: str
    holdout_mape_pct: dict[str, float | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"method": self.method, "why": self.why, "holdout_mape_pct": dict(self.holdout_mape_pct)}


def base_prompt(analysis: Analysis, rows: Sequence[Any]) -> float | None:
    """The prompt length the chain and least squares answer for: the base prompt level, else the
    median server-counted prompt of the rows (one plain prompt), else None (not recorded)."""
    if analysis.base_prompt_level is not None:
        return float(analysis.base_prompt_level)
    counted = sorted(p for r in rows if (p := getattr(r, "prompt_tokens", None)) is not None)
    return float(counted[len(counted) // 2]) if counted else None


def other_prompt_level(prompt_tokens: float | None, base: float | None) -> bool:
    """True when the asked prompt length is not the one the chain and lsq calibrate at (within 5%)."""
    if prompt_tokens is None or base is None:
        return False
    return not base / PROMPT_LEVEL_RATIO <= prompt_tokens <= base * PROMPT_LEVEL_RATIO


def _mape(holdout: dict[str, Any] | None) -> float | None:
    if not holdout or (holdout.get("loo_rows") or 0) < MIN_HOLDOUT_ROWS:
        return None
    value = holdout.get("loo_mape_pct")
    return float(value) if value is not None else None


def choose_method(requested: str, analysis: Analysis, lsq_report: dict[str, Any] | None,
                  latency: LatencyModel | None, *, prompt_tokens: float | None = None,
                  base: float | None = None) -> MethodChoice:
    """The method that answers (`requested`, or by hold-out error when "auto") and why."""
    errors = {
        "chain": _mape((lsq_report or {}).get("chain_holdout")),
        "lsq": _mape(lsq_report),
        "latency": _mape(latency.holdout.as_dict()) if latency is not None and latency.available else None,
    }
    shown = dict(errors)
    if requested != "auto":
        return MethodChoice(requested, "asked for (--method)", shown)
    if analysis.base_prompt_level is None and other_prompt_level(prompt_tokens, base):
        if latency is not None and latency.available:
            return MethodChoice("latency", f"only the latency model answers for a prompt of {prompt_tokens:g} tokens "
                                           f"(the data have one prompt, {base:g} tokens, and no prompt levels)", shown)
        return MethodChoice("chain", "no latency model (TTFT, latency and ITL not recorded); the chain answers "
                                     "only at its base prompt level", shown)
    ranked = sorted((value, name) for name, value in errors.items() if value is not None)
    if not ranked:
        return MethodChoice("chain", "no method has a hold-out error to compare (the article's chain answers)", shown)
    best_value, best = ranked[0]
    others = ", ".join(f"{name} {value:.1f}%" for value, name in ranked[1:])
    return MethodChoice(best, f"lowest leave-one-out error: {best} {best_value:.1f}%"
                              + (f" (against {others})" if others else ""), shown)



def default_questions(rows: Sequence[Any]) -> dict[str, Any]:
    """The forward and inverse questions every surface asks when the person asks none: a new
    workbook's input cells, `solve` and `predict` without options, the report's calculator as it
    opens, `demo` (its own target TPS aside). The rules' defaults (DEFAULT_FORWARD, DEFAULT_TARGET,
    DEFAULT_METHOD) where the data measured them, else the nearest measured levels: the forward at
    the second concurrency level and the longest max_tokens, the inverse at the base max_tokens
    (PREFERRED_BASE_MAX_TOKENS when measured, else the shortest). {} for no rows."""
    from scm_xl.model import PREFERRED_BASE_MAX_TOKENS

    if not rows:
        return {}
    lengths = sorted({r.max_tokens for r in rows})
    levels = sorted({r.concurrency for r in rows})
    base_length = PREFERRED_BASE_MAX_TOKENS if PREFERRED_BASE_MAX_TOKENS in lengths else lengths[0]

    def pick(value: int, measured: list[int], fallback: int) -> int:
        return value if value in measured else fallback

    return {
        "forward": {"concurrency": pick(DEFAULT_FORWARD["concurrency"], levels, levels[min(1, len(levels) - 1)]),
                    "max_tokens": pick(DEFAULT_FORWARD["max_tokens"], lengths, lengths[-1])},
        "inverse": {"target_tps": DEFAULT_TARGET["tps"],
                    "max_tokens": pick(DEFAULT_TARGET["max_tokens"], lengths, base_length)},
        "method": DEFAULT_METHOD,
    }
