"""Prompt length as a factor: `collect --prompt-tokens`, `--shared-prefix`, `--prompts FILE`.

The lengths are the server's own counts (usage.prompt_tokens), so every test checks them at a
server: the built-in simulator (characters / chars_per_token, no template), and a small
recording server on 127.0.0.1 that counts words and punctuation plus a fixed chat-template
overhead, keeps every body it was sent, and can refuse a prompt beyond its context with
llama.cpp's words or send no usage at all.
"""

from __future__ import annotations

import asyncio
import io
import json
import re
import statistics
import tomllib
from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest
from click.testing import CliRunner

from scm_xl.cli import main
from scm_xl.collect import CollectConfig, CollectionReport, load_matrix_file, matrix_points, run_collection
from scm_xl.collect.progress import summary_table
from scm_xl.collect.prompts import FILLER_WORDS, Nonces, group_by_length, load_prompts, make_groups
from scm_xl.errors import InputError, UsageError
from scm_xl.plan import make_plan, write_plan
from scm_xl.results import RESULT_COLUMNS, read_results
from scm_xl.simulator import SimConfig, running_simulator
from support.servers import NO_KEYS, SSE_HEAD, answer, raw_server, requests_of, sse_chunk, token_event, wide_row
from support.servers import fakellm  # noqa: F401  (the fixture)

OVERHEAD = 12  # the recording server's chat template, in tokens


def word_tokens(text: str) -> list[str]:
    """The recording server's tokenizer: words and single punctuation marks (not characters / 4)."""
    return re.findall(r"\w+|[^\w\s]", text)


def contents(body: dict) -> list[str]:
    texts = []
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            texts.append(content)
        else:
            texts.extend(part.get("text", "") for part in content)
    return texts


def first_text(body: dict) -> str:
    return contents(body)[0]


def chat_server(bodies: list, *, overhead: int = OVERHEAD, context: int | None = None, usage: bool = True):
    """A raw_server handler: an OpenAI-compatible streaming chat endpoint that records each body."""

    async def handle(reader, writer):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))
            body = json.loads(await reader.readexactly(length))
            bodies.append(body)
            prompt = overhead + sum(len(word_tokens(text)) for text in contents(body))
            if context is not None and prompt > context:
                writer.write(answer(400, {"error": {
                    "code": 400, "type": "exceed_context_size_error",
                    "message": f"request ({prompt} tokens) exceeds the available context size ({context} tokens), "
                               "try increasing it"}}))
                await writer.drain()
                continue
            produced = body.get("max_tokens", 4)
            out = SSE_HEAD + b"".join(sse_chunk(token_event("w")) for _ in range(produced))
            out += sse_chunk("data: " + json.dumps({"choices": [{"index": 0, "delta": {},
                                                                 "finish_reason": "length"}]}) + "\n\n")
            if usage and body.get("stream_options", {}).get("include_usage"):
                out += sse_chunk("data: " + json.dumps({"choices": [], "usage": {
                    "prompt_tokens": prompt, "completion_tokens": produced,
                    "total_tokens": prompt + produced}}) + "\n\n")
            out += sse_chunk("data: [DONE]\n\n") + b"0\r\n\r\n"
            writer.write(out)
            await writer.drain()

    return handle


def collect(tmp_path: Path, base_url: str, **overrides) -> CollectionReport:
    values = dict(models=("m",), concurrency=(1, 2), max_tokens=(8,), requests_per_slot=2,
                  results_path=tmp_path / "results.csv", base_url=base_url)
    values.update(overrides)
    return asyncio.run(run_collection(CollectConfig(**values)))


def run_cli(*args: object):
    return CliRunner().invoke(main, ["collect", *map(str, args)], env=NO_KEYS)


def within(measured: float, level: float) -> bool:
    return abs(measured - level) <= 0.05 * level


# -- synthetic levels ---------------------------------------------------------------------------


