"""The first-principles calculator: scm_xl.roofline as live formulas (rows 1-55 of the sheet).

Long because the calculator's layout, its formulas and its expected values are one unit: each
formula sits next to the roofline figure it must equal.

Hand-set inputs sit in column B (pale yellow; blank = catalog value or default),
their effective values in C; below them, column C resolves names to catalog ids
and figures (0 = unknown). The results sit in column G. Every figure is SI:
bytes, bytes/s, FLOP, FLOP/s, milliseconds; GB = 1e9 bytes.

Names resolve through the alias tables by exact, case-insensitive equality,
`SUMPRODUCT((alias_col=""&name)*id_col)`, not SUMIFS: SUMIFS criteria apply
wildcards (`qwen*`) and comparison prefixes, and the engines disagree on a
numeric name (formulas matches 4090 to the text "4090", LibreOffice does not).
A name with spaces around it does not resolve (there is no TRIM the engines
agree on); `expected_calculator` mirrors that.

Each formula repeats scm_xl.roofline's order of operations, so the engines
produce the same doubles as Python. One known limit: LibreOffice snaps
nearly equal results (3 - 2^-51 gives 3, and INT/FLOOR/TRUNC all follow), so
max batch by memory can differ by one from Python's floor when
(memory - weights) / KV lands within about 1e-15 of a whole number.

Cells are laid out here, not in layout.py, because nothing else on the
workbook refers to them except through the defined names `write_calculator`
returns.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, TypeGuard, cast

from openpyxl.styles import Alignment
from openpyxl.worksheet.datavalidation import DataValidation
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.engines.base import CellValue
from scm_xl.roofline import (
    ADHOC_LINK_BANDWIDTH, DEFAULT_CONTEXT, GB, PEAK_PRECISIONS, PRECISION_BYTES, SI_PREFIXES, Deployment, Gpu,
    ModelSpec, analyze,
    attention_flops_linear, attention_flops_quadratic, precision_bytes, training_flops_per_token,
)
from scm_xl.workbook.catalog_tables import TABLES_FIRST_ROW, CatalogLayout, precision_rows
from scm_xl.workbook.styles import (
    BOLD, DEFAULT_FONT_SIZE, FORMULA_FILL, HEADER_FILL, HEADER_FONT, INPUT_FILL, KEY_FILL, TITLE_FONT, fit_row,
    wrapped_note, write_value,
)
from scm_xl.workbook.literals import q as _q

# ---------------------------------------------------------------------------
# Where things are
# ---------------------------------------------------------------------------

LABEL_COL, INPUT_COL, EFFECTIVE_COL, UNIT_COL = "A", "B", "C", "D"
OUT_LABEL_COL, OUT_COL, OUT_UNIT_COL = "F", "G", "H"
TITLE_ROW, NOTE_ROW, HEADER_ROW = 1, 2, 3

INPUT_KEYS = ("model", "gpu", "precision", "kv_precision", "context", "batch", "tp", "bandwidth_efficiency",
              "compute_efficiency", "prompt_tokens", "params_b", "bandwidth_gbs", "tflops", "memory_gb")
INPUT_ROWS = {key: 4 + i for i, key in enumerate(INPUT_KEYS)}  # rows 4-17

RESOLVED_HEADER_ROW = 19
RESOLVED_KEYS = ("model_id", "gpu_id", "weight_bytes_per_param", "kv_bytes_per_element", "inputs_valid", "ready",
                 "layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "v_head_dim", "kv_lora_rank",
                 "qk_rope_head_dim", "vocab_size", "tie_word_embeddings", "attention_width", "kv_replication",
                 "active_params", "total_params", "read_params", "gpu_memory", "gpu_bandwidth", "compute_1",
                 "compute_2", "peak_1", "peak_2", "compute_precision", "gpu_peak", "link_bandwidth")
RESOLVED_ROWS = {key: RESOLVED_HEADER_ROW + 1 + i for i, key in enumerate(RESOLVED_KEYS)}  # rows 20-49

# Results in column G; None marks a sub-heading row (label only).
OUTPUT_LAYOUT: tuple[str | None, ...] = (
    "status", "active_params", "total_params", "read_params", "bytes_per_weight", "flops_per_token",
    "training_flops_per_token", "attention_linear_flops", "attention_quadratic_flops", "weight_bytes",
    "weight_bytes_read", "kv_bytes_per_token", "kv_bytes_per_seq", "kv_replication", "memory_bytes", "bandwidth",
    "peak_flops", "max_batch_by_memory",
    None, "memory_ms_1", "compute_ms_1", "comm_ms_1", "decode_ms_per_token", "ceiling_tps", "bottleneck_1",
    None, "kv_bytes_b", "memory_ms_b", "compute_ms_b", "comm_ms_b", "step_ms_b", "ceiling_tps_b",
    "per_stream_tps_b", "bottleneck_b", "fits_memory_b",
    None, "prefill_ms", "compute_ceiling_tps",
)
OUTPUT_FIRST_ROW = 4
OUTPUT_ROWS = {key: OUTPUT_FIRST_ROW + i for i, key in enumerate(OUTPUT_LAYOUT) if key is not None}
SUBHEADING_ROWS = tuple(OUTPUT_FIRST_ROW + i for i, key in enumerate(OUTPUT_LAYOUT) if key is None)
LAST_ROW = max(OUTPUT_FIRST_ROW + len(OUTPUT_LAYOUT) - 1, max(RESOLVED_ROWS.values()))
assert LAST_ROW <= 55 < TABLES_FIRST_ROW

DEFAULT_INPUTS: dict[str, object] = {
    "model": "qwen2.5-7b", "gpu": "a100-80gb", "precision": "bf16", "kv_precision": None,
    "context": DEFAULT_CONTEXT, "batch": 8, "tp": 1, "bandwidth_efficiency": 1, "compute_efficiency": 1,
    "prompt_tokens": 512, "params_b": None, "bandwidth_gbs": None, "tflops": None, "memory_gb": None,
}
"""What the builder writes into the input cells."""

BLANK_DEFAULTS = {"context": DEFAULT_CONTEXT, "batch": 8, "tp": 1, "bandwidth_efficiency": 1,
                  "compute_efficiency": 1, "prompt_tokens": 512}
"""What a blank numeric input means."""

DEFINED_NAMES = {
    "FP_FlopsPerToken": "flops_per_token",
    "FP_WeightBytes": "weight_bytes",
    "FP_DecodeMsPerToken": "decode_ms_per_token",
    "FP_CeilingTPS": "ceiling_tps",
    "FP_KVBytesPerSeq": "kv_bytes_per_seq",
    "FP_MaxBatchByMemory": "max_batch_by_memory",
    "FP_Bottleneck": "bottleneck_b",
    "FP_CeilingTPSAtBatch": "ceiling_tps_b",
}
"""Workbook-scoped names -> output keys. FP_Bottleneck is the bottleneck at the input batch b."""

SHAPE_KEYS = ("layers", "hidden_size", "attention_heads", "kv_heads", "head_dim", "v_head_dim", "kv_lora_rank",
              "qk_rope_head_dim", "vocab_size", "tie_word_embeddings")
"""Resolved rows read straight from the model table (0 = unknown or none)."""

TABLE_PEAKS = PEAK_PRECISIONS
"""The peak FLOP/s columns the catalog table has: every peak a catalog GPU may give."""


def input_cell(key: str) -> str:
    return f"{INPUT_COL}{INPUT_ROWS[key]}"


def effective_cell(key: str) -> str:
    return f"{EFFECTIVE_COL}{INPUT_ROWS[key]}"


def resolved_cell(key: str) -> str:
    return f"{EFFECTIVE_COL}{RESOLVED_ROWS[key]}"


def output_cell(key: str) -> str:
    return f"{OUT_COL}{OUTPUT_ROWS[key]}"


def defined_names() -> dict[str, str]:
    """Defined name -> "A1" address on the first-principles sheet."""
    return {name: output_cell(key) for name, key in DEFINED_NAMES.items()}


# ---------------------------------------------------------------------------
# Words
# ---------------------------------------------------------------------------

TEXTS = {
    "zh": {
        "title": "第一性原理：推理性能的理论上限（roofline）",
        "note": "数值带十进制 SI 前缀，与 scm-xl roofline 的输出一致（GB = 1e9 字节，TFLOP/s = 1e12 FLOP/s；参数以十亿 B 计），"
                "时间以毫秒计。黄色 = 输入（留空 = 用目录值或默认值），"
                "灰色 = 公式。模型与 GPU 按名称（不区分大小写，需完全一致）在第 60 行起的目录表和别名表中查找。",
        "inputs": "输入", "hand_set": "手工输入", "effective": "生效值", "unit": "单位 / 说明",
        "resolved": "解析结果（来自目录表或手工数值；0 = 未知）",
        "results": "结果", "value": "数值",
        "sub_1": "解码：批大小 1（单流）", "sub_b": "解码：批大小 b（输入第 9 行）", "sub_other": "预填充与算力上限",
        "custom": "custom",
        "ok": "正常",
        "bad_precision": "未知精度：可选 w16a16(bf16)、fp16、w8a8、w8a8-fp8(fp8)、w8a8-int8(int8)、w8a16、w4a16(int4)、fp32",
        "bad_kv_precision": "未知 KV 精度：可选 fp32、bf16、fp16、fp8、int8、int4，或留空",
        "bad_number": "T、b、k、P 须为 ≥1 的整数；效率在 (0, 1] 内；覆盖值须 > 0",
        "unknown_model": "未知模型名：请从下拉列表选择（别名表中的别名也可）",
        "no_model": "未指定模型：请选择模型，或填写参数量覆盖",
        "unknown_gpu": "未知 GPU 名：请从下拉列表选择（别名表中的别名也可）",
        "no_gpu": "未指定 GPU：请选择 GPU，或填写显存带宽覆盖 (GB/s)",
    },
    "en": {
        "title": "First principles: the roofline bounds of inference",
        "note": "Figures carry decimal SI prefixes as scm-xl roofline prints them (GB = 1e9 bytes, TFLOP/s = 1e12 "
                "FLOP/s; parameters in billions, B); times in milliseconds. Yellow = input (blank = "
                "catalog value or default), grey = formula. Model and GPU names are looked up (case-insensitive, "
                "exact) in the catalog and alias tables from row 60.",
        "inputs": "inputs", "hand_set": "hand-set", "effective": "effective", "unit": "unit / note",
        "resolved": "resolved (from the catalog tables or the typed figures; 0 = unknown)",
        "results": "results", "value": "value",
        "sub_1": "decode at batch 1 (one stream)", "sub_b": "decode at batch b (input row 9)",
        "sub_other": "prefill and the compute ceiling",
        "custom": "custom",
        "ok": "ok",
        "bad_precision": "unknown precision: use w16a16 (bf16), fp16, w8a8, w8a8-fp8 (fp8), w8a8-int8 (int8), "
                         "w8a16, w4a16 (int4) or fp32",
        "bad_kv_precision": "unknown KV precision: use fp32, bf16, fp16, fp8, int8 or int4, or leave it blank",
        "bad_number": "T, b, k and P must be whole numbers ≥ 1, efficiencies in (0, 1], overrides > 0",
        "unknown_model": "unknown model name: pick one from the list (aliases from the alias table work too)",
        "no_model": "no model: pick one, or type the parameter override",
        "unknown_gpu": "unknown GPU name: pick one from the list (aliases from the alias table work too)",
        "no_gpu": "no GPU: pick one, or type the bandwidth override (GB/s)",
    },
}

# key -> (zh label, en label, unit)
LABELS: dict[str, tuple[str, str, str]] = {
    "model": ("模型（下拉选择或输入别名）", "model (pick from the list or type an alias)", "blank = parameter override only"),
    "gpu": ("GPU（下拉选择或输入别名）", "GPU (pick from the list or type an alias)", "blank = typed figures only"),
    "precision": ("精度（权重与激活）", "precision (weights and activations)",
                  "w16a16=bf16 / fp16 / w8a8 / fp8 / int8 / w8a16 / w4a16=int4 / fp32"),
    "kv_precision": ("KV 缓存精度（留空 = 随激活）", "KV-cache precision (blank = activations')",
                     "blank: bf16, or fp16/fp32 with such weights"),
    "context": ("上下文长度 T", "context length T", "tokens"),
    "batch": ("批大小 b", "batch size b", "sequences"),
    "tp": ("张量并行 k", "tensor parallelism k", "GPUs"),
    "bandwidth_efficiency": ("带宽效率", "bandwidth efficiency", "(0, 1]; 1 = the pure bound"),
    "compute_efficiency": ("算力效率", "compute efficiency", "(0, 1]; 1 = the pure bound"),
    "prompt_tokens": ("预填充提示长度 P", "prompt tokens P (prefill)", "tokens"),
    "params_b": ("覆盖：参数量（十亿）", "override: parameters (billions)", "effective: parameters; total = active"),
    "bandwidth_gbs": ("覆盖：显存带宽 GB/s（每卡）", "override: memory bandwidth, GB/s per GPU", "effective: bytes/s"),
    "tflops": ("覆盖：稠密算力 TFLOP/s（每卡）", "override: dense TFLOP/s per GPU",
               "effective: FLOP/s, used at any precision"),
    "memory_gb": ("覆盖：显存 GB（每卡）", "override: memory, GB per GPU", "effective: bytes (GB = 1e9 bytes)"),
    # resolved
    "model_id": ("模型编号（别名表）", "model id (alias table)", "0 = not found"),
    "gpu_id": ("GPU 编号（别名表）", "GPU id (alias table)", "0 = not found"),
    "weight_bytes_per_param": ("每个权重的字节数", "bytes per weight", "bytes; 0 = unknown precision"),
    "kv_bytes_per_element": ("每个 KV 元素的字节数（亦为激活字节）", "bytes per KV element (and activation)",
                             "bytes; 0 = unknown precision"),
    "inputs_valid": ("数值输入有效", "numeric inputs valid", "1 = yes"),
    "ready": ("可以计算", "ready to compute", "1 = yes"),
    "layers": ("层数 L", "layers L", ""),
    "hidden_size": ("隐藏维度 d", "hidden size d", ""),
    "attention_heads": ("注意力头数", "attention heads", ""),
    "kv_heads": ("KV 头数", "KV heads", "GQA"),
    "head_dim": ("头维度（qk）", "head dim (qk)", ""),
    "v_head_dim": ("v 头维度", "v head dim", "0 = same as head dim"),
    "vocab_size": ("词表大小", "vocabulary size", ""),
    "tie_word_embeddings": ("输入嵌入与输出头共享", "input embedding tied to the LM head", "1 = tied"),
    "attention_width": ("注意力宽度 w", "attention width w", "heads·(head dim + v head dim)/2; d if unknown"),
    "kv_replication": ("KV 复制倍数（张量并行）", "KV copies over the k GPUs", "MLA: k; GQA: k·ceil(kv_heads/k)/kv_heads"),
    "read_params": ("每 token 读取的参数", "parameters read per token", "active less an untied input embedding"),
    "kv_lora_rank": ("MLA 潜向量宽度 kv_lora_rank", "MLA latent width kv_lora_rank", "0 = not MLA"),
    "qk_rope_head_dim": ("MLA qk_rope_head_dim", "MLA qk_rope_head_dim", ""),
    "active_params": ("激活参数 N", "active parameters N", "parameters"),
    "total_params": ("总参数", "total parameters", "parameters"),
    "gpu_memory": ("每卡显存", "memory per GPU", ""),
    "gpu_bandwidth": ("每卡显存带宽", "memory bandwidth per GPU", ""),
    "compute_1": ("该精度首选的计算峰值", "the precision's first compute peak", "precision table"),
    "compute_2": ("该精度的备选计算峰值", "the precision's second compute peak", "precision table; blank = none"),
    "peak_1": ("每卡首选峰值（目录）", "first peak per GPU (catalog)", "0 = the GPU has none"),
    "peak_2": ("每卡备选峰值（目录）", "second peak per GPU (catalog)", "0 = the GPU has none"),
    "compute_precision": ("计算所用精度", "compute precision used", "the first of the two the GPU has"),
    "gpu_peak": ("每卡峰值算力", "peak per GPU", "dense"),
    "link_bandwidth": ("卡间链路带宽（单向）", "link bandwidth per direction", ""),
    # results
    "status": ("状态", "status", ""),
    "bytes_per_weight": ("每个权重的字节数", "bytes per weight", "bytes"),
    "flops_per_token": ("每 token 计算量 2N", "FLOPs per token, 2N", "N = parameters read per token"),
    "training_flops_per_token": ("训练每 token 计算量 6N", "training FLOPs per token, 6N", ""),
    "attention_linear_flops": ("注意力线性项 4·L·w·T", "attention, linear term 4·L·w·T", ""),
    "attention_quadratic_flops": ("注意力二次项 2·L·w·T²", "attention, quadratic term 2·L·w·T²", ""),
    "weight_bytes": ("权重字节（常驻，总参数）", "weight bytes (resident, total parameters)", ""),
    "weight_bytes_read": ("每步读取的权重字节", "weight bytes read per decode step", "parameters read × bytes per weight"),
    "kv_bytes_per_token": ("每 token 的 KV 缓存", "KV cache per token", "GQA 2·L·kv_heads·head_dim·B, "
                           "MLA L·(kv_lora_rank+rope)·B"),
    "kv_bytes_per_seq": ("每序列 KV 缓存（T 个 token，一份）", "KV cache per sequence (T tokens, one copy)", ""),
    "memory_bytes": ("总显存（× k）", "memory, all GPUs (× k)", ""),
    "bandwidth": ("总显存带宽（× k，未乘效率）", "memory bandwidth, all GPUs (× k, before efficiency)", ""),
    "peak_flops": ("总峰值算力（× k，未乘效率）", "peak FLOP/s, all GPUs (× k, before efficiency)", ""),
    "max_batch_by_memory": ("显存容许的最大批", "max batch by memory",
                            "sequences: floor((memory − weights) / (KV × copies))"),
    "memory_ms_1": ("访存时间", "memory time", "ms"),
    "compute_ms_1": ("计算时间", "compute time", "ms"),
    "comm_ms_1": ("张量并行通信", "tensor-parallel communication", "ms: 2·L·(k−1)/k·b·d·B / link"),
    "decode_ms_per_token": ("每 token 解码时间", "decode time per token", "ms = max(memory, compute) + comm"),
    "ceiling_tps": ("单流上限 TPS", "single-stream ceiling", "tokens/s"),
    "bottleneck_1": ("瓶颈", "bottleneck", "compute / bandwidth / capacity"),
    "kv_bytes_b": ("整批 KV 缓存", "KV cache, whole batch", ""),
    "memory_ms_b": ("访存时间", "memory time", "ms"),
    "compute_ms_b": ("计算时间", "compute time", "ms"),
    "comm_ms_b": ("张量并行通信", "tensor-parallel communication", "ms"),
    "step_ms_b": ("每步解码时间", "decode step time", "ms"),
    "ceiling_tps_b": ("上限 TPS（全部流）", "ceiling, all streams", "tokens/s"),
    "per_stream_tps_b": ("每流 TPS", "per stream", "tokens/s"),
    "bottleneck_b": ("瓶颈", "bottleneck", "capacity if it does not fit, else compute or bandwidth"),
    "fits_memory_b": ("放得下", "fits in memory", "TRUE / FALSE"),
    "prefill_ms": ("预填充 P 个 token 的时间", "prefill time for P prompt tokens", "ms"),
    "compute_ceiling_tps": ("算力上限 TPS（任意批）", "compute-bound ceiling (any batch)", "tokens/s = peak / 2N"),
}

def si_format(unit: str, largest: str) -> str:
    """A number format that shows a quantity with a decimal SI prefix as `scm-xl roofline` prints
    it (roofline.si: 14.14e9 FLOP is "14.14 GFLOP", 2.039e12 B/s "2.039 TB/s"), not 1.414E+10:
    the three prefixes from `largest` down (a format holds two conditions and a default), each
    "," after the digits dividing by 1000. Below the smallest the figure keeps that prefix
    (0.06 MB); a text result shows as it is."""
    start = [prefix for _, prefix in SI_PREFIXES].index(largest)
    chosen = list(SI_PREFIXES[start:start + 3])
    sections = []
    for i, (factor, prefix) in enumerate(chosen):
        commas = "," * round(math.log10(factor) / 3)
        body = f'0.00{commas}" {prefix}{unit}"'
        # 999.995 G rounds to 1000.00 G at two decimals: from there on it is 1.00 T
        sections.append(body if i == len(chosen) - 1 else f"[>={factor * 0.999995:.0f}]{body}")
    return ";".join(sections)


PARAMS_FORMAT = '0.00,,,"B"'  # parameters in billions, as roofline prints them (7.62B)
FLOP_FORMAT, BYTES_FORMAT = si_format("FLOP", "T"), si_format("B", "T")
BANDWIDTH_FORMAT, FLOPS_FORMAT = si_format("B/s", "T"), si_format("FLOP/s", "P")
NUMBER_FORMATS = {
    **{key: PARAMS_FORMAT for key in ("active_params", "total_params", "read_params")},
    **{key: FLOP_FORMAT for key in ("flops_per_token", "training_flops_per_token", "attention_linear_flops",
                                    "attention_quadratic_flops")},
    **{key: BYTES_FORMAT for key in ("weight_bytes", "weight_bytes_read", "kv_bytes_per_seq", "memory_bytes",
                                     "kv_bytes_b")},
    "bandwidth": BANDWIDTH_FORMAT,
    "peak_flops": FLOPS_FORMAT,
    **{key: "0.000" for key in ("memory_ms_1", "compute_ms_1", "comm_ms_1", "decode_ms_per_token", "memory_ms_b",
                                "compute_ms_b", "comm_ms_b", "step_ms_b", "prefill_ms")},
    **{key: "0.0" for key in ("ceiling_tps", "ceiling_tps_b", "per_stream_tps_b", "compute_ceiling_tps")},
    "kv_bytes_per_token": si_format("B", "M"),
}
RESOLVED_FORMATS = {
    **{key: PARAMS_FORMAT for key in ("active_params", "total_params", "read_params")},
    "gpu_memory": BYTES_FORMAT,
    **{key: BANDWIDTH_FORMAT for key in ("gpu_bandwidth", "link_bandwidth")},
    **{key: FLOPS_FORMAT for key in ("peak_1", "peak_2", "gpu_peak")},
}
# The effective values of the overrides, typed in GB/s, TFLOP/s, GB and billions.
EFFECTIVE_FORMATS = {"params_b": PARAMS_FORMAT, "bandwidth_gbs": BANDWIDTH_FORMAT, "tflops": FLOPS_FORMAT,
                     "memory_gb": BYTES_FORMAT}


def _label_text(key: str, lang: str) -> str:
    zh, en, _ = LABELS[key]
    return zh if lang == "zh" else en


# ---------------------------------------------------------------------------
# Formulas
# ---------------------------------------------------------------------------


_E9, _E12 = "1000000000", "1000000000000"  # written out: not every reader takes 1e9 in a formula


def _abs(address: str) -> str:
    col = "".join(ch for ch in address if ch.isalpha())
    row = "".join(ch for ch in address if ch.isdigit())
    return f"${col}${row}"


def calculator_formulas(lang: str, cl: CatalogLayout) -> dict[str, str]:
    """Every formula cell of the block: "A1" -> formula."""
    t = TEXTS[lang]
    B = {key: _abs(input_cell(key)) for key in INPUT_KEYS}
    E = {key: _abs(effective_cell(key)) for key in INPUT_KEYS}
    R = {key: _abs(resolved_cell(key)) for key in RESOLVED_KEYS}
    O = {key: _abs(output_cell(key)) for key in OUTPUT_ROWS}
    mid, gid = R["model_id"], R["gpu_id"]

    def model_field(name: str) -> str:
        return f"SUMIFS({cl.model(name)},{cl.model('id')},{mid})"

    def gpu_field(name: str) -> str:
        return f"SUMIFS({cl.gpu(name)},{cl.gpu('id')},{gid})"

    def blank(key: str) -> str:
        return f'""&{B[key]}=""'

    def whole(ref: str) -> str:
        return f"IF(ISNUMBER({ref}),IF(AND({ref}>=1,{ref}=INT({ref})),1,0),0)"

    def fraction(ref: str) -> str:
        return f"IF(ISNUMBER({ref}),IF(AND({ref}>0,{ref}<=1),1,0),0)"

    def positive_or_blank(ref: str) -> str:
        return f'IF({ref}="",1,IF(ISNUMBER({ref}),IF({ref}>0,1,0),0))'

    f: dict[str, str] = {}
    # -- effective inputs ----------------------------------------------------
    f[effective_cell("model")] = (
        f"=IF({mid}>0,INDEX({cl.model('key')},MATCH({mid},{cl.model('id')},0)),"
        f'IF(AND({blank("model")},ISNUMBER({B["params_b"]})),{_q(t["custom"])},""))')
    f[effective_cell("gpu")] = (
        f"=IF({gid}>0,INDEX({cl.gpu('key')},MATCH({gid},{cl.gpu('id')},0)),"
        f'IF(AND({blank("gpu")},ISNUMBER({B["bandwidth_gbs"]})),{_q(t["custom"])},""))')
    f[effective_cell("precision")] = f'=IF({blank("precision")},"bf16",LOWER(""&{B["precision"]}))'
    p = E["precision"]
    f[effective_cell("kv_precision")] = (
        f'=IF({blank("kv_precision")},IF(OR({p}="fp32",{p}="fp16"),{p},"bf16"),LOWER(""&{B["kv_precision"]}))')
    for key, default in BLANK_DEFAULTS.items():
        f[effective_cell(key)] = f"=IF({blank(key)},{default},{B[key]})"
    for key, scale in (("params_b", _E9), ("bandwidth_gbs", _E9), ("tflops", _E12), ("memory_gb", _E9)):
        f[effective_cell(key)] = f'=IF(ISNUMBER({B[key]}),{B[key]}*{scale},"")'

    # -- resolved ------------------------------------------------------------
    f[resolved_cell("model_id")] = (
        f'=IF({blank("model")},0,SUMPRODUCT(({cl.model_alias("alias")}=""&{B["model"]})*{cl.model_alias("id")}))')
    f[resolved_cell("gpu_id")] = (
        f'=IF({blank("gpu")},0,SUMPRODUCT(({cl.gpu_alias("alias")}=""&{B["gpu"]})*{cl.gpu_alias("id")}))')
    f[resolved_cell("weight_bytes_per_param")] = (
        f"=SUMPRODUCT(({cl.precision('precision')}={E['precision']})*{cl.precision('bytes')})")
    f[resolved_cell("kv_bytes_per_element")] = (
        f"=SUMPRODUCT(({cl.precision('precision')}={E['kv_precision']})*{cl.precision('bytes')})")
    checks = [whole(E[k]) for k in ("context", "batch", "tp", "prompt_tokens")]
    checks += [fraction(E[k]) for k in ("bandwidth_efficiency", "compute_efficiency")]
    checks += [positive_or_blank(B[k]) for k in ("params_b", "bandwidth_gbs", "tflops", "memory_gb")]
    f[resolved_cell("inputs_valid")] = "=" + "*".join(checks)
    model_ok = f'IF({blank("model")},IF(ISNUMBER({B["params_b"]}),1,0),IF({mid}>0,1,0))'
    gpu_ok = f'IF({blank("gpu")},IF(ISNUMBER({B["bandwidth_gbs"]}),1,0),IF({gid}>0,1,0))'
    f[resolved_cell("ready")] = (
        f"=IF({R['weight_bytes_per_param']}>0,1,0)*IF({R['kv_bytes_per_element']}>0,1,0)"
        f"*{R['inputs_valid']}*{model_ok}*{gpu_ok}")
    for key in SHAPE_KEYS:
        f[resolved_cell(key)] = f"=IF({mid}>0,{model_field(key)},0)"
    heads, hd, vhd, d_r = R["attention_heads"], R["head_dim"], R["v_head_dim"], R["hidden_size"]
    f[resolved_cell("attention_width")] = f"=IF(AND({heads}>0,{hd}>0),{heads}*({hd}+IF({vhd}>0,{vhd},{hd}))/2,{d_r})"
    k_r = E["tp"]
    f[resolved_cell("kv_replication")] = (
        f"=IF({k_r}<=1,1,IF({R['kv_lora_rank']}>0,{k_r},IF({R['kv_heads']}>0,"
        f"{k_r}*(-INT(-{R['kv_heads']}/{k_r}))/{R['kv_heads']},1)))")
    # an invalid tp (text, 0) would make the line above an error: 1 until the inputs are valid
    f[resolved_cell("kv_replication")] = f"=IF({R['inputs_valid']}=1,{f[resolved_cell('kv_replication')][1:]},1)"
    for key in ("active_params", "total_params"):
        f[resolved_cell(key)] = (f"=IF(ISNUMBER({B['params_b']}),{B['params_b']}*{_E9},"
                                 f"IF({mid}>0,{model_field(key)},0))")
    embedding = (f"IF(AND({R['tie_word_embeddings']}=0,{R['vocab_size']}>0,{d_r}>0),"
                 f"{R['vocab_size']}*{d_r},0)")
    na_r = R["active_params"]
    f[resolved_cell("read_params")] = f"=IF({na_r}>{embedding},{na_r}-{embedding},{na_r})"
    f[resolved_cell("gpu_memory")] = (f"=IF(ISNUMBER({B['memory_gb']}),{B['memory_gb']}*{_E9},"
                                      f"IF({gid}>0,{gpu_field('memory_bytes')},0))")
    f[resolved_cell("gpu_bandwidth")] = (f"=IF(ISNUMBER({B['bandwidth_gbs']}),{B['bandwidth_gbs']}*{_E9},"
                                         f"IF({gid}>0,{gpu_field('memory_bandwidth')},0))")
    for n in ("1", "2"):
        f[resolved_cell(f"compute_{n}")] = (
            f'=IF({R["weight_bytes_per_param"]}>0,""&INDEX({cl.precision("compute_" + n)},'
            f'MATCH({p},{cl.precision("precision")},0)),"")')
        c = R[f"compute_{n}"]
        peak = "0"
        for name in reversed(TABLE_PEAKS):
            peak = f'IF({c}="{name}",{gpu_field(name + "_flops")},{peak})'
        f[resolved_cell(f"peak_{n}")] = f"=IF({gid}>0,{peak},0)"
    c1, c2, peak1, peak2 = R["compute_1"], R["compute_2"], R["peak_1"], R["peak_2"]
    f[resolved_cell("compute_precision")] = (
        f'=IF(ISNUMBER({B["tflops"]}),{c1},IF({peak1}>0,{c1},IF({peak2}>0,{c2},"")))')
    f[resolved_cell("gpu_peak")] = (
        f"=IF(ISNUMBER({B['tflops']}),{B['tflops']}*{_E12},IF({peak1}>0,{peak1},{peak2}))")
    f[resolved_cell("link_bandwidth")] = f"=IF({gid}>0,{gpu_field('link_bandwidth')},{ADHOC_LINK_BANDWIDTH:.0f})"

    # -- results -------------------------------------------------------------
    ready = R["ready"]

    def gated(expr: str) -> str:
        return f'=IF({ready}=1,{expr},"")'

    status = _q(t["ok"])
    status = f'IF({gpu_ok}=0,IF({blank("gpu")},{_q(t["no_gpu"])},{_q(t["unknown_gpu"])}),{status})'
    status = f'IF({model_ok}=0,IF({blank("model")},{_q(t["no_model"])},{_q(t["unknown_model"])}),{status})'
    status = f'IF({R["inputs_valid"]}=0,{_q(t["bad_number"])},{status})'
    status = f'IF({R["kv_bytes_per_element"]}=0,{_q(t["bad_kv_precision"])},{status})'
    status = f'IF({R["weight_bytes_per_param"]}=0,{_q(t["bad_precision"])},{status})'
    f[output_cell("status")] = "=" + status

    L, d, T, P, k = R["layers"], R["hidden_size"], E["context"], E["prompt_tokens"], E["tp"]
    kvh, hd, rank, rope = R["kv_heads"], R["head_dim"], R["kv_lora_rank"], R["qk_rope_head_dim"]
    bpw, kvb = R["weight_bytes_per_param"], R["kv_bytes_per_element"]
    eb, ec, link = E["bandwidth_efficiency"], E["compute_efficiency"], R["link_bandwidth"]
    na, nt, nr, w, repl = R["active_params"], R["total_params"], R["read_params"], R["attention_width"], \
        R["kv_replication"]
    shape_known = f"AND({L}>0,{d}>0)"
    f[output_cell("active_params")] = gated(na)
    f[output_cell("total_params")] = gated(nt)
    f[output_cell("read_params")] = gated(nr)
    f[output_cell("bytes_per_weight")] = gated(bpw)
    f[output_cell("flops_per_token")] = gated(f"2*{nr}")
    f[output_cell("training_flops_per_token")] = gated(f"6*{na}")
    f[output_cell("attention_linear_flops")] = gated(f'IF({shape_known},4*{L}*{w}*{T},"")')
    f[output_cell("attention_quadratic_flops")] = gated(f'IF({shape_known},2*{L}*{w}*{T}^2,"")')
    f[output_cell("weight_bytes")] = gated(f"{nt}*{bpw}")
    f[output_cell("weight_bytes_read")] = gated(f"{nr}*{bpw}")
    f[output_cell("kv_replication")] = gated(repl)
    f[output_cell("kv_bytes_per_token")] = gated(
        f'IF({L}>0,IF({rank}>0,{L}*({rank}+{rope})*{kvb},IF(AND({kvh}>0,{hd}>0),2*{L}*{kvh}*{hd}*{kvb},"")),"")')
    kvpt, kvs = O["kv_bytes_per_token"], O["kv_bytes_per_seq"]
    f[output_cell("kv_bytes_per_seq")] = f'=IF({kvpt}="","",{kvpt}*{T})'
    f[output_cell("memory_bytes")] = gated(f'IF({R["gpu_memory"]}>0,{R["gpu_memory"]}*{k},"")')
    f[output_cell("bandwidth")] = gated(f"{R['gpu_bandwidth']}*{k}")
    f[output_cell("peak_flops")] = gated(f'IF({R["gpu_peak"]}>0,{R["gpu_peak"]}*{k},"")')
    mem, wb, wbr, fpt = O["memory_bytes"], O["weight_bytes"], O["weight_bytes_read"], O["flops_per_token"]
    bw, peak = O["bandwidth"], O["peak_flops"]
    f[output_cell("max_batch_by_memory")] = (
        f'=IF(OR({kvs}="",{mem}=""),"",IF({mem}-{wb}<=0,0,INT(({mem}-{wb})/({kvs}*{repl}))))')
    kvs0 = f'(IF({kvs}="",0,{kvs})*{repl})'  # resident over all GPUs, copies included

    def if_fits(expr: str) -> str:
        """A tokens/s figure only for a deployment whose weights and one sequence fit (roofline.memory_fit)."""
        return f'IF({mem}="",{expr},IF({wb}+{kvs0}<={mem},{expr},""))'

    def comm(tokens: str) -> str:
        return f"IF(OR({k}=1,{L}=0,{d}=0),0,2*{L}*({k}-1)/{k}*{tokens}*{d}*{kvb}/{link})"

    for suffix, batch in (("1", "1"), ("b", E["batch"])):
        mem_ms, comp_ms, comm_ms = (O[f"{part}_{suffix}"] for part in ("memory_ms", "compute_ms", "comm_ms"))
        step = O["decode_ms_per_token"] if suffix == "1" else O["step_ms_b"]
        f[output_cell(f"memory_ms_{suffix}")] = gated(f"({wbr}+{batch}*{kvs0})/({bw}*{eb})*1000")
        f[output_cell(f"compute_ms_{suffix}")] = gated(f'IF({peak}="","",{batch}*{fpt}/({peak}*{ec})*1000)')
        f[output_cell(f"comm_ms_{suffix}")] = gated(f"{comm(batch)}*1000")
        f[step.replace("$", "")] = gated(f'MAX({mem_ms},IF({comp_ms}="",0,{comp_ms}))+{comm_ms}')
        ceiling = O["ceiling_tps"] if suffix == "1" else O["ceiling_tps_b"]
        f[ceiling.replace("$", "")] = gated(if_fits(f"{batch}/({step}/1000)"))
        by_speed = f'IF({comp_ms}="","bandwidth",IF({comp_ms}>{mem_ms},"compute","bandwidth"))'
        f[output_cell(f"bottleneck_{suffix}")] = gated(
            f'IF({mem}="",{by_speed},IF({wb}+{batch}*{kvs0}<={mem},{by_speed},"capacity"))')
    batch = E["batch"]
    f[output_cell("per_stream_tps_b")] = gated(if_fits(f"1/({O['step_ms_b']}/1000)"))
    f[output_cell("kv_bytes_b")] = f'=IF({kvs}="","",{batch}*({kvs}*{repl}))'
    f[output_cell("fits_memory_b")] = gated(f'IF({mem}="","",{wb}+{batch}*{kvs0}<={mem})')
    quadratic = f"IF({shape_known},2*{L}*{w}*{P}^2,0)"
    f[output_cell("prefill_ms")] = gated(
        f'(MAX(IF({peak}="",0,({P}*{fpt}+{quadratic})/({peak}*{ec})),'
        f"MIN({nt},{P}*{na})*{bpw}/({bw}*{eb}))+{comm(P)})*1000")
    f[output_cell("compute_ceiling_tps")] = gated(if_fits(f'IF({peak}="","",{peak}*{ec}/{fpt})'))
    return f


# ---------------------------------------------------------------------------
# Writing and reading the sheet
# ---------------------------------------------------------------------------


def write_calculator(ws: Worksheet, lang: str, cl: CatalogLayout) -> dict[str, str]:
    """Write the calculator block (rows 1-55) with its default inputs; return defined name -> "A1".

    Call after catalog_tables.write_tables: it sets the widths of columns A-H.
    """
    t = TEXTS[lang]
    ws[f"A{TITLE_ROW}"] = t["title"]
    ws[f"A{TITLE_ROW}"].font = TITLE_FONT
    ws[f"A{NOTE_ROW}"] = t["note"]
    for col, text in ((LABEL_COL, t["inputs"]), (INPUT_COL, t["hand_set"]), (EFFECTIVE_COL, t["effective"]),
                      (UNIT_COL, t["unit"]), (OUT_LABEL_COL, t["results"]), (OUT_COL, t["value"]),
                      (OUT_UNIT_COL, t["unit"])):
        ws[f"{col}{HEADER_ROW}"] = text
        ws[f"{col}{HEADER_ROW}"].font = HEADER_FONT
        ws[f"{col}{HEADER_ROW}"].fill = HEADER_FILL
    ws[f"A{RESOLVED_HEADER_ROW}"] = t["resolved"]
    ws[f"A{RESOLVED_HEADER_ROW}"].font = BOLD

    for key in INPUT_KEYS:
        row = INPUT_ROWS[key]
        ws[f"{LABEL_COL}{row}"] = _label_text(key, lang)
        ws[f"{UNIT_COL}{row}"] = LABELS[key][2]
        ws[input_cell(key)].fill = INPUT_FILL
    set_calculator_inputs(ws, DEFAULT_INPUTS)
    for key in RESOLVED_KEYS:
        row = RESOLVED_ROWS[key]
        ws[f"{LABEL_COL}{row}"] = _label_text(key, lang)
        ws[f"{UNIT_COL}{row}"] = LABELS[key][2]
    for key, row in OUTPUT_ROWS.items():
        ws[f"{OUT_LABEL_COL}{row}"] = _label_text(key, lang)
        ws[f"{OUT_UNIT_COL}{row}"] = LABELS[key][2]
    for row, text in zip(SUBHEADING_ROWS, (t["sub_1"], t["sub_b"], t["sub_other"])):
        ws[f"{OUT_LABEL_COL}{row}"] = text
        ws[f"{OUT_LABEL_COL}{row}"].font = BOLD

    formats = {**{resolved_cell(k): v for k, v in RESOLVED_FORMATS.items()},
               **{output_cell(k): v for k, v in NUMBER_FORMATS.items()},
               **{effective_cell(k): v for k, v in EFFECTIVE_FORMATS.items()}}
    for address, formula in calculator_formulas(lang, cl).items():
        ws[address] = formula
        ws[address].fill = FORMULA_FILL
        if address in formats:
            ws[address].number_format = formats[address]
    for key in ("status", *DEFINED_NAMES.values()):
        ws[output_cell(key)].fill = KEY_FILL
        ws[output_cell(key)].font = BOLD
    ws[output_cell("status")].alignment = Alignment(wrap_text=True, vertical="top")
    _validations(ws, cl)
    for col, width in COLUMN_WIDTHS.items():
        ws.column_dimensions[col].width = width
    _wrap_texts(ws)
    return defined_names()


COLUMN_WIDTHS = {LABEL_COL: 40, INPUT_COL: 16, EFFECTIVE_COL: 16, UNIT_COL: 30, "E": 3, OUT_LABEL_COL: 40,
                 OUT_COL: 16, OUT_UNIT_COL: 44}
"""The calculator's columns A-H: what it prints."""


