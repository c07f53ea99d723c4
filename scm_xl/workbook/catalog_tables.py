"""The GPU and model catalog as tables on the first-principles sheet.

The per-row physics checks on the raw-data sheet and the first-principles
calculator both look figures up here, by numeric id: a name is first mapped to
an id through an alias table (case-insensitive, exact), then the id to its
figures with SUMIFS. The Python reference uses the same alias list
(`scm_xl.physics.PhysicsCatalog`, re-exported here for older imports), so both
sides resolve a name identically. The precision table gives each precision name
its bytes per weight and the chip peaks its math may use (the roofline's modes).
"""

from __future__ import annotations

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.physics import PhysicsCatalog, per_token_figures, physics_catalog
from scm_xl.workbook.styles import BOLD, HEADER_FILL, HEADER_FONT
from scm_xl.roofline import PEAK_PRECISIONS, PRECISION_ALIASES, PRECISION_BYTES, PRECISION_MODES, ModelSpec

SHEET_TITLES = {"zh": "第一性原理", "en": "FirstPrinciples"}
TABLES_FIRST_ROW = 60  # the calculator block sits above

GPU_FIELDS = ("id", "key", "name", "memory_bytes", "memory_bandwidth", "fp32_flops", "bf16_flops", "fp16_flops",
              "fp8_flops", "int8_flops", "link_bandwidth", "sources")
MODEL_FIELDS = ("id", "key", "name", "total_params", "active_params", "layers", "hidden_size",
                "attention_heads", "kv_heads", "head_dim", "v_head_dim", "vocab_size", "tie_word_embeddings",
                "kv_lora_rank", "qk_rope_head_dim", "sources")
# Formula columns beside the model table, at the physics checks' precision (calibration sheet):
# what each raw row looks up, so a row needs three lookups instead of nine.
PHYSICS_FIELDS = ("phys_weight_bytes", "phys_read_bytes", "phys_kv_bytes_per_token")
ALIAS_FIELDS = ("alias", "id")
# A precision name, its bytes per weight, and the chip peaks its math may use, in order ("" = none).
PRECISION_FIELDS = ("precision", "bytes", "compute_1", "compute_2")
# Columns where each table starts (1-based): the alias and precision tables sit right of the
# model table and its physics columns, one column apart, so nothing overlaps.
GPU_COL, MODEL_COL = 1, 1
MODEL_ALIAS_COL = MODEL_COL + len(MODEL_FIELDS) + len(PHYSICS_FIELDS) + 1
GPU_ALIAS_COL = MODEL_ALIAS_COL + len(ALIAS_FIELDS) + 1
PRECISION_COL = GPU_ALIAS_COL + len(ALIAS_FIELDS) + 1
assert GPU_COL + len(GPU_FIELDS) <= MODEL_ALIAS_COL


def precision_rows() -> list[tuple[str, float, str, str]]:
    """(name, bytes per weight, first compute peak, second or "") for every precision name."""
    rows = []
    for name, nbytes in PRECISION_BYTES.items():
        mode = PRECISION_MODES[PRECISION_ALIASES.get(name, name)]
        compute = (*mode.compute, "", "")[:2]
        rows.append((name, nbytes, compute[0], compute[1]))
    return rows


class CatalogLayout:
    """Where the catalog tables sit on the first-principles sheet."""

    def __init__(self, lang: str, pc: PhysicsCatalog) -> None:
        self.lang = lang
        self.pc = pc
        self.gpu_header = TABLES_FIRST_ROW
        self.gpu_first = self.gpu_header + 1
        self.gpu_last = self.gpu_first + len(pc.gpus) - 1
        self.model_header = self.gpu_last + 3
        self.model_first = self.model_header + 1
        self.model_last = self.model_first + len(pc.models) - 1
        self.alias_header = TABLES_FIRST_ROW
        self.model_alias_last = self.alias_header + len(pc.model_aliases)
        self.gpu_alias_last = self.alias_header + len(pc.gpu_aliases)
        self.precision_last = self.alias_header + len(PRECISION_BYTES)

    @property
    def title(self) -> str:
        return SHEET_TITLES[self.lang]

    def _ref(self, col: int, first: int, last: int) -> str:
        letter = get_column_letter(col)
        return f"'{self.title}'!${letter}${first}:${letter}${last}"

    def gpu(self, field: str) -> str:
        return self._ref(GPU_COL + GPU_FIELDS.index(field), self.gpu_first, self.gpu_last)

    def model(self, field: str) -> str:
        return self._ref(self.model_col(field), self.model_first, self.model_last)

    def model_col(self, field: str) -> int:
        if field in PHYSICS_FIELDS:
            return MODEL_COL + len(MODEL_FIELDS) + PHYSICS_FIELDS.index(field)
        return MODEL_COL + MODEL_FIELDS.index(field)

    def model_alias(self, field: str) -> str:
        return self._ref(MODEL_ALIAS_COL + ALIAS_FIELDS.index(field), self.alias_header + 1, self.model_alias_last)

    def gpu_alias(self, field: str) -> str:
        return self._ref(GPU_ALIAS_COL + ALIAS_FIELDS.index(field), self.alias_header + 1, self.gpu_alias_last)

    def precision(self, field: str) -> str:
        return self._ref(PRECISION_COL + PRECISION_FIELDS.index(field), self.alias_header + 1, self.precision_last)