@pytest.mark.parametrize("chars_per_token", [4.0, 3.3])
def test_levels_hit_within_5_percent_on_the_simulator(tmp_path, chars_per_token):
    with running_simulator(SimConfig.zero_delay(chars_per_token=chars_per_token)) as base_url:
        report = collect(tmp_path, base_url, prompt_tokens=(128, 1024, 4096))
    rows = read_results(tmp_path / "results.csv").rows
    assert [(r.exp_id, r.concurrency, r.prompt_level) for r in rows] == [
        ("E001", 1, 128), ("E002", 1, 1024), ("E003", 1, 4096), ("E004", 2, 128), ("E005", 2, 1024),
        ("E006", 2, 4096)]
    for row in rows:
        assert within(row.prompt_tokens, row.prompt_level), row
        assert row.ttft_mean_s is not None and row.latency_mean_s is not None
        assert 0 < row.ttft_mean_s <= row.latency_mean_s
    for record in requests_of(tmp_path):
        assert within(int(record["prompt_tokens"]), int(record["prompt_level"])), record
    assert report.prompt_warnings == []


def test_levels_hit_on_a_server_with_a_template_overhead_and_another_tokenizer(tmp_path):
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        collect(tmp_path, base_url, prompt_tokens=(64, 300, 2000), warmup=1)
    rows = read_results(tmp_path / "results.csv").rows
    assert sorted({r.prompt_level for r in rows}) == [64, 300, 2000]
    for row in rows:
        assert within(row.prompt_tokens, row.prompt_level), row
    measured = [(int(r["prompt_tokens"]), int(r["prompt_level"])) for r in requests_of(tmp_path)]
    assert measured and all(within(tokens, level) for tokens, level in measured)


def test_every_request_differs_from_its_first_token(tmp_path):
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        collect(tmp_path, base_url, prompt_tokens=(64, 256), warmup=2, requests_per_slot=3)
    firsts = [word_tokens(first_text(body))[0] for body in bodies]  # pre-flight, warm-up and matrix
    assert len(firsts) == len(bodies) > 20
    assert len(set(firsts)) == len(firsts)  # no two prompts share even their first token
    assert all(re.fullmatch(r"\d{8}", first) for first in firsts)
    written = requests_of(tmp_path) + requests_of(tmp_path, warmup=True)
    assert {r["prompt_nonce"] for r in written} <= set(firsts)
    assert len({r["prompt_nonce"] for r in written}) == len(written)
    # the rest of a prompt is the filler, the same words for every request of a level
    rest = {tuple(first_text(body).split()[1:]) for body in bodies if body["max_tokens"] == 8}
    assert len(rest) == 2 and all(set(words) <= set(FILLER_WORDS) for words in rest)


def test_two_runs_send_different_nonces(tmp_path):
    bodies: list[dict] = []
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with raw_server(chat_server(bodies)) as base_url:
        collect(tmp_path / "a", base_url, prompt_tokens=(64,))
        first = len(bodies)
        collect(tmp_path / "b", base_url, prompt_tokens=(64,))
    one = {word_tokens(first_text(b))[0] for b in bodies[:first]}
    two = {word_tokens(first_text(b))[0] for b in bodies[first:]}
    assert not one & two


def test_shared_prefix_makes_the_first_n_tokens_equal(tmp_path):
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        collect(tmp_path, base_url, prompt_tokens=(600, 1500), shared_prefix=256, max_tokens=(8,))
    sent = [word_tokens(first_text(body)) for body in bodies if body["max_tokens"] == 8]  # the matrix's
    assert len(sent) == 12
    shared = 0
    while all(len(tokens) > shared and tokens[shared] == sent[0][shared] for tokens in sent):
        shared += 1
    assert within(shared, 256)
    # right after the shared part comes the nonce: unique per request
    assert len({tokens[shared] for tokens in sent}) == len(sent)
    assert all(re.fullmatch(r"\d{8}", tokens[shared]) for tokens in sent)
    rows = read_results(tmp_path / "results.csv").rows
    assert all(within(row.prompt_tokens, row.prompt_level) for row in rows)
    assert all("shared prefix of about 256 tokens" in (row.notes or "") for row in rows)


