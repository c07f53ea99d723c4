"""Physics facts with one home each, built on scm_xl.roofline.

- The physics catalog (`PhysicsCatalog`): catalog entries by numeric id and the
  alias list names resolve through, the same list the workbook's alias tables
  hold. Names compare by `roofline.alias_key` (trimmed, case-folded, exact).
- Per-model figures the per-row physics checks use (`per_token_figures`):
  resident weight bytes, weight bytes read per token, KV bytes per token.
- C_model from first principles (`c_model_first_principles`): the ratio of
  weight bytes read per token.
- A model's shape from a Hugging Face `config.json` on disk
  (`model_from_config`): parameters counted from the tensor shapes the
  config implies, active parameters for MoE, the KV layout (MHA, GQA, MLA),
  its name (`config_name`: `_name_or_path`, `architectures`, `model_type`)
  and native precision (`config_precision`: quantization_config, torch_dtype).

No network, no workbook: the workbook's catalog tables (scm_xl.workbook.
catalog_tables) and the Python reference (scm_xl.model) both import from here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping

from scm_xl.errors import InputError
from scm_xl.roofline import (
    Catalog, Gpu, ModelSpec, alias_key, c_model_from_first_principles, kv_bytes_per_token, load_catalog,
    precision_bytes,
)

# ---------------------------------------------------------------------------
# The physics catalog: ids and the alias list
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PhysicsCatalog:
    """Catalog entries by id, and the alias lists both sides resolve names with."""

    gpus: tuple[tuple[str, Gpu], ...]  # (key, gpu), id = index + 1
    models: tuple[tuple[str, ModelSpec], ...]
    gpu_aliases: tuple[tuple[str, int], ...]
    model_aliases: tuple[tuple[str, int], ...]
    # alias_key(alias) -> id, built once: a fill looks a name up for every row
    _model_ids: dict[str, int] = field(init=False, repr=False, compare=False)
    _gpu_ids: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_model_ids", _id_map(self.model_aliases))
        object.__setattr__(self, "_gpu_ids", _id_map(self.gpu_aliases))

    def model_id(self, name: str | None) -> int:
        return 0 if not name or not name.strip() else self._model_ids.get(alias_key(name), 0)

    def gpu_id(self, name: str | None) -> int:
        return 0 if not name or not name.strip() else self._gpu_ids.get(alias_key(name), 0)

    def model(self, name: str | None) -> ModelSpec | None:
        i = self.model_id(name)
        return self.models[i - 1][1] if i else None

    def gpu(self, name: str | None) -> Gpu | None:
        i = self.gpu_id(name)
        return self.gpus[i - 1][1] if i else None


def resolve_id(name: str | None, aliases: tuple[tuple[str, int], ...]) -> int:
    """The id a name resolves to through an alias list (0 = unknown)."""
    if not name or not name.strip():
        return 0
    key = alias_key(name)
    for alias, i in aliases:
        if alias_key(alias) == key:
            return i
    return 0


def _id_map(aliases: tuple[tuple[str, int], ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for alias, i in aliases:
        out.setdefault(alias_key(alias), i)  # the first listing wins, as resolve_id's scan does
    return out


def _literal(alias: str) -> bool:
    """Whether an alias means itself in spreadsheet criteria (no wildcard or operator). Bare
    numbers ("4090") stay: the results reader refuses numeric model and GPU names in rows,
    so a row never looks one up through SUMIFS, and the calculator matches names exactly."""
    return not (alias.startswith(("=", "<", ">")) or any(ch in alias for ch in "*?~") or alias != alias.strip())


def _alias_list(keys: list[str], aliases: Mapping[str, str]) -> tuple[tuple[str, int], ...]:
    """(alias, id) for every alias of the catalog's alias list, ids in key order."""
    ids = {key: i for i, key in enumerate(keys, start=1)}
    return tuple((alias, ids[key]) for alias, key in sorted(aliases.items(), key=lambda kv: (ids[kv[1]], kv[0]))
                 if key in ids and _literal(alias))


def physics_catalog(catalog: Catalog | None = None) -> PhysicsCatalog:
    """The physics catalog of a catalog (default: the built-in one, cached)."""
    if catalog is None:
        return _builtin()
    gpus = sorted(catalog.gpus.items())
    models = sorted(catalog.models.items())
    return PhysicsCatalog(gpus=tuple(gpus), models=tuple(models),
                          gpu_aliases=_alias_list([k for k, _ in gpus], catalog.gpu_aliases),
                          model_aliases=_alias_list([k for k, _ in models], catalog.model_aliases))


@lru_cache(maxsize=1)
def _builtin() -> PhysicsCatalog:
    return physics_catalog(load_catalog())


# ---------------------------------------------------------------------------
# Per-model figures
# ---------------------------------------------------------------------------


