"""The GPU and model catalog as tables on the first-principles sheet.

The per-row physics checks on the raw-data sheet and the first-principles
calculator both look figures up here, by numeric id: a name is first mapped to
an id through an alias table (case-insensitive, exact), then the id to its
figures with SUMIFS. The Python reference uses the same alias list
(`PhysicsCatalog`), so both sides resolve a name identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from openpyxl.utils import get_column_letter
from openpyxl.worksheet.worksheet import Worksheet

from scm_xl.roofline import PRECISION_BYTES, Catalog, Gpu, ModelSpec, load_catalog

SHEET_TITLES = {"zh": "第一性原理", "en": "FirstPrinciples"}
TABLES_FIRST_ROW = 60  # the calculator block sits above

GPU_FIELDS = ("id", "key", "name", "memory_bytes", "memory_bandwidth", "bf16_flops", "fp16_flops",
              "fp8_flops", "int8_flops", "link_bandwidth", "sources")
MODEL_FIELDS = ("id", "key", "name", "total_params", "active_params", "layers", "hidden_size",
                "attention_heads", "kv_heads", "head_dim", "vocab_size", "kv_lora_rank", "qk_rope_head_dim",
                "sources")
# Formula columns beside the model table, at the physics checks' precision (calibration sheet):
# what each raw row looks up, so a row needs three lookups instead of nine.
PHYSICS_FIELDS = ("phys_weight_bytes", "phys_read_bytes", "phys_kv_bytes_per_token")
ALIAS_FIELDS = ("alias", "id")
PRECISION_FIELDS = ("precision", "bytes")
# Columns where each table starts (1-based).
GPU_COL, MODEL_COL = 1, 1
MODEL_ALIAS_COL, GPU_ALIAS_COL, PRECISION_COL = 17, 20, 23


@dataclass(frozen=True)
class PhysicsCatalog:
    """Catalog entries by id, and the alias lists both sides resolve names with."""

    gpus: tuple[tuple[str, Gpu], ...]  # (key, gpu), id = index + 1
    models: tuple[tuple[str, ModelSpec], ...]
    gpu_aliases: tuple[tuple[str, int], ...]
    model_aliases: tuple[tuple[str, int], ...]

    def model_id(self, name: str | None) -> int:
        return _resolve(name, self.model_aliases)

    def gpu_id(self, name: str | None) -> int:
        return _resolve(name, self.gpu_aliases)

    def model(self, name: str | None) -> ModelSpec | None:
        i = self.model_id(name)
        return self.models[i - 1][1] if i else None

    def gpu(self, name: str | None) -> Gpu | None:
        i = self.gpu_id(name)
        return self.gpus[i - 1][1] if i else None


def _resolve(name: str | None, aliases: tuple[tuple[str, int], ...]) -> int:
    if not name or not name.strip():
        return 0
    key = name.strip().casefold()
    for alias, i in aliases:
        if alias.casefold() == key:
            return i
    return 0


def _alias_list(entries: list[tuple[str, object]]) -> tuple[tuple[str, int], ...]:
    out: list[tuple[str, int]] = []
    seen: set[str] = set()
    for i, (key, spec) in enumerate(entries, start=1):
        for alias in (key, getattr(spec, "name", ""), *getattr(spec, "aliases", ())):
            if alias and alias.casefold() not in seen and _literal(alias):
                seen.add(alias.casefold())
                out.append((alias, i))
    return tuple(out)


def _literal(alias: str) -> bool:
    """Whether an alias means itself in criteria (no wildcard or operator). Bare numbers
    ("4090") stay: the results reader refuses numeric model and GPU names in rows, so a row
    never looks one up through SUMIFS, and the calculator matches names exactly."""
    return not (alias.startswith(("=", "<", ">")) or any(ch in alias for ch in "*?~") or alias != alias.strip())


def physics_catalog(catalog: Catalog | None = None) -> PhysicsCatalog:
    if catalog is None:
        return _builtin()
    gpus = sorted(catalog.gpus.items())
    models = sorted(catalog.models.items())
    gpu_names = [(k, _Named(g.name, _aliases_for(k, catalog.gpu_aliases))) for k, g in gpus]
    model_names = [(k, _Named(m.name, _aliases_for(k, catalog.model_aliases))) for k, m in models]
    return PhysicsCatalog(gpus=tuple(gpus), models=tuple(models),
                          gpu_aliases=_alias_list(gpu_names),  # type: ignore[arg-type]
                          model_aliases=_alias_list(model_names))  # type: ignore[arg-type]


@lru_cache(maxsize=1)
def _builtin() -> PhysicsCatalog:
    return physics_catalog(load_catalog())


@dataclass(frozen=True)
class _Named:
    name: str
    aliases: tuple[str, ...]


def _aliases_for(key: str, aliases: dict[str, str] | object) -> tuple[str, ...]:
    return tuple(sorted(alias for alias, target in dict(aliases).items() if target == key))  # type: ignore[arg-type]


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
    from scm_xl.workbook.build import BOLD, HEADER_FILL, HEADER_FONT

    def header(row: int, col: int, names: tuple[str, ...]) -> None:
        for i, name in enumerate(names):
            cell = ws.cell(row=row, column=col + i, value=name)
            cell.font = HEADER_FONT
            cell.fill = HEADER_FILL

    ws.cell(row=cl.gpu_header - 1, column=GPU_COL, value="GPU catalog (SI: bytes, bytes/s, FLOP/s dense)").font = BOLD
    header(cl.gpu_header, GPU_COL, GPU_FIELDS)
    for i, (key, gpu) in enumerate(cl.pc.gpus):
        flops = dict(gpu.peak_flops)
        values = (i + 1, key, gpu.name, gpu.memory_bytes, gpu.memory_bandwidth, flops.get("bf16"),
                  flops.get("fp16"), flops.get("fp8"), flops.get("int8"), gpu.link_bandwidth,
                  "; ".join(f"{k}: {v}" for k, v in dict(gpu.sources).items()))
        for j, value in enumerate(values):
            ws.cell(row=cl.gpu_first + i, column=GPU_COL + j, value=value)
    ws.cell(row=cl.model_header - 1, column=MODEL_COL, value="Model catalog (config.json figures)").font = BOLD
    header(cl.model_header, MODEL_COL, MODEL_FIELDS)
    for i, (key, m) in enumerate(cl.pc.models):
        values = (i + 1, key, m.name, m.total_params, m.active_params, m.layers, m.hidden_size,
                  m.attention_heads, m.kv_heads, m.head_dim, m.vocab_size, m.kv_lora_rank or 0,
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
    for i, (name, nbytes) in enumerate(PRECISION_BYTES.items(), start=1):
        ws.cell(row=cl.alias_header + i, column=PRECISION_COL, value=name)
        ws.cell(row=cl.alias_header + i, column=PRECISION_COL + 1, value=nbytes)
    for col, width in ((1, 6), (2, 14), (3, 26)):
        ws.column_dimensions[get_column_letter(col)].width = width


def physics_column_formulas(cl: CatalogLayout, bytes_ref: str) -> dict[str, str]:
    """Array formulas (over the model rows) of the per-model figures the physics checks use."""
    def col(field: str) -> str:
        return cl.model(field)

    return {
        "phys_weight_bytes": f"={col('total_params')}*{bytes_ref}",
        "phys_read_bytes": f"={col('active_params')}*{bytes_ref}",
        "phys_kv_bytes_per_token": (
            f"=IF({col('kv_lora_rank')}>0,{col('layers')}*({col('kv_lora_rank')}+{col('qk_rope_head_dim')})"
            f"*{bytes_ref},2*{col('layers')}*{col('kv_heads')}*{col('head_dim')}*{bytes_ref})"
        ),
    }


def physics_column_values(spec: ModelSpec, nbytes: float) -> dict[str, float]:
    """The reference for physics_column_formulas."""
    if spec.kv_lora_rank:
        kv = spec.layers * (spec.kv_lora_rank + (spec.qk_rope_head_dim or 0)) * nbytes
    else:
        kv = 2 * spec.layers * spec.kv_heads * spec.head_dim * nbytes
    return {"phys_weight_bytes": spec.total_params * nbytes, "phys_read_bytes": spec.active_params * nbytes,
            "phys_kv_bytes_per_token": kv}
