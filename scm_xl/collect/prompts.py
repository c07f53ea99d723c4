"""Prompts of a known length: synthetic filler text, the user's own prompts, and the nonce.

`collect --prompt-tokens 128,1024` sends synthetic prompts whose length *as the server counts
it* (usage.prompt_tokens) is the level; `collect --prompts FILE` sends the user's prompts,
grouped into levels by their server-counted length. No tokenizer is assumed: the pre-flight
(collect/preflight.py) measures the text on the server itself, and this module holds the
pure half: building texts, reading the prompts file, grouping, and handing each request
its prompt.

Every request's prompt starts with a nonce, an 8-digit number unique within the run and
drawn afresh for each run, so that a prefix cache cannot make a repeat cheaper than a first
send. Digits tokenize by position rather than by value in the common tokenizers, so every
nonce has the same length. With `--shared-prefix N` the first (about) N tokens of filler
come before the nonce, identical across requests.

The filler is a fixed cycle of common English words: each is one token (with its leading
space) in most vocabularies, so the server-counted length grows by a steady rate per word.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scm_xl.collect.matrix import MatrixPoint
from scm_xl.errors import InputError
from scm_xl.input_files import read_capped

FILLER_WORDS: tuple[str, ...] = tuple("""
the of and to in is it you that he was for on are with as his they be at one have this from or
had by word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make thing
see him two has look more day could go come did number sound no most people my over know water than
call first who may down side been now find
""".split())
TOLERANCE = 0.05  # a level is hit when the server's count is within 5% of it
MEASURE_ALL_UP_TO = 200  # distinct prompts of a --prompts file measured one by one; beyond: a sample
DEFAULT_PROMPT_LEVELS = 3
# The most of a --prompts file read (a device or an endless file is refused, not read until memory ends).
MAX_PROMPTS_BYTES = 256 * 1024 * 1024
_NONCE_DIGITS = 8
_NONCE_STEP = 61_803_399  # coprime to 10**8: consecutive requests get unrelated, unique numbers

Messages = list[dict[str, Any]]


def filler(start: int, count: int) -> str:
    """`count` filler words from position `start` of the endless cycle, space-separated."""
    size = len(FILLER_WORDS)
    return " ".join(FILLER_WORDS[(start + i) % size] for i in range(max(0, count)))


def synthetic_text(nonce: str, words: int, prefix_words: int = 0) -> str:
    """The user message of a synthetic prompt: `prefix_words` words shared by every request, the
    nonce, then the rest of the `words` filler words."""
    body = filler(prefix_words, words - prefix_words)
    head = f"{filler(0, prefix_words)} " if prefix_words else ""
    return f"{head}{nonce} {body}" if body else f"{head}{nonce}"


class Nonces:
    """Unique 8-digit numbers for one run, from a random start (never the same run twice)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._next = (rng or random.SystemRandom()).randrange(10 ** _NONCE_DIGITS)

    def next(self) -> str:
        value = self._next
        self._next = (value + _NONCE_STEP) % 10 ** _NONCE_DIGITS
        return f"{value:0{_NONCE_DIGITS}d}"


def with_nonce(messages: Messages, nonce: str) -> Messages:
    """A copy of `messages` whose first message starts with the nonce."""
    copied = [dict(message) for message in messages]
    first = copied[0]
    content = first.get("content")
    if isinstance(content, list):
        first["content"] = [{"type": "text", "text": f"{nonce} "}, *content]
    else:
        first["content"] = f"{nonce} {content or ''}"
    return copied


def user_messages(text: str) -> Messages:
    return [{"role": "user", "content": text}]


# -- synthetic prompts --------------------------------------------------------------------


@dataclass
class LevelText:
    """How one prompt level is made for one model, and what the server counted at pre-flight."""

    level: int
    words: int  # filler words in all (the shared prefix included)
    measured: int  # usage.prompt_tokens of the verified prompt

    @property
    def off_by(self) -> float:
        return (self.measured - self.level) / self.level

    @property
    def hit(self) -> bool:
        return abs(self.measured - self.level) <= TOLERANCE * self.level


@dataclass
class Calibration:
    """One model's server-counted length of a synthetic prompt: overhead + rate x words."""

    model: str
    overhead: float  # tokens of the chat template and the nonce
    tokens_per_word: float
    prefix_words: int = 0
    levels: dict[int, LevelText] = field(default_factory=dict)

    def words_for(self, tokens: float) -> int:
        return round((tokens - self.overhead) / self.tokens_per_word)


def words_for_prefix(tokens: int, tokens_per_word: float) -> int:
    return max(0, round(tokens / tokens_per_word))


# -- the user's prompts -------------------------------------------------------------------