def test_shared_prefix_needs_levels_and_room():
    with pytest.raises(UsageError, match="--shared-prefix needs --prompt-tokens"):
        CollectConfig(shared_prefix=10)
    with pytest.raises(UsageError, match="smaller than the smallest prompt level"):
        CollectConfig(prompt_tokens=(128, 1024), shared_prefix=128)


def test_a_level_beyond_the_context_is_refused_at_preflight_with_the_servers_words(tmp_path):
    bodies: list[dict] = []
    with raw_server(chat_server(bodies, context=1024)) as base_url:
        result = run_cli("--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "8", "-n", "1", "-q",
                         "--prompt-tokens", "128,2048", "--out", tmp_path / "results.csv")
    assert result.exit_code == 2, result.output
    message = " ".join(result.output.split())
    assert "prompt level 2048 tokens" in message
    assert "exceeds the available context size (1024 tokens), try increasing it" in message
    assert "Nothing was written." in message
    assert list(tmp_path.iterdir()) == []
    assert all(body["max_tokens"] == 4 for body in bodies)  # only pre-flight requests were sent


def test_a_level_below_the_template_overhead_is_refused(tmp_path):
    with raw_server(chat_server([])) as base_url:
        result = run_cli("--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "8", "-n", "1", "-q",
                         "--prompt-tokens", "5", "--out", tmp_path / "results.csv")
    assert result.exit_code == 2
    assert "prompt level 5 tokens" in result.output and "shortest prompt" in result.output
    assert list(tmp_path.iterdir()) == []


def test_a_server_without_usage_stops_prompt_levels(tmp_path):
    bodies: list[dict] = []
    with raw_server(chat_server(bodies, usage=False)) as base_url:
        result = run_cli("--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "8", "-n", "1", "-q",
                         "--prompt-tokens", "128", "--out", tmp_path / "results.csv")
    assert result.exit_code == 2
    assert "prompt levels need usage.prompt_tokens" in " ".join(result.output.split())
    assert list(tmp_path.iterdir()) == [] and len(bodies) == 1


def test_fakellm_sends_no_usage_so_prompt_levels_stop(tmp_path, fakellm):
    """fakellm, a third-party OpenAI-compatible server, streams without usage."""
    result = run_cli("--base-url", fakellm, "-m", "gpt-4o-mini", "-c", "1", "--max-tokens", "8", "-n", "1", "-q",
                     "--prompt-tokens", "128", "--out", tmp_path / "results.csv")
    assert result.exit_code == 2
    assert "prompt levels need usage.prompt_tokens" in " ".join(result.output.split())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("other", [["--prompt-tokens", "128"], ["--prompts", "p.txt"]])
def test_prompt_and_prompt_levels_exclude_each_other(tmp_path, other):
    result = run_cli("--base-url", "http://127.0.0.1:9/v1", "--prompt", "hello", *other,
                     "--out", tmp_path / "results.csv")
    assert result.exit_code == 2
    assert f"--prompt and {other[0]} exclude each other" in result.output
    with pytest.raises(UsageError, match=f"--prompt and {other[0]} exclude each other"):
        CollectConfig(prompt="hello", **({"prompt_tokens": (128,)} if other[0] == "--prompt-tokens"
                                         else {"prompts_path": "p.txt"}))


def test_plain_prompt_runs_as_before(tmp_path):
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        collect(tmp_path, base_url, prompt="Say hi.")
    assert {first_text(body) for body in bodies} == {"Say hi."}
    rows = read_results(tmp_path / "results.csv").rows
    assert {row.prompt_level for row in rows} == {None}
    assert {r["prompt_level"] for r in requests_of(tmp_path)} == {""}


# -- the user's prompts -------------------------------------------------------------------------