def per_token_figures(spec: ModelSpec, nbytes: float) -> dict[str, float]:
    """What the per-row physics checks look up for a model at `nbytes` per weight and KV
    element: resident weight bytes, weight bytes read per token, KV bytes per token."""
    kv = kv_bytes_per_token(spec, nbytes)
    return {"phys_weight_bytes": spec.total_params * nbytes, "phys_read_bytes": spec.read_params * nbytes,
            "phys_kv_bytes_per_token": 0.0 if kv is None else kv}


def single_stream_ceiling(gpu: Gpu, spec: ModelSpec, nbytes: float) -> float:
    """Tokens/s one stream cannot beat: bandwidth / weight bytes read per token."""
    return gpu.memory_bandwidth / per_token_figures(spec, nbytes)["phys_read_bytes"]


def c_model_first_principles(base: ModelSpec, model: ModelSpec, precision: str = "bf16") -> float:
    """C_model of `model` relative to `base` from first principles: the ratio of weight
    bytes read per token (a bandwidth-bound server's speed scales with 1 / C_model)."""
    return c_model_from_first_principles(base, model, precision)


def c_model_table(base_name: str | None, names: list[str], catalog: PhysicsCatalog | None = None) -> dict[str, float]:
    """C_model from first principles of each name the catalog knows, relative to base_name."""
    pc = catalog or physics_catalog()
    base = pc.model(base_name) if base_name else None
    if base is None:
        return {}
    out = {}
    for name in names:
        spec = pc.model(name)
        if spec is not None:
            out[name] = c_model_first_principles(base, spec)
    return out


# ---------------------------------------------------------------------------
# A Hugging Face config.json
# ---------------------------------------------------------------------------


