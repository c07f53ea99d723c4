"""`scm-xl collect` (measure an endpoint) and `scm-xl serve-sim` (the built-in endpoint)."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import click

from scm_xl.cli._common import handle_errors, library_default
from scm_xl.cli.options import Aliased
from scm_xl.cli.plan import int_list
from scm_xl.collect.config import (
    DEFAULT_BASE_URL, DEFAULT_CONCURRENCY, DEFAULT_MAX_TOKENS, DEFAULT_MODEL, CollectConfig,
)
from scm_xl.collect.records import RERUN_FAILED_SHARE
from scm_xl.errors import CheckFailed, UsageError
from scm_xl.simulator import SimConfig


class _Terminated(Exception):
    """SIGTERM arrived; the run was cancelled like Ctrl-C cancels it."""


async def _cancel_on_sigterm(coroutine):
    """Run `coroutine`; SIGTERM cancels it as Ctrl-C does, so finished experiments stay saved."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    terminated = []

    def on_sigterm() -> None:
        terminated.append(True)
        if task is not None:
            task.cancel()

    loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    try:
        return await coroutine
    except asyncio.CancelledError:
        if terminated:
            raise _Terminated() from None
        raise
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def _run(coroutine):
    """asyncio.run on uvloop when it is installed."""
    from scm_xl.simulator import new_event_loop

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coroutine)


# CLI option name -> CollectConfig field, for options that may also come from --matrix.
_MATRIX_OPTIONS = {
    "base_url": "base_url", "model": "models", "concurrency": "concurrency", "max_tokens": "max_tokens",
    "repeats": "repeats", "requests_per_slot": "requests_per_slot", "warmup": "warmup", "prompt": "prompt",
    "ignore_eos": "ignore_eos", "min_tokens": "min_tokens", "temperature": "temperature",
    "timeout": "timeout_s", "request_timeout": "request_timeout_s", "max_retries": "max_retries",
    "max_retry_after": "max_retry_after_s", "gpu": "gpu", "prompt_tokens": "prompt_tokens",
    "shared_prefix": "shared_prefix", "prompts": "prompts_path", "prompt_levels": "prompt_levels",
    "prompt_seed": "prompt_seed",
}


@click.command()
@click.option("--matrix", "matrix_file", type=click.Path(dir_okay=False, path_type=Path),
              help="TOML matrix file (see examples/matrix.toml); options given on the command line win.")
@click.option("--base-url", default=DEFAULT_BASE_URL, show_default=True,
              help="OpenAI-compatible API base URL.")
@click.option("--model", "-m", multiple=True, default=(DEFAULT_MODEL,), show_default=True,
              help="Model to measure; repeat for several.")
@click.option("--concurrency", "-c", callback=int_list, default=",".join(map(str, DEFAULT_CONCURRENCY)),
              show_default=True,
              help="Comma-separated concurrency levels.")
@click.option("--max-tokens", callback=int_list, default=",".join(map(str, DEFAULT_MAX_TOKENS)),
              show_default=True,
              help="Comma-separated max_tokens levels.")
@click.option("--repeats", "-r", type=click.IntRange(min=1), default=1, show_default=True,
              help="Repeats of each (model, concurrency, max_tokens).")
@click.option("--requests-per-slot", "-n", type=click.IntRange(min=1), default=10, show_default=True,
              help="Requests each concurrency slot sends in sequence (total = n x concurrency).")
@click.option("--warmup", type=click.IntRange(min=0), default=0, show_default=True,
              help="Warm-up requests before each experiment, excluded from its figures.")
@click.option("--prompt", default=None, help="The user message sent with every request (no prompt levels).")
@click.option("--prompt-tokens", callback=int_list, default=None,
              help="Comma-separated prompt lengths in tokens as the server counts them (usage.prompt_tokens): "
                   "synthetic prompts, measured at pre-flight; a factor like --max-tokens.")
@click.option("--shared-prefix", type=click.IntRange(min=0), default=None, metavar="N",
              help="With --prompt-tokens: the first N tokens (about) are the same in every request, the "
                   "per-request nonce after them [default: 0, every prompt differs from its first token].")
@click.option("--prompts", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help='Your own prompts: JSONL ({"prompt": ...} or {"messages": [...]} per line) or plain text, one '
                   "per line; grouped by server-counted length into --prompt-levels levels.")
@click.option("--prompt-levels", type=click.IntRange(min=1), default=None, metavar="K",
              help="With --prompts: at most K levels, by quantiles of length [default: 3].")
@click.option("--prompt-seed", type=int, default=None,
              help="With --prompts: seed of the order prompts are sent in [default: drawn; recorded in the "
                   "requests CSV, and reused by --resume].")
