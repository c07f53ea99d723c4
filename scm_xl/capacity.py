"""Replicas and cost under an SLO: how many copies of a measured configuration serve a target
TPS, what a million output tokens cost, and whether a provider's rate limits allow it (no I/O).

Why: goodput.solve_slo answers with one replica; a deployment scales out. Every measured cell
that meets the SLO (goodput.SloCell.meets: the Wilson lower bound of its attainment reaches the
target) can serve any target with enough replicas:

    replicas = ceil(target TPS / TPS of one replica at that cell)

which is DistServe's sense of throughput at an SLO: the whole rate a replica sustains while
its attainment holds (goodput.py's goodput, the good requests' tokens only, is reported beside it).

Cost per million output tokens, from either pricing:

    tokens (price_in, price_out per 1M tokens, any currency):
        price_in x input tokens per output token + price_out
        (input per output = mean server-counted prompt tokens / mean output tokens per request)
    GPU (gpu_hour_price per GPU-hour, gpus per replica):
        gpus x gpu_hour_price / (TPS per replica x 3600) x 1e6

Rate limits (a provider's requests and tokens per minute) are constraints on the whole
deployment at full load: each replica's slots each send a request per mean latency, so

    RPM = replicas x 60 x concurrency / mean latency
    TPM = RPM x (prompt + output tokens per request)

each at most RATE_LIMIT_HEADROOM of its limit. The plan is *limit-bound* when a rate limit
rules out the configuration that would be chosen without the limits (or every one), else
*server-bound*: the server's throughput at the SLO decides.

Order (`minimise`): "concurrency" (the default) lifts constrained.py's order to replicas: fewest
replicas (what a deployment pays for), then the lowest concurrency per replica, then the
shorter max_tokens, then the model name. "cost": the lowest cost per hour of the deployment
(replicas rounded up included: GPU pricing pays for whole replicas; token pricing pays per
token, so the order is the cost per 1M output tokens), then the order above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from scm_xl.errors import UsageError
from scm_xl.goodput import Slo, SloCell
from scm_xl.rules import RATE_LIMIT_WINDOW_S, Lang
from scm_xl.slo_texts import REASONS, Reasons, Text

# Plan to use at most this share of a provider's rate limit: its minute windows are not ours,
# and a closed loop's requests come in bursts.
RATE_LIMIT_HEADROOM = 0.9
MINIMISE_CONCURRENCY, MINIMISE_COST = "concurrency", "cost"
MINIMISE: tuple[str, ...] = (MINIMISE_CONCURRENCY, MINIMISE_COST)
SERVER_BOUND, LIMIT_BOUND = "server-bound", "limit-bound"
# Why an option is ruled out (besides the SLO's own reasons, goodput.REASON_WORDS).
RPM_LIMIT, TPM_LIMIT = "rpm_limit", "tpm_limit"
TPM_UNMEASURED = "tpm_unmeasured"  # no server-counted prompt tokens: TPM cannot be proven under its limit
COST_UNKNOWN = "cost_unknown"  # no server-counted prompt tokens: token pricing cannot cost it
# In words (the JSON keeps the names); Chinese: slo_texts.REASONS, the one home of both languages.
REASON_WORDS: dict[str, str] = {name: REASONS["en"][name] for name in (RPM_LIMIT, TPM_LIMIT, TPM_UNMEASURED,
                                                                       COST_UNKNOWN)}
_SECONDS_PER_HOUR = 3600.0
_PER_MILLION = 1e6


def replicas_for(target_tps: float, per_replica_tps: float) -> int:
    """ceil(target / per replica), without float noise adding one (3 / 0.3 is 10.000000000000002)."""
    if not (target_tps > 0 and per_replica_tps > 0):
        raise ValueError(f"need positive TPS, got target {target_tps}, per replica {per_replica_tps}")
    count = math.ceil(target_tps / per_replica_tps)
    if count > 1 and (count - 1) * per_replica_tps >= target_tps * (1 - 1e-12):
        count -= 1
    return count


@dataclass(frozen=True, kw_only=True)
class Pricing:
    """Either a provider's token prices (per 1M tokens) or a GPU-hour price and GPUs per replica."""

    price_in: float | None = None
    price_out: float | None = None
    gpu_hour_price: float | None = None
    gpus: int | None = None

    def __post_init__(self) -> None:
        tokens = (self.price_in, self.price_out)
        gpu = (self.gpu_hour_price, self.gpus)
        names = ("price_in", "price_out", "gpu_hour_price", "gpus")
        given = [name for name in names if getattr(self, name) is not None]
        if any(v is not None for v in tokens) and any(v is not None for v in gpu):
            raise UsageError(f"give token prices (price_in, price_out) or a GPU price (gpu_hour_price, gpus), "
                             f"not both (given: {', '.join(given)})")
        if any(v is not None for v in tokens) and None in tokens:
            raise UsageError("token pricing needs both price_in and price_out (per million tokens)")
        if any(v is not None for v in gpu) and None in gpu:
            raise UsageError("GPU pricing needs both gpu_hour_price and gpus (per replica)")
        if not given:
            raise UsageError("no price: give price_in and price_out, or gpu_hour_price and gpus")
        for name in ("price_in", "price_out", "gpu_hour_price"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise UsageError(f"{name} must be a number that is not negative, got {value}")
        if self.gpus is not None and (isinstance(self.gpus, bool) or not isinstance(self.gpus, int) or self.gpus < 1):
            raise UsageError(f"gpus must be a whole number of at least 1, got {self.gpus}")

    @property
    def mode(self) -> str:
        return "tokens" if self.price_out is not None else "gpu"

    def per_million_output(self, tps_per_replica: float, input_per_output: float | None) -> float | None:
        """Cost per 1M output tokens; None when token pricing has no input-per-output ratio."""
        if self.price_in is not None and self.price_out is not None:
            return None if input_per_output is None else self.price_in * input_per_output + self.price_out
        assert self.gpus is not None and self.gpu_hour_price is not None
        return self.gpus * self.gpu_hour_price / (tps_per_replica * _SECONDS_PER_HOUR) * _PER_MILLION


@dataclass(frozen=True, kw_only=True)
class RateLimits:
    """A provider's limits per minute (None: none), for the whole deployment."""

    rpm: float | None = None
    tpm: float | None = None
    headroom: float = RATE_LIMIT_HEADROOM

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value > 0):
                raise UsageError(f"{name} limit must be positive, got {value}")
        if not (0 < self.headroom <= 1):
            raise UsageError(f"headroom must be in (0, 1], got {self.headroom}")

    @property
    def any(self) -> bool:
        return self.rpm is not None or self.tpm is not None


