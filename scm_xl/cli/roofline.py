"""`scm-xl roofline`: first-principles bounds for a model on a GPU (adapter over scm_xl.roofline)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from scm_xl import physics, roofline
from scm_xl.cli._common import handle_errors
from scm_xl.errors import UsageError


@click.command("roofline")
@click.option("--model", "model_name", metavar="NAME", help="Catalog model (key, alias or HF repo name).")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="A Hugging Face config.json on disk: parameters, active parameters (MoE), KV layout "
                   "(MHA/GQA/MLA) and per-token bytes derived from it; no network.")
@click.option("--params-b", type=float, metavar="X", help="Ad-hoc model: parameters in billions (KV cache unknown).")
@click.option("--gpu", "gpu_name", metavar="NAME", help="Catalog GPU (key or alias).")
@click.option("--bandwidth-gbs", type=float, metavar="X", help="Ad-hoc GPU: memory bandwidth in GB/s (1 GB = 1e9 B).")
@click.option("--tflops", type=float, metavar="Y", help="Ad-hoc GPU: peak dense TFLOP/s at the chosen precision.")
@click.option("--memory-gb", type=float, metavar="Z", help="Ad-hoc GPU: memory in GB.")
@click.option("--link-gbs", type=float, metavar="X",
              help="Tensor-parallel link bandwidth per direction, GB/s [default: the GPU's; 64 for ad-hoc].")
@click.option("--precision", default=None,
              type=click.Choice(list(roofline.PRECISION_BYTES), case_sensitive=False),
              help="Weights and activations: w16a16 (alias bf16), fp16, w8a8 (fp8 or int8 math), w8a8-fp8 "
                   "(alias fp8), w8a8-int8 (alias int8), w8a16 and w4a16 (weight-only, 16-bit math; alias int4), "
                   "fp32 (FP32 math). [default: the model's native precision: the catalog's native_precision, "
                   "or the config.json's quantization_config, else its torch_dtype; bf16 when none is stated]")
@click.option("--kv-precision", type=click.Choice(list(roofline.ELEMENT_BYTES), case_sensitive=False),
              help="KV-cache precision [default: bf16; fp16/fp32 with fp16/fp32 weights].")
@click.option("--context", type=int, default=roofline.DEFAULT_CONTEXT, show_default=True, metavar="T",
              help="Sequence length in tokens for KV-cache sizes and the prefill figure.")
@click.option("--batch", "batch_list", default="1", show_default=True, metavar="LIST",
              help="Batch sizes, comma-separated, e.g. 1,8,64.")
@click.option("--prompt-tokens", type=click.IntRange(min=1), metavar="P",
              help="Also the prefill time of a P-token prompt, the TTFT lower bound (prefill + one decode "
                   "step at batch 1) and the largest batch whose KV cache fits at P + L tokens.")
@click.option("--max-tokens", type=click.IntRange(min=0), metavar="L",
              help="Output tokens per sequence for that batch bound (with --prompt-tokens) [default: 0].")
@click.option("--tp", type=int, default=1, show_default=True, metavar="K", help="Tensor-parallel GPUs.")
@click.option("--bandwidth-efficiency", type=float, default=1.0, show_default=True,
              help="Fraction of peak bandwidth reached (1.0 = pure bound).")
@click.option("--compute-efficiency", type=float, default=1.0, show_default=True,
              help="Fraction of peak FLOP/s reached (1.0 = pure bound).")
@click.option("--reserve-gb", type=float, default=0.0, show_default=True,
              help="Memory kept back from the KV cache (activations, runtime), GB over all GPUs.")
@click.option("--catalog", "catalog_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Extra catalog JSON (same schema as the built-in one); its entries win.")
@click.option("--list", "list_only", is_flag=True, help="List the catalog's GPUs and models, then exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (SI units).")
@handle_errors
def roofline_command(model_name, config_path, params_b, gpu_name, bandwidth_gbs, tflops, memory_gb, link_gbs, precision,
                     kv_precision, context, batch_list, prompt_tokens, max_tokens, tp, bandwidth_efficiency,
                     compute_efficiency, reserve_gb, catalog_path, list_only, as_json):
    """First-principles ceilings: FLOPs and bytes per token, KV cache, max batch,
    decode step time and tokens/s at each batch, and whether compute, bandwidth
    or capacity binds; with --prompt-tokens, the prefill, TTFT lower bound and
    max batch of such a prompt. SI units (GB = 1e9 bytes).

    A deployment whose weights and one sequence's KV cache at --context do not fit
    in the GPUs' memory gets no throughput: it is reported as "does not fit", with
    the part that does not fit, by how much, and the GPU count or precision that
    would. That is an answer, so the exit status stays 0."""
    catalog = roofline.load_catalog(catalog_path)
    if list_only:
        _print_catalog(catalog, as_json)
        return

    if max_tokens is not None and prompt_tokens is None:
        raise UsageError("--max-tokens goes with --prompt-tokens")
    if sum(v is not None for v in (model_name, config_path, params_b)) != 1:
        raise UsageError("give one of --model NAME, --config config.json or --params-b X (see --list)")
    adhoc_gpu = any(v is not None for v in (bandwidth_gbs, tflops, memory_gb))
    if gpu_name is not None and adhoc_gpu:
        raise UsageError("give either --gpu NAME or --bandwidth-gbs/--tflops/--memory-gb, not both")
    if gpu_name is None and bandwidth_gbs is None:
        raise UsageError("give --gpu NAME or --bandwidth-gbs X (see --list)")

    if config_path is not None:
        model, origin = physics.model_from_config(config_path), f"config {config_path}"
    elif model_name:
        model, origin = catalog.find_model(model_name), "catalog"
    else:
        model, origin = roofline.ModelSpec.from_params(params_b), None
    choice = roofline.choose_precision(precision, model, origin)
    if gpu_name:
        gpu = catalog.find_gpu(gpu_name)
    else:
        gpu = roofline.Gpu.from_numbers(bandwidth_gbs=bandwidth_gbs, tflops=tflops, memory_gb=memory_gb)
    deployment = roofline.Deployment(
        model, gpu, precision=choice.precision, tp=tp, context=context,
        bandwidth_efficiency=bandwidth_efficiency, compute_efficiency=compute_efficiency,
        kv_precision=kv_precision, reserve_bytes=_gb_to_bytes(reserve_gb, "--reserve-gb"),
        link_bandwidth=None if link_gbs is None else _gb_to_bytes(link_gbs, "--link-gbs"),
    )
    report = roofline.analyze(deployment, roofline.parse_batches(batch_list), prompt_tokens=prompt_tokens,
                              max_tokens=max_tokens or 0)
    if as_json:
        data = report.to_dict()
        data["precision_reason"] = choice.reason
        data["units"]["precision_reason"] = "text: which precision was used and why"
        click.echo(json.dumps(data, indent=2))
    else:
        click.echo(_render(report, choice))


commands: list = [roofline_command]


def _gb_to_bytes(value: float, option: str) -> float:
    if value < 0:
        raise UsageError(f"{option} must be zero or positive, got {value:g}")
    return value * roofline.GB


# ----------------------------------------------------------------------------
# Text output
# ----------------------------------------------------------------------------


def _bytes(value: float | None) -> str:
    return "unknown" if value is None else roofline.si(value, "B")


def _yes_no(value: bool | None) -> str:
    return "unknown" if value is None else ("yes" if value else "no")


NO_FIT = "does not fit"
"""What the text output prints where a throughput or time would be, for what does not fit in memory."""


def _render(report: roofline.RooflineReport, choice: roofline.PrecisionChoice) -> str:
    si = roofline.si
    fits = report.fit.fits is not False
    gpus = report.gpu_name if report.tp == 1 else f"{report.tp} x {report.gpu_name}"
    lines = [
        f"Roofline bound: {report.model_name} on {gpus}, {report.precision} weights, "
        f"{report.kv_precision} KV cache, context {report.context:,} tokens",
        f"Precision: {choice.reason}",
    ]
    hardware = [f"{_bytes(report.memory_bytes)} memory" if report.memory_bytes else "memory unknown",
                si(report.memory_bandwidth, "B/s")]
    if report.peak_flops is not None:
        hardware.append(f"{si(report.peak_flops, 'FLOP/s')} {report.compute_precision}")
    else:
        hardware.append("peak FLOP/s unknown")
    if report.tp > 1:
        hardware.append(f"link {si(report.link_bandwidth, 'B/s')} per direction")
    if report.bandwidth_efficiency != 1.0 or report.compute_efficiency != 1.0:
        hardware.append(f"efficiency: bandwidth {report.bandwidth_efficiency:g}, "
                        f"compute {report.compute_efficiency:g}")
    lines.append("Hardware (all GPUs): " + ", ".join(hardware))
    lines.append("")

    kv_detail = "" if report.kv_bytes_per_token is None else \
        f"{si(report.kv_bytes_per_token, 'B')}/token x {report.context:,} tokens"
    if report.kv_replication != 1 and report.kv_resident_bytes_per_seq is not None:
        kv_detail += f"; held {report.kv_replication:g}x over the GPUs ({_bytes(report.kv_resident_bytes_per_seq)})"
    moe = "" if report.weight_bytes_read == report.weight_bytes else \
        f"; {_bytes(report.weight_bytes_read)} read per step"
    max_batch = "unknown" if report.max_batch_by_memory is None else f"{report.max_batch_by_memory:,}"
    compute_ceiling = NO_FIT if not fits else "unknown" if report.compute_ceiling_tps is None else \
        f"{report.compute_ceiling_tps:,.0f} tokens/s"
    summary = [
        ("FLOPs per token", si(report.flops_per_token, "FLOP"),
         f"2 x {report.flops_per_token / 2e9:,.2f}B params read per token"),
        ("Weight bytes", _bytes(report.weight_bytes), f"resident{moe}"),
        ("Parameters", f"{report.total_params / 1e9:,.2f}B",
         ("dense" if report.active_params == report.total_params else
          f"MoE, {report.active_params / 1e9:,.2f}B active") + f"; KV layout {report.kv_layout or 'unknown'}"),
        ("KV cache per sequence", _bytes(report.kv_cache_bytes_per_seq), kv_detail),
        ("Max batch by memory", max_batch, f"reserve {_bytes(report.reserve_bytes)}"),
        ("Single stream", f"{report.decode_ms_per_token:,.2f} ms/token",
         f"{report.ceiling_tps:,.1f} tokens/s, {report.bottleneck}-bound") if fits else
        ("Single stream", NO_FIT, "no throughput: see below"),
        ("Compute ceiling", compute_ceiling, "any batch: peak FLOP/s / FLOPs per token" if fits else ""),
        (f"Prefill {report.context:,} tokens", f"{report.prefill_ms:,.1f} ms" if fits else NO_FIT, ""),
    ]
    prompt = report.prompt
    if prompt is not None:
        prompt_batch = "unknown" if prompt.max_batch is None else f"{prompt.max_batch:,}"
        if prompt.fits_memory is False:
            summary += [("Prompt prefill", NO_FIT, f"{prompt.prompt_tokens:,} + {prompt.max_tokens:,} tokens "
                                                   "of one sequence do not fit beside the weights"),
                        ("TTFT lower bound", NO_FIT, "")]
        else:
            summary += [
                ("Prompt prefill", f"{prompt.prefill_s * 1e3:,.2f} ms",
                 f"{prompt.prompt_tokens:,} tokens: max(2 x params read x P + attention FLOPs, weight bytes), "
                 "at peak x efficiency"),
                ("TTFT lower bound", f"{prompt.ttft_lower_bound_s * 1e3:,.2f} ms",
                 f"prefill + one decode step ({prompt.decode_step_s * 1e3:,.2f} ms at batch 1, "
                 f"{prompt.prompt_tokens:,} tokens of KV)"),
            ]
        summary.append(
            ("Max batch at P + L", prompt_batch,
             f"KV cache of {prompt.prompt_tokens:,} + {prompt.max_tokens:,} = {prompt.context:,} tokens per sequence "
             f"({_bytes(prompt.kv_resident_bytes_per_seq)}), reserve {_bytes(report.reserve_bytes)}"))
    for label, value, detail in summary:
        lines.append(f"  {label:<24}{value:<18}{detail}".rstrip())
    lines.append("")

    if not fits:
        lines.append(f"Does not fit: {report.fit.verdict.removeprefix('does not fit: ')}.")
        lines.extend(f"  {detail[0].upper()}{detail[1:]}." for detail in report.fit.details)
    else:
        header = ("batch", "step ms", "ceiling tok/s", "per-stream tok/s", "KV cache", "bottleneck", "fits memory")
        rows = [
            (f"{row.batch:,}", f"{row.step_ms:,.2f}", f"{row.ceiling_tps:,.1f}", f"{row.per_stream_tps:,.1f}",
             _bytes(row.kv_bytes), row.bottleneck, _yes_no(row.fits_memory)) if row.fits_memory is not False else
            (f"{row.batch:,}", "-", NO_FIT, "-", _bytes(row.kv_bytes), row.bottleneck, _yes_no(row.fits_memory))
            for row in report.batches
        ]
        widths = [max(len(cell) for cell in column) for column in zip(header, *rows)]
        for cells in (header, *rows):
            numeric = "  ".join(cell.rjust(width) for cell, width in zip(cells[:5], widths[:5]))
            text = "  ".join(cell.ljust(width) for cell, width in zip(cells[5:], widths[5:]))
            lines.append(f"  {numeric}  {text}".rstrip())
    if report.notes:
        lines.append("")
        lines.extend(f"Note: {note}" for note in report.notes)
    return "\n".join(lines)


def _print_catalog(catalog: roofline.Catalog, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({
            "gpus": {key: gpu.name for key, gpu in catalog.gpus.items()},
            "models": {key: model.name for key, model in catalog.models.items()},
        }, indent=2))
        return
    click.echo("GPUs:")
    for key, gpu in catalog.gpus.items():
        peak = gpu.compute_for("bf16")
        tflops = "" if peak is None else f", {roofline.si(peak[1], 'FLOP/s')} bf16"
        click.echo(f"  {key:<14}{gpu.name} ({_bytes(gpu.memory_bytes)}, "
                   f"{roofline.si(gpu.memory_bandwidth, 'B/s')}{tflops})")
    click.echo("Models:")
    for key, model in catalog.models.items():
        active = "" if not model.is_moe else f", {model.active_params / 1e9:,.1f}B active"
        native = "" if model.native_precision is None else f", {model.native_precision}"
        click.echo(f"  {key:<14}{model.name} ({model.total_params / 1e9:,.1f}B params{active}{native})")