def write_tables(ws: Worksheet, cl: CatalogLayout) -> None:
    """Write the catalog as plain values (users may edit or extend the figures)."""
    def header(row: int, col: int, names: tuple[str, ...]) -> None:
        for i, name in enumerate(names):
            cell = ws.cell(row=row, column=col + i, value=name)
            cell.font = HEADER_FONT
            cell.fill = HEADER_FILL

    ws.cell(row=cl.gpu_header - 1, column=GPU_COL, value="GPU catalog (SI: bytes, bytes/s, FLOP/s dense)").font = BOLD
    header(cl.gpu_header, GPU_COL, GPU_FIELDS)
    for i, (key, gpu) in enumerate(cl.pc.gpus):
        flops = dict(gpu.peak_flops)
        values = (i + 1, key, gpu.name, gpu.memory_bytes, gpu.memory_bandwidth,
                  *(flops.get(p) for p in PEAK_PRECISIONS), gpu.link_bandwidth,
                  "; ".join(f"{k}: {v}" for k, v in dict(gpu.sources).items()))
        for j, value in enumerate(values):
            ws.cell(row=cl.gpu_first + i, column=GPU_COL + j, value=value)
    ws.cell(row=cl.model_header - 1, column=MODEL_COL, value="Model catalog (config.json figures)").font = BOLD
    header(cl.model_header, MODEL_COL, MODEL_FIELDS)
    for i, (key, m) in enumerate(cl.pc.models):
        values = (i + 1, key, m.name, m.total_params, m.active_params, m.layers, m.hidden_size,
                  m.attention_heads, m.kv_heads, m.head_dim, m.v_head_dim or 0, m.vocab_size,
                  1 if m.tie_word_embeddings else 0, m.kv_lora_rank or 0,
                  m.qk_rope_head_dim or 0, "; ".join(f"{k}: {v}" for k, v in dict(m.sources).items()))
        for j, value in enumerate(values):
            ws.cell(row=cl.model_first + i, column=MODEL_COL + j, value=value)
    header(cl.alias_header, MODEL_ALIAS_COL, ("model alias", "model id"))
    for i, (alias, mid) in enumerate(cl.pc.model_aliases, start=1):
        ws.cell(row=cl.alias_header + i, column=MODEL_ALIAS_COL, value=alias)
        ws.cell(row=cl.alias_header + i, column=MODEL_ALIAS_COL + 1, value=mid)
    header(cl.alias_header, GPU_ALIAS_COL, ("GPU alias", "GPU id"))
    for i, (alias, gid) in enumerate(cl.pc.gpu_aliases, start=1):
        ws.cell(row=cl.alias_header + i, column=GPU_ALIAS_COL, value=alias)
        ws.cell(row=cl.alias_header + i, column=GPU_ALIAS_COL + 1, value=gid)
    header(cl.alias_header, PRECISION_COL, PRECISION_FIELDS)
    for i, precision_row in enumerate(precision_rows(), start=1):
        entries: list[str | float] = list(precision_row)
        for j, entry in enumerate(entries):
            ws.cell(row=cl.alias_header + i, column=PRECISION_COL + j, value=entry)
    for col, width in ((1, 6), (2, 14), (3, 26)):
        ws.column_dimensions[get_column_letter(col)].width = width


def physics_column_formulas(cl: CatalogLayout, bytes_ref: str, row: int) -> dict[str, str]:
    """The per-model figures the physics checks use (scm_xl.physics.per_token_figures), as the
    formulas of catalog row `row` (ordinary per-row formulas: IronCalc computes element-wise
    functions inside array formulas wrongly). Read bytes leave out an untied input embedding."""
    def col(field: str) -> str:
        return f"${get_column_letter(cl.model_col(field))}{row}"

    embedding = f"IF({col('tie_word_embeddings')}=1,0,{col('vocab_size')}*{col('hidden_size')})"
    active = col("active_params")
    return {
        "phys_weight_bytes": f"={col('total_params')}*{bytes_ref}",
        "phys_read_bytes": f"=IF({active}>{embedding},{active}-{embedding},{active})*{bytes_ref}",
        "phys_kv_bytes_per_token": (
            f"=IF({col('kv_lora_rank')}>0,{col('layers')}*({col('kv_lora_rank')}+{col('qk_rope_head_dim')})"
            f"*{bytes_ref},2*{col('layers')}*{col('kv_heads')}*{col('head_dim')}*{bytes_ref})"
        ),
    }


def physics_column_values(spec: ModelSpec, nbytes: float) -> dict[str, float]:
    """The reference for physics_column_formulas (one home: scm_xl.physics)."""
    return per_token_figures(spec, nbytes)


__all__ = [
    "ALIAS_FIELDS", "CatalogLayout", "GPU_FIELDS", "MODEL_FIELDS", "PHYSICS_FIELDS", "PRECISION_FIELDS",
    "PhysicsCatalog", "SHEET_TITLES", "TABLES_FIRST_ROW", "physics_catalog", "physics_column_formulas",
    "physics_column_values", "precision_rows", "write_tables",
]
