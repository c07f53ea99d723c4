"""Physics checks in the filter: warnings by default, exclusions when strict."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from scm_xl.model import Settings, analyze
from scm_xl.results import ResultRow, read_results
from scm_xl.workbook.fill import fill
from support.paths import ARTICLE



def article_rows() -> list[ResultRow]:
    return read_results(ARTICLE).rows


def test_article_flags_fire_as_warnings_and_leave_the_table_alone() -> None:
    analysis = analyze(article_rows())
    by_id = {s.exp_id: s for s in analysis.statuses}
    assert "short_output" in by_id["E01"].physics.codes()  # 25 tokens from 10 requests of 50
    assert by_id["E01"].physics.expected_tokens == 500
    assert by_id["E02"].physics.superlinear  # f(2) = 2.62 > 2
    assert by_id["E02"].physics.group_lowest_concurrency == 1
    assert not by_id["E03"].physics.superlinear  # f(4) = 3.10 < 4
    # Warnings only: the article's numbers are unchanged.
    cal = analysis.calibration
    assert round(cal.base_tps, 2) == 45.45
    assert round(cal.f(2), 2) == 2.62 and round(cal.f(4), 2) == 3.10
    assert round(cal.k_len(100), 2) == 0.50
    assert by_id["E01"].included and by_id["E02"].included


def test_strict_physics_excludes_warned_rows_and_a_manual_include_wins() -> None:
    rows = article_rows()
    strict = analyze(rows, Settings(strict_physics=True))
    assert all(not s.included for s in strict.statuses)  # every article row is short
    assert {s.reason_code for s in strict.statuses} <= {"physics", "mono"}
    assert strict.calibration.base_tps is None
    assert strict.consistency.verdict == "insufficient"
    rows = [dataclasses.replace(r, override="include") if r.exp_id == "E01" else r for r in rows]
    strict = analyze(rows, Settings(strict_physics=True))
    assert {s.exp_id for s in strict.statuses if s.included} == {"E01"}
    assert strict.calibration.base_tps == pytest.approx(25 / 0.55)


def row(exp_id: str, c: int, tps: float, *, gpu: str | None = "a100-80gb", model: str = "Qwen2.5-7B",
        max_tokens: int = 100, prompt_tokens: int | None = None) -> ResultRow:
    requests = 10 * c
    tokens = requests * max_tokens
    return ResultRow(exp_id=exp_id, model=model, concurrency=c, requests_per_slot=10, total_requests=requests,
                     max_tokens=max_tokens, total_time_s=tokens / tps, total_output_tokens=tokens, gpu=gpu,
                     prompt_tokens=prompt_tokens)


def test_roofline_ceiling_and_kv_capacity() -> None:
    # Qwen2.5-7B bf16 on an A100 80GB: a token reads 7,615,616,512 parameters less the untied
    # embedding 152,064 x 3,584 = 7,070,619,136; 2,039e9 B/s / (7,070,619,136 x 2 B) = 144.2 tok/s per stream.
    rows = [row("A1", 1, 80.0), row("A2", 2, 2 * 200.0), row("A3", 4, 4 * 70.0, gpu=None),
            row("A4", 8, 8 * 60.0, prompt_tokens=2_000_000)]
    by_id = {s.exp_id: s for s in analyze(rows).statuses}
    assert by_id["A1"].physics.ceiling_tps == pytest.approx(2039e9 / (7_070_619_136 * 2))
    assert not by_id["A1"].physics.above_ceiling
    assert by_id["A2"].physics.above_ceiling  # 200 tok/s per stream is impossible there
    assert by_id["A3"].physics.ceiling_tps is None  # no GPU recorded: no roofline check
    assert by_id["A4"].physics.kv_over_memory  # 8 x 2M tokens of KV cache cannot fit in 80 GB
    assert not by_id["A1"].physics.kv_over_memory
    assert "roofline ceiling of 144 tok/s" in by_id["A2"].physics.text("en")


def test_clean_data_stays_quiet() -> None:
    rows = [row(f"B{i}", c, 60.0 * c ** 0.9) for i, c in enumerate((1, 2, 4, 8), start=1)]
    assert all(s.physics.count == 0 for s in analyze(rows).statuses)


@pytest.mark.parametrize("engine", ["ironcalc", pytest.param("libreoffice", marks=pytest.mark.libreoffice)])
def test_workbook_physics_matches_the_reference(engine: str, tmp_path: Path) -> None:
    from scm_xl.results import write_results

    rows = [row("A1", 1, 80.0), row("A2", 2, 2 * 200.0), row("A3", 4, 4 * 70.0, gpu=None),
            row("A4", 8, 8 * 60.0, prompt_tokens=2_000_000), row("A5", 16, 16 * 50.0, gpu="H100")]
    csv_path = tmp_path / "r.csv"
    write_results(csv_path, rows)
    report = fill(csv_path, output=tmp_path / "r.xlsx", engine=engine, strict_physics=True)
    assert report.verification.ok, report.verification.mismatches[:5]
    included = {s.exp_id for s in report.analysis.statuses if s.included}
    assert "A2" not in included and "A4" not in included and "A1" in included


# --- scm_xl.physics: one home for the physics catalog and its names ---------------------------


def test_one_rule_resolves_names_for_the_cli_and_the_workbook() -> None:
    from scm_xl import roofline
    from scm_xl.physics import physics_catalog

    catalog = roofline.load_catalog()
    pc = physics_catalog(catalog)
    keys = [key for key, _ in pc.models]
    # every alias the sheet's alias table lists resolves to the same model on both sides
    for alias, model_id in pc.model_aliases:
        assert catalog.find_model(alias).key == keys[model_id - 1], alias
        assert pc.model_id(f"  {alias.upper()} ") == model_id
    assert pc.model_id("qwen*") == 0 and pc.model_id("") == 0 and pc.model_id(None) == 0
    assert pc.gpu(" NVIDIA H100 80GB HBM3").key == "h100-sxm"  # type: ignore[union-attr]


def test_nothing_outside_the_workbook_reaches_into_it_for_physics() -> None:
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent / "scm_xl"
    for path in root.rglob("*.py"):
        if "workbook" in path.relative_to(root).parts:
            continue
        text = path.read_text(encoding="utf-8")
        assert "workbook.catalog_tables" not in text, path
    # the old names stay importable from catalog_tables
    from scm_xl import physics
    from scm_xl.workbook import catalog_tables

    assert catalog_tables.PhysicsCatalog is physics.PhysicsCatalog
    assert catalog_tables.physics_catalog is physics.physics_catalog


def test_the_catalog_tables_do_not_overlap() -> None:
    from openpyxl.utils import column_index_from_string

    from scm_xl.physics import physics_catalog
    from scm_xl.workbook.catalog_tables import CatalogLayout

    cl = CatalogLayout("en", physics_catalog())

    def columns(ref: str) -> tuple[int, int, int]:
        cells = ref.split("!", 1)[1].replace("$", "")
        first, last = cells.split(":")
        col = column_index_from_string("".join(ch for ch in first if ch.isalpha()))
        return col, int("".join(ch for ch in first if ch.isdigit())), int("".join(ch for ch in last if ch.isdigit()))

    blocks = [columns(cl.model(f)) for f in ("id", "sources", "phys_kv_bytes_per_token")]
    blocks += [columns(cl.gpu(f)) for f in ("id", "sources")]
    blocks += [columns(cl.model_alias(f)) for f in ("alias", "id")] + [columns(cl.gpu_alias(f)) for f in ("alias", "id")]
    blocks += [columns(cl.precision(f)) for f in ("precision", "bytes", "compute_1", "compute_2")]
    cells = [(col, row) for col, first, last in blocks for row in range(first, last + 1)]
    assert len(cells) == len(set(cells))  # the alias table used to share column Q with a physics column


def test_per_token_figures_by_hand() -> None:
    from scm_xl.physics import c_model_first_principles, per_token_figures
    from scm_xl.roofline import find_model

    llama, qwen = find_model("llama-3.1-8b"), find_model("qwen2.5-7b")
    figures = per_token_figures(llama, 2.0)
    # 8,030,261,248 x 2 resident; (8,030,261,248 - 128,256 x 4,096) x 2 = 15,009,849,344 read;
    # KV 2 x 32 layers x 8 heads x 128 x 2 B = 131,072 per token
    assert figures == {"phys_weight_bytes": 16060522496.0, "phys_read_bytes": 15009849344.0,
                       "phys_kv_bytes_per_token": 131072.0}
    # C_model(Llama / Qwen) = 7,504,924,672 / 7,070,619,136 = 1.0614 (active-parameter ratio: 1.0544)
    assert c_model_first_principles(qwen, llama) == pytest.approx(7504924672 / 7070619136)


# --- A config.json's native precision and name (issue 17) ------------------------------------


@pytest.mark.parametrize("fields, precision, words", [
    ({"torch_dtype": "bfloat16"}, "bf16", "torch_dtype bfloat16, no quantization_config"),
    ({"dtype": "float16"}, "fp16", "torch_dtype float16, no quantization_config"),
    ({"torch_dtype": "float32"}, "fp32", "torch_dtype float32, no quantization_config"),
    ({"torch_dtype": "bfloat16", "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}}, "fp8",
     "quantization_config quant_method fp8, fmt e4m3"),
    ({"quantization_config": {"quant_method": "awq", "bits": 4}}, "w4a16", "quantization_config quant_method awq, bits 4"),
    ({"quantization_config": {"quant_method": "gptq", "bits": 8}}, "w8a16", "quantization_config quant_method gptq, bits 8"),
    ({"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": True}}, "w4a16",
     "quantization_config quant_method bitsandbytes, load_in_4bit"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 8, "type": "float"}, "input_activations": {"num_bits": 8, "type": "float"}}}}},
     "w8a8-fp8", "quantization_config quant_method compressed-tensors, weights 8-bit float, activations quantized"),
    ({"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {"group_0": {
        "weights": {"num_bits": 4, "type": "int"}, "input_activations": None}}}},
     "w4a16", "quantization_config quant_method compressed-tensors, weights 4-bit int, weight-only"),
    ({"quantization_config": {"quant_method": "mxfp4"}}, "w4a16", "quantization_config quant_method mxfp4 (MoE"),
    ({}, None, ""),
    ({"quantization_config": {"quant_method": "gptq", "bits": 3}}, None, "is not a quantization roofline reads"),
    ({"torch_dtype": "float8_e4m3fn"}, None, "torch_dtype float8_e4m3fn is not one roofline reads"),
])
def test_config_precision_reads_quantization_config_then_torch_dtype(fields, precision, words) -> None:
    from scm_xl.physics import config_precision

    found, said = config_precision(fields)
    assert found == precision
    assert said.startswith(words) if precision else words in said


@pytest.mark.parametrize("fields, key, name", [
    ({"_name_or_path": "deepseek-ai/DeepSeek-V3", "architectures": ["DeepseekV3ForCausalLM"],
      "model_type": "deepseek_v3"}, "deepseek-v3", "DeepSeek-V3 (DeepseekV3ForCausalLM)"),
    ({"_name_or_path": "/data/models/my-llama/", "model_type": "llama"}, "my-llama", "my-llama (llama)"),
    ({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}, "qwen3forcausallm", "Qwen3ForCausalLM"),
    ({"model_type": "mixtral"}, "mixtral", "mixtral"),
    ({}, "config", "unnamed model (its config.json gives no _name_or_path, architectures or model_type)"),
])
def test_config_name_comes_from_the_config_not_the_file(fields, key, name) -> None:
    from scm_xl.physics import config_name

    assert config_name(fields) == (key, name)