def jsonl_prompts(path: Path) -> list[int]:
    """Twelve prompts, four short, four middling, four long; two as chat messages. Returns the
    word count of each (the recording server's tokens, before the nonce and the template)."""
    lines, lengths = [], []
    for i in range(12):
        words = [10, 12, 14, 16, 100, 110, 120, 130, 400, 420, 440, 460][i]
        text = " ".join(f"w{i}x{j}" for j in range(words))
        if i % 5 == 0:
            lines.append(json.dumps({"messages": [{"role": "system", "content": "Be brief"},
                                                  {"role": "user", "content": text}]}))
            words += 2
        else:
            lines.append(json.dumps({"prompt": text, "id": i}))
        lengths.append(words)
    path.write_text("\n".join(lines[:6]) + "\n\n" + "\n".join(lines[6:]) + "\n", encoding="utf-8")
    return lengths


def test_prompts_jsonl_grouped_into_levels_by_the_servers_count(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    words = jsonl_prompts(prompts)
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        result = run_cli("--base-url", base_url, "-m", "m", "-c", "1,2", "--max-tokens", "8", "-n", "3", "-q",
                         "--prompts", prompts, "--prompt-levels", "3", "--prompt-seed", "7",
                         "--out", tmp_path / "results.csv")
    assert result.exit_code == 0, result.output
    # what the server counts: the nonce (one token), the words and the template
    counted = [n + 1 + OVERHEAD for n in words]
    levels = sorted({row.prompt_level for row in read_results(tmp_path / "results.csv").rows})
    assert levels == [round(statistics.median(counted[g:g + 4])) for g in (0, 4, 8)]
    records = requests_of(tmp_path)
    assert {r["prompt_seed"] for r in records} == {"7"}
    index_of_line = {i + 1 if i < 6 else i + 2: i for i in range(12)}  # a blank line after the sixth
    for record in records:
        index = index_of_line[int(record["prompt_line"])]
        assert index // 4 == levels.index(int(record["prompt_level"]))  # sent at its own level
        assert int(record["prompt_tokens"]) == counted[index]  # and as it was measured
    # each distinct prompt was measured once at pre-flight, with its own nonce
    preflight = [body for body in bodies if body["max_tokens"] == 4]
    assert len(preflight) == 12
    for body in bodies:
        first = body["messages"][0]["content"]
        assert re.match(r"\d{8} ", first)
    chat = [body for body in bodies if body["messages"][0]["role"] == "system"]
    assert chat and all(body["messages"][0]["content"].endswith(" Be brief") for body in chat)
    assert all(len(body["messages"]) == 2 for body in chat)


def test_prompts_order_is_seeded_and_recorded(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(f"question number {i} " + "x " * i + "\n" for i in range(1, 9)), encoding="utf-8")
    orders = []
    with running_simulator(SimConfig.zero_delay()) as base_url:
        for run, seed in enumerate((5, 5, 6)):
            out = tmp_path / str(run)
            out.mkdir()
            collect(out, base_url, prompts_path=prompts, prompt_levels=2, prompt_seed=seed, requests_per_slot=4)
            orders.append([r["prompt_line"] for r in requests_of(out)])
    assert orders[0] == orders[1] != orders[2]


def test_prompts_plain_text_one_per_line(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Tell me a joke.\n\nWhat is the capital of France? Answer in one word, please.\n"
                       '{"not": "a prompt object"} is text here\n', encoding="utf-8")
    assert [p.line for p in load_prompts(prompts)] == [1, 3, 4]
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        collect(tmp_path, base_url, prompts_path=prompts, prompt_levels=1, concurrency=(1,), requests_per_slot=3)
    rows = read_results(tmp_path / "results.csv").rows
    assert len(rows) == 1
    sent = {first_text(body).split(" ", 1)[1] for body in bodies}
    assert sent == {"Tell me a joke.", "What is the capital of France? Answer in one word, please.",
                    '{"not": "a prompt object"} is text here'}
    counts = sorted(OVERHEAD + 1 + len(word_tokens(text)) for text in sent)
    assert rows[0].prompt_level == counts[1]  # the median of the one group
    assert sorted(int(r["prompt_line"]) for r in requests_of(tmp_path)) == [1, 3, 4]  # each once, shuffled


@pytest.mark.parametrize("line, problem", [
    ('{"prompt": "unclosed', "not JSON"),
    ('{"text": "hi"}', 'expected a JSON object with a "prompt" or a "messages" key'),
    ('{"prompt": ""}', '"prompt" must be a non-empty string'),
    ('{"messages": [{"role": "user"}]}', 'messages[0]: "content" must be a string or a list of parts'),
    ('just words', 'not JSON but plain text'),
])
def test_bad_jsonl_names_file_and_line_and_sends_nothing(tmp_path, line, problem):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"prompt": "one"}\n{"messages": [{"role": "user", "content": "two"}]}\n' + line + "\n",
                       encoding="utf-8")
    bodies: list[dict] = []
    out = tmp_path / "out"
    out.mkdir()
    with raw_server(chat_server(bodies)) as base_url:
        result = run_cli("--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "8", "-n", "1", "-q",
                         "--prompts", prompts, "--out", out / "results.csv")
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"Error: {prompts}:3: ")
    assert problem in result.output
    assert bodies == [] and list(out.iterdir()) == []


