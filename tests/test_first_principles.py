"""The first-principles calculator: live formulas equal scm_xl.roofline on every engine."""

from __future__ import annotations

import math
from pathlib import Path

import openpyxl
import pytest
from openpyxl import Workbook
from openpyxl.workbook.defined_name import DefinedName

from scm_xl import roofline
from scm_xl.engines import get_engine
from scm_xl.verify import compare, same_value
from scm_xl.workbook import first_principles as fp
from scm_xl.workbook.catalog_tables import SHEET_TITLES, TABLES_FIRST_ROW, CatalogLayout, physics_catalog, write_tables
from support.engines import ENGINES

NAMES_SHEET = "names"

DEFAULTS: dict[str, object] = {}
DEEPSEEK = {"model": "deepseek-v2.5", "gpu": "h200", "tp": 8, "precision": "fp8"}
OVER_MEMORY = {"model": "llama-3.1-70b", "gpu": "h100-sxm", "tp": 2, "batch": 64}
COMPUTE_BOUND = {"model": "llama-3.1-8b", "gpu": "a100-80gb", "context": 128, "batch": 512}
SEED_800 = {"model": None, "params_b": 7, "bandwidth_gbs": 800}
SEED_1500 = {"model": None, "gpu": None, "params_b": 7, "bandwidth_gbs": 1500, "tflops": 30}
ALIASES = {"model": "Qwen/Qwen2.5-7B-Instruct", "gpu": "H100", "precision": "FP8", "kv_precision": "fp8"}
WILDCARD = {"model": "qwen*"}
NUMERIC_NAME = {"gpu": 4090, "precision": "int4"}
BAD_NUMBER = {"context": 0.5, "bandwidth_efficiency": 1.5}
NO_GPU = {"gpu": None}


def _layout(lang: str) -> CatalogLayout:
    return CatalogLayout(lang, physics_catalog())


def _build(path: Path, cases: dict[str, dict[str, object]], *, names: bool = False) -> dict:
    """A workbook with one calculator per language in `cases`; the expected value of every formula cell."""
    wb = Workbook()
    first = wb.active
    expected: dict = {}
    for lang, inputs in cases.items():
        ws = wb.create_sheet(SHEET_TITLES[lang])
        cl = _layout(lang)
        write_tables(ws, cl)
        addresses = fp.write_calculator(ws, lang, cl)
        fp.set_calculator_inputs(ws, inputs)
        expected.update(fp.expected_calculator(lang, cl, fp.read_calculator_inputs(ws)))
        if names:  # the builder's way: workbook-scoped names, read from another sheet
            check = wb.create_sheet(NAMES_SHEET)
            for row, (name, address) in enumerate(sorted(addresses.items()), start=1):
                col, num = address.rstrip("0123456789"), address[len(address.rstrip("0123456789")):]
                wb.defined_names[name] = DefinedName(name, attr_text=f"'{ws.title}'!${col}${num}")
                check.cell(row=row, column=1, value=name)
                check[f"B{row}"] = f"={name}"
                expected[(NAMES_SHEET, f"B{row}")] = expected[(ws.title, address)]
    wb.remove(first)
    wb.save(path)
    return expected


def _recalculate(engine: str, path: Path, expected: dict) -> dict:
    result = get_engine(engine).recalculate(path)
    sheets = {sheet for sheet, _ in expected}
    verification = compare(expected, result, sheets)
    assert verification.ok, "\n".join(str(m) for m in verification.mismatches) + "\n".join(verification.unexpected)
    assert verification.cells_compared == len(expected)
    return result.values


def _out(values: dict, lang: str, key: str) -> object:
    return values[(SHEET_TITLES[lang], fp.output_cell(key))]