@click.option("--ignore-eos/--no-ignore-eos", default=False, show_default=True,
              help="Send ignore_eos=true so outputs run to max_tokens (vLLM/SGLang).")
@click.option("--min-tokens", type=click.IntRange(min=0), default=None, help="Send min_tokens (vLLM/SGLang).")
@click.option("--temperature", type=float, default=None, help="Send this temperature.")
@click.option("--output", "-o", "--out", "results_path", cls=Aliased, old=("--out",),
              type=click.Path(dir_okay=False, path_type=Path),
              default=Path("results.csv"), show_default=True, help="Results CSV (one row per experiment).")
@click.option("--requests-out", "requests_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Per-request CSV [default: requests.csv beside results.csv, NAME.requests.csv beside NAME.csv].")
@click.option("--resume", is_flag=True,
              help="Skip experiments already in --output and append the rest; experiments in which more than "
                   f"{RERUN_FAILED_SHARE:.0%} of the requests failed are run again.")
@click.option("--force", "--overwrite", "overwrite", is_flag=True, cls=Aliased, old=("--overwrite",),
              help="Replace existing output files (otherwise refused).")
@click.option("--api-key-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File holding the API key [default: $SCM_XL_API_KEY, $SILICONFLOW_API_KEY, $OPENAI_API_KEY].")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True),
              default=library_default(CollectConfig, "timeout_s"), show_default=True,
              help="Seconds to connect, and the longest silence within a stream.")
@click.option("--request-timeout", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Seconds one request attempt may take in all [default: no limit].")
@click.option("--max-retries", type=click.IntRange(min=0),
              default=library_default(CollectConfig, "max_retries"), show_default=True,
              help="Retries of a request after HTTP 429.")
@click.option("--max-retry-after", type=click.FloatRange(min=0),
              default=library_default(CollectConfig, "max_retry_after_s"), show_default=True,
              help="Longest wait (s) honoured from a Retry-After header.")
@click.option("--streams-per-client", type=click.IntRange(min=1),
              default=library_default(CollectConfig, "streams_per_client"), show_default=True,
              help="Concurrent streams per httpx.AsyncClient (streams are sharded over up to 16 clients).")
@click.option("--transport", type=click.Choice(["auto", "fast", "httpx"]), default="auto", show_default=True,
              help="HTTP layer: scm-xl's lean HTTP/1.1 transport, or httpx's own (HTTP proxies, HTTP/2 off); "
                   "auto picks httpx only when the environment sets a proxy for the base URL.")
@click.option("--gpu", default=None, help="GPU label recorded in each results row.")
@click.option("--shard", default=None, metavar="I/N",
              help="Run only every N-th experiment, from the I-th (1/3, 2/3, 3/3 on three machines cover the "
                   "matrix once; their CSVs fill together, and fill names a missing shard or refuses one of "
                   "another matrix).")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr [default: on when stderr is a terminal].")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no summary table.")
@click.pass_context
@handle_errors
def collect(ctx, matrix_file, results_path, requests_path, resume, overwrite, api_key_file,
            streams_per_client, transport, shard, progress, quiet, **options):
    """Measure an OpenAI-compatible endpoint over a matrix of models x
    concurrency x max_tokens x repeats, writing a results CSV (one row per
    experiment) and a per-request CSV beside it.

    \b
    Before the matrix, one short request per model checks the endpoint, the key
    and the model: a problem there stops the run (exit 2) with nothing written.
    Exit 1 when an experiment had no successful request.

    \b
    Prompt length as a factor: --prompt-tokens 128,1024,4096 sends synthetic
    prompts of those lengths as the server counts them (measured at pre-flight;
    the server must report usage), or --prompts FILE your own prompts, grouped
    by length. Every request's prompt starts with a nonce, so a prefix cache
    cannot make repeats cheap (--shared-prefix N shares the first N tokens).

    \b
    Against the built-in simulator (no key needed):
      scm-xl serve-sim --port 8000 &
      scm-xl collect --base-url http://127.0.0.1:8000/v1 -c 1,4,16 --max-tokens 64,128
    """
    from rich.console import Console

    from scm_xl.collect import load_matrix_file, parse_shard, resolve_api_key, run_collection

    values = load_matrix_file(matrix_file) if matrix_file is not None else {}
    for option, field_name in _MATRIX_OPTIONS.items():
        explicit = ctx.get_parameter_source(option) not in (click.core.ParameterSource.DEFAULT, None)
        if explicit and "experiments" in values and option in ("model", "concurrency", "max_tokens", "repeats",
                                                               "prompt_tokens", "prompt_levels"):
            raise UsageError(f"--{option.replace('_', '-')} cannot change a plan's [[experiments]] list; "
                             "edit the plan or run `scm-xl plan` again")
        if explicit or field_name not in values:
            value = options[option]
            if value is not None:
                values[field_name] = value
    _check_prompt_options(values)
    api_key, source = resolve_api_key(api_key_file)
    config = CollectConfig(**values, results_path=results_path, requests_path=requests_path, resume=resume,
                           overwrite=overwrite, api_key=api_key, api_key_source=source,
                           streams_per_client=streams_per_client, transport=transport,
                           shard=parse_shard(shard) if shard is not None else None)
    console = None if quiet else Console()
    try:
        report = _run(_cancel_on_sigterm(run_collection(config, console=console,
                                                        progress=False if quiet else progress)))
    except (KeyboardInterrupt, _Terminated) as exc:
        click.echo(f"Interrupted: finished experiments are saved in {config.results_path}; "
                   "run again with --resume to continue.", err=True)
        sys.exit(143 if isinstance(exc, _Terminated) else 130)
    if report.failed_experiments:
        raise CheckFailed(f"{len(report.failed_experiments)} of {len(report.rows)} experiment(s) had no "
                          f"successful request ({_classes(report)}); see {config.requests_csv}")