def test_a_file_of_json_lines_is_jsonl_even_when_the_name_says_txt(tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text('{"prompt": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"p.txt:2: not JSON but plain text"):
        load_prompts(prompts)
    empty = tmp_path / "e.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputError, match="no prompts"):
        load_prompts(empty)


def test_many_prompts_are_measured_by_a_sample(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join("p " * (5 + i % 60) + f"{i}\n" for i in range(260)), encoding="utf-8")
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        collect(tmp_path, base_url, prompts_path=prompts, concurrency=(1,), requests_per_slot=2, prompt_seed=3)
    assert len([body for body in bodies if body["max_tokens"] == 4]) == 200
    rows = read_results(tmp_path / "results.csv").rows
    assert len(rows) == 3 and rows[0].prompt_level < rows[1].prompt_level < rows[2].prompt_level


def test_grouping_by_quantiles():
    assert group_by_length([5, 1, 3, 2, 4, 6], 3) == [2, 0, 1, 0, 1, 2]
    assert group_by_length([7, 7, 7, 7], 3) == [0, 0, 0, 0]  # one length: one level
    assert group_by_length([1, 2, 2, 2, 9], 2) == [0, 0, 0, 0, 1]  # equal lengths stay together
    assert group_by_length([3, 1], 5) == [1, 0]  # at most as many levels as lengths


def test_levels_are_the_median_server_count_of_each_group(tmp_path):
    prompts = tmp_path / "p.txt"
    prompts.write_text("a\nb\nc\nd\ne\nf\n", encoding="utf-8")
    loaded = load_prompts(prompts)
    measured = {p.key: n for p, n in zip(loaded, [10, 11, 30, 50, 52, 90])}
    groups = make_groups(loaded, measured, 2)
    assert [(g.level, [p.line for p in g.prompts]) for g in groups] == [(11, [1, 2, 3]), (52, [4, 5, 6])]


def test_nonces_are_unique_and_of_one_length():
    nonces = Nonces()
    drawn = [nonces.next() for _ in range(100_000)]
    assert len(set(drawn)) == len(drawn) and {len(n) for n in drawn} == {8}
    assert len({n[0] for n in drawn[:20]}) > 5  # consecutive requests differ from the first digit


# -- plans, matrix files and resume ---------------------------------------------------------------


def test_plan_designs_treat_prompt_tokens_as_a_factor():
    full = make_plan(models=["a"], concurrency=[1, 2], max_tokens=[8], prompt_tokens=[1024, 128], design="full",
                     repeats=1, seed=1)
    assert full.cells == (("a", 1, 8, 128), ("a", 1, 8, 1024), ("a", 2, 8, 128), ("a", 2, 8, 1024))
    assert full.array == "full factorial 2x2"
    ofat = make_plan(models=["a", "b"], concurrency=[1, 4], max_tokens=[50, 100], prompt_tokens=[128, 512, 2048],
                     design="ofat", repeats=1, seed=1)
    assert ofat.cells == (("a", 1, 50, 128), ("a", 1, 50, 512), ("a", 1, 50, 2048), ("a", 1, 100, 128),
                          ("a", 4, 50, 128), ("b", 1, 50, 128))
    # four factors: L9 (two-level factors take symbols mod 2), strength 2 in proportion
    array = make_plan(models=["a", "b"], concurrency=[1, 2, 4], max_tokens=[50, 100, 200],
                      prompt_tokens=[128, 1024, 4096], design="orthogonal", repeats=1, seed=1)
    assert array.array == "L9"
    runs = [(e.model, e.concurrency, e.max_tokens, e.prompt_level) for e in array.experiments]
    for i, j in combinations(range(4), 2):
        pairs = Counter((run[i], run[j]) for run in runs)
        levels_i, levels_j = {run[i] for run in runs}, {run[j] for run in runs}
        assert len(pairs) == len(levels_i) * len(levels_j)  # every pair of levels appears
    three = make_plan(models=["a"], concurrency=[1, 2, 4], max_tokens=[50, 100, 200], prompt_tokens=[128, 1024, 4096],
                      design="orthogonal", repeats=1, seed=1)
    assert three.array == "L9" and len({e.prompt_level for e in three.experiments}) == 3
    with pytest.raises(UsageError, match="prompt_tokens levels repeat"):
        make_plan(models=["a"], concurrency=[1], max_tokens=[8], prompt_tokens=[128, 128])


def test_plan_file_round_trip_with_prompt_tokens(tmp_path):
    plan = make_plan(models=["m"], concurrency=[1, 2], max_tokens=[4, 8], prompt_tokens=[64, 256], design="full",
                     repeats=2, requests_per_slot=1, seed=3)
    path = tmp_path / "plan.toml"
    write_plan(plan, path)
    data = tomllib.loads(path.read_text())
    assert data["prompt_tokens"] == [64, 256]
    assert {e["prompt_tokens"] for e in data["experiments"]} == {64, 256}
    values = load_matrix_file(path)
    assert values["prompt_tokens"] == (64, 256)
    points = values["experiments"]
    assert [(p.exp_id, p.prompt_level) for p in points] == [(e.exp_id, e.prompt_level) for e in plan.experiments]
    # a full plan numbers its cells as the collector numbers its own matrix
    own = {p.key: p.exp_id for p in matrix_points(CollectConfig(models=("m",), concurrency=(1, 2), max_tokens=(4, 8),
                                                                prompt_tokens=(64, 256), repeats=2))}
    assert {p.key: p.exp_id for p in points} == own
    bodies: list[dict] = []
    out = tmp_path / "results.csv"
    with raw_server(chat_server(bodies)) as base_url:
        result = run_cli("--matrix", path, "--base-url", base_url, "-o", out, "-q")
    assert result.exit_code == 0, result.output
    rows = read_results(out).rows
    assert [(r.exp_id, r.prompt_level) for r in rows] == [(e.exp_id, e.prompt_level) for e in plan.experiments]
    assert all(within(r.prompt_tokens, r.prompt_level) for r in rows)


def test_plan_cli_takes_prompt_tokens_and_a_plan_cannot_be_changed(tmp_path):
    path = tmp_path / "plan.toml"
    result = CliRunner().invoke(main, ["plan", "-m", "m", "-c", "1,2,4", "--max-tokens", "50,100,200",
                                       "--prompt-tokens", "128,1024,4096", "-o", str(path), "--seed", "1"])
    assert result.exit_code == 0, result.output
    assert "L9" in result.output
    assert {e["prompt_tokens"] for e in tomllib.loads(path.read_text())["experiments"]} == {128, 1024, 4096}
    changed = run_cli("--matrix", path, "--base-url", "http://127.0.0.1:9/v1", "--prompt-tokens", "64",
                      "-o", tmp_path / "r.csv")
    assert changed.exit_code == 2 and "cannot change a plan's [[experiments]] list" in changed.output


def test_matrix_file_keys_for_prompts(tmp_path):
    (tmp_path / "sub").mkdir()
    matrix = tmp_path / "sub" / "matrix.toml"
    matrix.write_text('prompts = "mine.jsonl"\nprompt_levels = 2\nprompt_seed = 4\n', encoding="utf-8")
    assert load_matrix_file(matrix) == {"prompts_path": str(tmp_path / "sub" / "mine.jsonl"), "prompt_levels": 2,
                                        "prompt_seed": 4}
    matrix.write_text("prompt_tokens = [128, 1024]\nshared_prefix = 64\n", encoding="utf-8")
    assert load_matrix_file(matrix) == {"prompt_tokens": (128, 1024), "shared_prefix": 64}
    matrix.write_text('prompt_tokens = [128, "x"]\n', encoding="utf-8")
    with pytest.raises(InputError, match="'prompt_tokens' must be a list of integers"):
        load_matrix_file(matrix)


def test_resume_with_levels_runs_only_what_is_missing(tmp_path):
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), prompt_tokens=(64, 256))
        report = collect(tmp_path, base_url, concurrency=(1, 2), prompt_tokens=(64, 256), resume=True)
    assert [(p.exp_id, p.prompt_level) for p in report.skipped] == [("E001", 64), ("E002", 256)]
    rows = read_results(tmp_path / "results.csv").rows
    assert [(r.exp_id, r.concurrency, r.prompt_level) for r in rows] == [
        ("E001", 1, 64), ("E002", 1, 256), ("E003", 2, 64), ("E004", 2, 256)]
    assert sorted(Counter(r["exp_id"] for r in requests_of(tmp_path)).items()) == [
        ("E001", 2), ("E002", 2), ("E003", 4), ("E004", 4)]