@dataclass(frozen=True)
class UserPrompt:
    line: int  # 1-based line of the prompts file
    messages: tuple[dict[str, Any], ...]

    @property
    def key(self) -> str:
        return json.dumps(self.messages, sort_keys=True, ensure_ascii=False)

    @property
    def characters(self) -> int:
        total = 0
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                total += len(content)
            elif isinstance(content, list):
                total += sum(len(str(part.get("text", ""))) for part in content if isinstance(part, dict))
        return total


def load_prompts(path: str | Path) -> list[UserPrompt]:
    """The prompts of a --prompts file: JSONL (`{"prompt": "..."}` or `{"messages": [...]}` per
    line) or plain text, one prompt per line. A file is JSONL when its name ends in .jsonl or
    .ndjson, or when one of its lines is such an object; then every non-blank line must be one
    (InputError naming file:line). Blank lines are skipped."""
    where = str(path)
    data = read_capped(path, MAX_PROMPTS_BYTES, "a prompts file")  # a device or FIFO is refused unread
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", path=where, line=data.count(b"\n", 0, exc.start) + 1) from None
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise InputError("no prompts: the file is empty", path=where)
    jsonl = Path(path).suffix.lower() in (".jsonl", ".ndjson") or any(
        _prompt_object(line) is not None for _, line in lines)
    if not jsonl:
        if "\0" in text:
            raise InputError("not a text file (it contains NUL bytes)", path=where)
        return [UserPrompt(number, tuple(user_messages(line))) for number, line in lines]
    return [UserPrompt(number, _jsonl_messages(line, where, number)) for number, line in lines]


def _prompt_object(line: str) -> dict[str, Any] | None:
    stripped = line.strip()
    if not stripped.startswith("{"):
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return value if isinstance(value, dict) and ("prompt" in value or "messages" in value) else None


