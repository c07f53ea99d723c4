"""The load collector: streams chat completions from an OpenAI-compatible endpoint.

    config.py     CollectConfig, the API key (Secret, resolve_api_key), defaults
    matrix.py     MatrixPoint, exp_ids, matrix files, shards, model names (shared with plan.py)
    records.py    per-request records, requests.csv, output checks and --resume
    send.py       the Sender interface every request goes through, and the senders it opens
    transport.py  FastTransport, scm-xl's HTTP/1.1 transport (see benchmarks/results/transport.md)
    prompts.py    prompt levels: synthetic filler, a --prompts file, grouping, the per-request nonce
    preflight.py  one short request per model before the matrix (and the prompt-length measurements)
    run.py        the run loop: run_collection
    progress.py   the progress bar and the summary table
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scm_xl.collect.config import (
    API_KEY_ENV_VARS, DEFAULT_BASE_URL, DEFAULT_CONCURRENCY, DEFAULT_MAX_TOKENS, DEFAULT_MODEL, DEFAULT_PROMPT,
    CollectConfig, Secret, is_loopback_url, matrix_points, resolve_api_key,
)
from scm_xl.collect.matrix import MatrixPoint, check_model_names, load_matrix_file, parse_shard
from scm_xl.collect.records import REQUEST_COLUMNS, RequestRecord, all_failed, read_requests

if TYPE_CHECKING:  # the lazy names below, for the type checker
    from scm_xl.collect.preflight import PreflightFailed
    from scm_xl.collect.progress import CollectionReport
    from scm_xl.collect.run import run_collection
    from scm_xl.collect.send import FastSender, HttpxSender, Sender, open_senders
    from scm_xl.collect.transport import FastTransport

# The sending half imports httpx: loaded on first use, so that `scm-xl plan` and the
# other commands start without it.
_LAZY = {
    "PreflightFailed": "preflight", "CollectionReport": "progress", "run_collection": "run",
    "FastSender": "send", "HttpxSender": "send", "Sender": "send", "open_senders": "send",
    "FastTransport": "transport",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'scm_xl.collect' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"scm_xl.collect.{module}"), name)


__all__ = [
    "API_KEY_ENV_VARS", "DEFAULT_BASE_URL", "DEFAULT_CONCURRENCY", "DEFAULT_MAX_TOKENS", "DEFAULT_MODEL",
    "DEFAULT_PROMPT", "REQUEST_COLUMNS", "CollectConfig", "CollectionReport", "FastSender", "FastTransport",
    "HttpxSender", "MatrixPoint", "PreflightFailed", "RequestRecord", "Secret", "Sender", "all_failed",
    "check_model_names", "is_loopback_url", "load_matrix_file", "matrix_points", "open_senders", "parse_shard",
    "read_requests", "resolve_api_key", "run_collection",
]