def _int(config: Mapping[str, Any], name: str, path: str, *, default: int | None = None) -> int:
    value = config.get(name, default)
    if value is None:
        raise InputError(f"config.json has no {name}", path=path, column=name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{name} must be a whole number >= 0, got {value!r}", path=path, column=name)
    return value


def _read_config(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read config: {exc.strerror or exc}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise InputError("not a UTF-8 text file", path=str(path)) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg} (column {exc.colno})", path=str(path), line=exc.lineno) from exc
    if not isinstance(data, dict):
        raise InputError("a config.json is a JSON object", path=str(path))
    # Multimodal configs nest the language model's shape.
    if "hidden_size" not in data and isinstance(data.get("text_config"), dict):
        data = {**data, **data["text_config"]}
    return data


@dataclass(frozen=True)
class ConfigCount:
    """Parameters counted from a config's tensor shapes."""

    total: int
    active: int
    attention: str  # "MHA", "GQA" or "MLA"


def count_params(config: Mapping[str, Any], path: str = "config.json") -> ConfigCount:
    """Total and active parameters of a decoder from its config.json, counted tensor by tensor.

    Dense (Llama, Mistral, Qwen2/2.5, Qwen3), MoE with routed experts (Mixtral, Qwen2-MoE,
    Qwen3-MoE) and DeepSeek-V2/V3 (MLA, shared and routed experts, first_k_dense_replace
    dense layers). Norm weights and q/k/v biases are counted; rotary tables are buffers,
    not parameters; a DeepSeek-V3 multi-token-prediction module is not part of the model
    served for decoding and is left out.
    """
    d = _int(config, "hidden_size", path)
    layers = _int(config, "num_hidden_layers", path)
    vocab = _int(config, "vocab_size", path)
    heads = _int(config, "num_attention_heads", path)
    model_type = str(config.get("model_type", "")).lower()
    tied = bool(config.get("tie_word_embeddings", False))
    embed = vocab * d
    total = embed + (0 if tied else vocab * d) + d  # embeddings, LM head, final norm
    active = total
    if "kv_lora_rank" in config and config.get("kv_lora_rank"):
        attention_kind = "MLA"
        rank = _int(config, "kv_lora_rank", path)
        rope = _int(config, "qk_rope_head_dim", path)
        nope = _int(config, "qk_nope_head_dim", path)
        v_dim = _int(config, "v_head_dim", path)
        q_rank = config.get("q_lora_rank")
        qk = heads * (nope + rope)
        if q_rank:
            q = d * q_rank + q_rank + q_rank * qk  # q_a_proj, q_a_layernorm, q_b_proj
        else:
            q = d * qk
        attention = q + d * (rank + rope) + rank + rank * heads * (nope + v_dim) + heads * v_dim * d
    else:
        kv_heads = _int(config, "num_key_value_heads", path, default=heads)
        head_dim = _int(config, "head_dim", path, default=d // heads if heads else 0)
        attention_kind = "MHA" if kv_heads == heads else "GQA"
        q_out, kv_out = heads * head_dim, kv_heads * head_dim
        attention = d * q_out + 2 * d * kv_out + q_out * d
        if model_type in ("qwen2", "qwen2_moe") or config.get("attention_bias"):
            attention += q_out + 2 * kv_out + (d if config.get("attention_bias") and model_type not in
                                               ("qwen2", "qwen2_moe") else 0)
        if model_type in ("qwen3", "qwen3_moe"):
            attention += 2 * head_dim  # q_norm, k_norm
    norms = 2 * d
    dense_mlp = 3 * d * _int(config, "intermediate_size", path)
    if config.get("mlp_bias"):
        dense_mlp += 2 * _int(config, "intermediate_size", path) + d
    experts = config.get("n_routed_experts") or config.get("num_local_experts") or config.get("num_experts")
    for layer in range(layers):
        total += attention + norms
        active += attention + norms
        if not experts or not _is_moe_layer(config, layer, path):
            total += dense_mlp
            active += dense_mlp
            continue
        n_experts = _int(config, "n_routed_experts" if "n_routed_experts" in config else
                         "num_local_experts" if "num_local_experts" in config else "num_experts", path)
        per_token = _int(config, "num_experts_per_tok", path)
        expert_size = _int(config, "moe_intermediate_size", path,
                           default=config.get("intermediate_size"))
        expert = 3 * d * expert_size
        router = d * n_experts + (n_experts if model_type == "deepseek_v3" else 0)  # V3: score-correction bias
        shared = 0
        if config.get("n_shared_experts"):
            shared = _int(config, "n_shared_experts", path) * expert
        if config.get("shared_expert_intermediate_size"):
            shared += 3 * d * _int(config, "shared_expert_intermediate_size", path) + d  # + shared_expert_gate
        total += router + shared + n_experts * expert
        active += router + shared + per_token * expert
    return ConfigCount(total=total, active=active, attention=attention_kind)


def _is_moe_layer(config: Mapping[str, Any], layer: int, path: str) -> bool:
    if "first_k_dense_replace" in config:  # DeepSeek
        freq = _int(config, "moe_layer_freq", path, default=1) or 1
        return layer >= _int(config, "first_k_dense_replace", path) and layer % freq == 0
    if layer in (config.get("mlp_only_layers") or []):  # Qwen MoE
        return False
    step = config.get("decoder_sparse_step", 1) or 1
    return (layer + 1) % step == 0


UNNAMED_CONFIG = "unnamed model (its config.json gives no _name_or_path, architectures or model_type)"
"""The name of a config that names nothing: never the file's name, which is usually just config.json."""


def config_name(config: Mapping[str, Any]) -> tuple[str, str]:
    """(key, display name) of a config's model: the last part of `_name_or_path` (the repo it was
    saved from) with `architectures[0]` (else `model_type`) in brackets, e.g.
    ("deepseek-v3", "DeepSeek-V3 (DeepseekV3ForCausalLM)"); either alone when only one is given.
    Never the file or folder name: a downloaded config is called config.json wherever it lies."""
    architectures = config.get("architectures")
    kind = next((a.strip() for a in architectures if isinstance(a, str) and a.strip()), "") \
        if isinstance(architectures, list) else ""
    if not kind and isinstance(config.get("model_type"), str):
        kind = config["model_type"].strip()
    origin = config.get("_name_or_path")
    base = origin.strip().rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] if isinstance(origin, str) else ""
    if base and kind:
        return alias_key(base), f"{base} ({kind})"
    if base or kind:
        return alias_key(base or kind), base or kind
    return "config", UNNAMED_CONFIG


TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}
"""config.json torch_dtype (or dtype) -> precision name."""