def _check_prompt_options(values) -> None:
    """Prompt options that exclude or need each other, named as given (command line or matrix)."""
    given = {"--prompt": "prompt", "--prompt-tokens": "prompt_tokens", "--prompts": "prompts_path"}
    used = [option for option, field_name in given.items() if values.get(field_name)]
    if "experiments" in values and any(p.prompt_level is not None for p in values["experiments"]):
        used = [option for option in used if option != "--prompt-tokens"] + ["--prompt-tokens"]
    if len(used) > 1:
        raise UsageError(f"{used[0]} and {used[1]} exclude each other: --prompt sends one fixed prompt, "
                         "--prompt-tokens synthetic prompts of chosen lengths, --prompts your own prompts")
    if values.get("prompt_levels") is not None and not values.get("prompts_path"):
        raise UsageError("--prompt-levels needs --prompts (it groups the file's prompts by length)")
    if values.get("prompt_seed") is not None and not values.get("prompts_path"):
        raise UsageError("--prompt-seed needs --prompts (it orders the file's prompts)")


def _classes(report) -> str:
    """Error classes over the failed experiments, e.g. "http_5xx 8, timeout 2"."""
    from collections import Counter

    total: Counter[str] = Counter()
    for classes in report.failed_experiments.values():
        total.update(classes)
    return ", ".join(f"{name} {count}" for name, count in sorted(total.items()))


@click.command("serve-sim")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (loopback by default).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True,
              help="Port to listen on (0: any free port).")
@click.option("--model-name", default=DEFAULT_MODEL, show_default=True,
              help="Model name served by /v1/models.")
@click.option("--strict-model", is_flag=True, help="Answer 404 for any other model name.")
@click.option("--step-base-s", type=click.FloatRange(min=0),
              default=library_default(SimConfig, "step_base_s"), show_default=True,
              help="Decode step time with an empty batch (s).")
@click.option("--step-per-seq-s", type=click.FloatRange(min=0),
              default=library_default(SimConfig, "step_per_seq_s"), show_default=True,
              help="Added step time per active sequence (s).")
@click.option("--prefill-s-per-token", type=click.FloatRange(min=0),
              default=library_default(SimConfig, "prefill_s_per_token"), show_default=True,
              help="Prefill time per prompt token of a joining request (s).")
@click.option("--step-per-ctx-token-s", type=click.FloatRange(min=0),
              default=library_default(SimConfig, "step_per_ctx_token_s"), show_default=True,
              help="Added step time per context token (prompt + tokens so far) of every active sequence "
                   "(s): the KV-cache read, so ITL grows with prompt length and batch.")
@click.option("--max-seqs", type=click.IntRange(min=0),
              default=library_default(SimConfig, "max_seqs"), show_default=True,
              help="Sequences decoding at once (KV-cache slots); more wait first in, first out, their "
                   "TTFT including the wait (0: no limit) [with --model/--gpu: what fits at --context].")
@click.option("--chars-per-token", type=click.FloatRange(min=0, min_open=True),
              default=library_default(SimConfig, "chars_per_token"), show_default=True,
              help="Characters per prompt token, to estimate prompt tokens.")
@click.option("--default-max-tokens", type=click.IntRange(min=1),
              default=library_default(SimConfig, "default_max_tokens"), show_default=True,
              help="Output length when a request gives no max_tokens.")
@click.option("--eos-prob", type=click.FloatRange(0, 1),
              default=library_default(SimConfig, "eos_prob"), show_default=True,
              help="Probability per token of ending early (after min_tokens; off with ignore_eos).")
@click.option("--ttft-s", type=click.FloatRange(min=0), default=None,
              help="Fixed-delay mode: time to first token (s), whatever the load.")