def test_resume_with_prompts_reuses_the_recorded_seed(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join("p " * (3 + i) + "\n" for i in range(300)), encoding="utf-8")  # sampled
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        collect(tmp_path, base_url, concurrency=(1,), prompts_path=prompts, prompt_levels=2)
        report = collect(tmp_path, base_url, concurrency=(1, 2), prompts_path=prompts, prompt_levels=2, resume=True)
    assert len(report.skipped) == 2 and len(report.rows) == 2
    rows = read_results(tmp_path / "results.csv").rows
    assert len({r.prompt_level for r in rows}) == 2 and [r.exp_id for r in rows] == ["E001", "E002", "E003", "E004"]
    assert len({r["prompt_seed"] for r in requests_of(tmp_path)}) == 1


def test_resume_onto_csvs_of_an_older_scm_xl_says_so(tmp_path):
    old_results = [c for c in RESULT_COLUMNS if c not in ("prompt_level", "ttft_mean_s", "latency_mean_s")]
    results = tmp_path / "results.csv"
    results.write_text(",".join(old_results) + "\n", encoding="utf-8")
    bodies: list[dict] = []
    with raw_server(chat_server(bodies)) as base_url:
        result = run_cli("--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "8", "-n", "1", "-q",
                         "--out", results, "--resume")
        assert result.exit_code == 2
        message = " ".join(result.output.split())
        assert "written by an older scm-xl (it has no prompt_level, ttft_mean_s, latency_mean_s columns)" in message
        results.unlink()
        from scm_xl.collect.records import REQUEST_COLUMNS
        old_requests = [c for c in REQUEST_COLUMNS if not c.startswith("prompt_") or c == "prompt_tokens"]
        (tmp_path / "requests.csv").write_text(",".join(old_requests) + "\n", encoding="utf-8")
        result = run_cli("--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "8", "-n", "1", "-q",
                         "--out", results, "--resume")
    assert result.exit_code == 2
    assert "requests CSV was written by an older scm-xl" in " ".join(result.output.split())
    assert bodies == []