def config_precision(config: Mapping[str, Any]) -> tuple[str | None, str]:
    """The precision a config's weights are released in, and the config's words for it.

    quantization_config wins over torch_dtype (DeepSeek-V3: torch_dtype bfloat16 for the
    unquantized tensors, quant_method fp8 for the weights): fp8 / fbgemm_fp8 -> fp8; awq, gptq
    (and their marlin forms) by `bits` -> w4a16 or w8a16; bitsandbytes 4-bit -> w4a16, 8-bit ->
    int8; compressed-tensors by its first group's weight bits and type, activations quantized or
    not -> w8a8-fp8, w8a8-int8, w8a16 or w4a16; mxfp4 (gpt-oss: the MoE experts) -> w4a16 for
    every weight, which understates the 16-bit rest (said in the words). Without a
    quantization_config, torch_dtype. (None, words) when the config states a precision
    not listed here (the caller asks for --precision); (None, "") when it states none.
    """
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        method = str(quant.get("quant_method", "")).strip().lower()
        words = f"quantization_config quant_method {method or '(none)'}"
        precision: str | None = None
        if method in ("fp8", "fbgemm_fp8"):
            precision = "fp8"
            if quant.get("fmt"):
                words += f", fmt {quant['fmt']}"
        elif method in ("awq", "gptq", "awq_marlin", "gptq_marlin"):
            bits = quant.get("bits", quant.get("w_bit"))
            words += f", bits {bits}"
            precision = {4: "w4a16", 8: "w8a16"}.get(bits) if isinstance(bits, int) else None
        elif method == "bitsandbytes":
            if quant.get("load_in_4bit"):
                precision, words = "w4a16", words + ", load_in_4bit"
            elif quant.get("load_in_8bit"):
                precision, words = "int8", words + ", load_in_8bit"
        elif method == "compressed-tensors":
            precision, detail = _compressed_tensors(quant)
            words += detail
        elif method == "mxfp4":
            precision = "w4a16"
            words += (" (MoE expert weights in 4-bit MXFP4, taken here for every weight: the 16-bit "
                      "attention and embeddings make the real bytes larger)")
        if precision is None:
            return None, f"{words} is not a quantization roofline reads"
        return precision, words
    if quant is not None:
        return None, "quantization_config is not a JSON object"
    dtype = config.get("torch_dtype", config.get("dtype"))
    if dtype is None:
        return None, ""
    name = TORCH_DTYPES.get(str(dtype).strip().lower().removeprefix("torch."))
    if name is None:
        return None, f"torch_dtype {dtype} is not one roofline reads ({', '.join(TORCH_DTYPES)})"
    return name, f"torch_dtype {dtype}, no quantization_config"


def _compressed_tensors(quant: Mapping[str, Any]) -> tuple[str | None, str]:
    groups = quant.get("config_groups")
    group = next(iter(groups.values()), None) if isinstance(groups, dict) and groups else None
    weights = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(weights, dict):
        return None, " (no config_groups weights)"
    bits, kind = weights.get("num_bits"), str(weights.get("type", "")).lower()
    activations = isinstance(group, dict) and isinstance(group.get("input_activations"), dict)
    detail = f", weights {bits}-bit {kind}" + (", activations quantized" if activations else ", weight-only")
    if bits == 8 and activations:
        return {"float": "w8a8-fp8", "int": "w8a8-int8"}.get(kind), detail
    if bits in (4, 8) and not activations:
        return ("w4a16" if bits == 4 else "w8a16"), detail
    return None, detail


def model_from_config(path: str | Path, *, key: str | None = None) -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json on disk (no network): its shape, its name
    (`config_name`) and its native precision (`config_precision`, with the config's words in
    sources["native_precision"])."""
    path = Path(path)
    config = _read_config(path)
    where = str(path)
    count = count_params(config, where)
    heads = _int(config, "num_attention_heads", where)
    d = _int(config, "hidden_size", where)
    name_key, name = config_name(config)
    native, words = config_precision(config)
    source = f"counted from the tensor shapes in {path}"
    shape: dict[str, Any] = {
        "layers": _int(config, "num_hidden_layers", where), "hidden_size": d, "attention_heads": heads,
        "vocab_size": _int(config, "vocab_size", where),
    }
    if count.attention == "MLA":
        nope, rope = _int(config, "qk_nope_head_dim", where), _int(config, "qk_rope_head_dim", where)
        shape.update(kv_heads=_int(config, "num_key_value_heads", where, default=heads), head_dim=nope + rope,
                     kv_lora_rank=_int(config, "kv_lora_rank", where), qk_rope_head_dim=rope,
                     v_head_dim=_int(config, "v_head_dim", where))
    else:
        shape.update(kv_heads=_int(config, "num_key_value_heads", where, default=heads),
                     head_dim=_int(config, "head_dim", where, default=d // heads if heads else 0))
    sources = {field: source for field in ("total_params", "active_params", *shape)}
    if words:
        sources["native_precision"] = f"{path}: {words}"
    try:
        return ModelSpec(key=key or name_key, name=name,
                         total_params=float(count.total), active_params=float(count.active),
                         tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
                         native_precision=native, sources=sources, **shape)
    except InputError as exc:
        raise InputError(exc.problem, path=where) from exc


def kv_bytes_per_token_at(spec: ModelSpec, precision: str) -> float | None:
    """KV bytes per token at a precision name (roofline.kv_bytes_per_token by name)."""
    return kv_bytes_per_token(spec, precision_bytes(precision))


__all__ = [
    "ConfigCount", "PhysicsCatalog", "TORCH_DTYPES", "UNNAMED_CONFIG", "c_model_first_principles", "c_model_table",
    "config_name", "config_precision", "count_params",
    "kv_bytes_per_token", "kv_bytes_per_token_at", "model_from_config", "per_token_figures", "physics_catalog",
    "resolve_id", "single_stream_ceiling",
]