def _wrap_texts(ws: Worksheet) -> None:
    """The note and the labels and unit notes wrap within their columns (the note within A-H),
    each row as tall as its longest: nothing runs into the next column or past the margin."""
    wrapped_note(ws, f"A{NOTE_ROW}", OUT_UNIT_COL, sum(COLUMN_WIDTHS.values()))
    for row in range(HEADER_ROW + 1, LAST_ROW + 1):
        texts = []
        for col in (LABEL_COL, UNIT_COL, OUT_LABEL_COL, OUT_UNIT_COL):
            cell = ws[f"{col}{row}"]
            if isinstance(cell.value, str) and cell.value and not cell.value.startswith("="):
                cell.alignment = Alignment(wrap_text=True)  # at the bottom, beside its figure
                texts.append((cell.value, float(COLUMN_WIDTHS[col]), DEFAULT_FONT_SIZE))
        fit_row(ws, row, texts)


def _validations(ws: Worksheet, cl: CatalogLayout) -> None:
    def local(ref: str) -> str:  # same-sheet range, no sheet name
        return ref.split("!", 1)[1]

    # Names warn rather than refuse: aliases from the alias table are not in the key list.
    names = {
        "model": local(cl.model("key")), "gpu": local(cl.gpu("key")),
        "precision": local(cl.precision("precision")), "kv_precision": local(cl.precision("precision")),
    }
    for key, ref in names.items():
        dv = DataValidation(type="list", formula1=ref, allow_blank=True, showErrorMessage=True,
                            errorStyle="warning", error="not in the list: an alias from the alias table also works")
        ws.add_data_validation(dv)
        dv.add(input_cell(key))
    whole = DataValidation(type="whole", operator="greaterThanOrEqual", formula1="1", allow_blank=True,
                           showErrorMessage=True, error="a whole number ≥ 1")
    fraction = DataValidation(type="decimal", operator="between", formula1="0.000001", formula2="1",
                              allow_blank=True, showErrorMessage=True, error="a number in (0, 1]")
    positive = DataValidation(type="decimal", operator="greaterThan", formula1="0", allow_blank=True,
                              showErrorMessage=True, error="a number > 0")
    for dv in (whole, fraction, positive):
        ws.add_data_validation(dv)
    for key in ("context", "batch", "tp", "prompt_tokens"):
        whole.add(input_cell(key))
    for key in ("bandwidth_efficiency", "compute_efficiency"):
        fraction.add(input_cell(key))
    for key in ("params_b", "bandwidth_gbs", "tflops", "memory_gb"):
        positive.add(input_cell(key))