# -- the summary ----------------------------------------------------------------------------------


def test_the_summary_shows_the_prompt_level_within_80_columns(tmp_path):
    from rich.console import Console

    report = CollectionReport(results_path=tmp_path / "results.csv", requests_path=tmp_path / "requests.csv")
    # one model at the widest figures
    report.rows = [wide_row("E001-R12", "Qwen/Qwen2.5-72B-Instruct", prompt_level=131072),
                   wide_row("E002-R1", "Qwen/Qwen2.5-72B-Instruct", prompt_level=128)]
    out = io.StringIO()
    Console(file=out, width=80).print(summary_table(report))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "prompt" in text and "131072" in text and "12,346/98,765" in text and "10000/200/40" in text
    # several models, at c 256 and max_tokens 4096
    wide = dict(concurrency=256, max_tokens=4096, total_requests=2560, latency_p50_s=12.3, latency_p99_s=99.4,
                ttft_p50_s=1.234, ttft_p99_s=9.876, ok_requests=2500, failed_requests=40, rate_limited_requests=20)
    report.rows = [wide_row("E001-R3", "a", prompt_level=32768, **wide),
                   wide_row("E002-R1", "b", prompt_level=128, **wide)]
    out = io.StringIO()
    Console(file=out, width=80).print(summary_table(report))
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    for value in ("32768", "1,234/9,876", "2500/40/20", "12.3/99.4", "m1 = a"):
        assert value in text, value