# ---------------------------------------------------------------------------
# On the engines
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_defaults_and_moe_mla_with_names(engine: str, tmp_path: Path) -> None:
    path = tmp_path / "fp.xlsx"
    values = _recalculate(engine, path, _build(path, {"zh": DEFAULTS, "en": DEEPSEEK}, names=True))
    assert _out(values, "zh", "status") == "正常"
    assert _out(values, "zh", "bottleneck_b") == "bandwidth"
    # Qwen2.5-7B GQA, bf16: 2 x 28 layers x 4 KV heads x 128 x 2 bytes per token
    assert _out(values, "zh", "kv_bytes_per_token") == 2 * 28 * 4 * 128 * 2
    # DeepSeek-V2.5: MoE reads the active parameters, MLA caches 60 x (512 + 64) x 2 bytes per token
    assert _out(values, "en", "status") == "ok"
    assert _out(values, "en", "kv_bytes_per_token") == 60 * (512 + 64) * 2
    # A token reads its active parameters less the untied input embedding (102,400 x 5,120 =
    # 524,288,000): 21,375,800,320 - 524,288,000 = 20,851,512,320, one byte each at fp8.
    assert math.isclose(_out(values, "en", "flops_per_token"), 2 * 20851512320)  # type: ignore[arg-type]
    assert math.isclose(_out(values, "en", "weight_bytes"), 235741434880)  # type: ignore[arg-type]
    assert math.isclose(_out(values, "en", "weight_bytes_read"), 20851512320)  # type: ignore[arg-type]
    # MLA at tp 8: the latent is copied to every GPU
    assert _out(values, "en", "kv_replication") == 8
    assert _out(values, "en", "comm_ms_b") > 0  # type: ignore[operator]
    assert values[(NAMES_SHEET, "B1")] is not None


@pytest.mark.parametrize("engine", ENGINES)
def test_capacity_and_compute_bottlenecks(engine: str, tmp_path: Path) -> None:
    path = tmp_path / "fp.xlsx"
    values = _recalculate(engine, path, _build(path, {"zh": OVER_MEMORY, "en": COMPUTE_BOUND}))
    # Llama-3.1-70B bf16 on 2 x 80 GB: 141.1 GB of weights leave room for 14 sequences of 4096 tokens
    assert _out(values, "zh", "max_batch_by_memory") == 14
    assert _out(values, "zh", "fits_memory_b") is False
    assert _out(values, "zh", "bottleneck_b") == "capacity"
    assert _out(values, "zh", "bottleneck_1") == "bandwidth"
    assert _out(values, "en", "bottleneck_b") == "compute"


TP_DEEPSEEK = {"model": "deepseek-v2.5", "gpu": "h200", "tp": 8, "context": 4096}
TP_QWEN = {"model": "qwen2.5-7b", "gpu": "h100-sxm", "tp": 8, "context": 4096}


@pytest.mark.parametrize("engine", ENGINES)
def test_tensor_parallel_kv_replication(engine: str, tmp_path: Path) -> None:
    path = tmp_path / "fp.xlsx"
    values = _recalculate(engine, path, _build(path, {"zh": TP_DEEPSEEK, "en": TP_QWEN}))
    # DeepSeek-V2.5 bf16 on 8 x H200: weights 471.48 GB over 1,128 GB; each sequence's latent
    # 60 x 576 x 2 x 4,096 = 283.1 MB is held on all 8 GPUs: (1,128 - 471.48) / (8 x 0.2831) = 289.9 -> 289
    assert _out(values, "zh", "max_batch_by_memory") == 289
    # Qwen2.5-7B (4 KV heads) on 8 x H100: each GPU keeps one whole head, 2 x 28 x 128 x 2 x 4,096
    # = 58,720,256 B per sequence per GPU; (640e9 - 15,231,233,024) / (8 x 58,720,256) = 1,329.97 -> 1,329
    assert _out(values, "en", "kv_replication") == 2
    assert _out(values, "en", "max_batch_by_memory") == 1329


@pytest.mark.parametrize("engine", ENGINES)
def test_precision_modes(engine: str, tmp_path: Path) -> None:
    path = tmp_path / "fp.xlsx"
    cases = {"zh": {"precision": "w8a16"}, "en": {"precision": "fp32"}}
    values = _recalculate(engine, path, _build(path, cases))
    # w8a16 on the A100: one byte per weight, 16-bit math at the 312 TFLOP/s bf16 peak
    assert _out(values, "zh", "bytes_per_weight") == 1
    assert _out(values, "zh", "peak_flops") == 312e12
    # fp32: four bytes, the 19.5 TFLOP/s FP32 rate (not the bf16 tensor peak)
    assert _out(values, "en", "bytes_per_weight") == 4
    assert _out(values, "en", "peak_flops") == 19.5e12