def set_calculator_inputs(ws: Worksheet, inputs: Mapping[str, object]) -> None:
    """Type values into the input cells (None clears one); keys not given are left alone."""
    for key, value in inputs.items():
        if key not in INPUT_ROWS:
            raise KeyError(f"no calculator input {key!r}; inputs: {', '.join(INPUT_KEYS)}")
        write_value(ws[input_cell(key)], value)  # text that looks like a formula stays text


def read_calculator_inputs(ws: Worksheet) -> dict[str, object]:
    """The hand-set input cells as typed; None where blank."""
    values: dict[str, object] = {}
    for key in INPUT_KEYS:
        value = ws[input_cell(key)].value
        values[key] = None if value == "" else value
    return values


# ---------------------------------------------------------------------------
# The reference: what each formula cell should hold
# ---------------------------------------------------------------------------


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scaled(value: object, scale: float) -> float | None:
    return value * scale if _is_number(value) else None


def _num(value: CellValue) -> float:
    """float() of a figure this module set to a number itself."""
    return float(cast(float, value))


def _as_text(value: object) -> str:
    """What ""&cell gives."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _lookup(name: object, aliases: tuple[tuple[str, int], ...]) -> int:
    """SUMPRODUCT((alias=""&name)*id): exact, case-insensitive, no trimming."""
    text = _as_text(name)
    if not text:
        return 0
    key = text.casefold()
    return sum(i for alias, i in aliases if alias.casefold() == key)


def _precision_bytes(name: str) -> float:
    return sum(nbytes for p, nbytes in PRECISION_BYTES.items() if p.casefold() == name.casefold())


def _cell(value: object) -> CellValue:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if _is_number(value):
        return float(value)
    return str(value)


@dataclasses.dataclass(frozen=True)
class _Resolved:
    """The sheet's effective inputs and resolved figures, mirrored cell by cell."""

    effective: dict[str, CellValue]
    resolved: dict[str, CellValue]
    status: str
    ready: bool