def _jsonl_messages(line: str, where: str, number: int) -> tuple[dict[str, Any], ...]:
    def bad(problem: str) -> InputError:
        return InputError(problem, path=where, line=number)

    layout = '{"prompt": "..."} or {"messages": [...]} object per line'
    if not line.lstrip().startswith(("{", "[", '"')):
        raise bad(f"not JSON but plain text, in a JSONL prompts file (one {layout}); for plain-text "
                  "prompts, one per line, make every line plain text")
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise bad(f"not JSON ({exc.msg} at column {exc.colno}); a JSONL prompts file holds one {layout}") from None
    if not isinstance(value, dict) or not ("prompt" in value or "messages" in value):
        raise bad('expected a JSON object with a "prompt" or a "messages" key')
    if "prompt" in value and "messages" in value:
        raise bad('give "prompt" or "messages", not both')
    if "prompt" in value:
        prompt = value["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise bad('"prompt" must be a non-empty string')
        return tuple(user_messages(prompt))
    messages = value["messages"]
    if not isinstance(messages, list) or not messages:
        raise bad('"messages" must be a non-empty list of {"role": ..., "content": ...} objects')
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise bad(f'messages[{index}] must be an object with "role" and "content"')
        if not isinstance(message.get("role"), str) or not message["role"]:
            raise bad(f'messages[{index}]: "role" must be a string')
        content = message.get("content")
        if not isinstance(content, (str, list)) or (isinstance(content, list) and not all(
                isinstance(part, dict) for part in content)):
            raise bad(f'messages[{index}]: "content" must be a string or a list of parts')
    return tuple(messages)


def distinct_prompts(prompts: Sequence[UserPrompt]) -> list[UserPrompt]:
    """The first of each distinct prompt, in file order."""
    seen: dict[str, UserPrompt] = {}
    for prompt in prompts:
        seen.setdefault(prompt.key, prompt)
    return list(seen.values())


def to_measure(distinct: Sequence[UserPrompt], seed: int, limit: int = MEASURE_ALL_UP_TO) -> list[UserPrompt]:
    """Every distinct prompt when there are at most `limit`, else a seeded sample of `limit`."""
    if len(distinct) <= limit:
        return list(distinct)
    chosen = random.Random(f"{seed}:measure").sample(range(len(distinct)), limit)
    return [distinct[i] for i in sorted(chosen)]


def estimate_lengths(distinct: Sequence[UserPrompt], measured: dict[str, int]) -> dict[str, float]:
    """Server-counted length per distinct prompt: measured where measured, else estimated from its
    characters by the least-squares line through the measured ones."""
    points = [(p.characters, measured[p.key]) for p in distinct if p.key in measured]
    xs = [x for x, _ in points]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(y for _, y in points)
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0
    if slope <= 0:
        slope = mean_y / mean_x if mean_x else 0.0
        intercept = 0.0
    else:
        intercept = mean_y - slope * mean_x
    return {p.key: float(measured[p.key]) if p.key in measured else intercept + slope * p.characters
            for p in distinct}


def group_by_length(lengths: Sequence[float], groups: int) -> list[int]:
    """A 0-based group per item: at most `groups` groups of about equal size by quantiles of
    length, equal lengths in one group, numbered from the shortest."""
    count = len(lengths)
    order = sorted(range(count), key=lambda i: lengths[i])
    index = [0] * count
    first_of: dict[float, int] = {}
    for rank, i in enumerate(order):
        index[i] = first_of.setdefault(lengths[i], rank * groups // count)
    renumber = {group: number for number, group in enumerate(sorted(set(index)))}
    return [renumber[group] for group in index]


@dataclass
class PromptGroup:
    """One prompt level of a --prompts file: its prompts and the median server-counted length."""

    level: int
    prompts: list[UserPrompt]  # every prompt of the file in this group, duplicates included
    measured: int  # how many of its distinct prompts were measured one by one

    @property
    def lines(self) -> list[int]:
        return [prompt.line for prompt in self.prompts]


def make_groups(prompts: Sequence[UserPrompt], measured: dict[str, int], levels: int) -> list[PromptGroup]:
    """Group the file's prompts into at most `levels` levels by server-counted length (measured, or
    estimated for prompts beyond the measured sample); each level is the median measured length of
    its group (of its estimates where none was measured)."""
    distinct = distinct_prompts(prompts)
    lengths = estimate_lengths(distinct, measured)
    group_of_key = dict(zip((p.key for p in distinct), group_by_length([lengths[p.key] for p in distinct], levels)))
    found: list[PromptGroup] = []
    for number in sorted(set(group_of_key.values())):
        keys = [key for key, group in group_of_key.items() if group == number]
        counted = [measured[key] for key in keys if key in measured]
        median = statistics.median(counted or [lengths[key] for key in keys])
        level = max(1, math.floor(median + 0.5))
        members = [prompt for prompt in prompts if group_of_key[prompt.key] == number]
        if found and found[-1].level >= level:  # estimates can blur two groups into one level
            found[-1].prompts.extend(members)
            found[-1].measured += len(counted)
            continue
        found.append(PromptGroup(level=level, prompts=members, measured=len(counted)))
    return found


# -- what each request sends ----------------------------------------------------------------


@dataclass(frozen=True)
class PromptChoice:
    """One request's prompt and where it came from (written to requests.csv)."""

    messages: Messages
    nonce: str
    line: int | None = None  # the prompts file's line; None for synthetic prompts


class SyntheticPrompts:
    """Each request: the calibrated filler for its model and level, with a fresh nonce."""

    def __init__(self, calibrations: dict[str, Calibration], nonces: Nonces, shared_prefix: int = 0) -> None:
        self.calibrations = calibrations
        self.nonces = nonces
        self.shared_prefix = shared_prefix
        self.seed: int | None = None

    def choose(self, point: MatrixPoint, count: int, phase: str) -> list[PromptChoice]:
        calibration = self.calibrations[point.model]
        words = calibration.levels[point.prompt_level or 0].words
        choices = []
        for _ in range(count):
            nonce = self.nonces.next()
            choices.append(PromptChoice(user_messages(synthetic_text(nonce, words, calibration.prefix_words)), nonce))
        return choices

    def note(self, point: MatrixPoint) -> str | None:
        if not self.shared_prefix:
            return None
        return f"shared prefix of about {self.shared_prefix} tokens"


class FilePrompts:
    """Each request: a prompt of its level's group, in a seeded order (shuffled passes through the
    group, so every prompt is sent once before any is sent again), with a fresh nonce."""

    def __init__(self, path: str | Path, groups: list[PromptGroup], seed: int, nonces: Nonces) -> None:
        self.path = str(path)
        self.groups = {group.level: group for group in groups}
        self.seed = seed
        self.nonces = nonces

    def choose(self, point: MatrixPoint, count: int, phase: str) -> list[PromptChoice]:
        group = self.groups[point.prompt_level or 0]
        rng = random.Random(f"{self.seed}:{point.key}:{phase}")
        order: list[UserPrompt] = []
        while len(order) < count:
            batch = list(group.prompts)
            rng.shuffle(batch)
            order.extend(batch)
        choices = []
        for prompt in order[:count]:
            nonce = self.nonces.next()
            choices.append(PromptChoice(with_nonce(list(prompt.messages), nonce), nonce, prompt.line))
        return choices

    def note(self, point: MatrixPoint) -> str | None:
        levels = sorted(self.groups)
        group = self.groups[point.prompt_level or 0]
        return (f"prompts: {self.path}, level {levels.index(group.level) + 1} of {len(levels)} "
                f"({len(group.prompts)} prompts), seed {self.seed}")