@pytest.mark.parametrize("engine", ENGINES)
def test_the_seeds_numbers(engine: str, tmp_path: Path) -> None:
    path = tmp_path / "fp.xlsx"
    values = _recalculate(engine, path, _build(path, {"zh": SEED_800, "en": SEED_1500}))
    # 7B at fp16 on 800 GB/s: 17.5 ms per token, about 57 tokens/s; 14 GFLOPs per token
    assert math.isclose(_out(values, "zh", "decode_ms_per_token"), 17.5)  # type: ignore[arg-type]
    assert math.isclose(_out(values, "zh", "ceiling_tps"), 1000 / 17.5)  # type: ignore[arg-type]
    assert math.isclose(_out(values, "zh", "flops_per_token"), 14e9)  # type: ignore[arg-type]
    # on 1,500 GB/s: about 9.3 ms; at 30 TFLOP/s about 2,000 tokens/s if compute-bound
    assert math.isclose(_out(values, "en", "decode_ms_per_token"), 14e9 / 1.5e12 * 1e3)  # type: ignore[arg-type]
    assert round(_out(values, "en", "decode_ms_per_token"), 2) == 9.33  # type: ignore[arg-type]
    assert math.isclose(_out(values, "en", "compute_ceiling_tps"), 30e12 / 14e9)  # type: ignore[arg-type]
    assert _out(values, "en", "kv_bytes_per_seq") is None  # a model given by its size has no known KV cache
    assert _out(values, "en", "max_batch_by_memory") is None


@pytest.mark.parametrize("engine", ENGINES)
def test_names_resolve_exactly_and_case_insensitively(engine: str, tmp_path: Path) -> None:
    path = tmp_path / "fp.xlsx"
    values = _recalculate(engine, path, _build(path, {"zh": WILDCARD, "en": ALIASES}))
    assert _out(values, "zh", "status") == fp.TEXTS["zh"]["unknown_model"]  # no wildcard matching
    assert _out(values, "zh", "decode_ms_per_token") is None
    en = SHEET_TITLES["en"]
    assert values[(en, fp.effective_cell("model"))] == "qwen2.5-7b"
    assert values[(en, fp.effective_cell("gpu"))] == "h100-sxm"
    assert values[(en, fp.effective_cell("precision"))] == "fp8"
    assert values[(en, fp.resolved_cell("compute_precision"))] == "fp8"


@pytest.mark.parametrize("engine", ENGINES)
def test_odd_inputs(engine: str, tmp_path: Path) -> None:
    path = tmp_path / "a.xlsx"
    values = _recalculate(engine, path, _build(path, {"zh": BAD_NUMBER, "en": NUMERIC_NAME}))
    assert _out(values, "zh", "status") == fp.TEXTS["zh"]["bad_number"]
    assert values[(SHEET_TITLES["en"], fp.effective_cell("gpu"))] == "rtx4090"  # a number typed as a name
    path = tmp_path / "b.xlsx"
    values = _recalculate(engine, path, _build(path, {"en": NO_GPU}))
    assert _out(values, "en", "status") == fp.TEXTS["en"]["no_gpu"]


# ---------------------------------------------------------------------------
# The reference alone
# ---------------------------------------------------------------------------


def _expected_outputs(lang: str, inputs: dict[str, object]) -> dict[str, object]:
    given = {**fp.DEFAULT_INPUTS, **inputs}
    cells = fp.expected_calculator(lang, _layout(lang), given)
    return {key: cells[(SHEET_TITLES[lang], fp.output_cell(key))] for key in fp.OUTPUT_ROWS}


@pytest.mark.parametrize("inputs", [DEFAULTS, DEEPSEEK, OVER_MEMORY, COMPUTE_BOUND,
                                    {"model": "qwen2.5-72b", "gpu": "l40s", "precision": "int4", "tp": 4,
                                     "bandwidth_efficiency": 0.7, "compute_efficiency": 0.4}])
