"""First-principles bounds: the seed's worked numbers, hand-computed KV sizes, the catalog and the CLI."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl import roofline
from scm_xl.cli import main
from scm_xl.errors import InputError
from scm_xl.roofline import Deployment, Gpu, ModelSpec, analyze

SEVEN_B = ModelSpec.from_params(7)


def seven_b_on(bandwidth_gbs: float, tflops: float | None = None, **kwargs) -> Deployment:
    return Deployment(SEVEN_B, Gpu.from_numbers(bandwidth_gbs=bandwidth_gbs, tflops=tflops), precision="fp16",
                      **kwargs)


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["roofline", *args])
    return result.exit_code, result.output


def run_json(*args: str) -> dict:
    code, output = run_cli(*args, "--json")
    assert code == 0, output
    return json.loads(output)


# --- The seed's worked numbers ------------------------------------------------


def test_seed_7b_fp16_at_800_gbs_is_17_5_ms_and_57_tps():
    report = analyze(seven_b_on(800))
    assert report.weight_bytes == 14e9
    assert report.decode_ms_per_token == pytest.approx(17.5)
    assert report.ceiling_tps == pytest.approx(57.14, abs=0.01)
    assert report.bottleneck == "bandwidth"


def test_seed_7b_fp16_at_1500_gbs_is_9_3_ms_in_si_units():
    # The seed divides by 1024**3 (GiB) and then by GB/s, which would give 8.7 ms.
    assert analyze(seven_b_on(1500)).decode_ms_per_token == pytest.approx(9.333, abs=0.001)


def test_seed_7b_is_14_gflops_per_token():
    assert roofline.flops_per_token(7e9) == 14e9
    assert roofline.training_flops_per_token(7e9) == 42e9
    assert analyze(seven_b_on(800)).flops_per_token == 14e9


def test_seed_30_tflops_gives_about_2000_tokens_per_second_compute_bound():
    report = analyze(seven_b_on(800, tflops=30), [64])
    assert report.compute_ceiling_tps == pytest.approx(2142.86, abs=0.01)
    row = report.batches[0]
    assert row.bottleneck == "compute"
    assert row.ceiling_tps == pytest.approx(30e12 / 14e9)


def test_seed_numbers_from_the_cli():
    data = run_json("--params-b", "7", "--bandwidth-gbs", "800", "--precision", "fp16")
    assert data["flops_per_token"] == 14e9
    assert data["weight_bytes"] == 14e9
    assert data["decode_ms_per_token"] == pytest.approx(17.5)
    assert data["ceiling_tps"] == pytest.approx(57.14, abs=0.01)
    assert data["bottleneck"] == "bandwidth"
    assert data["kv_cache_bytes_per_seq"] is None
    assert data["max_batch_by_memory"] is None

    data = run_json("--params-b", "7", "--bandwidth-gbs", "1500", "--precision", "fp16")
    assert round(data["decode_ms_per_token"], 1) == 9.3

    data = run_json("--params-b", "7", "--bandwidth-gbs", "800", "--tflops", "30", "--precision", "fp16",
                    "--batch", "1,64")
    assert data["compute_ceiling_tps"] == pytest.approx(2142.86, abs=0.01)
    assert [row["bottleneck"] for row in data["batches"]] == ["bandwidth", "compute"]
    assert data["batches"][1]["ceiling_tps"] == pytest.approx(2142.86, abs=0.01)


def test_json_keys():
    data = run_json("--model", "qwen2.5-7b", "--gpu", "a100-80gb", "--batch", "1,8,64")
    for key in ("flops_per_token", "weight_bytes", "decode_ms_per_token", "ceiling_tps",
                "kv_cache_bytes_per_seq", "max_batch_by_memory", "bottleneck", "batches", "units"):
        assert key in data
    assert [row["batch"] for row in data["batches"]] == [1, 8, 64]
    for row in data["batches"]:
        assert set(row) >= {"batch", "step_ms", "ceiling_tps", "per_stream_tps", "kv_bytes", "bottleneck",
                            "fits_memory"}
    assert data["model"] == "qwen2.5-7b" and data["gpu"] == "a100-80gb"


# --- Units ------------------------------------------------------------------------


def test_doubling_bandwidth_halves_a_bandwidth_bound_step():
    slow, fast = analyze(seven_b_on(800)), analyze(seven_b_on(1600))
    assert fast.decode_ms_per_token == pytest.approx(slow.decode_ms_per_token / 2)


def test_milliseconds_agree_with_seconds_and_tokens_per_second():
    report = analyze(seven_b_on(800), [1, 4])
    seconds = roofline.decode_step_seconds(weight_bytes_read=14e9, kv_bytes_per_seq=0.0, batch=4,
                                           flops_per_token=14e9, bandwidth=800e9, peak_flops=None)
    assert seconds == pytest.approx(0.0175)
    row = report.batches[1]
    assert row.step_ms == pytest.approx(seconds * 1e3)
    assert row.ceiling_tps == pytest.approx(4 / seconds)
    assert row.per_stream_tps == pytest.approx(1 / seconds)


def test_efficiency_factors_scale_the_bound():
    full = analyze(seven_b_on(800))
    half = analyze(seven_b_on(800, bandwidth_efficiency=0.5))
    assert half.decode_ms_per_token == pytest.approx(2 * full.decode_ms_per_token)
    compute = analyze(seven_b_on(800, tflops=30, compute_efficiency=0.5))
    assert compute.compute_ceiling_tps == pytest.approx(15e12 / 14e9)


def test_weight_bytes_by_precision():
    assert [roofline.weight_bytes(1e9, p) for p in ("fp32", "bf16", "fp16", "fp8", "int8", "int4")] == \
        [4e9, 2e9, 2e9, 1e9, 1e9, 0.5e9]
    with pytest.raises(InputError, match="unknown precision 'fp3'"):
        roofline.weight_bytes(1e9, "fp3")


def test_attention_terms():
    assert roofline.attention_flops_linear(32, 4096, 1000) == 4 * 32 * 4096 * 1000
    assert roofline.attention_flops_quadratic(32, 4096, 1000) == 2 * 32 * 4096 * 1000**2


def test_prefill_is_compute_bound_for_long_prompts_and_bandwidth_bound_for_short():
    model = roofline.find_model("llama-3.1-8b")
    deployment = Deployment(model, roofline.find_gpu("h100-sxm"))
    long_prompt = deployment.prefill_seconds(4096)
    # parameters read per token: 8,030,261,248 less the untied embedding 128,256 x 4,096
    flops = 4096 * 2 * (8030261248 - 128256 * 4096) + 2 * 32 * 4096 * 4096**2
    assert long_prompt == pytest.approx(flops / 989.4e12)
    assert deployment.prefill_seconds(1) == pytest.approx(2 * model.total_params / 3350e9)


# --- The model's shape: MoE, GQA, MLA ------------------------------------------------


def test_moe_uses_active_parameters_for_flops_and_reads_but_total_for_residency():
    model = roofline.find_model("deepseek-v2.5")
    assert 20e9 < model.active_params < 22e9
    assert 230e9 < model.total_params < 240e9
    report = analyze(Deployment(model, roofline.find_gpu("h200"), tp=8))
    # active parameters less the untied input embedding (102,400 x 5,120)
    assert report.flops_per_token == 2 * (model.active_params - 102400 * 5120)
    assert report.weight_bytes == 2 * model.total_params
    assert report.weight_bytes_read == 2 * (model.active_params - 102400 * 5120)
    assert any("MoE" in note for note in report.notes)


def test_gqa_kv_cache_llama_3_1_8b():
    model = roofline.find_model("llama-3.1-8b")
    assert roofline.kv_bytes_per_token(model, 2) == 2 * 32 * 8 * 128 * 2 == 131072
    assert roofline.kv_cache_bytes_per_seq(model, 4096, 2) == 131072 * 4096


def test_gqa_kv_cache_qwen2_5_7b():
    model = roofline.find_model("qwen2.5-7b")
    assert roofline.kv_bytes_per_token(model, 2) == 2 * 28 * 4 * 128 * 2 == 57344


def test_mla_kv_cache_deepseek_v2_5():
    model = roofline.find_model("deepseek-v2.5")
    assert roofline.kv_bytes_per_token(model, 2) == 60 * (512 + 64) * 2 == 69120
    report = analyze(Deployment(model, roofline.find_gpu("h200"), tp=8, context=1000))
    assert report.kv_cache_bytes_per_seq == 69120 * 1000


def test_kv_precision_defaults_to_16_bits_and_can_be_set():
    model = roofline.find_model("llama-3.1-8b")
    gpu = roofline.find_gpu("h100")
    assert Deployment(model, gpu, precision="fp8").kv_bytes_per_token == 131072
    assert Deployment(model, gpu, precision="fp8", kv_precision="fp8").kv_bytes_per_token == 65536
    assert Deployment(model, gpu, precision="fp32").kv_bytes_per_token == 2 * 131072


def test_adhoc_model_has_unknown_kv_cache():
    assert roofline.kv_bytes_per_token(SEVEN_B, 2) is None
    report = analyze(seven_b_on(800))
    assert report.kv_cache_bytes_per_seq is None
    assert report.max_batch_by_memory is None
    assert report.batches[0].kv_bytes is None


# --- Bottlenecks and capacity -------------------------------------------------------


def test_bottleneck_moves_from_bandwidth_to_compute_as_batch_grows():
    deployment = Deployment(roofline.find_model("llama-3.1-8b"), roofline.find_gpu("h100-sxm"), context=128)
    rows = analyze(deployment, [1, 16, 512]).batches
    assert [row.bottleneck for row in rows] == ["bandwidth", "bandwidth", "compute"]
    assert rows[0].ceiling_tps < rows[1].ceiling_tps < rows[2].ceiling_tps
    assert rows[0].per_stream_tps > rows[2].per_stream_tps


def test_capacity_when_the_batch_does_not_fit():
    deployment = Deployment(roofline.find_model("qwen2.5-7b"), roofline.find_gpu("a100-80gb"))
    max_batch = deployment.max_batch_by_memory
    # (80e9 - 2 x 7,615,616,512) / (57,344 x 4,096), floored
    assert max_batch == math.floor((80e9 - 2 * 7615616512) / (57344 * 4096)) == 275
    rows = analyze(deployment, [max_batch, max_batch + 1]).batches
    assert rows[0].fits_memory is True and rows[0].bottleneck == "bandwidth"
    assert rows[1].fits_memory is False and rows[1].bottleneck == "capacity"


def test_reserve_lowers_the_max_batch():
    model, gpu = roofline.find_model("qwen2.5-7b"), roofline.find_gpu("a100-80gb")
    reserved = Deployment(model, gpu, reserve_bytes=10e9)
    assert reserved.max_batch_by_memory == math.floor((70e9 - 2 * 7615616512) / (57344 * 4096))


def test_weights_that_do_not_fit_are_capacity_bound():
    report = analyze(Deployment(roofline.find_model("llama-3.1-70b"), roofline.find_gpu("rtx4090")))
    assert report.max_batch_by_memory == 0
    assert report.bottleneck == "capacity"


# --- Tensor parallelism ---------------------------------------------------------------


def test_tensor_parallel_multiplies_resources_and_adds_communication():
    model, gpu = roofline.find_model("llama-3.1-70b"), roofline.find_gpu("h100-sxm")
    single = Deployment(model, gpu)
    tp4 = Deployment(model, gpu, tp=4)
    assert tp4.memory_bytes == 4 * 80e9
    assert tp4.bandwidth == 4 * 3350e9
    assert tp4.peak_flops == 4 * 989.4e12
    assert analyze(single).bottleneck == "capacity"
    report = analyze(tp4, [8])
    row = report.batches[0]
    comm_seconds = 2 * 80 * (3 / 4) * 8 * 8192 * 2 / 450e9
    assert row.comm_ms == pytest.approx(comm_seconds * 1e3)
    # 8 KV heads over 4 GPUs split evenly (no copy); reads leave out the 128,256 x 8,192 embedding
    memory_seconds = (2 * (model.active_params - 128256 * 8192) + 8 * 327680 * 4096) / (4 * 3350e9)
    assert row.step_ms == pytest.approx((memory_seconds + comm_seconds) * 1e3)
    assert report.link_bandwidth == 450e9
    assert any("TP 4" in note for note in report.notes)


def test_link_bandwidth_comes_from_the_gpu_and_can_be_overridden():
    model = roofline.find_model("llama-3.1-70b")
    assert Deployment(model, roofline.find_gpu("h100-pcie"), tp=2).link_bandwidth_used == 64e9
    pcie = Deployment(model, roofline.find_gpu("h100-pcie"), tp=2, link_bandwidth=300e9)
    assert pcie.link_bandwidth_used == 300e9
    assert pcie.comm_seconds(1) == pytest.approx(2 * 80 * 0.5 * 8192 * 2 / 300e9)
    assert Deployment(model, roofline.find_gpu("h100-pcie")).comm_seconds(64) == 0.0


def test_tp_from_the_cli():
    data = run_json("--model", "llama-3.1-70b", "--gpu", "h100", "--tp", "2", "--batch", "1,8")
    assert data["tp"] == 2
    assert data["memory_bytes"] == 160e9
    assert data["batches"][1]["comm_ms"] > data["batches"][0]["comm_ms"] > 0


# --- Helpers for later steps ---------------------------------------------------------------


def test_c_model_from_first_principles_is_the_ratio_of_weight_bytes_read():
    # (72,706,203,648 - 152,064 x 8,192) / (7,615,616,512 - 152,064 x 3,584) = 71,460,495,360 / 7,070,619,136
    assert roofline.c_model_from_first_principles("qwen2.5-7b", "qwen2.5-72b", "bf16") == \
        pytest.approx(71460495360 / 7070619136)
    small, moe = roofline.find_model("llama-3.1-8b"), roofline.find_model("deepseek-v2.5")
    assert roofline.c_model_from_first_principles(small, moe) == \
        pytest.approx(moe.read_params / small.read_params)
    assert roofline.c_model_from_first_principles(small, small, "bf16", precision_b="fp8") == 0.5


def test_simulator_params_reproduce_the_decode_step():
    deployment = Deployment(roofline.find_model("llama-3.1-70b"), roofline.find_gpu("h100-sxm"), tp=4,
                            context=2048, bandwidth_efficiency=0.8)
    params = roofline.simulator_params(deployment)
    assert params["base_step_seconds"] == pytest.approx(deployment.weight_bytes_read / (0.8 * 4 * 3350e9))
    for row in analyze(deployment, [1, 32, 256]).batches:
        b = row.batch
        predicted = max(params["base_step_seconds"] + b * params["per_sequence_seconds"],
                        b * params["per_sequence_compute_seconds"]) + b * params["per_sequence_comm_seconds"]
        assert predicted == pytest.approx(row.step_ms / 1e3)
    assert params["prefill_seconds_per_token"] == pytest.approx(deployment.prefill_seconds(2048) / 2048)
    assert params["max_batch"] == deployment.max_batch_by_memory


# --- The catalog ----------------------------------------------------------------------------


def test_catalog_has_the_required_entries_with_sources():
    catalog = roofline.load_catalog()
    assert set(catalog.gpus) >= {"a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200", "l40s", "rtx4090"}
    assert set(catalog.models) >= {"qwen2.5-7b", "qwen2.5-72b", "llama-3.1-8b", "llama-3.1-70b",
                                   "deepseek-v2.5"}
    for gpu in catalog.gpus.values():
        assert {"memory_bytes", "memory_bandwidth", "peak_flops", "link_bandwidth"} <= set(gpu.sources)
        assert "bf16" in gpu.peak_flops
    for model in catalog.models.values():
        assert {"total_params", "layers", "hidden_size", "kv_heads", "head_dim"} <= set(model.sources)
        assert all("config.json" in model.sources[name] for name in ("layers", "hidden_size", "kv_heads"))
    assert "fp8" not in catalog.gpus["a100-80gb"].peak_flops
    h100 = catalog.gpus["h100-sxm"].peak_flops
    assert h100["fp8"] == pytest.approx(2 * h100["bf16"], rel=1e-3)  # dense FP8 is twice dense BF16


@pytest.mark.parametrize("name, key", [
    ("Qwen2.5-7B", "qwen2.5-7b"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b"),
    ("  QWEN2.5-72B-instruct ", "qwen2.5-72b"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
    ("meta-llama/Meta-Llama-3.1-70B-Instruct", "llama-3.1-70b"),
    ("deepseek-ai/DeepSeek-V2.5", "deepseek-v2.5"),
])
def test_model_names_are_case_insensitive_with_aliases(name, key):
    assert roofline.find_model(name).key == key


@pytest.mark.parametrize("name, key", [
    ("H100", "h100-sxm"), ("h100-SXM", "h100-sxm"), ("4090", "rtx4090"), ("RTX 4090", "rtx4090"),
    ("L40S", "l40s"), ("A100-40GB", "a100-40gb"), ("h100-pcie", "h100-pcie"), ("H200", "h200"),
])
def test_gpu_names_are_case_insensitive_with_aliases(name, key):
    assert roofline.find_gpu(name).key == key


def test_unknown_names_list_the_known_ones():
    with pytest.raises(InputError, match=r"unknown model 'gpt-5'; known models: deepseek-v2.5, .*qwen2.5-7b"):
        roofline.find_model("gpt-5")
    with pytest.raises(InputError, match=r"unknown GPU 'tpu-v5e'; known GPUs: a100-40gb, .*rtx4090"):
        roofline.find_gpu("tpu-v5e")


def test_fp8_on_a_chip_without_fp8_has_no_borrowed_peak():
    # fp8 = w8a8-fp8: fp8 math. The A100 has none, so no compute bound rather than the bf16 one;
    # the note points at w8a16 (weight-only fp8, 16-bit math at 312 TFLOP/s).
    deployment = Deployment(roofline.find_model("llama-3.1-8b"), roofline.find_gpu("a100-80gb"), precision="fp8")
    assert deployment.compute_precision is None
    assert deployment.peak_flops is None
    assert any("no fp8 peak" in note and "w8a16" in note for note in analyze(deployment).notes)
    weight_only = Deployment(roofline.find_model("llama-3.1-8b"), roofline.find_gpu("a100-80gb"), precision="w8a16")
    assert (weight_only.compute_precision, weight_only.peak_flops) == ("bf16", 312e12)


def test_user_catalog_adds_and_overrides(tmp_path: Path):
    extra = tmp_path / "mine.json"
    extra.write_text(json.dumps({
        "gpus": {
            "H100-SXM": {"memory_bandwidth": 3.0e12},
            "mi300x": {"name": "AMD Instinct MI300X", "aliases": ["MI300"], "memory_bytes": 192e9,
                       "memory_bandwidth": 5.3e12, "peak_flops": {"bf16": 1307.4e12, "fp8": 2614.9e12},
                       "link_bandwidth": 64e9, "sources": {"memory_bytes": "AMD MI300X datasheet"}},
        },
        "models": {
            "tiny-1b": {"total_params": 1e9, "layers": 16, "hidden_size": 2048, "attention_heads": 16,
                        "kv_heads": 4, "aliases": ["me/Tiny-1B"]},
        },
    }))
    catalog = roofline.load_catalog(extra)
    h100 = catalog.find_gpu("h100")
    assert h100.memory_bandwidth == 3.0e12
    assert h100.memory_bytes == 80e9
    assert h100.sources["memory_bandwidth"] == f"user catalog {extra}"
    assert "datasheet" in h100.sources["memory_bytes"]
    mi300 = catalog.find_gpu("MI300")
    assert mi300.key == "mi300x" and mi300.sources["memory_bytes"] == "AMD MI300X datasheet"
    tiny = catalog.find_model("me/tiny-1b-instruct")
    assert tiny.active_params == 1e9 and tiny.head_dim == 128
    assert roofline.kv_bytes_per_token(tiny, 2) == 2 * 16 * 4 * 128 * 2
    assert "qwen2.5-7b" in catalog.models
    # the built-in catalog is untouched
    assert roofline.find_gpu("h100").memory_bandwidth == 3350e9


def test_user_catalog_from_the_cli(tmp_path: Path):
    extra = tmp_path / "mine.json"
    extra.write_text(json.dumps({"models": {"tiny-1b": {"total_params": 1e9}}}))
    data = run_json("--catalog", str(extra), "--model", "TINY-1B", "--gpu", "h100")
    assert data["model"] == "tiny-1b"
    assert data["decode_ms_per_token"] == pytest.approx(2e9 / 3350e9 * 1e3)


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('{"gpus": {"x": {"memory_bytes": 1e9}}}', "gpus.x: missing memory_bandwidth"),
    ('{"models": {"x": {"total_params": -5}}}', "models.x: total_params must be a positive number"),
    ('{"models": {"x": {"total_params": 1e9, "layerz": 3}}}', "unknown fields: layerz"),
    ('{"model": {}}', "unknown top-level keys: model"),
])
def test_bad_user_catalog_is_an_input_error(tmp_path: Path, content: str, message: str):
    extra = tmp_path / "bad.json"
    extra.write_text(content)
    with pytest.raises(InputError, match=message):
        roofline.load_catalog(extra)
    code, output = run_cli("--catalog", str(extra), "--model", "qwen2.5-7b", "--gpu", "h100")
    assert code == 2
    assert output.startswith("Error: ") and str(extra) in output
    assert "Traceback" not in output


# --- Input validation and CLI errors ----------------------------------------------------------


@pytest.mark.parametrize("kwargs, message", [
    ({"tp": 0}, "tp must be a positive whole number"),
    ({"context": -1}, "context must be a positive whole number"),
    ({"bandwidth_efficiency": 1.5}, r"bandwidth efficiency must be in \(0, 1\]"),
    ({"compute_efficiency": 0}, "compute efficiency must be a positive number"),
    ({"reserve_bytes": -1.0}, "reserve must be zero or positive"),
    ({"precision": "fp4"}, "unknown precision 'fp4'"),
])
def test_bad_deployments_are_input_errors(kwargs, message):
    with pytest.raises(InputError, match=message):
        Deployment(SEVEN_B, Gpu.from_numbers(bandwidth_gbs=800), **kwargs)


def test_parse_batches():
    assert roofline.parse_batches("1, 8,64") == [1, 8, 64]
    for bad in ("", "0", "1,,2", "-1", "1.5", "a"):
        with pytest.raises(InputError, match="bad batch list"):
            roofline.parse_batches(bad)


@pytest.mark.parametrize("args, message", [
    (["--model", "gpt-5", "--gpu", "h100"], "Error: unknown model 'gpt-5'; known models: deepseek-v2.5"),
    (["--model", "qwen2.5-7b", "--gpu", "tpu"], "Error: unknown GPU 'tpu'; known GPUs: a100-40gb"),
    (["--model", "qwen2.5-7b"], "Error: give --gpu NAME or --bandwidth-gbs X"),
    (["--model", "qwen2.5-7b", "--tflops", "30"], "Error: give --gpu NAME or --bandwidth-gbs X"),
    (["--gpu", "h100"], "Error: give one of --model NAME, --config config.json or --params-b X"),
    (["--model", "qwen2.5-7b", "--params-b", "7", "--gpu", "h100"], "Error: give one of --model NAME"),
    (["--model", "qwen2.5-7b", "--gpu", "h100", "--bandwidth-gbs", "800"], "Error: give either --gpu NAME"),
    (["--params-b", "-7", "--bandwidth-gbs", "800"], "Error: params_b must be a positive number"),
    (["--params-b", "7", "--bandwidth-gbs", "-800"], "Error: bandwidth must be a positive number"),
    (["--params-b", "7", "--bandwidth-gbs", "800", "--memory-gb", "0"], "Error: memory must be a positive"),
    (["--model", "qwen2.5-7b", "--gpu", "h100", "--batch", "1,x"], "Error: bad batch list '1,x'"),
    (["--model", "qwen2.5-7b", "--gpu", "h100", "--batch", "0"], "Error: bad batch list '0'"),
    (["--model", "qwen2.5-7b", "--gpu", "h100", "--tp", "0"], "Error: tp must be a positive whole number"),
    (["--model", "qwen2.5-7b", "--gpu", "h100", "--context", "0"], "Error: context must be a positive"),
    (["--model", "qwen2.5-7b", "--gpu", "h100", "--reserve-gb", "-1"], "Error: --reserve-gb must be zero"),
    (["--model", "qwen2.5-7b", "--gpu", "h100", "--bandwidth-efficiency", "2"],
     "Error: bandwidth efficiency must be in (0, 1]"),
    (["--model", "qwen2.5-7b", "--gpu", "h100", "--catalog", "/nonexistent/x.json"],
     "Error: /nonexistent/x.json: cannot read catalog"),
])
def test_cli_bad_input_exits_2_with_an_error_line(args, message):
    code, output = run_cli(*args)
    assert code == 2, output
    assert output.startswith(message), output
    assert "Traceback" not in output


def test_cli_text_output_has_units():
    code, output = run_cli("--model", "qwen2.5-7b", "--gpu", "a100-80gb", "--batch", "1,8,64")
    assert code == 0, output
    assert "Qwen2.5-7B on NVIDIA A100 80GB SXM4" in output
    assert "57.34 kB/token" in output and "234.9 MB" in output
    assert "ms/token" in output and "tokens/s" in output and "2.039 TB/s" in output
    assert "step ms" in output and "ceiling tok/s" in output
    assert "Max batch by memory     275" in output


def test_cli_list():
    code, output = run_cli("--list")
    assert code == 0
    assert "h100-sxm" in output and "deepseek-v2.5" in output
    data = run_json("--list")
    assert "rtx4090" in data["gpus"] and "llama-3.1-70b" in data["models"]


def test_cli_help():
    code, output = run_cli("--help")
    assert code == 0
    assert "--bandwidth-gbs" in output and "--catalog" in output


# --- Corrections from the fact-check (issue 10), each against a figure worked by hand ----------


def test_rtx4090_peaks_are_on_one_basis():
    # Ada whitepaper, RTX 4090, dense with FP32 accumulate: BF16 165.2, FP8 330.3 (660.6 is FP16 accumulate)
    peaks = roofline.find_gpu("rtx4090").peak_flops
    assert peaks["fp8"] == 330.3e12
    assert peaks["bf16"] == 165.2e12


def test_every_gpu_has_fp8_at_twice_its_16_bit_peak_where_it_has_both():
    # One basis (dense, FP32 accumulate): fp8 math is twice bf16 on every chip that has it.
    # The L40S datasheet's own figures are 362.05 and 733 (2.02x), hence 2% slack.
    for gpu in roofline.load_catalog().gpus.values():
        if "fp8" in gpu.peak_flops:
            assert gpu.peak_flops["fp8"] == pytest.approx(2 * gpu.peak_flops["bf16"], rel=0.02), gpu.key


def test_deepseek_tp8_copies_the_mla_latent_to_every_gpu():
    report = analyze(Deployment(roofline.find_model("deepseek-v2.5"), roofline.find_gpu("h200"), tp=8,
                                context=4096), [1, 64])
    # latent per sequence: 60 layers x (512 + 64) x 2 B x 4,096 = 283,115,520 B, on each of 8 GPUs
    assert report.kv_cache_bytes_per_seq == 283115520
    assert report.kv_replication == 8
    # (8 x 141e9 - 235,741,434,880 x 2) / (8 x 283,115,520) = 656.52e9 / 2.2649e9 = 289.9 -> 289 (was 2,318)
    assert report.max_batch_by_memory == 289
    # KV read per step at batch 64: 64 x 8 x 283,115,520 B over 8 x 4.8e12 B/s = 3.775 ms (was 8x less)
    row = report.batches[1]
    weights = 2 * (21375800320 - 102400 * 5120) / (8 * 4800e9)
    assert row.memory_ms == pytest.approx((weights + 64 * 8 * 283115520 / (8 * 4800e9)) * 1e3)


def test_qwen_tp8_replicates_its_4_kv_heads():
    deployment = Deployment(roofline.find_model("qwen2.5-7b"), roofline.find_gpu("h100-sxm"), tp=8, context=4096)
    # 4 KV heads over 8 GPUs: each keeps one whole head, 8 heads held in all = 2 copies
    assert deployment.kv_replication == 2
    # per GPU: 2 x 28 x 1 x 128 x 2 B x 4,096 = 58,720,256 B per sequence;
    # (80e9 - 15,231,233,024 / 8) / 58,720,256 = 1,329.97 -> 1,329 (was 2,659)
    assert deployment.max_batch_by_memory == 1329
    # 8 heads over 8 GPUs split evenly: no copy
    assert Deployment(roofline.find_model("llama-3.1-8b"), roofline.find_gpu("h100-sxm"), tp=8).kv_replication == 1


def test_deepseek_prefill_attention_uses_its_attention_width():
    model = roofline.find_model("deepseek-v2.5")
    # 128 heads x (qk 192 + v 128) / 2 = 20,480, four times the hidden size 5,120
    assert model.attention_width == 20480
    deployment = Deployment(model, roofline.find_gpu("h200"), context=4096)
    # prefill of 4,096 tokens is compute-bound: (4,096 x 2 x 20,851,512,320 + 2 x 60 x 20,480 x 4,096^2) / 989.4e12
    flops = 4096 * 2 * 20851512320 + 2 * 60 * 20480 * 4096**2
    assert deployment.prefill_seconds(4096) == pytest.approx(flops / 989.4e12)
    # the dense models keep w = d: Llama-3.1-8B 32 x (128 + 128) / 2 = 4,096
    assert roofline.find_model("llama-3.1-8b").attention_width == 4096


@pytest.mark.parametrize("precision, weight_bytes, compute, peak", [
    ("w16a16", 2.0, "bf16", 312e12),
    ("bf16", 2.0, "bf16", 312e12),      # alias of w16a16
    ("w8a8", 1.0, "int8", 624e12),      # no fp8 on the A100: int8 math (SmoothQuant-style)
    ("w8a16", 1.0, "bf16", 312e12),     # weight-only: 16-bit math
    ("w4a16", 0.5, "bf16", 312e12),
    ("int4", 0.5, "bf16", 312e12),      # alias of w4a16
    ("fp32", 4.0, "fp32", 19.5e12),     # FP32 math, not the bf16 tensor peak
])
def test_precision_modes_set_bytes_and_the_compute_peak(precision, weight_bytes, compute, peak):
    deployment = Deployment(roofline.find_model("llama-3.1-8b"), roofline.find_gpu("a100-80gb"), precision=precision)
    assert roofline.precision_bytes(precision) == weight_bytes
    assert (deployment.compute_precision, deployment.peak_flops) == (compute, peak)
    # weight bytes read: 7,504,924,672 parameters x bytes per weight
    assert deployment.weight_bytes_read == 7504924672 * weight_bytes


def test_fp32_keeps_fp32_kv_and_w8a8_uses_fp8_where_the_chip_has_it():
    model = roofline.find_model("llama-3.1-8b")
    assert Deployment(model, roofline.find_gpu("a100-80gb"), precision="fp32").kv_precision_used == "fp32"
    h100 = Deployment(model, roofline.find_gpu("h100-sxm"), precision="w8a8")
    assert (h100.compute_precision, h100.peak_flops, h100.kv_precision_used) == ("fp8", 1978.9e12, "bf16")


def test_the_input_embedding_is_not_read_per_token():
    qwen = roofline.find_model("qwen2.5-7b")
    # untied: 7,615,616,512 - 152,064 x 3,584 = 7,070,619,136 parameters read, 7.7% fewer
    assert qwen.read_params == 7070619136
    report = analyze(Deployment(qwen, roofline.find_gpu("a100-80gb")))
    assert report.weight_bytes_read == 2 * 7070619136
    assert report.flops_per_token == 2 * 7070619136
    assert report.weight_bytes == 2 * 7615616512  # all stay resident
    # tied: the one table is the LM head, read once per token, so nothing is left out
    tied = ModelSpec(key="t", name="t", total_params=1e9, active_params=1e9, layers=16, hidden_size=2048,
                     attention_heads=16, kv_heads=4, head_dim=128, vocab_size=151936, tie_word_embeddings=True)
    assert tied.read_params == 1e9


# --- The catalog's sources and the config.json path ----------------------------------------

_GPU_FIGURES = ("memory_bytes", "memory_bandwidth", "peak_flops", "link_bandwidth")
_MODEL_FIGURES = ("total_params", "active_params", "layers", "hidden_size", "attention_heads", "kv_heads",
                  "head_dim", "vocab_size", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "tie_word_embeddings",
                  "native_precision")


def _missing_sources(catalog_json: dict) -> list[str]:
    missing = []
    for section, figures in (("gpus", _GPU_FIGURES), ("models", _MODEL_FIGURES)):
        for key, entry in catalog_json[section].items():
            sources = entry.get("sources", {})
            missing += [f"{section}.{key}.{name}" for name in figures
                        if name in entry and not str(sources.get(name, "")).strip()]
    return missing


def test_every_catalog_figure_names_its_source():
    data = json.loads(roofline._builtin_path().read_text(encoding="utf-8"))
    assert _missing_sources(data) == []
    # and the check can fail: drop one source
    del data["gpus"]["h20"]["sources"]["memory_bandwidth"]
    assert _missing_sources(data) == ["gpus.h20.memory_bandwidth"]


def test_the_catalog_has_the_gpus_and_models_users_deploy():
    catalog = roofline.load_catalog()
    assert {"h20", "h800", "a800-80gb", "l20", "b200", "mi300x"} <= set(catalog.gpus)
    assert "ascend-910b" not in catalog.gpus  # no primary source: left out, said in the catalog's notes
    assert "Ascend 910B" in json.loads(roofline._builtin_path().read_text(encoding="utf-8"))["about"]
    for key in ("qwen2.5-14b", "qwen2.5-32b", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "llama-3.3-70b",
                "deepseek-v3", "mixtral-8x7b"):
        assert key in catalog.models
    v3 = catalog.models["deepseek-v3"]
    assert round(v3.total_params / 1e9) == 671 and round(v3.active_params / 1e9, 1) == 37.6 and v3.is_mla


CONFIGS = Path(__file__).parent / "data" / "hf_configs"


@pytest.mark.parametrize("key", sorted(p.stem for p in CONFIGS.glob("*.json")))
def test_roofline_config_reproduces_the_catalog_rows(key):
    from scm_xl.physics import model_from_config

    derived = model_from_config(CONFIGS / f"{key}.json")
    listed = roofline.find_model(key)
    for name in ("total_params", "active_params", "layers", "hidden_size", "attention_heads", "kv_heads",
                 "head_dim", "vocab_size", "kv_lora_rank", "qk_rope_head_dim", "tie_word_embeddings",
                 "read_params", "kv_layout"):
        assert getattr(derived, name) == getattr(listed, name), name
    assert (derived.v_head_dim or derived.head_dim) == (listed.v_head_dim or listed.head_dim)


@pytest.mark.parametrize("key", ["qwen2.5-7b", "qwen2.5-72b", "llama-3.1-8b", "llama-3.1-70b", "deepseek-v2.5"])
def test_roofline_config_on_the_cli_equals_model(key):
    by_config = run_json("--config", str(CONFIGS / f"{key}.json"), "--gpu", "h100", "--batch", "1,32")
    by_name = run_json("--model", key, "--gpu", "h100", "--batch", "1,32")
    for name in ("total_params", "active_params", "read_params", "kv_layout", "flops_per_token", "weight_bytes",
                 "weight_bytes_read", "kv_bytes_per_token", "max_batch_by_memory", "ceiling_tps", "batches"):
        assert by_config[name] == by_name[name], name


def test_config_counts_by_hand():
    from scm_xl.physics import count_params

    # Llama-3.1-8B: embeddings and LM head 2 x 128,256 x 4,096 = 1,050,673,152; per layer q,o 2 x 4,096^2,
    # k,v 2 x 4,096 x 1,024, MLP 3 x 4,096 x 14,336, norms 2 x 4,096 = 218,112,000; x 32 = 6,979,584,000;
    # final norm 4,096: 8,030,261,248
    config = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    assert count_params(config).total == 8030261248
    # Mixtral-8x7B: 2 of 8 experts per token; each expert 3 x 4,096 x 14,336 = 176,160,768
    mixtral = count_params(json.loads((CONFIGS / "mixtral-8x7b.json").read_text()))
    assert mixtral.total - mixtral.active == 32 * 6 * 176160768


def test_config_errors_name_the_file(tmp_path: Path):
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 4096,')
    result = CliRunner().invoke(main, ["roofline", "--config", str(bad), "--gpu", "h100"])
    assert result.exit_code == 2 and str(bad) in result.output and "Traceback" not in result.output
    bad.write_text('{"hidden_size": 4096, "num_hidden_layers": 32}')
    result = CliRunner().invoke(main, ["roofline", "--config", str(bad), "--gpu", "h100"])
    assert result.exit_code == 2 and "vocab_size" in result.output


def test_config_with_tied_embeddings_and_a_nested_text_config(tmp_path: Path):
    from scm_xl.physics import model_from_config

    # a small tied model (Qwen3-0.6B-like shape) nested under text_config, as multimodal configs do
    text = {"model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_attention_heads": 16,
            "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 28, "vocab_size": 151936,
            "tie_word_embeddings": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"_name_or_path": "me/tiny-vl", "text_config": text}))
    spec = model_from_config(path)
    # per layer: q 1,024 x 2,048 + k,v 2 x 1,024 x 1,024 + o 2,048 x 1,024 = 6,291,456; MLP 3 x 1,024 x 3,072
    # = 9,437,184; norms 2,048; q/k norms 256 -> 15,730,944 x 28 = 440,466,432; one tied table
    # 151,936 x 1,024 = 155,582,464; final norm 1,024: 596,049,920
    assert spec.total_params == 596049920
    assert spec.read_params == spec.active_params  # tied: the table is the LM head, read once
    assert (spec.kv_layout, spec.name) == ("GQA", "tiny-vl (qwen3)")


# --- One prompt: prefill, TTFT lower bound, max batch at prompt + output; the simulator's terms ------


def test_prompt_bounds_qwen_7b_on_a100():
    deployment = Deployment(roofline.find_model("qwen2.5-7b"), roofline.find_gpu("a100-80gb"))
    bounds = roofline.prompt_bounds(deployment, 1000, 500)
    # compute-bound: (1,000 x 2 x 7,070,619,136 + 2 x 28 layers x 3,584 x 1,000^2) / 312e12 = 45.97 ms,
    # above the 15.23 GB of weights' 7.47 ms read
    assert bounds.prefill_s == pytest.approx((1000 * 2 * 7070619136 + 2 * 28 * 3584 * 1000**2) / 312e12)
    assert bounds.prefill_s == deployment.prefill_seconds(1000)
    # one decode step at batch 1 with 1,000 tokens of KV: (14,141,238,272 + 57,344 x 1,000) B / 2,039e9 B/s
    assert bounds.decode_step_s == pytest.approx((2 * 7070619136 + 57344 * 1000) / 2039e9)
    assert bounds.ttft_lower_bound_s == pytest.approx(bounds.prefill_s + bounds.decode_step_s)
    # (80e9 - 15,231,233,024) / (57,344 x 1,500) = 752.99
    assert (bounds.context, bounds.max_batch) == (1500, 752)
    assert bounds.kv_resident_bytes_per_seq == 57344 * 1500
    with pytest.raises(InputError, match="prompt tokens"):
        roofline.prompt_bounds(deployment, 0)


def test_roofline_cli_prompt_tokens():
    args = ("--model", "qwen2.5-7b", "--gpu", "a100-80gb", "--prompt-tokens", "1000", "--max-tokens", "500")
    code, text = run_cli(*args)
    assert code == 0, text
    assert "Prompt prefill          45.97 ms" in text
    assert "TTFT lower bound        52.93 ms" in text
    assert "Max batch at P + L      752" in text and "1,000 + 500 = 1,500 tokens" in text
    prompt = run_json(*args)["prompt"]
    assert set(prompt) == {"prompt_tokens", "max_tokens", "context", "prefill_s", "decode_step_s",
                           "ttft_lower_bound_s", "kv_resident_bytes_per_seq", "max_batch", "fits_memory"}
    assert prompt["ttft_lower_bound_s"] == pytest.approx(prompt["prefill_s"] + prompt["decode_step_s"])
    assert prompt["max_batch"] == 752
    assert "prompt.ttft_lower_bound_s" in run_json(*args)["units"]
    # without --prompt-tokens the report is as before; --max-tokens alone is refused
    plain = run_json("--model", "qwen2.5-7b", "--gpu", "a100-80gb")
    assert "prompt" not in plain and not any(key.startswith("prompt.") for key in plain["units"])
    code, text = run_cli("--model", "qwen2.5-7b", "--gpu", "a100-80gb", "--max-tokens", "5")
    assert code == 2 and "--max-tokens goes with --prompt-tokens" in text
    # an ad-hoc GPU without memory: no batch bound, the rest still given
    code, text = run_cli("--params-b", "7", "--bandwidth-gbs", "800", "--precision", "fp16", "--prompt-tokens", "100")
    assert code == 0 and "Max batch at P + L      unknown" in text


def test_simulator_params_per_context_token_is_the_per_sequence_read_spread():
    deployment = Deployment(roofline.find_model("llama-3.1-70b"), roofline.find_gpu("h100-sxm"), tp=4,
                            context=2048, bandwidth_efficiency=0.8)
    params = roofline.simulator_params(deployment)
    # the same KV bytes: per sequence at the context = context x per context token
    assert params["per_context_token_seconds"] * 2048 == pytest.approx(params["per_sequence_seconds"])
    assert params["per_context_token_seconds"] == pytest.approx(
        deployment.kv_resident_bytes_per_token / (0.8 * 4 * 3350e9))
    assert params["max_seqs"] == params["max_batch"] == deployment.max_batch_by_memory
    # weights that leave no room still give one slot
    tight = Deployment(roofline.find_model("llama-3.1-70b"), roofline.find_gpu("h100-sxm"))
    assert tight.max_batch_by_memory == 0 and roofline.simulator_params(tight)["max_seqs"] == 1


# --- Issue 17: a deployment that does not fit, the native precision, a config's name, SI units ------


def test_deepseek_v3_bf16_on_8_h800_does_not_fit_and_gets_no_throughput():
    args = ("--model", "deepseek-v3", "--gpu", "h800", "--tp", "8", "--precision", "bf16", "--batch", "1,8")
    code, text = run_cli(*args)
    assert code == 0, text  # an answer, not an error
    # 671,026,419,200 x 2 B = 1.342 TB of weights over 8 x 80 GB = 640 GB: 702.1 GB short
    assert "Does not fit: the weights alone (1.342 TB) exceed the memory of the 8 GPUs (640 GB) by 702.1 GB" in text
    assert "Single stream           does not fit" in text
    assert "ms/token" not in text and "tok/s" not in text and "tokens/s" not in text
    # k x 80 GB >= 1,342.05 GB + k x 287.8 MB (the MLA latent on every GPU): k = 17; 32 divides the 128 heads
    assert "17 GPUs at bf16 (32 if the count must divide the 128 attention heads" in text
    assert "int4 (0.5 B per weight) on the 8 GPUs" in text  # fp8's 671 GB does not fit either
    assert "Assumed: activations and runtime overhead get no memory beyond the reserve (--reserve-gb, 0 B)" in text
    data = run_json(*args)
    fit = data["fit"]
    assert (fit["fits"], fit["short_of"], fit["min_gpus"], fit["min_gpus_dividing_heads"],
            fit["fitting_precision"]) == (False, "weights", 17, 32, "int4")
    assert fit["needed_bytes"] == 2 * 671026419200 + 8 * 61 * 576 * 2 * 4096
    assert fit["short_bytes"] == fit["needed_bytes"] - 640e9
    for key in ("ceiling_tps", "decode_ms_per_token", "compute_ceiling_tps", "prefill_ms"):
        assert data[key] is None, key
    assert all(row["ceiling_tps"] is None and row["per_stream_tps"] is None and row["step_ms"] is None
               for row in data["batches"])
    assert data["bottleneck"] == "capacity" and data["weight_bytes"] == 2 * 671026419200


def test_a_kv_cache_that_does_not_fit_says_so_and_what_would():
    deployment = Deployment(roofline.find_model("qwen2.5-7b"), roofline.find_gpu("rtx4090"), context=200_000)
    fit = roofline.memory_fit(deployment)
    # 15,231,233,024 B of weights fit in 24 GB; with 57,344 x 200,000 = 11,468,800,000 B of KV they do not
    assert (fit.fits, fit.short_of) == (False, "kv_cache")
    assert fit.short_bytes == 2 * 7615616512 + 57344 * 200_000 - 24e9
    assert (fit.min_gpus, fit.min_gpus_dividing_heads, fit.fitting_precision) == (2, 2, "fp8")
    code, text = run_cli("--model", "qwen2.5-7b", "--gpu", "rtx4090", "--context", "200000")
    assert code == 0 and "the KV cache of one 200,000-token sequence (11.47 GB) does not: 2.7 GB over" in text
    # what fits is unchanged, with the fit in words
    assert roofline.memory_fit(replace(deployment, context=4096)).fits is True
    assert analyze(Deployment(SEVEN_B, Gpu.from_numbers(bandwidth_gbs=800))).fit.fits is None  # memory unknown


def test_a_batch_that_does_not_fit_gets_no_throughput():
    code, text = run_cli("--model", "qwen2.5-7b", "--gpu", "a100-80gb", "--batch", "275,276")
    assert code == 0, text
    row_276 = next(line for line in text.splitlines() if line.strip().startswith("276"))
    assert "does not fit" in row_276 and "capacity" in row_276
    rows = run_json("--model", "qwen2.5-7b", "--gpu", "a100-80gb", "--batch", "275,276")["batches"]
    assert rows[0]["fits_memory"] is True and rows[0]["ceiling_tps"] > 0
    assert rows[1]["fits_memory"] is False and rows[1]["ceiling_tps"] is None and rows[1]["step_ms"] is None
    # the library keeps the arithmetic, marked capacity (the sheet and the simulator use it)
    report = analyze(Deployment(roofline.find_model("qwen2.5-7b"), roofline.find_gpu("a100-80gb")), [276])
    assert report.batches[0].ceiling_tps > 0 and report.batches[0].bottleneck == "capacity"


def test_precision_defaults_to_the_models_native_one_and_says_why():
    data = run_json("--model", "deepseek-v3", "--gpu", "h200", "--tp", "8")
    assert data["precision"] == "fp8"
    assert data["precision_reason"] == "fp8, the model's native precision (catalog)"
    assert data["weight_bytes"] == 671026419200  # one byte a weight
    code, text = run_cli("--model", "deepseek-v3", "--gpu", "h200", "--tp", "8")
    assert "Precision: fp8, the model's native precision (catalog)" in text
    assert run_json("--model", "qwen3-8b", "--gpu", "h100")["precision_reason"] == \
        "bf16, the model's native precision (catalog)"
    assert run_json("--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--precision", "bf16")[
        "precision_reason"] == "bf16, as asked (--precision)"
    assert run_json("--params-b", "7", "--bandwidth-gbs", "800")["precision_reason"] == \
        "bf16, the default (an ad-hoc model states no precision)"
    catalog = roofline.load_catalog()
    assert {key for key, model in catalog.models.items() if model.native_precision != "bf16"} == {"deepseek-v3"}


def test_a_user_catalog_may_set_a_native_precision(tmp_path: Path):
    extra = tmp_path / "mine.json"
    extra.write_text(json.dumps({"models": {"tiny-1b": {"total_params": 1e9, "native_precision": "int4"}}}))
    data = run_json("--catalog", str(extra), "--model", "tiny-1b", "--gpu", "h100")
    assert (data["precision"], data["weight_bytes"]) == ("int4", 0.5e9)
    extra.write_text(json.dumps({"models": {"tiny-1b": {"total_params": 1e9, "native_precision": "fp4"}}}))
    code, output = run_cli("--catalog", str(extra), "--model", "tiny-1b", "--gpu", "h100")
    assert code == 2 and output.startswith(f"Error: {extra}") and "native_precision must be one of" in output


def _deepseek_v3_release_config(tmp_path: Path) -> Path:
    """The DeepSeek-V3 config.json as released: its shape, torch_dtype bfloat16 and the fp8 quantization_config."""
    config = json.loads((CONFIGS / "deepseek-v3.json").read_text())
    config["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                     "weight_block_size": [128, 128]}
    folder = tmp_path / "downloads"
    folder.mkdir()
    path = folder / "config.json"
    path.write_text(json.dumps(config))
    return path


def test_a_config_gives_its_native_precision(tmp_path: Path):
    path = _deepseek_v3_release_config(tmp_path)
    data = run_json("--config", str(path), "--gpu", "h200", "--tp", "8")
    assert data["precision"] == "fp8"
    assert data["precision_reason"] == (f"fp8, the model's native precision ({path}: quantization_config "
                                        "quant_method fp8, fmt e4m3)")
    # a 4-bit AWQ config and a plain float16 one
    llama = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    awq = tmp_path / "awq.json"
    awq.write_text(json.dumps({**llama, "quantization_config": {"quant_method": "awq", "bits": 4}}))
    assert run_json("--config", str(awq), "--gpu", "h100")["precision"] == "w4a16"
    half = tmp_path / "half.json"
    half.write_text(json.dumps({**llama, "torch_dtype": "float16"}))
    assert run_json("--config", str(half), "--gpu", "h100")["precision"] == "fp16"
    # a quantization roofline cannot read: asks for --precision, exit 2, and takes it when given
    odd = tmp_path / "odd.json"
    odd.write_text(json.dumps({**llama, "quantization_config": {"quant_method": "hqq", "nbits": 3}}))
    code, output = run_cli("--config", str(odd), "--gpu", "h100")
    assert code == 2 and str(odd) in output and "give --precision" in output and "Traceback" not in output
    assert run_json("--config", str(odd), "--gpu", "h100", "--precision", "int4")["precision"] == "int4"


def test_a_config_model_is_named_by_its_architecture_not_its_file(tmp_path: Path):
    path = _deepseek_v3_release_config(tmp_path)
    code, text = run_cli("--config", str(path), "--gpu", "h200", "--tp", "8")
    assert code == 0 and "Roofline bound: DeepSeek-V3 (DeepseekV3ForCausalLM) on 8 x NVIDIA H200" in text
    config = json.loads(path.read_text())
    del config["_name_or_path"]
    path.write_text(json.dumps(config))
    data = run_json("--config", str(path), "--gpu", "h200", "--tp", "8")
    assert data["model_name"] == "DeepseekV3ForCausalLM" and "downloads" not in json.dumps(data["model_name"])
    del config["architectures"]
    path.write_text(json.dumps(config))
    assert run_json("--config", str(path), "--gpu", "h200", "--tp", "8")["model_name"] == "deepseek_v3"


def test_the_text_output_uses_si_prefixes_throughout():
    assert [roofline.si(v, "FLOP") for v in (14.14e9, 999.96e3, 0.5, 1.9789e15)] == \
        ["14.14 GFLOP", "1 MFLOP", "0.5 FLOP", "1.979 PFLOP"]
    code, text = run_cli("--model", "qwen2.5-7b", "--gpu", "a100-80gb", "--tp", "2")
    assert code == 0, text
    assert "14.14 GFLOP" in text and "4.078 TB/s" in text and "624 TFLOP/s bf16" in text
    assert "link 300 GB/s per direction" in text and "over 300 GB/s per direction" in text
    assert "e9" not in text and "E+" not in text  # no exponent beside the prefixes


def test_the_first_principles_sheet_gives_no_tokens_per_second_when_it_does_not_fit(tmp_path: Path):
    from openpyxl import Workbook

    from scm_xl.engines import get_engine
    from scm_xl.verify import compare
    from scm_xl.workbook import first_principles as fp
    from scm_xl.workbook.catalog_tables import SHEET_TITLES, CatalogLayout, physics_catalog, write_tables

    wb = Workbook()
    ws = wb.active
    ws.title = SHEET_TITLES["en"]
    cl = CatalogLayout("en", physics_catalog())
    write_tables(ws, cl)
    fp.write_calculator(ws, "en", cl)
    fp.set_calculator_inputs(ws, {**fp.DEFAULT_INPUTS, "model": "deepseek-v3", "gpu": "h800", "tp": 8,
                                  "precision": "bf16"})
    expected = fp.expected_calculator("en", cl, fp.read_calculator_inputs(ws))
    path = tmp_path / "fp.xlsx"
    wb.save(path)
    result = get_engine("ironcalc").recalculate(path)
    verification = compare(expected, result, {ws.title})
    assert verification.ok, "\n".join(str(m) for m in verification.mismatches)
    for key in ("ceiling_tps", "ceiling_tps_b", "per_stream_tps_b", "compute_ceiling_tps"):
        assert result.values[(ws.title, fp.output_cell(key))] in (None, ""), key
    assert result.values[(ws.title, fp.output_cell("bottleneck_1"))] == "capacity"