def _resolve(lang: str, cl: CatalogLayout, given: Mapping[str, object]) -> _Resolved:
    t = TEXTS[lang]
    raw = {key: given.get(key) for key in INPUT_KEYS}
    blank = {key: _as_text(value) == "" for key, value in raw.items()}
    pc = cl.pc
    mid = _lookup(raw["model"], pc.model_aliases)
    gid = _lookup(raw["gpu"], pc.gpu_aliases)
    precision = "bf16" if blank["precision"] else _as_text(raw["precision"]).lower()
    if blank["kv_precision"]:
        kv_precision = precision if precision in ("fp32", "fp16") else "bf16"
    else:
        kv_precision = _as_text(raw["kv_precision"]).lower()

    eff: dict[str, CellValue] = {}
    model = pc.models[mid - 1][1] if mid else None
    gpu = pc.gpus[gid - 1][1] if gid else None
    eff["model"] = pc.models[mid - 1][0] if mid else (
        t["custom"] if blank["model"] and _is_number(raw["params_b"]) else None)
    eff["gpu"] = pc.gpus[gid - 1][0] if gid else (
        t["custom"] if blank["gpu"] and _is_number(raw["bandwidth_gbs"]) else None)
    eff["precision"] = precision
    eff["kv_precision"] = kv_precision
    numbers: dict[str, object] = {}
    for key, default in BLANK_DEFAULTS.items():
        numbers[key] = default if blank[key] else raw[key]
        eff[key] = _cell(numbers[key])
    scales = {"params_b": 1e9, "bandwidth_gbs": 1e9, "tflops": 1e12, "memory_gb": 1e9}
    overrides = {key: _scaled(raw[key], scale) for key, scale in scales.items()}
    for key, value in overrides.items():
        eff[key] = value

    def whole(v: object) -> bool:
        return _is_number(v) and v >= 1 and v == math.floor(v)

    def fraction(v: object) -> bool:
        return _is_number(v) and 0 < v <= 1

    def positive_or_blank(v: object) -> bool:
        return v is None or v == "" or (_is_number(v) and v > 0)

    valid = (all(whole(numbers[k]) for k in ("context", "batch", "tp", "prompt_tokens"))
             and all(fraction(numbers[k]) for k in ("bandwidth_efficiency", "compute_efficiency"))
             and all(positive_or_blank(raw[k]) for k in scales))
    bpw, kvb = _precision_bytes(precision), _precision_bytes(kv_precision)
    model_ok = _is_number(raw["params_b"]) if blank["model"] else mid > 0
    gpu_ok = _is_number(raw["bandwidth_gbs"]) if blank["gpu"] else gid > 0
    ready = bpw > 0 and kvb > 0 and valid and model_ok and gpu_ok
    if bpw == 0:
        status = t["bad_precision"]
    elif kvb == 0:
        status = t["bad_kv_precision"]
    elif not valid:
        status = t["bad_number"]
    elif not model_ok:
        status = t["no_model"] if blank["model"] else t["unknown_model"]
    elif not gpu_ok:
        status = t["no_gpu"] if blank["gpu"] else t["unknown_gpu"]
    else:
        status = t["ok"]

    res: dict[str, CellValue] = {
        "model_id": float(mid), "gpu_id": float(gid), "weight_bytes_per_param": float(bpw),
        "kv_bytes_per_element": float(kvb), "inputs_valid": 1.0 if valid else 0.0, "ready": 1.0 if ready else 0.0,
    }
    for key in SHAPE_KEYS:
        res[key] = float(getattr(model, key) or 0) if model is not None else 0.0
    heads, hd, vhd, d = (_num(res[k]) for k in ("attention_heads", "head_dim", "v_head_dim", "hidden_size"))
    res["attention_width"] = heads * (hd + (vhd if vhd > 0 else hd)) / 2 if heads > 0 and hd > 0 else d
    tp = cast(float, numbers["tp"])  # a whole number when valid, the only case that uses it
    if not valid:
        res["kv_replication"] = 1.0
    elif tp <= 1:
        res["kv_replication"] = 1.0
    elif _num(res["kv_lora_rank"]) > 0:
        res["kv_replication"] = float(tp)
    elif _num(res["kv_heads"]) > 0:
        kvh = _num(res["kv_heads"])
        res["kv_replication"] = tp * math.ceil(kvh / tp) / kvh
    else:
        res["kv_replication"] = 1.0
    for key in ("active_params", "total_params"):
        res[key] = overrides["params_b"] if overrides["params_b"] is not None else (
            float(getattr(model, key)) if model is not None else 0.0)
    vocab, tied, active = _num(res["vocab_size"]), _num(res["tie_word_embeddings"]), _num(res["active_params"])
    embedding = vocab * d if tied == 0 and vocab > 0 and d > 0 else 0.0
    res["read_params"] = active - embedding if active > embedding else active
    res["gpu_memory"] = overrides["memory_gb"] if overrides["memory_gb"] is not None else (
        float(gpu.memory_bytes or 0) if gpu is not None else 0.0)
    res["gpu_bandwidth"] = overrides["bandwidth_gbs"] if overrides["bandwidth_gbs"] is not None else (
        float(gpu.memory_bandwidth) if gpu is not None else 0.0)
    peaks = {} if gpu is None else {p: v for p, v in gpu.peak_flops.items() if p in TABLE_PEAKS}
    chain = next(((c1, c2) for name, _, c1, c2 in precision_rows() if name.casefold() == precision.casefold()),
                 ("", "")) if bpw > 0 else ("", "")
    peak = [float(peaks.get(c, 0.0)) if c else 0.0 for c in chain]
    res["compute_1"], res["compute_2"] = chain[0] or None, chain[1] or None
    res["peak_1"], res["peak_2"] = peak[0], peak[1]
    if overrides["tflops"] is not None:
        res["compute_precision"], res["gpu_peak"] = chain[0] or None, overrides["tflops"]
    else:
        res["compute_precision"] = chain[0] if peak[0] > 0 else chain[1] if peak[1] > 0 else None
        res["gpu_peak"] = peak[0] if peak[0] > 0 else peak[1]
    res["link_bandwidth"] = float(gpu.link_bandwidth) if gpu is not None else ADHOC_LINK_BANDWIDTH
    return _Resolved(eff, res, status, ready)