def test_a_prompt_beyond_the_context_is_refused_naming_its_line(tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("".join(("long " * 2000 if i == 6 else f"short prompt {i}") + "\n" for i in range(10)),
                       encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    with raw_server(chat_server([], context=1024)) as base_url:
        result = run_cli("--base-url", base_url, "-m", "m", "-c", "1", "--max-tokens", "8", "-n", "1", "-q",
                         "--prompts", prompts, "--out", out / "results.csv")
    assert result.exit_code == 2
    message = " ".join(result.output.split())
    assert f"the prompt at {prompts}:7: HTTP 400" in message
    assert "exceeds the available context size (1024 tokens)" in message
    assert list(out.iterdir()) == []


def test_prompt_options_that_need_prompts(tmp_path):
    for option in (["--prompt-levels", "2"], ["--prompt-seed", "1"]):
        result = run_cli("--base-url", "http://127.0.0.1:9/v1", *option, "--out", tmp_path / "r.csv")
        assert result.exit_code == 2 and f"{option[0]} needs --prompts" in result.output
    result = run_cli("--base-url", "http://127.0.0.1:9/v1", "--prompt-tokens", "128", "--prompts", "p.txt",
                     "--out", tmp_path / "r.csv")
    assert result.exit_code == 2 and "--prompt-tokens and --prompts exclude each other" in result.output
    help_text = CliRunner().invoke(main, ["collect", "--help"]).output
    for option in ("--prompt-tokens", "--shared-prefix", "--prompts", "--prompt-levels", "--prompt-seed"):
        assert option in help_text


def test_a_plan_without_prompt_levels_runs_the_file_as_one_level(tmp_path):
    path = tmp_path / "plan.toml"
    write_plan(make_plan(models=["m"], concurrency=[1, 2], max_tokens=[8], design="full", repeats=1,
                         requests_per_slot=2, seed=1), path)
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("one two three\nfour five six seven\neight\n", encoding="utf-8")
    with raw_server(chat_server([])) as base_url:
        result = run_cli("--matrix", path, "--base-url", base_url, "--prompts", prompts, "-q",
                         "-o", tmp_path / "results.csv")
    assert result.exit_code == 0, result.output
    rows = read_results(tmp_path / "results.csv").rows
    assert sorted(r.exp_id for r in rows) == ["E001", "E002"]
    assert {r.prompt_level for r in rows} == {OVERHEAD + 1 + 3}  # the median prompt, with nonce and template
