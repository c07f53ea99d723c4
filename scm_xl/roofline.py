"""First-principles bounds for LLM inference: FLOPs, bytes and the roofline.

Long because every formula of the chain (FLOPs, weight and KV bytes with MLA/GQA and tensor
parallelism, precision modes, prefill and decode, capacity) is one readable derivation, kept in
one place so the sheet and the CLI can be checked against it line by line.

The chain, after the seed article on first-principles performance modelling:
what a token costs (FLOPs), what a decode step must move (weight and KV-cache
bytes), and which of compute, memory bandwidth or memory capacity runs out
first. The numbers are ceilings: with efficiency factors of 1.0 (the default)
no real server can beat them.

Units are SI throughout: bytes, bytes/s, FLOP, FLOP/s, seconds, and GB = 1e9
bytes. Bandwidths are per second in the same bytes, so 14e9 bytes over
800e9 bytes/s is 17.5 ms. (The seed's own snippet divides bytes by 1024**3 and
then by GB/s, mixing GiB with GB/s: for 7B fp16 at 1,500 GB/s that gives 8.7 ms,
not the 9.3 ms it prints. In SI it is 14e9 / 1.5e12 = 9.3 ms.) Catalog memory
sizes are the datasheets' "GB" taken as 1e9 bytes; physical HBM is usually a
little larger (GiB), so capacity figures err on the safe side.

Formulas (N = parameters, L = layers, d = hidden size, T = sequence length):

- FLOPs per token (forward) = 2 N_read, where N_read is the parameters a
  decode step multiplies by: the active parameters less the input embedding
  table when the LM head is not tied to it (a token reads one row of that
  table, not all of it; a tied table is counted once, as the LM head).
  Training = 6 N per token.
- Attention: a linear term 4 L w T and a quadratic term 2 L w T^2, where the
  attention width w = heads x (qk head dim + v head dim) / 2. For standard
  multi-head or grouped-query attention w = d (the seed's figures); for
  DeepSeek's MLA it is 128 x (192 + 128) / 2 = 20,480, four times d = 5,120.
- Precision is a mode for weights and activations (`PRECISION_MODES`):
  w16a16 (alias bf16), fp16, w8a8 (fp8 or int8 math; aliases fp8, int8 name
  the math), w8a16 and w4a16 (weight-only quantization: 16-bit math; alias
  int4), fp32. Each sets the bytes per weight and the chip peaks the compute
  bound may use, in order; a chip with none of them has no compute bound
  (said in the notes) rather than a borrowed one.
- Weight bytes = N x bytes per weight. All N_total weights must be resident;
  a decode step reads the N_read of them (for a MoE model, the routed and
  shared experts one token uses). At large batches a MoE step touches more
  experts, so the read bytes are a lower bound there, which is what a ceiling
  needs.
- KV cache per sequence = 2 x L x kv_heads x head_dim x T x bytes (K and V).
  With multi-head latent attention (MLA) the cache holds one latent per layer:
  L x (kv_lora_rank + qk_rope_head_dim) x T x bytes, with no factor 2. The KV
  precision defaults to the activations' precision: 16 bits (bf16, or fp16
  with fp16 weights) even with quantized weights, as servers do unless told
  otherwise; fp32 weights keep fp32 KV.
- Tensor parallelism over k GPUs splits the weights k ways but replicates KV
  it cannot split: an MLA latent is copied to every GPU (replication k), and
  with kv_heads < k each GPU still keeps ceil(kv_heads / k) whole heads
  (replication k x ceil(kv_heads / k) / kv_heads). The resident KV of a
  sequence over all GPUs is its KV cache x replication.
- Max batch by memory = floor((memory x tp - weight bytes - reserve) /
  resident KV bytes per sequence at the context).
- Decode step at batch b = max((weight bytes read + b x resident KV bytes per
  sequence) / (bandwidth x eff_bw), b x 2 N_read / (peak FLOP/s x
  eff_compute)) + TP communication. Ceiling tokens/s = b / step; one stream
  gets 1 / step.
- Prefill of P prompt tokens = max((P x 2 N_read + 2 L w P^2) / compute,
  min(N_total, P x N_active) weight bytes / bandwidth) + TP communication:
  a long prompt touches every expert, a one-token prompt only the active ones.
- One prompt of P tokens with up to L output tokens (`prompt_bounds`): prefill
  as above; TTFT lower bound = prefill + one decode step at batch 1 with the
  prompt's P tokens of KV cache (the simulator's first token ends the step its
  request joins in, so the two agree); max batch = max batch by memory with the
  KV cache of P + L tokens per sequence.
- Tensor parallelism over k GPUs multiplies memory, bandwidth and compute by k
  and adds, per decode step, 2 x L x (k-1)/k x b x d x activation bytes /
  link bandwidth (two all-reduces per layer). The link bandwidth is per
  direction (H100 SXM NVLink: 900 GB/s total, 450e9 B/s per direction; PCIe
  Gen5 x16: 64e9). A ring all-reduce moves up to twice that volume and adds
  latency, so this term, like the rest, is optimistic.
- Bottleneck: "capacity" when the batch does not fit in memory, else "compute"
  when the FLOPs take longer than the bytes, else "bandwidth".
- Does the deployment fit (`memory_fit`): weights + reserve + the resident KV
  cache of one sequence at the context <= memory x tp. Activations and runtime
  overhead are assumed to take no more than the reserve (default 0), so a fit
  is necessary, not sufficient. A deployment that does not fit has no
  throughput: the JSON form and the CLI give none (the report's attributes keep
  the arithmetic, marked "capacity"), and `memory_fit` says which part does not
  fit, by how much, and the smallest GPU count and the widest precision that would.
- Precision when none is asked for (`choose_precision`): the model's native
  precision (catalog `native_precision`, or a config.json's quantization_config /
  torch_dtype), else bf16; the choice comes with the reason, to be printed.

The only I/O is reading the catalog JSON (scm_xl/data/catalog.json plus an
optional user file with the same schema).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from scm_xl.errors import InputError

GB = 1e9
"""Bytes in a GB (SI)."""

ELEMENT_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
"""Bytes per element of each number format (weights, KV-cache elements, activations)."""

PEAK_PRECISIONS = ("fp32", "bf16", "fp16", "fp8", "int8")
"""The chip peaks a catalog GPU may give (dense FLOP/s or OP/s)."""


@dataclass(frozen=True)
class PrecisionMode:
    """What a precision name means for weights and activations: bytes per weight,
    the chip peaks the math may run at (first one the chip has wins), and the
    default KV-cache format."""

    name: str
    weight_bytes: float
    compute: tuple[str, ...]
    kv: str
    about: str


PRECISION_MODES: dict[str, PrecisionMode] = {mode.name: mode for mode in (
    PrecisionMode("w16a16", 2.0, ("bf16", "fp16"), "bf16", "16-bit weights and activations (bf16 math)"),
    PrecisionMode("fp16", 2.0, ("fp16", "bf16"), "fp16", "fp16 weights and activations"),
    PrecisionMode("w8a8", 1.0, ("fp8", "int8"), "bf16",
                  "8-bit weights and activations: fp8 math where the chip has it, else int8"),
    PrecisionMode("w8a8-fp8", 1.0, ("fp8",), "bf16", "fp8 weights and activations (fp8 math)"),
    PrecisionMode("w8a8-int8", 1.0, ("int8",), "bf16", "int8 weights and activations (int8 math)"),
    PrecisionMode("w8a16", 1.0, ("bf16", "fp16"), "bf16",
                  "8-bit weights dequantized to 16 bits (weight-only; 16-bit math)"),
    PrecisionMode("w4a16", 0.5, ("bf16", "fp16"), "bf16",
                  "4-bit weights dequantized to 16 bits (weight-only, e.g. AWQ/GPTQ; 16-bit math)"),
    PrecisionMode("fp32", 4.0, ("fp32",), "fp32", "fp32 weights and activations (FP32 math, no tensor cores)"),
)}
"""The weight/activation precision modes."""

PRECISION_ALIASES: dict[str, str] = {"bf16": "w16a16", "fp8": "w8a8-fp8", "int8": "w8a8-int8", "int4": "w4a16"}
"""The older names, kept: bf16, fp8 and int8 name weights and math alike; int4 is weight-only."""

PRECISION_BYTES: dict[str, float] = {
    **{name: PRECISION_MODES[target].weight_bytes for name, target in PRECISION_ALIASES.items()},
    **{name: mode.weight_bytes for name, mode in PRECISION_MODES.items()},
}
"""Bytes per weight for every precision name (the modes and their aliases); as a KV
precision a name means its weights' format, so its bytes are the same."""