def _deployment(cl: CatalogLayout, given: Mapping[str, object], r: _Resolved) -> Deployment:
    """The deployment the sheet describes, built the way `scm-xl roofline` would from the same figures."""
    pc = cl.pc
    mid, gid = int(_num(r.resolved["model_id"])), int(_num(r.resolved["gpu_id"]))
    # numbers or blank: _resolve has checked them (ready)
    params_b, bandwidth_gbs = cast("float | None", given.get("params_b")), cast("float | None", given.get("bandwidth_gbs"))
    tflops, memory_gb = cast("float | None", given.get("tflops")), cast("float | None", given.get("memory_gb"))
    if mid:
        model = pc.models[mid - 1][1]
        if params_b is not None:
            model = dataclasses.replace(model, total_params=params_b * 1e9,
                                        active_params=params_b * 1e9)
    else:
        model = ModelSpec.from_params(params_b)
    if gid:
        gpu = pc.gpus[gid - 1][1]
        # the sheet's GPU table has bf16/fp16/fp8/int8 peaks only
        peaks: dict[str, float] = {p: v for p, v in gpu.peak_flops.items() if p in TABLE_PEAKS}
        if tflops is not None:
            peaks = {p: tflops * 1e12 for p in PEAK_PRECISIONS}
        gpu = dataclasses.replace(
            gpu, peak_flops=peaks,
            memory_bytes=gpu.memory_bytes if memory_gb is None else memory_gb * GB,
            memory_bandwidth=gpu.memory_bandwidth if bandwidth_gbs is None else bandwidth_gbs * GB)
    else:
        gpu = Gpu.from_numbers(bandwidth_gbs=bandwidth_gbs, tflops=tflops, memory_gb=memory_gb)
    eff = r.effective
    return Deployment(
        model=model, gpu=gpu, precision=str(eff["precision"]),
        tp=int(_num(eff["tp"])), context=int(_num(eff["context"])),
        bandwidth_efficiency=_num(eff["bandwidth_efficiency"]),
        compute_efficiency=_num(eff["compute_efficiency"]),
        kv_precision=None if _as_text(given.get("kv_precision")) == "" else str(eff["kv_precision"]),
    )