@dataclass(frozen=True)
class CapacityOption:
    """One measured cell scaled to the target."""

    cell: SloCell
    replicas: int
    capacity_tps: float  # replicas x TPS per replica
    input_per_output: float | None  # prompt tokens per output token (None: prompt not counted)
    cost_per_million_output: float | None  # None: no pricing, or token pricing without prompt tokens
    cost_per_hour: float | None  # of the deployment serving the target
    rpm: float | None  # the deployment at full load; None: no latency measured
    tpm: float | None  # None: no prompt tokens measured
    rejected_by: tuple[str, ...]  # () when it can be chosen

    def as_dict(self) -> dict[str, Any]:
        return {**self.cell.as_dict(), "replicas": self.replicas, "capacity_tps": self.capacity_tps,
                "input_per_output": self.input_per_output, "cost_per_million_output": self.cost_per_million_output,
                "cost_per_hour": self.cost_per_hour, "rpm": self.rpm, "tpm": self.tpm,
                "rejected_by": list(self.rejected_by)}


@dataclass
class CapacityPlan:
    slo: Slo
    target_tps: float
    minimise: str
    chosen: CapacityOption | None  # None: no measured configuration meets the SLO (and the limits)
    bound: str  # SERVER_BOUND | LIMIT_BOUND
    binding: tuple[str, ...]  # what ruled out the option preferred before it (() when none was)
    unlimited: CapacityOption | None  # the choice without the rate limits
    notes: list[str]
    options: list[CapacityOption] = field(repr=False, default_factory=list)

    def report(self) -> dict[str, Any]:
        return {"slo": self.slo.describe(), "target_tps": self.target_tps, "minimise": self.minimise,
                "chosen": self.chosen.as_dict() if self.chosen else None, "bound": self.bound,
                "binding": list(self.binding), "notes": list(self.notes)}


def traffic(cell: SloCell, replicas: int) -> tuple[float | None, float | None]:
    """(RPM, TPM) of `replicas` copies of the cell at full load; None where unmeasured."""
    latency = cell.tally.mean_latency_s
    if latency is None or latency <= 0:
        return None, None
    rpm = replicas * RATE_LIMIT_WINDOW_S * cell.concurrency / latency
    prompt = cell.tally.mean_prompt_tokens
    return rpm, None if prompt is None else rpm * (prompt + cell.tally.mean_output_tokens)