def test_expected_values_are_the_roofline_report(inputs: dict[str, object]) -> None:
    given = {**fp.DEFAULT_INPUTS, **inputs}
    deployment = roofline.Deployment(
        roofline.find_model(str(given["model"])), roofline.find_gpu(str(given["gpu"])),
        precision=str(given["precision"]), tp=int(given["tp"]),  # type: ignore[call-overload]
        context=int(given["context"]),  # type: ignore[call-overload]
        bandwidth_efficiency=float(given["bandwidth_efficiency"]),  # type: ignore[arg-type]
        compute_efficiency=float(given["compute_efficiency"]))  # type: ignore[arg-type]
    report = roofline.analyze(deployment, [1, int(given["batch"])])  # type: ignore[call-overload]
    out = _expected_outputs("en", inputs)
    for key in ("flops_per_token", "weight_bytes", "decode_ms_per_token", "ceiling_tps", "max_batch_by_memory",
                "compute_ceiling_tps"):
        assert same_value(getattr(report, key), out[key]), key
    assert same_value(report.kv_cache_bytes_per_seq, out["kv_bytes_per_seq"])
    at_b = report.batches[1]
    assert (out["step_ms_b"], out["ceiling_tps_b"], out["bottleneck_b"], out["fits_memory_b"]) == \
        (at_b.step_ms, at_b.ceiling_tps, at_b.bottleneck, at_b.fits_memory)
    assert same_value(deployment.prefill_seconds(int(given["prompt_tokens"])) * 1e3,  # type: ignore[call-overload]
                      out["prefill_ms"])


def test_seed_numbers_in_the_reference() -> None:
    out = _expected_outputs("en", SEED_800)
    assert out["decode_ms_per_token"] == pytest.approx(17.5)
    assert out["ceiling_tps"] == pytest.approx(57.14, abs=0.01)
    assert out["flops_per_token"] == 14e9
    assert _expected_outputs("en", SEED_1500)["decode_ms_per_token"] == pytest.approx(9.333, abs=1e-3)


def test_an_unresolved_model_blanks_every_result() -> None:
    out = _expected_outputs("en", {"model": "no-such-model", "params_b": None})
    assert out.pop("status") == fp.TEXTS["en"]["unknown_model"]
    assert set(out.values()) == {None}


@pytest.mark.parametrize("lang", ["zh", "en"])
@pytest.mark.parametrize("inputs", [DEFAULTS, DEEPSEEK, SEED_1500, WILDCARD, BAD_NUMBER])
def test_every_formula_cell_has_an_expected_value(lang: str, inputs: dict[str, object]) -> None:
    cl = _layout(lang)
    formulas = fp.calculator_formulas(lang, cl)
    expected = fp.expected_calculator(lang, cl, {**fp.DEFAULT_INPUTS, **inputs})
    assert {address for _, address in expected} == set(formulas)


def test_the_block_fits_above_the_catalog_and_round_trips(tmp_path: Path) -> None:
    wb = Workbook()
    ws = wb.active
    ws.title = SHEET_TITLES["en"]
    cl = _layout("en")
    write_tables(ws, cl)
    addresses = fp.write_calculator(ws, "en", cl)
    assert set(addresses) == set(fp.DEFINED_NAMES)
    rows = [int(a.lstrip("ABCDEFGH")) for a in fp.calculator_formulas("en", cl)]
    assert max(rows) <= 55 < TABLES_FIRST_ROW
    assert all(ws[address].data_type == "f" for address in addresses.values())
    validated = {str(ref) for dv in ws.data_validations.dataValidation for ref in dv.sqref.ranges}
    assert {fp.input_cell("model"), fp.input_cell("gpu"), fp.input_cell("precision")} <= validated
    wb.save(tmp_path / "fp.xlsx")
    again = openpyxl.load_workbook(tmp_path / "fp.xlsx")[SHEET_TITLES["en"]]
    assert fp.read_calculator_inputs(again) == fp.DEFAULT_INPUTS


def test_unknown_input_keys_are_refused() -> None:
    ws = Workbook().active
    with pytest.raises(KeyError, match="no calculator input"):
        fp.set_calculator_inputs(ws, {"modle": "qwen2.5-7b"})