def expected_calculator(lang: str, cl: CatalogLayout,
                        inputs: Mapping[str, object]) -> dict[tuple[str, str], CellValue]:
    """Every formula cell of the block -> its value, from scm_xl.roofline and the same inputs.

    `inputs` are the input cells as typed (read_calculator_inputs); a missing key is a blank cell.
    """
    given = {key: (None if inputs.get(key) == "" else inputs.get(key)) for key in INPUT_KEYS}
    r = _resolve(lang, cl, given)
    cells: dict[str, CellValue] = {}
    for key, value in r.effective.items():
        cells[effective_cell(key)] = value
    for key, value in r.resolved.items():
        cells[resolved_cell(key)] = value
    out: dict[str, CellValue] = {key: None for key in OUTPUT_ROWS}
    out["status"] = r.status
    if r.ready:
        out.update(_outputs(cl, given, r))
    for key, value in out.items():
        cells[output_cell(key)] = value
    title = cl.title
    return {(title, address): value for address, value in cells.items()}


def _outputs(cl: CatalogLayout, given: Mapping[str, object], r: _Resolved) -> dict[str, CellValue]:
    dep = _deployment(cl, given, r)
    batch, prompt = int(_num(r.effective["batch"])), int(_num(r.effective["prompt_tokens"]))
    report = analyze(dep, [1, batch])
    one, at_b = report.batches
    model = dep.model
    # attention_width is the hidden size when the heads are unknown: never None with a hidden size
    layers, width = model.layers, model.attention_width
    shape = layers is not None and model.hidden_size is not None and width is not None
    fits = report.fit.fits is not False  # no tokens/s for a deployment that does not fit
    out: dict[str, CellValue] = {
        "active_params": model.active_params,
        "total_params": model.total_params,
        "read_params": model.read_params,
        "bytes_per_weight": precision_bytes(dep.precision),
        "flops_per_token": report.flops_per_token,
        "training_flops_per_token": training_flops_per_token(model.active_params),
        "attention_linear_flops": attention_flops_linear(layers, width, dep.context)
        if shape and layers is not None and width is not None else None,
        "attention_quadratic_flops": attention_flops_quadratic(layers, width, dep.context)
        if shape and layers is not None and width is not None else None,
        "weight_bytes": report.weight_bytes,
        "weight_bytes_read": report.weight_bytes_read,
        "kv_bytes_per_token": report.kv_bytes_per_token,
        "kv_bytes_per_seq": report.kv_cache_bytes_per_seq,
        "kv_replication": report.kv_replication,
        "memory_bytes": report.memory_bytes,
        "bandwidth": report.memory_bandwidth,
        "peak_flops": report.peak_flops,
        "max_batch_by_memory": report.max_batch_by_memory,
        "decode_ms_per_token": report.decode_ms_per_token,
        "ceiling_tps": report.ceiling_tps if fits else None,
        "kv_bytes_b": at_b.kv_bytes,
        "per_stream_tps_b": at_b.per_stream_tps if fits else None,
        "step_ms_b": at_b.step_ms,
        "ceiling_tps_b": at_b.ceiling_tps if fits else None,
        "fits_memory_b": at_b.fits_memory,
        "prefill_ms": dep.prefill_seconds(prompt) * 1e3,
        "compute_ceiling_tps": report.compute_ceiling_tps if fits else None,
    }
    for suffix, row in (("1", one), ("b", at_b)):
        out[f"memory_ms_{suffix}"] = row.memory_ms
        out[f"compute_ms_{suffix}"] = row.compute_ms
        out[f"comm_ms_{suffix}"] = row.comm_ms
        out[f"bottleneck_{suffix}"] = row.bottleneck
    return {key: _cell(value) for key, value in out.items()}


__all__ = [
    "DEFAULT_INPUTS", "DEFINED_NAMES", "INPUT_KEYS", "INPUT_ROWS", "OUTPUT_ROWS", "RESOLVED_ROWS",
    "calculator_formulas", "defined_names", "effective_cell", "expected_calculator", "input_cell",
    "output_cell", "read_calculator_inputs", "resolved_cell", "set_calculator_inputs", "write_calculator",
]