DEFAULT_PRECISION = "bf16"
"""The precision of a model that states none (ad-hoc models, catalog entries without one)."""

FIT_PRECISIONS = ("fp32", "bf16", "fp8", "int4")
"""The precisions a "does not fit" answer tries, widest first: 4, 2, 1 and 0.5 bytes per weight."""

MAX_FIT_GPUS = 4096
"""The largest GPU count a "does not fit" answer searches for one that would fit."""

SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
"""Decimal (SI) prefixes the text output uses: GB = 1e9 B, TFLOP/s = 1e12 FLOP/s."""

DEFAULT_CONTEXT = 4096
"""Default sequence length (tokens) for KV-cache sizes and the prefill figure."""

ADHOC_LINK_BANDWIDTH = 64e9
"""Link bandwidth (B/s per direction) for a GPU given by raw numbers: PCIe Gen5 x16."""

UNITS: dict[str, str] = {
    "flops_per_token": "FLOP (2 x parameters read per token)",
    "read_params": "parameters a decode step reads per token (active, less an untied input embedding)",
    "kv_layout": "MHA, GQA or MLA (null: unknown)",
    "weight_bytes": "bytes (all parameters, resident)",
    "weight_bytes_read": "bytes read per decode step (active parameters)",
    "decode_ms_per_token": "milliseconds (batch 1)",
    "ceiling_tps": "tokens/s (batch 1)",
    "compute_ceiling_tps": "tokens/s at any batch (peak FLOP/s / FLOPs per token)",
    "kv_cache_bytes_per_seq": "bytes at `context` tokens (one copy)",
    "kv_replication": "copies of a sequence's KV cache over the tp GPUs (1 = split, no copy)",
    "kv_resident_bytes_per_seq": "bytes at `context` tokens over all GPUs (copies included)",
    "kv_bytes_per_token": "bytes",
    "max_batch_by_memory": "sequences at `context` tokens",
    "prefill_ms": "milliseconds for a prompt of `context` tokens",
    "memory_bytes": "bytes (x tp)",
    "memory_bandwidth": "bytes/s (x tp, before efficiency)",
    "peak_flops": "FLOP/s (x tp, before efficiency)",
    "link_bandwidth": "bytes/s per direction",
    "batches.step_ms": "milliseconds per decode step",
    "batches.ceiling_tps": "tokens/s, all streams",
    "batches.per_stream_tps": "tokens/s, one stream",
    "batches.kv_bytes": "bytes, whole batch at `context` tokens, over all GPUs",
    "batches.memory_ms / compute_ms / comm_ms": "milliseconds: the parts of step_ms",
    "fit": "weights + reserve + one sequence's KV cache at `context` against memory: fits (null: memory "
           "unknown), bytes, short_bytes, short_of (weights | kv_cache), min_gpus, min_gpus_dividing_heads, "
           "fitting_precision, verdict and details in words; when fits is false every time and tokens/s "
           "figure is null",
}


# ---------------------------------------------------------------------------
# Formulas: small pure functions, SI in and out
# ---------------------------------------------------------------------------


def si(value: float, unit: str) -> str:
    """A quantity with a decimal SI prefix and 4 significant digits: si(14.14e9, "FLOP") is
    "14.14 GFLOP", si(2.039e12, "B/s") "2.039 TB/s". The one format of every byte, FLOP and
    bandwidth figure the text output prints, so no figure shows in GB beside another in E+10."""
    magnitude = abs(value)
    for factor, prefix in SI_PREFIXES:
        if magnitude >= factor * 0.99995:  # 999,960 B rounds to 1 MB, not 1e+03 kB
            return f"{value / factor:.4g} {prefix}{unit}"
    return f"{value:.4g} {unit}"


def precision_bytes(precision: str) -> float:
    """Bytes per parameter or element for a precision name (case-insensitive)."""
    key = precision.strip().lower()
    if key not in PRECISION_BYTES:
        raise InputError(f"unknown precision '{precision}'; known: {', '.join(PRECISION_BYTES)}")
    return PRECISION_BYTES[key]


def precision_mode(precision: str) -> PrecisionMode:
    """The mode a precision name (or alias) stands for (case-insensitive)."""
    key = precision.strip().lower()
    key = PRECISION_ALIASES.get(key, key)
    if key not in PRECISION_MODES:
        raise InputError(f"unknown precision '{precision}'; known: {', '.join(PRECISION_BYTES)}")
    return PRECISION_MODES[key]


def flops_per_token(n_active: float) -> float:
    """Forward FLOPs per token: 2 x active parameters."""
    return 2.0 * n_active


def training_flops_per_token(n_params: float) -> float:
    """Training FLOPs per token (forward 2N + backward 4N): 6 x parameters."""
    return 6.0 * n_params


def attention_flops_linear(layers: int, width: float, seq_len: int) -> float:
    """The attention term linear in sequence length: 4 L w T (w: the attention width,
    `ModelSpec.attention_width`; the hidden size for standard attention)."""
    return 4.0 * layers * width * seq_len


def attention_flops_quadratic(layers: int, width: float, seq_len: int) -> float:
    """The attention term quadratic in sequence length: 2 L w T^2."""
    return 2.0 * layers * width * seq_len**2


def weight_bytes(n_params: float, precision: str) -> float:
    """Bytes taken by n_params weights stored at `precision`."""
    return n_params * precision_bytes(precision)


def kv_bytes_per_token(model: ModelSpec, bytes_per_element: float) -> float | None:
    """KV-cache bytes one token adds; None when the model's shape is unknown."""
    if model.layers is None:
        return None
    if model.kv_lora_rank is not None and model.qk_rope_head_dim is not None:
        return model.layers * (model.kv_lora_rank + model.qk_rope_head_dim) * bytes_per_element
    if model.kv_heads is None or model.head_dim is None:
        return None
    return 2.0 * model.layers * model.kv_heads * model.head_dim * bytes_per_element


def kv_cache_bytes_per_seq(model: ModelSpec, seq_len: int, bytes_per_element: float) -> float | None:
    """KV-cache bytes of one sequence of seq_len tokens; None when unknown."""
    per_token = kv_bytes_per_token(model, bytes_per_element)
    return None if per_token is None else per_token * seq_len


def kv_replication(model: ModelSpec, tp: int) -> float:
    """How many copies of a sequence's KV cache `tp` GPUs hold together (1 = split, no copy).

    MLA: the latent cannot be split by head, so every GPU keeps it (k). GQA: each GPU
    keeps ceil(kv_heads / k) whole heads, so with kv_heads < k heads are replicated
    (k x ceil(kv_heads / k) / kv_heads). Unknown shape: 1.
    """
    if tp <= 1:
        return 1.0
    if model.kv_lora_rank is not None:
        return float(tp)
    if model.kv_heads is None:
        return 1.0
    return tp * math.ceil(model.kv_heads / tp) / model.kv_heads


def max_batch_by_memory(memory_bytes: float, weight_bytes_resident: float,
                        kv_bytes_per_seq: float, reserve_bytes: float = 0.0) -> int:
    """Sequences whose KV cache fits beside the weights: floor(free / per sequence), at least 0."""
    free = memory_bytes - weight_bytes_resident - reserve_bytes
    if free <= 0:
        return 0
    return math.floor(free / kv_bytes_per_seq)


def memory_seconds(bytes_moved: float, bandwidth: float, efficiency: float = 1.0) -> float:
    """Time to move bytes at bandwidth (B/s) x efficiency."""
    return bytes_moved / (bandwidth * efficiency)


def compute_seconds(flops: float, peak_flops: float | None, efficiency: float = 1.0) -> float:
    """Time for flops at peak FLOP/s x efficiency; 0 when the peak is unknown."""
    if peak_flops is None:
        return 0.0
    return flops / (peak_flops * efficiency)


