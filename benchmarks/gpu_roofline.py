"""Decode steps on a real GPU against `scm-xl roofline` (issue 10; not a test).

Builds a random-weight decoder of a catalog shape in PyTorch (no download: the shape
comes from scm_xl's catalog, dense MHA/GQA models only), fills a KV cache of `context`
tokens per sequence with random values, and times one decode step (every sequence
emits one token: all layers, attention over its cache, the LM head) at each batch size
and context. Each measured step is set beside the roofline's bound for the GPU it ran
on: the fraction of the bandwidth bound reached, and the batch where the roofline says
the step turns compute-bound beside where the measured step time starts to grow with
the batch. Combinations whose weights and KV cache do not fit are skipped.

Runs only where PyTorch and CUDA are present; elsewhere it prints why it skipped and
exits 0. Writes benchmarks/results/gpu_roofline.md (or --out).

    python benchmarks/gpu_roofline.py [--model llama-3.1-8b] [--gpu h100-sxm]
        [--batches 1,2,4,8,16,32,64,128,256] [--contexts 1024,2048,4096,8192] [--cuda-graph]
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

from scm_xl.errors import ScmXlError
from scm_xl.roofline import Deployment, analyze, load_catalog, parse_batches

ROOT = Path(__file__).resolve().parent


def _skip(reason: str) -> None:
    print(f"gpu_roofline: skipped: {reason}")
    sys.exit(0)


def _gpu_key(catalog, device_name: str, given: str | None) -> str:  # type: ignore[no-untyped-def]
    """The catalog GPU: --gpu, else the device's name through the catalog's aliases."""
    try:
        return catalog.find_gpu(given or device_name).key
    except ScmXlError:
        _skip(f"the GPU {device_name!r} is not in the catalog under that name: pass --gpu KEY")
        raise  # unreachable: _skip exits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b", help="catalog model (dense, MHA/GQA)")
    parser.add_argument("--gpu", default=None, help="catalog GPU key [default: from the device name]")
    parser.add_argument("--batches", default="1,2,4,8,16,32,64,128,256")
    parser.add_argument("--contexts", default="1024,2048,4096,8192")
    parser.add_argument("--layers", type=int, default=None,
                        help="build only this many layers and scale the roofline to them (smaller GPUs)")
    parser.add_argument("--repeats", type=int, default=20, help="timed steps per point (median)")
    parser.add_argument("--cuda-graph", action="store_true",
                        help="replay each step as one captured CUDA graph (takes kernel-launch time out)")
    parser.add_argument("--reserve-gb", type=float, default=4.0, help="memory kept free for activations")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "gpu_roofline.md")
    args = parser.parse_args()

    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        _skip("PyTorch is not installed (pip install torch); nothing was measured")
    if not torch.cuda.is_available():
        _skip("no CUDA device here; nothing was measured")

    catalog = load_catalog()
    spec = catalog.find_model(args.model)
    if spec.is_mla or spec.is_moe or spec.layers is None or spec.kv_heads is None:
        _skip(f"{spec.key}: only dense MHA/GQA shapes are built here")
    device_name = torch.cuda.get_device_name(0)
    gpu = catalog.find_gpu(_gpu_key(catalog, device_name, args.gpu))
    layers = args.layers or spec.layers
    d, heads, kvh, hd = spec.hidden_size, spec.attention_heads, spec.kv_heads, spec.head_dim
    vocab = spec.vocab_size or 32000
    # the MLP width that makes the per-layer parameter count match the catalog's total
    per_layer = (spec.total_params - 2 * vocab * d - d) / spec.layers
    attention = d * heads * hd * 2 + d * kvh * hd * 2
    inter = int(round((per_layer - attention - 2 * d) / (3 * d)))
    dtype = torch.bfloat16
    dev = torch.device("cuda")
    torch.manual_seed(0)

    def weight(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=dev, dtype=dtype) * 0.02

    blocks = [dict(q=weight(heads * hd, d), k=weight(kvh * hd, d), v=weight(kvh * hd, d), o=weight(d, heads * hd),
                   gate=weight(inter, d), up=weight(inter, d), down=weight(d, inter),
                   n1=torch.ones(d, device=dev, dtype=dtype), n2=torch.ones(d, device=dev, dtype=dtype))
              for _ in range(layers)]
    embed, head = weight(vocab, d), weight(vocab, d)
    weights_bytes = sum(t.numel() * t.element_size() for b in blocks for t in b.values()) \
        + 2 * embed.numel() * embed.element_size()
    scale = layers / spec.layers  # the roofline of the layers built (--layers)

    def rms(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(x.dtype) * w

    @torch.inference_mode()
    def step(tokens: torch.Tensor, caches: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
        x = embed[tokens]  # (b, d): one row of the table per token
        b = x.shape[0]
        for blk, (kc, vc) in zip(blocks, caches):
            h = rms(x, blk["n1"])
            q = (h @ blk["q"].T).view(b, heads, 1, hd)
            k_new = (h @ blk["k"].T).view(b, kvh, 1, hd)
            v_new = (h @ blk["v"].T).view(b, kvh, 1, hd)
            kc[:, :, -1:] = k_new  # the cache's last slot is this token
            vc[:, :, -1:] = v_new
            att = F.scaled_dot_product_attention(q, kc, vc, enable_gqa=kvh != heads)
            x = x + att.reshape(b, heads * hd) @ blk["o"].T
            h = rms(x, blk["n2"])
            x = x + (F.silu(h @ blk["gate"].T) * (h @ blk["up"].T)) @ blk["down"].T
        return (x @ head.T).argmax(-1)

    free_bytes = torch.cuda.mem_get_info()[0] - args.reserve_gb * 1e9
    rows = []
    for context in parse_batches(args.contexts):
        deployment = Deployment(spec, gpu, context=context)
        for batch in parse_batches(args.batches):
            kv_bytes = 2 * layers * batch * kvh * context * hd * 2
            if kv_bytes > free_bytes:
                rows.append((context, batch, None, None, None, "skipped: KV cache does not fit"))
                continue
            caches = [(torch.randn(batch, kvh, context, hd, device=dev, dtype=dtype),
                       torch.randn(batch, kvh, context, hd, device=dev, dtype=dtype)) for _ in range(layers)]
            tokens = torch.randint(0, vocab, (batch,), device=dev)
            side = torch.cuda.Stream()  # warm up off the default stream, as graph capture needs
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step(tokens, caches)
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            run_step = lambda: step(tokens, caches)  # noqa: E731
            if args.cuda_graph:
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    step(tokens, caches)
                graph.replay()
                torch.cuda.synchronize()
                run_step = graph.replay
            times = []
            for _ in range(args.repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                run_step()
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            measured_ms = sorted(times)[len(times) // 2]
            bound = analyze(deployment, [batch]).batches[0]
            bound_ms = bound.step_ms * scale
            rows.append((context, batch, measured_ms, bound_ms, bound.memory_ms * scale, bound.bottleneck))
            del caches, run_step
            if args.cuda_graph:
                del graph
            torch.cuda.empty_cache()

    lines = [f"# Decode steps on {device_name} against the roofline of {gpu.name}", "",
             f"Model: random-weight {spec.name} shape ({layers} of {spec.layers} layers, bf16, "
             f"{weights_bytes / 1e9:.2f} GB of weights, MLP width {inter}); torch {torch.__version__}, "
             f"{platform.python_version()}; median of {args.repeats} steps timed with CUDA events "
             + ("(each step replayed as one captured CUDA graph, so kernel-launch time is outside it)."
                if args.cuda_graph else
                "(eager mode, no CUDA graphs, so kernel-launch time is inside the measured step)."),
             f"Command: `python benchmarks/gpu_roofline.py {' '.join(sys.argv[1:])}`", "",
             "| context | batch | measured ms | roofline ms | fraction of bandwidth bound | roofline bottleneck |",
             "|---|---|---|---|---|---|"]
    for context, batch, measured, bound, memory, bottleneck in rows:
        if measured is None:
            lines.append(f"| {context:,} | {batch} | - | - | - | {bottleneck} |")
            continue
        lines.append(f"| {context:,} | {batch} | {measured:.3f} | {bound:.3f} | {memory / measured:.0%} | "
                     f"{bottleneck} |")
    lines += ["", "Where the bound flips to compute (roofline) and where the measured step starts to grow "
              "with the batch (step time more than 1.5x batch 1's), per context:", ""]
    for context in sorted({r[0] for r in rows}):
        measured_rows = [r for r in rows if r[0] == context and r[2] is not None]
        if not measured_rows:
            continue
        flip = next((r[1] for r in measured_rows if r[5] == "compute"), None)
        base = measured_rows[0][2]
        grows = next((r[1] for r in measured_rows if r[2] > 1.5 * base), None)
        lines.append(f"- context {context:,}: roofline compute-bound from batch {flip or 'none measured'}; "
                     f"measured step > 1.5x batch 1 from batch {grows or 'none measured'}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