def option(cell: SloCell, target_tps: float, pricing: Pricing | None = None,
           limits: RateLimits | None = None) -> CapacityOption:
    """The cell scaled to `target_tps`, costed and checked against the limits."""
    t = cell.tally
    replicas = replicas_for(target_tps, t.tps)
    prompt = t.mean_prompt_tokens
    input_per_output = None if prompt is None or t.mean_output_tokens <= 0 else prompt / t.mean_output_tokens
    per_million = pricing.per_million_output(t.tps, input_per_output) if pricing is not None else None
    per_hour = None
    if pricing is not None and pricing.mode == "gpu":
        assert pricing.gpus is not None and pricing.gpu_hour_price is not None
        per_hour = replicas * pricing.gpus * pricing.gpu_hour_price
    elif per_million is not None:
        per_hour = target_tps * _SECONDS_PER_HOUR / _PER_MILLION * per_million
    rpm, tpm = traffic(cell, replicas)
    reasons = list(cell.rejected_by)
    if pricing is not None and per_million is None:
        reasons.append(COST_UNKNOWN)
    if limits is not None:
        if limits.rpm is not None and (rpm is None or rpm > limits.headroom * limits.rpm):
            reasons.append(RPM_LIMIT)
        if limits.tpm is not None:
            if tpm is None:
                reasons.append(TPM_UNMEASURED)
            elif tpm > limits.headroom * limits.tpm:
                reasons.append(TPM_LIMIT)
    return CapacityOption(cell=cell, replicas=replicas, capacity_tps=replicas * t.tps,
                          input_per_output=input_per_output, cost_per_million_output=per_million,
                          cost_per_hour=per_hour, rpm=rpm, tpm=tpm, rejected_by=tuple(reasons))


def _order(minimise: str) -> Any:
    def by_slots(o: CapacityOption) -> tuple[int, int, int, str]:
        return (o.replicas, *o.cell.cost)

    if minimise == MINIMISE_COST:
        return lambda o: (math.inf if o.cost_per_hour is None else o.cost_per_hour,
                          math.inf if o.cost_per_million_output is None else o.cost_per_million_output, by_slots(o))
    return by_slots


def plan(candidates: Sequence[SloCell], target_tps: float, slo: Slo, *, pricing: Pricing | None = None,
         limits: RateLimits | None = None, minimise: str = MINIMISE_CONCURRENCY) -> CapacityPlan:
    """The preferred deployment (configuration per replica and replicas) serving `target_tps`
    under the SLO, costed, within the rate limits; with the verdict server- or limit-bound."""
    if minimise not in MINIMISE:
        raise UsageError(f"minimise must be one of {', '.join(MINIMISE)}, got {minimise!r}")
    if minimise == MINIMISE_COST and pricing is None:
        raise UsageError("minimise cost needs a price (price_in and price_out, or gpu_hour_price and gpus)")
    if not (math.isfinite(target_tps) and target_tps > 0):
        raise ValueError(f"target TPS must be positive, got {target_tps}")
    key = _order(minimise)
    options = sorted((option(c, target_tps, pricing, limits) for c in candidates if c.tally.tps > 0), key=key)
    unconstrained = sorted((option(c, target_tps, pricing) for c in candidates if c.tally.tps > 0), key=key)
    chosen = next((o for o in options if not o.rejected_by), None)
    unlimited = next((o for o in unconstrained if not o.rejected_by), None)
    limit_reasons = {RPM_LIMIT, TPM_LIMIT, TPM_UNMEASURED}
    before = [o for o in options if o.rejected_by and (chosen is None or key(o) < key(chosen))]
    binding = before[0].rejected_by if before else ()
    limit_bound = unlimited is not None and (chosen is None or key(chosen) != key(unlimited))
    notes: list[str] = []  # Texts: English, and slo_texts.say(note, lang) in another language
    if limit_bound:
        assert unlimited is not None
        shown = next(o for o in options if key(o) == key(unlimited))
        binding = tuple(r for r in shown.rejected_by if r in limit_reasons) or binding
        notes.append(Text("limits_rule_out", option=_describe(shown), reasons=Reasons(tuple(binding))))
    if chosen is None and unlimited is None:
        notes.append(Text("none_meets", slo=slo.describe()))
    return CapacityPlan(slo=slo, target_tps=target_tps, minimise=minimise, chosen=chosen,
                        bound=LIMIT_BOUND if limit_bound else SERVER_BOUND, binding=binding, unlimited=unlimited,
                        notes=notes, options=options)


def describe_reasons(names: Sequence[str], lang: Lang = "en") -> str:
    """Machine names (goodput's and these) as words in `lang`; "" for none."""
    return Reasons(tuple(names)).say(lang)


def _describe(o: CapacityOption) -> Text:
    c = o.cell
    return Text("plan_option", replicas=o.replicas, model=c.model, c=c.concurrency, length=c.max_tokens,
                rpm=o.rpm or 0, tpm=Text("plan_option_tpm", tpm=o.tpm) if o.tpm is not None else "")