def tp_comm_seconds(*, layers: int, hidden_size: int, tokens: int, tp: int,
                    activation_bytes: float, link_bandwidth: float) -> float:
    """Tensor-parallel all-reduce time for one step over `tokens` tokens:
    2 x L x (k-1)/k x tokens x d x activation bytes / link bandwidth."""
    if tp <= 1:
        return 0.0
    return 2.0 * layers * (tp - 1) / tp * tokens * hidden_size * activation_bytes / link_bandwidth


def decode_step_seconds(*, weight_bytes_read: float, kv_bytes_per_seq: float, batch: int,
                        flops_per_token: float, bandwidth: float, peak_flops: float | None,
                        bandwidth_efficiency: float = 1.0, compute_efficiency: float = 1.0,
                        comm_seconds: float = 0.0) -> float:
    """One decode step at batch b: max(bytes / bandwidth, b x FLOPs / compute) + communication."""
    moving = memory_seconds(weight_bytes_read + batch * kv_bytes_per_seq, bandwidth, bandwidth_efficiency)
    computing = compute_seconds(batch * flops_per_token, peak_flops, compute_efficiency)
    return max(moving, computing) + comm_seconds


def prefill_seconds(*, prompt_tokens: int, flops_per_token: float, attention_quadratic_flops: float,
                    weight_bytes_read: float, bandwidth: float, peak_flops: float | None,
                    bandwidth_efficiency: float = 1.0, compute_efficiency: float = 1.0,
                    comm_seconds: float = 0.0) -> float:
    """Prefill of a prompt: max((P x 2N + quadratic attention) / compute, weight bytes / bandwidth) + comm."""
    flops = prompt_tokens * flops_per_token + attention_quadratic_flops
    computing = compute_seconds(flops, peak_flops, compute_efficiency)
    moving = memory_seconds(weight_bytes_read, bandwidth, bandwidth_efficiency)
    return max(computing, moving) + comm_seconds


# ---------------------------------------------------------------------------
# GPUs, models, deployments
# ---------------------------------------------------------------------------