@click.option("--itl-s", type=click.FloatRange(min=0), default=None,
              help="Fixed-delay mode: time between tokens (s), whatever the load.")
@click.option("--zero-delay", is_flag=True, help="No step, prefill or token delays: tokens as fast as possible.")
@click.option("--max-concurrency", type=click.IntRange(min=0), default=0, show_default=True,
              help="Requests in flight beyond this get HTTP 429 (0: no limit).")
@click.option("--retry-after-s", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Retry-After sent with a 429.")
@click.option("--rpm", type=click.IntRange(min=0), default=0, show_default=True,
              help="A provider's rate limit: requests per minute, beyond which HTTP 429 with Retry-After; "
                   "every response carries x-ratelimit-* headers (0: no limit).")
@click.option("--tpm", type=click.IntRange(min=0), default=0, show_default=True,
              help="Tokens per minute (prompt + max_tokens, counted at admission), as --rpm (0: no limit).")
@click.option("--error-rate", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Fraction of requests answered with HTTP 500.")
@click.option("--stall-prob", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Fraction of requests that pause once mid-stream.")
@click.option("--stall-s", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Length of such a pause (s).")
@click.option("--truncate-prob", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="Fraction of streams that end without a finish chunk or [DONE].")
@click.option("--no-usage", is_flag=True, help="Never send usage (clients must count chunks).")
@click.option("--seed", type=int, default=None, help="Seed for reproducible sampling.")
@click.option("--model", "roofline_model", help="Take the step times from the roofline of this catalog model "
              "(e.g. qwen2.5-7b); needs --gpu.")
@click.option("--gpu", "roofline_gpu", help="Catalog GPU for the roofline (e.g. a100-80gb).")
@click.option("--efficiency", type=click.FloatRange(0, 1, min_open=True), default=1.0, show_default=True,
              help="Fraction of the roofline bound the simulated deployment reaches.")
@click.option("--context", type=click.IntRange(min=1), default=1024, show_default=True,
              help="Sequence length the roofline sizes the slots (--max-seqs) and the prefill per token "
                   "at; the KV read per step follows each sequence's own prompt + tokens so far.")
@click.pass_context
@handle_errors
def serve_sim(ctx, host, port, model_name, strict_model, zero_delay, no_usage, roofline_model, roofline_gpu,
              efficiency, context, **options):
    """Serve a simulated OpenAI-compatible endpoint (/v1/chat/completions,
    /v1/models) whose token timing comes from a continuous-batching decode
    loop: step = step_base_s + step_per_seq_s x active sequences +
    step_per_ctx_token_s x their context tokens (prompt + produced), plus
    prefill for joining requests; at most --max-seqs decode at once. With
    --model and --gpu these come from the first-principles roofline of that
    deployment (--max-seqs, when given, wins over the roofline's). Runs until
    Ctrl-C."""
    from scm_xl.simulator import LOOPBACK, SimConfig, SimServer, roofline_timing

    if (roofline_model is None) != (roofline_gpu is None):
        raise UsageError("--model and --gpu go together: the roofline needs both")
    if roofline_model is not None:
        given = {name for name in ("step_base_s", "step_per_seq_s", "prefill_s_per_token", "step_per_ctx_token_s",
                                   "max_seqs")
                 if ctx.get_parameter_source(name) not in (click.core.ParameterSource.DEFAULT, None)}
        if given - {"max_seqs"} or zero_delay:
            raise UsageError("--model/--gpu set the step times; drop --step-base-s, --step-per-seq-s, "
                             "--prefill-s-per-token, --step-per-ctx-token-s and --zero-delay")
        max_seqs = options["max_seqs"]
        options.update(roofline_timing(roofline_model, roofline_gpu, efficiency=efficiency, context=context))
        if "max_seqs" in given:
            options["max_seqs"] = max_seqs
    if zero_delay:
        if options["ttft_s"] is not None or options["itl_s"] is not None:
            raise UsageError("--zero-delay excludes --ttft-s and --itl-s")
        options.update(step_base_s=0.0, step_per_seq_s=0.0, prefill_s_per_token=0.0, step_per_ctx_token_s=0.0)
    config = SimConfig(host=host, port=port, model_name=model_name, strict_model=strict_model,
                       usage=not no_usage, **options)
    if host != LOOPBACK:
        click.echo(f"Warning: binding {host}, not loopback: the simulator is reachable from elsewhere.", err=True)
    server = SimServer(config)

    def ready(base_url):
        click.echo(f"scm-xl serve-sim: serving {model_name} at {base_url}", err=False)
        sys.stdout.flush()

    try:
        _run(server.serve_forever(on_ready=ready))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


commands: list = [collect, serve_sim]