def _require_positive(value: float | None, what: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise InputError(f"{what} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class Gpu:
    """One accelerator: memory (bytes), bandwidth (B/s), dense peaks (FLOP/s by precision)."""

    key: str
    name: str
    memory_bytes: float | None
    memory_bandwidth: float
    peak_flops: Mapping[str, float] = field(default_factory=dict)
    link_bandwidth: float = ADHOC_LINK_BANDWIDTH
    link: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _require_positive(self.memory_bytes, f"{self.key}: memory")
        _require_positive(self.memory_bandwidth, f"{self.key}: memory bandwidth")
        _require_positive(self.link_bandwidth, f"{self.key}: link bandwidth")
        for precision, value in self.peak_flops.items():
            _require_positive(value, f"{self.key}: peak FLOP/s at {precision}")

    @classmethod
    def from_numbers(cls, *, bandwidth_gbs: float | None, tflops: float | None = None,
                     memory_gb: float | None = None, link_gbs: float | None = None) -> Gpu:
        """An ad-hoc GPU: bandwidth in GB/s (required), peak TFLOP/s at whatever
        precision is used, memory in GB, link in GB/s per direction (default PCIe Gen5)."""
        if bandwidth_gbs is None:
            raise InputError("a GPU needs a memory bandwidth (GB/s)")
        for value, what in ((bandwidth_gbs, "bandwidth"), (tflops, "TFLOP/s"),
                            (memory_gb, "memory"), (link_gbs, "link bandwidth")):
            _require_positive(value, what)
        peak = {} if tflops is None else {p: tflops * 1e12 for p in PEAK_PRECISIONS}
        return cls(
            key="custom",
            name=_describe_adhoc_gpu(bandwidth_gbs, tflops, memory_gb),
            memory_bytes=None if memory_gb is None else memory_gb * GB,
            memory_bandwidth=bandwidth_gbs * GB,
            peak_flops=peak,
            link_bandwidth=ADHOC_LINK_BANDWIDTH if link_gbs is None else link_gbs * GB,
            link="given" if link_gbs is not None else "PCIe Gen5 x16 (default for ad-hoc GPUs)",
        )

    def compute_for(self, precision: str) -> tuple[str, float] | None:
        """The (peak name, FLOP/s) the math of a precision mode runs at: the first of
        the mode's compute peaks the chip has; None when it has none of them."""
        for candidate in precision_mode(precision).compute:
            if candidate in self.peak_flops:
                return candidate, self.peak_flops[candidate]
        return None


def _describe_adhoc_gpu(bandwidth_gbs: float, tflops: float | None, memory_gb: float | None) -> str:
    parts = [f"{bandwidth_gbs:g} GB/s"]
    if tflops is not None:
        parts.append(f"{tflops:g} TFLOP/s")
    if memory_gb is not None:
        parts.append(f"{memory_gb:g} GB")
    return "custom GPU (" + ", ".join(parts) + ")"


@dataclass(frozen=True)
class ModelSpec:
    """One model's shape. Shape fields may be None for an ad-hoc model (KV cache unknown)."""

    key: str
    name: str
    total_params: float
    active_params: float
    layers: int | None = None
    hidden_size: int | None = None
    attention_heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    vocab_size: int | None = None
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    v_head_dim: int | None = None  # None: head_dim (differs with MLA)
    tie_word_embeddings: bool = False
    sources: Mapping[str, str] = field(default_factory=dict)
    # The precision the model is released in (None: not stated). A `sources["native_precision"]`
    # without a value means the release states one this module cannot read (an unknown
    # quantization method): `choose_precision` then asks for --precision rather than guess.
    native_precision: str | None = None

    def __post_init__(self) -> None:
        if self.native_precision is not None:
            precision_mode(self.native_precision)
            object.__setattr__(self, "native_precision", self.native_precision.strip().lower())
        for name in ("total_params", "active_params", "layers", "hidden_size", "attention_heads",
                     "kv_heads", "head_dim", "vocab_size", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim"):
            _require_positive(getattr(self, name), f"{self.key}: {name}")
        if self.active_params > self.total_params:
            raise InputError(f"{self.key}: active_params ({self.active_params:g}) exceeds total_params "
                             f"({self.total_params:g})")
        if (self.kv_lora_rank is None) != (self.qk_rope_head_dim is None):
            raise InputError(f"{self.key}: MLA needs both kv_lora_rank and qk_rope_head_dim")

    @classmethod
    def from_params(cls, params_b: float | None, active_params_b: float | None = None) -> ModelSpec:
        """An ad-hoc model from its parameter count in billions; its KV cache is unknown."""
        if params_b is None:
            raise InputError("a model needs a parameter count")
        _require_positive(params_b, "params_b")
        _require_positive(active_params_b, "active_params_b")
        active = params_b if active_params_b is None else active_params_b
        return cls(key="custom", name=f"custom model ({params_b:g}B params)",
                   total_params=params_b * 1e9, active_params=active * 1e9)

    @property
    def is_moe(self) -> bool:
        return self.active_params < self.total_params

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def kv_layout(self) -> str | None:
        """MLA, GQA or MHA; None when the KV shape is unknown."""
        if self.is_mla:
            return "MLA"
        if self.kv_heads is None or self.attention_heads is None or self.layers is None:
            return None
        return "GQA" if self.kv_heads < self.attention_heads else "MHA"

    @property
    def embedding_params(self) -> float:
        """Parameters of an untied input embedding table (vocab x hidden), which a
        decode step does not read whole; 0 when tied or the shape is unknown."""
        if self.tie_word_embeddings or self.vocab_size is None or self.hidden_size is None:
            return 0.0
        return float(self.vocab_size * self.hidden_size)

    @property
    def read_params(self) -> float:
        """Parameters one token's decode step reads and multiplies by: the active ones
        less an untied input embedding table (one row of it is read, not all)."""
        embedding = self.embedding_params
        return self.active_params - embedding if self.active_params > embedding else self.active_params

    @property
    def attention_width(self) -> float | None:
        """heads x (qk head dim + v head dim) / 2: the hidden size for standard
        attention, 4x it for DeepSeek's MLA; the hidden size when heads are unknown."""
        if self.attention_heads is not None and self.head_dim is not None:
            v_dim = self.head_dim if self.v_head_dim is None else self.v_head_dim
            return self.attention_heads * (self.head_dim + v_dim) / 2
        return None if self.hidden_size is None else float(self.hidden_size)


@dataclass(frozen=True)
class PrecisionChoice:
    """The precision a report uses and why, in words ("fp8, the model's native precision (catalog)")."""

    precision: str
    reason: str


def choose_precision(given: str | None, model: ModelSpec, origin: str | None) -> PrecisionChoice:
    """The precision to use: the one asked for; else the model's native precision; else bf16.

    `origin` names where the model came from, for the reason: "catalog", or None for an ad-hoc
    model; a model from a config.json carries the config's words in sources["native_precision"].
    A model whose release states a precision this module cannot read is an InputError (asking
    for --precision): a 16-bit guess for a quantized model would double its bytes.
    """
    if given is not None:
        precision_mode(given)
        return PrecisionChoice(given.strip().lower(), f"{given.strip().lower()}, as asked (--precision)")
    native = model.native_precision
    source = model.sources.get("native_precision")
    if native is not None:
        where = origin if origin == "catalog" or not source else source
        return PrecisionChoice(native, f"{native}, the model's native precision ({where})")
    if source:
        raise InputError(f"{model.name}: {source}; give --precision")
    why = ("an ad-hoc model states no precision" if origin is None else
           f"the {origin} states no native precision")
    return PrecisionChoice(DEFAULT_PRECISION, f"{DEFAULT_PRECISION}, the default ({why})")


@dataclass(frozen=True)
class Deployment:
    """A model served on `tp` GPUs at a weight precision, for sequences of `context` tokens.

    Efficiencies scale bandwidth and compute (1.0 gives the pure bound);
    `reserve_bytes` is memory kept back from the KV cache (activations, runtime);
    `link_bandwidth` overrides the GPU's link (B/s per direction).
    """

    model: ModelSpec
    gpu: Gpu
    precision: str = "bf16"
    tp: int = 1
    context: int = DEFAULT_CONTEXT
    bandwidth_efficiency: float = 1.0
    compute_efficiency: float = 1.0
    kv_precision: str | None = None
    reserve_bytes: float = 0.0
    link_bandwidth: float | None = None

    def __post_init__(self) -> None:
        precision_mode(self.precision)
        object.__setattr__(self, "precision", self.precision.strip().lower())
        if self.kv_precision is not None:
            precision_bytes(self.kv_precision)
            object.__setattr__(self, "kv_precision", self.kv_precision.strip().lower())
        for value, what in ((self.tp, "tp"), (self.context, "context")):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{what} must be a positive whole number, got {value!r}")
        for share, what in ((self.bandwidth_efficiency, "bandwidth efficiency"),
                            (self.compute_efficiency, "compute efficiency")):
            _require_positive(share, what)
            if share > 1:
                raise InputError(f"{what} must be in (0, 1], got {share!r}")
        if isinstance(self.reserve_bytes, bool) or not isinstance(self.reserve_bytes, (int, float)) \
                or not math.isfinite(self.reserve_bytes) or self.reserve_bytes < 0:
            raise InputError(f"reserve must be zero or positive, got {self.reserve_bytes!r}")
        _require_positive(self.link_bandwidth, "link bandwidth")

    # What the deployment holds and moves -----------------------------------

    @property
    def mode(self) -> PrecisionMode:
        return precision_mode(self.precision)

    @property
    def kv_precision_used(self) -> str:
        return self.mode.kv if self.kv_precision is None else self.kv_precision

    @property
    def activation_bytes(self) -> float:
        """Bytes per activation element sent between GPUs (the KV/activation precision)."""
        return precision_bytes(self.kv_precision_used)

    @property
    def weight_bytes(self) -> float:
        """Resident weight bytes: all parameters."""
        return weight_bytes(self.model.total_params, self.precision)

    @property
    def weight_bytes_read(self) -> float:
        """Weight bytes one decode step reads: the active parameters less an untied
        input embedding table (`ModelSpec.read_params`)."""
        return weight_bytes(self.model.read_params, self.precision)

    @property
    def flops_per_token(self) -> float:
        return flops_per_token(self.model.read_params)

    @property
    def kv_bytes_per_token(self) -> float | None:
        return kv_bytes_per_token(self.model, precision_bytes(self.kv_precision_used))

    @property
    def kv_cache_bytes_per_seq(self) -> float | None:
        """One copy of a sequence's KV cache at `context` tokens."""
        return kv_cache_bytes_per_seq(self.model, self.context, precision_bytes(self.kv_precision_used))

    @property
    def kv_replication(self) -> float:
        return kv_replication(self.model, self.tp)

    @property
    def kv_resident_bytes_per_seq(self) -> float | None:
        """A sequence's KV cache as held over all `tp` GPUs (copies included)."""
        kv = self.kv_cache_bytes_per_seq
        return None if kv is None else kv * self.kv_replication

    @property
    def kv_resident_bytes_per_token(self) -> float | None:
        """What one token adds to a sequence's KV cache over all `tp` GPUs (copies included)."""
        kv = self.kv_bytes_per_token
        return None if kv is None else kv * self.kv_replication

    # The hardware, summed over tp GPUs ----------------------------------------

    @property
    def memory_bytes(self) -> float | None:
        return None if self.gpu.memory_bytes is None else self.gpu.memory_bytes * self.tp

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth over all GPUs, before efficiency (B/s)."""
        return self.gpu.memory_bandwidth * self.tp

    @property
    def compute_precision(self) -> str | None:
        found = self.gpu.compute_for(self.precision)
        return None if found is None else found[0]

    @property
    def peak_flops(self) -> float | None:
        """Peak FLOP/s over all GPUs at the compute precision, before efficiency."""
        found = self.gpu.compute_for(self.precision)
        return None if found is None else found[1] * self.tp

    @property
    def link_bandwidth_used(self) -> float:
        return self.gpu.link_bandwidth if self.link_bandwidth is None else self.link_bandwidth

    @property
    def max_batch_by_memory(self) -> int | None:
        kv = self.kv_resident_bytes_per_seq
        memory = self.memory_bytes
        if kv is None or memory is None:
            return None
        return max_batch_by_memory(memory, self.weight_bytes, kv, self.reserve_bytes)

    def comm_seconds(self, tokens: int) -> float:
        """TP communication for a step over `tokens` tokens (0 at tp=1 or when the shape is unknown)."""
        if self.tp == 1 or self.model.layers is None or self.model.hidden_size is None:
            return 0.0
        return tp_comm_seconds(layers=self.model.layers, hidden_size=self.model.hidden_size,
                               tokens=tokens, tp=self.tp, activation_bytes=self.activation_bytes,
                               link_bandwidth=self.link_bandwidth_used)

    def fits_memory(self, batch: int) -> bool | None:
        """Whether weights, reserve and `batch` KV caches fit; None when memory is unknown.
        With an unknown KV size only the weights are checked."""
        memory = self.memory_bytes
        if memory is None:
            return None
        needed = self.weight_bytes + self.reserve_bytes + batch * (self.kv_resident_bytes_per_seq or 0.0)
        return needed <= memory

    def prefill_seconds(self, prompt_tokens: int) -> float:
        """Lower bound on the prefill time of a prompt of `prompt_tokens` tokens."""
        model = self.model
        quadratic = 0.0
        width = model.attention_width
        if model.layers is not None and model.hidden_size is not None and width is not None:
            quadratic = attention_flops_quadratic(model.layers, width, prompt_tokens)
        touched = min(model.total_params, prompt_tokens * model.active_params)
        return prefill_seconds(
            prompt_tokens=prompt_tokens, flops_per_token=self.flops_per_token,
            attention_quadratic_flops=quadratic, weight_bytes_read=weight_bytes(touched, self.precision),
            bandwidth=self.bandwidth, peak_flops=self.peak_flops,
            bandwidth_efficiency=self.bandwidth_efficiency, compute_efficiency=self.compute_efficiency,
            comm_seconds=self.comm_seconds(prompt_tokens),
        )


# ---------------------------------------------------------------------------
# Does it fit?
# ---------------------------------------------------------------------------


FIT_ASSUMPTION = ("activations and runtime overhead get no memory beyond the reserve (--reserve-gb, "
                  "{reserve}); a real server needs more, so a fit here is necessary, not sufficient")
"""What the fit test assumes for the memory it does not count (one home for the caveat)."""


@dataclass(frozen=True)
class MemoryFit:
    """Whether the weights, the reserve and the KV cache of one sequence at the context fit in
    the memory of the GPUs; when not, which part does not, by how much, and what would fit.

    fits is None when the memory is unknown (an ad-hoc GPU without --memory-gb). kv_bytes is
    the resident KV cache of one sequence (copies over the GPUs included; None: unknown, then
    only weights and reserve are checked). short_of is "weights" when the weights and the
    reserve alone exceed memory, "kv_cache" when they fit but one sequence's cache does not.
    min_gpus is the smallest GPU count that would hold it at this precision (None: it fits,
    or no count up to MAX_FIT_GPUS does); min_gpus_dividing_heads the smallest such count that
    also divides the attention heads, as tensor parallelism needs. fitting_precision is the
    widest of FIT_PRECISIONS narrower than this one that fits on these GPUs (None: none does).
    """

    fits: bool | None
    memory_bytes: float | None
    weight_bytes: float
    kv_bytes: float | None
    reserve_bytes: float
    needed_bytes: float
    short_bytes: float
    short_of: str | None
    min_gpus: int | None
    min_gpus_dividing_heads: int | None
    fitting_precision: str | None
    verdict: str
    details: list[str]


def _fits_one_sequence(deployment: Deployment) -> bool | None:
    return deployment.fits_memory(1)


def memory_fit(deployment: Deployment) -> MemoryFit:
    """Does `deployment` hold its weights, reserve and one sequence's KV cache at `context`
    (`Deployment.fits_memory(1)`)? With the answer, the words for people: a verdict line and
    details (what is needed, what would fit, what is assumed)."""
    memory = deployment.memory_bytes
    weights, reserve = deployment.weight_bytes, deployment.reserve_bytes
    kv = deployment.kv_resident_bytes_per_seq
    needed = weights + reserve + (kv or 0.0)
    assumption = FIT_ASSUMPTION.format(reserve=si(reserve, "B"))
    if kv is None:
        assumption = "the KV cache is unknown (model given by parameter count): only weights and reserve " \
                     "are checked; " + assumption
    fits = _fits_one_sequence(deployment)
    if memory is None or fits is None:
        return MemoryFit(None, None, weights, kv, reserve, needed, 0.0, None, None, None, None,
                         "memory unknown: whether it fits is not evaluated", [])
    gpus = f"the {deployment.tp} GPUs" if deployment.tp > 1 else "the GPU"
    parts = f"weights {si(weights, 'B')} at {deployment.precision}"
    if kv is not None:
        copies = f" ({deployment.kv_replication:g} copies)" if deployment.kv_replication != 1 else ""
        parts += f" + KV cache of one {deployment.context:,}-token sequence {si(kv, 'B')}{copies}"
    parts += f" + reserve {si(reserve, 'B')} = {si(needed, 'B')}"
    if fits:
        return MemoryFit(True, memory, weights, kv, reserve, needed, 0.0, None, None, None, None,
                         f"fits: {si(needed, 'B')} of {si(memory, 'B')} on {gpus}",
                         [f"needed: {parts}", f"assumed: {assumption}"])
    short = needed - memory
    if weights + reserve > memory:
        short_of = "weights"
        what = "the weights" + (" and the reserve" if reserve else "") + " alone"
        verdict = (f"does not fit: {what} ({si(weights + reserve, 'B')}) exceed the memory of {gpus} "
                   f"({si(memory, 'B')}) by {si(weights + reserve - memory, 'B')}")
        if kv:
            verdict += f", {si(short, 'B')} with one sequence's KV cache"
    else:
        short_of = "kv_cache"
        verdict = (f"does not fit: the weights fit, but the KV cache of one {deployment.context:,}-token "
                   f"sequence ({si(kv or 0.0, 'B')}) does not: {si(short, 'B')} over the memory of {gpus} "
                   f"({si(memory, 'B')})")
    min_gpus = min_dividing = None
    heads = deployment.model.attention_heads
    for count in range(deployment.tp + 1, MAX_FIT_GPUS + 1):
        if not _fits_one_sequence(replace(deployment, tp=count)):
            continue
        if min_gpus is None:
            min_gpus = count
        if heads is None or heads % count == 0:
            min_dividing = count
            break
    if heads is None:
        min_dividing = None
    fitting = None
    for candidate in FIT_PRECISIONS:
        if precision_bytes(candidate) < precision_bytes(deployment.precision) and \
                _fits_one_sequence(replace(deployment, precision=candidate)):
            fitting = candidate
            break
    would = []
    if min_gpus is not None:
        would.append(f"{min_gpus} GPUs at {deployment.precision}" + (
            f" ({min_dividing} if the count must divide the {heads} attention heads, as tensor parallelism "
            "needs)" if min_dividing is not None and min_dividing != min_gpus else ""))
    if fitting is not None:
        would.append(f"{fitting} ({precision_bytes(fitting):g} B per weight) on {gpus}")
    details = [f"needed: {parts}, over {si(memory, 'B')}"]
    details.append("would fit: " + ("; or ".join(would) if would else
                                    f"nothing tried (up to {MAX_FIT_GPUS} GPUs; {', '.join(FIT_PRECISIONS)})"))
    details.append(f"assumed: {assumption}")
    return MemoryFit(False, memory, weights, kv, reserve, needed, short, short_of, min_gpus, min_dividing,
                     fitting, verdict, details)


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchRow:
    """The decode bound at one batch size."""

    batch: int
    step_ms: float
    ceiling_tps: float
    per_stream_tps: float
    kv_bytes: float | None
    bottleneck: str
    fits_memory: bool | None
    memory_ms: float
    compute_ms: float | None
    comm_ms: float


@dataclass(frozen=True)
class RooflineReport:
    """Bounds for one deployment; `to_dict()` gives the JSON form (SI units, see `units`)."""

    model: str
    model_name: str
    gpu: str
    gpu_name: str
    precision: str
    kv_precision: str
    compute_precision: str | None
    tp: int
    context: int
    bandwidth_efficiency: float
    compute_efficiency: float
    reserve_bytes: float
    memory_bytes: float | None
    memory_bandwidth: float
    peak_flops: float | None
    link_bandwidth: float
    total_params: float
    active_params: float
    read_params: float
    kv_layout: str | None
    flops_per_token: float
    weight_bytes: float
    weight_bytes_read: float
    kv_bytes_per_token: float | None
    kv_cache_bytes_per_seq: float | None
    kv_replication: float
    kv_resident_bytes_per_seq: float | None
    max_batch_by_memory: int | None
    decode_ms_per_token: float
    ceiling_tps: float
    compute_ceiling_tps: float | None
    bottleneck: str
    prefill_ms: float
    batches: list[BatchRow]
    notes: list[str]
    fit: MemoryFit
    prompt: PromptBounds | None = None  # analyze(..., prompt_tokens=P)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form. What does not fit in memory has no throughput here: a deployment that
        does not fit (`fit.fits` false) gets null for every time and tokens/s figure, a batch row
        that does not fit null for its times and tokens/s, a prompt whose P + L tokens do not fit
        null for its times (the attributes keep the arithmetic, marked "capacity")."""
        data = asdict(self)
        units = dict(UNITS)
        if self.fit.fits is False:
            data.update({key: None for key in NO_FIT_REPORT_KEYS})
        for row in data["batches"]:
            if row["fits_memory"] is False:
                row.update({key: None for key in NO_FIT_ROW_KEYS})
        if self.prompt is None:
            del data["prompt"]
        else:
            units.update(PROMPT_UNITS)
            if self.prompt.fits_memory is False:
                data["prompt"].update({key: None for key in NO_FIT_PROMPT_KEYS})
        data["units"] = units
        return data


NO_FIT_REPORT_KEYS = ("decode_ms_per_token", "ceiling_tps", "compute_ceiling_tps", "prefill_ms")
NO_FIT_ROW_KEYS = ("step_ms", "ceiling_tps", "per_stream_tps", "memory_ms", "compute_ms", "comm_ms")
NO_FIT_PROMPT_KEYS = ("prefill_s", "decode_step_s", "ttft_lower_bound_s")
"""The figures the JSON form leaves null for what does not fit in memory (see `RooflineReport.to_dict`)."""


PROMPT_UNITS: dict[str, str] = {
    "prompt.prefill_s": "seconds to prefill `prompt_tokens` (compute or weight reads, whichever is longer)",
    "prompt.decode_step_s": "seconds: one decode step at batch 1 with `prompt_tokens` of KV cache",
    "prompt.ttft_lower_bound_s": "seconds: prefill_s + decode_step_s",
    "prompt.kv_resident_bytes_per_seq": "bytes at `context` (= prompt_tokens + max_tokens) over all GPUs",
    "prompt.max_batch": "sequences whose KV cache fits at `context` tokens (null: unknown)",
    "prompt.fits_memory": "whether weights + reserve + one sequence of `context` tokens fit (null: memory "
                          "unknown); false: the prompt's times are null",
}
"""Units of the `prompt` section of the JSON report (present with --prompt-tokens)."""


@dataclass(frozen=True)
class PromptBounds:
    """What one prompt of `prompt_tokens` tokens, answered with up to `max_tokens`, costs at best."""

    prompt_tokens: int
    max_tokens: int
    context: int  # prompt_tokens + max_tokens
    prefill_s: float
    decode_step_s: float
    ttft_lower_bound_s: float
    kv_resident_bytes_per_seq: float | None
    max_batch: int | None
    fits_memory: bool | None = None  # weights + reserve + one sequence of P + L tokens


def prompt_bounds(deployment: Deployment, prompt_tokens: int, max_tokens: int = 0) -> PromptBounds:
    """Prefill of a `prompt_tokens` prompt (`Deployment.prefill_seconds`: 2 x params read x P
    plus quadratic attention at peak x efficiency, or the weight reads, whichever is longer),
    the TTFT lower bound (that prefill + one decode step at batch 1 with the prompt's KV cache)
    and the largest batch whose KV cache fits at prompt_tokens + max_tokens."""
    for value, what, least in ((prompt_tokens, "prompt tokens", 1), (max_tokens, "max tokens", 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise InputError(f"{what} must be a whole number >= {least}, got {value!r}")
    prefill = deployment.prefill_seconds(prompt_tokens)
    step = _batch_row(replace(deployment, context=prompt_tokens), 1).step_ms / 1e3
    at_context = replace(deployment, context=prompt_tokens + max_tokens)
    return PromptBounds(
        prompt_tokens=prompt_tokens,
        max_tokens=max_tokens,
        context=at_context.context,
        prefill_s=prefill,
        decode_step_s=step,
        ttft_lower_bound_s=prefill + step,
        kv_resident_bytes_per_seq=at_context.kv_resident_bytes_per_seq,
        max_batch=at_context.max_batch_by_memory,
        fits_memory=at_context.fits_memory(1),
    )


def _batch_row(deployment: Deployment, batch: int) -> BatchRow:
    kv_per_seq = deployment.kv_resident_bytes_per_seq
    moving = memory_seconds(deployment.weight_bytes_read + batch * (kv_per_seq or 0.0),
                            deployment.bandwidth, deployment.bandwidth_efficiency)
    peak = deployment.peak_flops
    computing = None if peak is None else compute_seconds(
        batch * deployment.flops_per_token, peak, deployment.compute_efficiency)
    comm = deployment.comm_seconds(batch)
    step = max(moving, computing or 0.0) + comm
    fits = deployment.fits_memory(batch)
    if fits is False:
        bottleneck = "capacity"
    elif computing is not None and computing > moving:
        bottleneck = "compute"
    else:
        bottleneck = "bandwidth"
    return BatchRow(
        batch=batch,
        step_ms=step * 1e3,
        ceiling_tps=batch / step,
        per_stream_tps=1.0 / step,
        kv_bytes=None if kv_per_seq is None else batch * kv_per_seq,
        bottleneck=bottleneck,
        fits_memory=fits,
        memory_ms=moving * 1e3,
        compute_ms=None if computing is None else computing * 1e3,
        comm_ms=comm * 1e3,
    )


def _notes(deployment: Deployment) -> list[str]:
    model, gpu = deployment.model, deployment.gpu
    notes: list[str] = []
    if deployment.kv_cache_bytes_per_seq is None:
        notes.append("KV cache unknown (model given by parameter count only): KV reads and the "
                     "KV part of capacity are left out.")
    if model.is_moe:
        notes.append(f"MoE: a decode step reads the {model.active_params / 1e9:.1f}B active parameters; "
                     f"all {model.total_params / 1e9:.1f}B stay resident.")
    if model.is_mla:
        notes.append(f"MLA: the KV cache holds one latent of {model.kv_lora_rank} + "
                     f"{model.qk_rope_head_dim} elements per layer and token.")
    mode = deployment.mode
    if model.embedding_params:
        notes.append(f"The untied input embedding ({model.embedding_params / 1e9:.2f}B parameters) is resident "
                     "but not read per token: bytes and FLOPs per token count "
                     f"{model.read_params / 1e9:.2f}B parameters.")
    compute_precision = deployment.compute_precision
    if compute_precision is None:
        if deployment.gpu.peak_flops:
            notes.append(f"{gpu.name} has no {' or '.join(mode.compute)} peak in the catalog, which "
                         f"{mode.name} ({mode.about}) needs: the compute bound is not evaluated"
                         + ("; for weight-only 8-bit use w8a16." if mode.weight_bytes == 1 else "."))
        else:
            notes.append("No peak FLOP/s given: the compute bound is not evaluated.")
    elif deployment.precision not in ("bf16", "w16a16", "fp16") or compute_precision != mode.compute[0]:
        notes.append(f"Precision {deployment.precision}: {mode.about}; compute at the {compute_precision} peak.")
    replication = deployment.kv_replication
    resident = deployment.kv_resident_bytes_per_seq
    if replication > 1 and resident is not None:
        why = "the MLA latent is copied to every GPU" if model.is_mla else \
            f"{model.kv_heads} KV heads over {deployment.tp} GPUs: heads are replicated"
        notes.append(f"TP {deployment.tp}: {why}, so the KV cache is held {replication:g}x "
                     f"({si(resident, 'B')} per sequence over all GPUs).")
    if deployment.memory_bytes is None:
        notes.append("No memory size given: capacity is not evaluated.")
    if deployment.tp > 1:
        if model.layers is None or model.hidden_size is None:
            notes.append(f"TP {deployment.tp}: model shape unknown, communication left out.")
        else:
            notes.append(f"TP {deployment.tp}: memory, bandwidth and compute x{deployment.tp}; per step "
                         f"2 x layers x (k-1)/k x batch x hidden x {deployment.activation_bytes:g} B "
                         f"over {si(deployment.link_bandwidth_used, 'B/s')} per direction.")
    return notes


def analyze(deployment: Deployment, batches: list[int] | None = None, *, prompt_tokens: int | None = None,
            max_tokens: int = 0) -> RooflineReport:
    """The first-principles bounds of a deployment at each batch size (default: batch 1);
    with `prompt_tokens`, also those of one such prompt (`prompt_bounds`, in `prompt`)."""
    sizes = [1] if batches is None else list(batches)
    for batch in sizes:
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise InputError(f"batch sizes must be positive whole numbers, got {batch!r}")
    single = _batch_row(deployment, 1)
    peak = deployment.peak_flops
    compute_ceiling = None if peak is None else \
        peak * deployment.compute_efficiency / deployment.flops_per_token
    model, gpu = deployment.model, deployment.gpu
    return RooflineReport(
        model=model.key,
        model_name=model.name,
        gpu=gpu.key,
        gpu_name=gpu.name,
        precision=deployment.precision,
        kv_precision=deployment.kv_precision_used,
        compute_precision=deployment.compute_precision,
        tp=deployment.tp,
        context=deployment.context,
        bandwidth_efficiency=deployment.bandwidth_efficiency,
        compute_efficiency=deployment.compute_efficiency,
        reserve_bytes=deployment.reserve_bytes,
        memory_bytes=deployment.memory_bytes,
        memory_bandwidth=deployment.bandwidth,
        peak_flops=peak,
        link_bandwidth=deployment.link_bandwidth_used,
        total_params=model.total_params,
        active_params=model.active_params,
        read_params=model.read_params,
        kv_layout=model.kv_layout,
        flops_per_token=deployment.flops_per_token,
        weight_bytes=deployment.weight_bytes,
        weight_bytes_read=deployment.weight_bytes_read,
        kv_bytes_per_token=deployment.kv_bytes_per_token,
        kv_cache_bytes_per_seq=deployment.kv_cache_bytes_per_seq,
        kv_replication=deployment.kv_replication,
        kv_resident_bytes_per_seq=deployment.kv_resident_bytes_per_seq,
        max_batch_by_memory=deployment.max_batch_by_memory,
        decode_ms_per_token=single.step_ms,
        ceiling_tps=single.ceiling_tps,
        compute_ceiling_tps=compute_ceiling,
        bottleneck=single.bottleneck,
        prefill_ms=deployment.prefill_seconds(deployment.context) * 1e3,
        batches=[_batch_row(deployment, batch) for batch in sizes],
        notes=_notes(deployment),
        fit=memory_fit(deployment),
        prompt=None if prompt_tokens is None else prompt_bounds(deployment, prompt_tokens, max_tokens),
    )


def parse_batches(text: str) -> list[int]:
    """Parse a batch list such as "1,8,64" into positive integers."""
    sizes: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) < 1:
            raise InputError(f"bad batch list '{text}': expected positive whole numbers "
                             "separated by commas, e.g. 1,8,64")
        sizes.append(int(part))
    return sizes


def c_model_from_first_principles(model_a: ModelSpec | str, model_b: ModelSpec | str,
                                  precision: str = "bf16", precision_b: str | None = None) -> float:
    """Predicted cost ratio C_model of b relative to a: weight bytes read per token
    (`ModelSpec.read_params` x bytes), b / a. A bandwidth-bound server's speed scales
    with 1/C_model."""
    spec_a = find_model(model_a) if isinstance(model_a, str) else model_a
    spec_b = find_model(model_b) if isinstance(model_b, str) else model_b
    bytes_a = weight_bytes(spec_a.read_params, precision)
    bytes_b = weight_bytes(spec_b.read_params, precision if precision_b is None else precision_b)
    return bytes_b / bytes_a


def simulator_params(deployment: Deployment) -> dict[str, float | int | None]:
    """Step-time constants for a simulator that takes its timing from the roofline:

        step(b) = max(base_step_seconds + b x per_sequence_seconds,
                      b x per_sequence_compute_seconds) + b x per_sequence_comm_seconds

    which equals the decode step of `analyze` at the deployment's context, and
    a prompt of P tokens takes about P x prefill_seconds_per_token (the prefill
    bound of a `context`-token prompt, spread over its tokens).

    per_sequence_seconds is the KV-cache read of one sequence at `context` tokens:
    context x per_context_token_seconds, the read of one token's KV cache (resident
    bytes per token / effective bandwidth). A simulator that follows each sequence's own
    length charges per_context_token_seconds x (its prompt + tokens so far) instead,

        step = max(base_step_seconds + per_context_token_seconds x sum of contexts,
                   b x per_sequence_compute_seconds) + b x per_sequence_comm_seconds,

    the same step when every sequence is at `context`; use one term or the other, never
    both (they are the same bytes). max_batch is `Deployment.max_batch_by_memory` at
    `context` (None: unknown); max_seqs the slot limit a simulator takes from it, at least 1
    (None when it is unknown).
    """
    kv_per_seq = deployment.kv_resident_bytes_per_seq or 0.0
    kv_per_token = deployment.kv_resident_bytes_per_token or 0.0
    peak = deployment.peak_flops
    max_batch = deployment.max_batch_by_memory
    return {
        "base_step_seconds": memory_seconds(deployment.weight_bytes_read, deployment.bandwidth,
                                            deployment.bandwidth_efficiency),
        "per_sequence_seconds": memory_seconds(kv_per_seq, deployment.bandwidth,
                                               deployment.bandwidth_efficiency),
        "per_context_token_seconds": memory_seconds(kv_per_token, deployment.bandwidth,
                                                    deployment.bandwidth_efficiency),
        "per_sequence_compute_seconds": None if peak is None else compute_seconds(
            deployment.flops_per_token, peak, deployment.compute_efficiency),
        "per_sequence_comm_seconds": deployment.comm_seconds(1),
        "prefill_seconds_per_token": deployment.prefill_seconds(deployment.context) / deployment.context,
        "context": deployment.context,
        "max_batch": max_batch,
        "max_seqs": None if max_batch is None else max(1, max_batch),
    }


# ---------------------------------------------------------------------------
# The catalog
# ---------------------------------------------------------------------------

_GPU_FIELDS = {"name", "aliases", "memory_bytes", "memory_bandwidth", "peak_flops",
               "link_bandwidth", "link", "sources"}
_GPU_REQUIRED = ("memory_bytes", "memory_bandwidth", "peak_flops", "link_bandwidth")
_MODEL_FIELDS = {"name", "aliases", "total_params", "active_params", "layers", "hidden_size",
                 "attention_heads", "kv_heads", "head_dim", "vocab_size", "kv_lora_rank",
                 "qk_rope_head_dim", "v_head_dim", "tie_word_embeddings", "native_precision", "sources"}
_MODEL_INTS = ("layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "vocab_size",
               "kv_lora_rank", "qk_rope_head_dim", "v_head_dim")
_TOP_FIELDS = {"schema", "about", "gpus", "models"}
_NAME_SUFFIXES = ("-instruct", "-chat")


def _normalise(name: str) -> str:
    return " ".join(name.strip().lower().split())


def alias_key(name: str) -> str:
    """The one rule a name is compared by, everywhere: surrounding spaces dropped,
    case folded, then an exact match against a catalog's alias list."""
    return name.strip().casefold()


def _forms(name: str, suffixes: bool = True) -> list[str]:
    """A listed name and the forms derived from it for the alias list: without an
    "org/" prefix, and with or without -instruct/-chat (the chat tunes share the shape).
    An org prefix a name is served under must itself be listed (as an alias)."""
    forms = [alias_key(name)]
    if "/" in forms[0]:
        forms.append(forms[0].rsplit("/", 1)[1])
    for form in list(forms) if suffixes else ():
        stripped = [form[: -len(suffix)] for suffix in _NAME_SUFFIXES if form.endswith(suffix)]
        forms.extend(stripped or [form + suffix for suffix in _NAME_SUFFIXES])
    return list(dict.fromkeys(forms))


@dataclass(frozen=True)
class Catalog:
    """GPUs and models by lower-case key, with aliases (normalised name -> key)."""

    gpus: Mapping[str, Gpu]
    models: Mapping[str, ModelSpec]
    gpu_aliases: Mapping[str, str]
    model_aliases: Mapping[str, str]

    def find_gpu(self, name: str) -> Gpu:
        return self.gpus[_lookup(name, self.gpus, self.gpu_aliases, "GPU")]

    def find_model(self, name: str) -> ModelSpec:
        return self.models[_lookup(name, self.models, self.model_aliases, "model")]


def _lookup(name: str, entries: Mapping[str, Any], aliases: Mapping[str, str], kind: str) -> str:
    found = aliases.get(alias_key(name))
    if found is not None:
        return found
    raise InputError(f"unknown {kind} '{name}'; known {kind}s: {', '.join(sorted(entries))}")


def _read_json(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read catalog: {exc.strerror or exc}", path=str(path)) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", path=str(path),
                         line=exc.lineno) from exc
    if not isinstance(data, dict):
        raise InputError("a catalog is a JSON object with \"gpus\" and/or \"models\"", path=str(path))
    unknown = set(data) - _TOP_FIELDS
    if unknown:
        raise InputError(f"unknown top-level keys: {', '.join(sorted(unknown))} "
                         f"(expected: {', '.join(sorted(_TOP_FIELDS))})", path=str(path))
    for section in ("gpus", "models"):
        if not isinstance(data.get(section, {}), dict):
            raise InputError(f"\"{section}\" must be an object keyed by name", path=str(path))
    return data


def _builtin_path() -> Path:
    return Path(str(resources.files("scm_xl") / "data" / "catalog.json"))


def _merge_section(base: dict[str, dict[str, Any]], extra: Mapping[str, Any], allowed: set[str],
                   path: Path, section: str, *, user: bool) -> None:
    """Merge entries into base, field by field. A field a user file sets without
    naming a source is credited to that file."""
    for raw_key, entry in extra.items():
        key = _normalise(raw_key)
        where = f"{section}.{raw_key}"
        if not isinstance(entry, dict):
            raise InputError("an entry must be a JSON object", path=str(path), column=where)
        unknown = set(entry) - allowed
        if unknown:
            raise InputError(f"unknown fields: {', '.join(sorted(unknown))} "
                             f"(allowed: {', '.join(sorted(allowed))})", path=str(path), column=where)
        aliases = entry.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(alias, str) for alias in aliases):
            raise InputError("aliases must be a list of strings", path=str(path), column=where)
        given_sources = entry.get("sources", {})
        if not isinstance(given_sources, dict) or not all(isinstance(v, str) for v in given_sources.values()):
            raise InputError("sources must be an object of field -> text", path=str(path), column=where)
        previous = base.get(key, {})
        merged = {**previous, **entry}
        sources = dict(previous.get("sources", {}))
        if user:
            sources.update({name: f"user catalog {path}" for name in entry
                            if name not in ("name", "aliases", "sources", "link")})
        sources.update(given_sources)
        merged["sources"] = sources
        merged["aliases"] = list(previous.get("aliases", [])) + aliases
        merged["_origin"] = str(path)
        base[key] = merged


def _number(entry: Mapping[str, Any], name: str, origin: str, where: str, *, integer: bool = False,
            required: bool = True) -> Any:
    value = entry.get(name)
    if value is None:
        if required:
            raise InputError(f"missing {name}", path=origin, column=where)
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise InputError(f"{name} must be a positive number, got {value!r}", path=origin, column=where)
    if integer:
        if value != int(value):
            raise InputError(f"{name} must be a whole number, got {value!r}", path=origin, column=where)
        return int(value)
    return value


def _build_gpu(key: str, entry: Mapping[str, Any]) -> Gpu:
    origin, where = entry.get("_origin", "catalog"), f"gpus.{key}"
    for name in _GPU_REQUIRED:
        if name not in entry:
            raise InputError(f"missing {name}", path=origin, column=where)
    peak = entry["peak_flops"]
    if not isinstance(peak, dict) or not peak:
        raise InputError("peak_flops must be an object of precision -> FLOP/s", path=origin, column=where)
    peak_flops = {}
    for precision, value in peak.items():
        if _normalise(precision) not in PEAK_PRECISIONS:
            raise InputError(f"peak_flops: unknown precision '{precision}' "
                             f"(known: {', '.join(PEAK_PRECISIONS)})", path=origin, column=where)
        peak_flops[_normalise(precision)] = _number(peak, precision, origin, f"{where}.peak_flops")
    return Gpu(
        key=key,
        name=str(entry.get("name", key)),
        memory_bytes=_number(entry, "memory_bytes", origin, where),
        memory_bandwidth=_number(entry, "memory_bandwidth", origin, where),
        peak_flops=peak_flops,
        link_bandwidth=_number(entry, "link_bandwidth", origin, where),
        link=str(entry.get("link", "")),
        sources=dict(entry.get("sources", {})),
    )


def _build_model(key: str, entry: Mapping[str, Any]) -> ModelSpec:
    origin, where = entry.get("_origin", "catalog"), f"models.{key}"
    total = _number(entry, "total_params", origin, where)
    active = _number(entry, "active_params", origin, where, required=False) or total
    shape = {name: _number(entry, name, origin, where, integer=True, required=False) for name in _MODEL_INTS}
    if shape["head_dim"] is None and shape["hidden_size"] and shape["attention_heads"]:
        shape["head_dim"] = shape["hidden_size"] // shape["attention_heads"]
    if shape["kv_heads"] is None and shape["kv_lora_rank"] is None:
        shape["kv_heads"] = shape["attention_heads"]
    tied = entry.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        raise InputError(f"tie_word_embeddings must be true or false, got {tied!r}", path=origin, column=where)
    native = entry.get("native_precision")
    if native is not None and (not isinstance(native, str) or native.strip().lower() not in PRECISION_BYTES):
        raise InputError(f"native_precision must be one of {', '.join(PRECISION_BYTES)}, got {native!r}",
                         path=origin, column=where)
    try:
        return ModelSpec(key=key, name=str(entry.get("name", key)), total_params=total,
                         active_params=active, tie_word_embeddings=tied, native_precision=native,
                         sources=dict(entry.get("sources", {})), **shape)
    except InputError as exc:
        raise InputError(exc.problem, path=origin, column=where) from exc


def _alias_map(entries: Mapping[str, Mapping[str, Any]], *, suffixes: bool) -> dict[str, str]:
    """The alias list: alias_key(form) -> key for every key, display name and alias of
    each entry and the forms derived from them. Keys win over names and names over
    aliases; among aliases the later (user) ones win."""
    out: dict[str, str] = {}
    for key, entry in entries.items():
        for alias in entry.get("aliases", []):
            for form in _forms(alias, suffixes):
                out[form] = key
    for key, entry in entries.items():
        for form in _forms(str(entry.get("name", key)), suffixes):
            out[form] = key
    for key in entries:
        for form in _forms(key, suffixes):
            out[form] = key
    return out


def load_catalog(extra: Path | None = None) -> Catalog:
    """The built-in catalog, merged with a user JSON file of the same schema.

    A user entry with a new key adds a GPU or model; one with an existing key
    overrides the fields it names. User aliases win over built-in ones. In a
    model entry only total_params is required: active_params defaults to it,
    head_dim to hidden_size / attention_heads, kv_heads to attention_heads
    (plain multi-head attention); without layers the KV cache is unknown. native_precision
    (a precision name, e.g. "fp8" for DeepSeek-V3) is what `roofline` uses without --precision.
    """
    builtin_path = _builtin_path()
    builtin = _read_json(builtin_path)
    user = None if extra is None else _read_json(Path(extra))
    sections: dict[str, dict[str, dict[str, Any]]] = {"gpus": {}, "models": {}}
    for section, allowed in (("gpus", _GPU_FIELDS), ("models", _MODEL_FIELDS)):
        _merge_section(sections[section], builtin.get(section, {}), allowed, builtin_path, section,
                       user=False)
        if user is not None and extra is not None:
            _merge_section(sections[section], user.get(section, {}), allowed, Path(extra), section,
                           user=True)
    return Catalog(
        gpus={key: _build_gpu(key, entry) for key, entry in sorted(sections["gpus"].items())},
        models={key: _build_model(key, entry) for key, entry in sorted(sections["models"].items())},
        gpu_aliases=_alias_map(sections["gpus"], suffixes=False),
        model_aliases=_alias_map(sections["models"], suffixes=True),
    )


def find_gpu(name: str, catalog: Catalog | None = None) -> Gpu:
    """A GPU by key or alias, case-insensitively; InputError listing the known GPUs on a miss."""
    return (catalog or load_catalog()).find_gpu(name)


def find_model(name: str, catalog: Catalog | None = None) -> ModelSpec:
    """A model by key, alias or Hugging Face repo name, case-insensitively; InputError on a miss."""
    return (catalog or load_catalog()).find_model(name)


__all__ = [
    "ADHOC_LINK_BANDWIDTH", "BatchRow", "alias_key", "Catalog", "DEFAULT_CONTEXT", "DEFAULT_PRECISION", "Deployment",
    "ELEMENT_BYTES", "FIT_ASSUMPTION", "FIT_PRECISIONS", "GB", "Gpu", "MAX_FIT_GPUS", "MemoryFit", "memory_fit",
    "NO_FIT_PROMPT_KEYS", "NO_FIT_REPORT_KEYS", "NO_FIT_ROW_KEYS", "PrecisionChoice", "choose_precision", "si",
    "ModelSpec", "PEAK_PRECISIONS", "PRECISION_ALIASES", "PRECISION_BYTES", "PRECISION_MODES", "PrecisionMode",
    "RooflineReport", "kv_replication", "precision_mode", "UNITS", "analyze", "attention_flops_linear",
    "attention_flops_quadratic", "c_model_from_first_principles", "compute_seconds",
    "decode_step_seconds", "find_gpu", "find_model", "flops_per_token", "kv_bytes_per_token",
    "kv_cache_bytes_per_seq", "load_catalog", "max_batch_by_memory", "memory_seconds",
    "parse_batches", "precision_bytes", "prefill_seconds", "PROMPT_UNITS", "PromptBounds", "prompt_bounds",
    "simulator_params",
    "tp_comm_seconds", "training_flops_per_token", "weight_bytes",
]
