"""A real third-party OpenAI-compatible server for the benchmarks: llama.cpp's `llama-server`, built
from the `llama-cpp-python` sdist on PyPI, serving a small random-weight llama-architecture GGUF that
is written locally (no weights are downloaded). See ../shared/notes/real-server.md.

    python benchmarks/llama_server.py build [--force] [--jobs 2]   # ~7 min on 2 cores, cached
    python benchmarks/llama_server.py model [--force]              # ~107 MB GGUF, cached, seed fixed
    python benchmarks/llama_server.py serve [--slots 8] [--ctx 8192] [--port 0]   # until Ctrl-C

As a module:

    from llama_server import LlamaServer
    with LlamaServer(slots=8, ctx=8192) as server:     # builds/writes what is missing first
        server.base_url                                # http://127.0.0.1:PORT/v1, model name "small"

Everything is cached under ~/.cache/scm-xl/ (or $SCM_XL_CACHE): the sdist in llama-server/sdist/, the
binary (and build-info.json, with the build's duration) in llama-server/llama-cpp-python-<version>/, and
models/small-<format>-<shape>-seed<N>.gguf. The server only ever listens on 127.0.0.1, and is killed (its whole
process group) when the `with` block ends, on an exception or a KeyboardInterrupt too, and when this
process dies (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

LLAMA_CPP_PYTHON = "0.3.36"
HOST = "127.0.0.1"  # the only address the server is ever bound to
MODEL_ALIAS = "small"
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DGGML_NATIVE=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
]


def cache_root() -> Path:
    return Path(os.environ.get("SCM_XL_CACHE") or Path.home() / ".cache" / "scm-xl")


def log(message: str) -> None:
    print(f"[llama_server] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------- build

def server_dir(version: str = LLAMA_CPP_PYTHON) -> Path:
    return cache_root() / "llama-server" / f"llama-cpp-python-{version}"


def server_binary(version: str = LLAMA_CPP_PYTHON) -> Path:
    return server_dir(version) / "llama-server"


def _binary_works(binary: Path) -> bool:
    """The cached binary starts here (GGML_NATIVE=ON: a binary built on another CPU may not)."""
    if not (binary.is_file() and os.access(binary, os.X_OK)):
        return False
    try:
        run = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return run.returncode == 0


def _compiler() -> str | None:
    for name in ("c++", "g++", "clang++"):
        if shutil.which(name):
            return name
    return None


def ensure_toolchain(install: bool = True) -> None:
    """cmake and a C/C++ compiler; installs them with apt-get (update first) when missing and allowed."""
    missing = [tool for tool, ok in (("cmake", shutil.which("cmake")), ("a C++ compiler", _compiler()),
                                     ("a C compiler", shutil.which("cc") or shutil.which("gcc"))) if not ok]
    if not missing:
        return
    if install and shutil.which("apt-get") and os.geteuid() == 0:
        log(f"missing {', '.join(missing)}: installing cmake and build-essential with apt-get")
        subprocess.run(["apt-get", "update"], check=True)
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "cmake", "build-essential"],
                       check=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        missing = [t for t, ok in (("cmake", shutil.which("cmake")), ("a C++ compiler", _compiler())) if not ok]
        if not missing:
            return
    raise RuntimeError(
        f"building llama-server needs cmake and a C/C++ compiler; missing: {', '.join(missing)}. "
        "Install them (Debian/Ubuntu: `apt-get update && apt-get install -y cmake build-essential`) "
        "or pass an existing binary with --server-binary.")


def _sdist(version: str) -> Path:
    folder = cache_root() / "llama-server" / "sdist"
    folder.mkdir(parents=True, exist_ok=True)
    found = sorted(folder.glob(f"llama_cpp_python-{version}.tar.gz"))
    if found:
        return found[0]
    log(f"downloading the llama-cpp-python=={version} sdist from PyPI")
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                    f"llama-cpp-python=={version}", "-d", str(folder)], check=True)
    found = sorted(folder.glob(f"llama_cpp_python-{version}.tar.gz"))
    if not found:
        raise RuntimeError(f"pip download left no llama_cpp_python-{version}.tar.gz in {folder}")
    return found[0]


def build(version: str = LLAMA_CPP_PYTHON, jobs: int = 2, force: bool = False, nice: int = 10) -> Path:
    """Build llama-server (CMake on the sdist's vendor/llama.cpp, --target llama-server) into the cache;
    return the cached binary without building when it is there and runs."""
    binary = server_binary(version)
    if not force and _binary_works(binary):
        return binary
    ensure_toolchain()
    sdist = _sdist(version)
    work = cache_root() / "llama-server" / f"work-{version}"
    source_root = work / f"llama_cpp_python-{version}"
    if not (source_root / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file():
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        log(f"unpacking {sdist.name}")
        with tarfile.open(sdist) as archive:
            archive.extractall(work, filter="data")
    source = source_root / "vendor" / "llama.cpp"
    build_dir = work / "build"
    prefix = ["nice", "-n", str(nice)] if nice and shutil.which("nice") else []
    started = time.monotonic()
    log(f"configuring {source}")
    subprocess.run([*prefix, "cmake", "-S", str(source), "-B", str(build_dir), *CMAKE_FLAGS], check=True)
    log(f"building llama-server with -j{jobs} (about 7 minutes on 2 cores)")
    subprocess.run([*prefix, "cmake", "--build", str(build_dir), "--config", "Release", "--target",
                    "llama-server", f"-j{jobs}"], check=True)
    built = next((p for p in (build_dir / "bin" / "llama-server", build_dir / "bin" / "Release" / "llama-server")
                  if p.is_file()), None)
    if built is None:
        raise RuntimeError(f"the build finished but no llama-server binary is under {build_dir}")
    seconds = time.monotonic() - started
    binary.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(built, binary)
    version_text = subprocess.run([str(binary), "--version"], capture_output=True, text=True).stderr.strip()
    (binary.parent / "build-info.json").write_text(json.dumps({
        "llama_cpp_python": version, "cmake_flags": CMAKE_FLAGS, "jobs": jobs, "nice": nice,
        "build_seconds": round(seconds, 1), "machine": platform.machine(), "cpus": os.cpu_count(),
        "llama_server_version": version_text, "built_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }, indent=2) + "\n")
    shutil.rmtree(work, ignore_errors=True)  # ~hundreds of MB of objects; the binary is all we keep
    log(f"built {binary} in {seconds:.0f} s")
    return binary


# --------------------------------------------------------------------------------------------- model

@dataclass(frozen=True)
class ModelShape:
    layers: int = 8
    hidden: int = 768
    ffn: int = 2048
    heads: int = 12
    kv_heads: int = 4
    vocab: int = 2000
    context: int = 32768  # llama.context_length (training context); -c beyond it only warns
    seed: int = 0

    @property
    def file_name(self) -> str:
        return (f"small-{MODEL_FORMAT}-l{self.layers}-h{self.hidden}-f{self.ffn}-a{self.heads}-kv{self.kv_heads}"
                f"-v{self.vocab}-seed{self.seed}.gguf")


# Bumped whenever the file's contents change for the same shape (the cache is keyed on the name).
MODEL_FORMAT = "r2"
# ChatML, as llama-server falls back to without a template; its markers are control tokens of the
# vocabulary, so the template costs a few tokens per request, not dozens.
CHAT_TEMPLATE = ("{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] "
                 "+ '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
                 "{% endif %}")

_COMMON_WORDS = (
    "the of and to in is that for it as was with be by on not he this are or his from at which but have an "
    "they you were her she there been one all we their has would when if so no will more can who out up its "
    "about into than them only other some time could these two may then do first any my now such like our "
    "over man me even most made after also did many before must through back years where much your way well "
    "down should because each just those people how too little state good very make world still own see men "
    "work long get here between both life being under never day same another know while last might us great "
    "old year off come since against go came right used take three house use during without again place "
    "around however home small found thought went say part once general high upon school every does number "
    "system model server token tokens request requests throughput latency concurrency load test benchmark "
    "prompt output input data value values result results measure rate second seconds minute fast slow "
    "queue batch slot slots memory cache context length example question answer write short story about "
    "please explain describe summary list three reasons why simple words sentence paragraph"
).split()


def _vocabulary(size: int) -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece-style ("llama") vocabulary: <unk>, <s>, </s>, the ChatML markers, the 256
    byte-fallback tokens, then word pieces ("▁" marks a leading space; letters, pairs of letters, some
    English words); scores favour longer pieces so the tokenizer merges."""
    normal, unknown, control, byte = 1, 2, 3, 6  # gguf.TokenType values
    tokens = ["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    types = [unknown, control, control, control, control]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [byte] * 256
    # The template's words, with every prefix (the tokenizer merges through pieces of the vocabulary).
    roles = ["▁" + word[:end] for word in ("user", "assistant", "system") for end in range(2, len(word) + 1)]
    pieces: list[str] = ["▁", *roles, "\n", "▁\n"]
    printable = [chr(c) for c in range(33, 127)]
    pieces += printable
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["▁" + c for c in printable]
    pieces += ["▁" + w for w in _COMMON_WORDS]
    pieces += [a + b for a in letters for b in letters]
    pieces += ["▁" + a + b for a in letters for b in letters]
    seen: set[str] = set(tokens)
    unique: list[str] = []
    for piece in pieces:
        if piece not in seen:
            seen.add(piece)
            unique.append(piece)
    room = size - len(tokens)
    if room < 100:
        raise ValueError(f"vocab {size} is too small (at least {len(tokens) + 100})")
    unique = unique[:room]
    while len(unique) < room:  # pad with rare three-letter pieces
        i = len(unique)
        unique.append("▁" + letters[i % 26] + letters[(i // 26) % 26] + letters[(i // 676) % 26])
        if unique[-1] in seen:
            unique[-1] += "q" * (1 + i % 3)
        seen.add(unique[-1])
    tokens += unique
    types += [normal] * len(unique)
    scores = [0.0] * (len(tokens) - len(unique)) + [float(len(p)) - i * 1e-4 for i, p in enumerate(unique)]
    return tokens, scores, types


def model_path(shape: ModelShape = ModelShape()) -> Path:
    return cache_root() / "models" / shape.file_name


def write_model(shape: ModelShape = ModelShape(), force: bool = False) -> Path:
    """A random-weight llama GGUF (f16 matrices, f32 norms), deterministic in shape.seed. Dimension 0 of
    the residual stream is held at 1.0 (embedding column 0 is 1, no block writes to it), so after the
    final RMSNorm it is always positive; the output rows of </s>, <s>, <unk>, the ChatML markers and
    the byte tokens read -1e4 from it and nothing else, so they are never sampled and every request
    runs to max_tokens (and the text stays ASCII)."""
    path = model_path(shape)
    if path.is_file() and not force:
        return path
    try:
        import gguf
        import numpy as np
    except ImportError as error:
        raise RuntimeError("writing the model needs the `gguf` package: pip install gguf") from error
    tokens, scores, types = _vocabulary(shape.vocab)
    n_vocab, d, head_dim = len(tokens), shape.hidden, shape.hidden // shape.heads
    rng = np.random.default_rng(shape.seed)

    def matrix(rows: int, cols: int, std: float) -> Any:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * std).astype(np.float16)

    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".gguf.partial")
    writer = gguf.GGUFWriter(str(partial), "llama")
    writer.add_name("scm-xl random small llama")
    writer.add_context_length(shape.context)
    writer.add_embedding_length(d)
    writer.add_block_count(shape.layers)
    writer.add_feed_forward_length(shape.ffn)
    writer.add_head_count(shape.heads)
    writer.add_head_count_kv(shape.kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    embedding = matrix(n_vocab, d, 0.5)
    embedding[:, 0] = 1.0
    writer.add_tensor("token_embd.weight", embedding)
    for layer in range(shape.layers):
        prefix = f"blk.{layer}."
        attn_out, ffn_down = matrix(d, d, 0.02), matrix(d, shape.ffn, 0.02)
        attn_out[0, :] = 0.0  # nothing is written to residual dimension 0
        ffn_down[0, :] = 0.0
        writer.add_tensor(prefix + "attn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(prefix + "attn_q.weight", matrix(d, d, 0.05))
        writer.add_tensor(prefix + "attn_k.weight", matrix(shape.kv_heads * head_dim, d, 0.05))
        writer.add_tensor(prefix + "attn_v.weight", matrix(shape.kv_heads * head_dim, d, 0.05))
        writer.add_tensor(prefix + "attn_output.weight", attn_out)
        writer.add_tensor(prefix + "ffn_norm.weight", np.ones(d, dtype=np.float32))
        writer.add_tensor(prefix + "ffn_gate.weight", matrix(shape.ffn, d, 0.05))
        writer.add_tensor(prefix + "ffn_up.weight", matrix(shape.ffn, d, 0.05))
        writer.add_tensor(prefix + "ffn_down.weight", ffn_down)
    writer.add_tensor("output_norm.weight", np.ones(d, dtype=np.float32))
    output = matrix(n_vocab, d, 0.05)
    output[:, 0] = 0.0
    never = [i for i, kind in enumerate(types) if kind != 1]  # unk, bos, eos, bytes
    output[never, :] = 0.0
    output[never, 0] = -1e4
    writer.add_tensor("output.weight", output)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    partial.replace(path)
    log(f"wrote {path} ({path.stat().st_size / 1e6:.0f} MB)")
    return path


# --------------------------------------------------------------------------------------------- serve

def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    os.setsid()  # own process group, so the whole group can be killed
    try:  # SIGKILL the server if this Python process dies without cleaning up
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class LlamaServer:
    """llama-server on 127.0.0.1 (a context manager). Builds the binary and writes the model first
    when they are not cached. `slots` is -np, `ctx` is -c (context per slot = ctx // slots)."""

    def __init__(self, slots: int = 8, ctx: int = 8192, port: int = 0, threads: int = 1,
                 batch_threads: int = 1, binary: str | Path | None = None, model: str | Path | None = None,
                 alias: str = MODEL_ALIAS, extra_args: list[str] | None = None, log_path: str | Path | None = None,
                 startup_timeout: float = 300.0, prompt_cache: bool = True) -> None:
        self.slots, self.ctx, self.requested_port = slots, ctx, port
        self.threads, self.batch_threads, self.alias = threads, batch_threads, alias
        self.binary, self.model = binary, model
        self.extra_args = list(extra_args or [])
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout = startup_timeout
        self.prompt_cache = prompt_cache  # False: --no-cache-prompt (every request prefills its prompt)
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._log_file: Any = None

    @property
    def ctx_per_slot(self) -> int:
        return self.ctx // self.slots

    @property
    def root(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def command(self) -> list[str]:
        return [str(self.binary), "-m", str(self.model), "-a", self.alias, "--host", HOST,
                "--port", str(self.port), "-c", str(self.ctx), "-np", str(self.slots),
                "-t", str(self.threads), "-tb", str(self.batch_threads), "--no-webui",
                *([] if self.prompt_cache else ["--no-cache-prompt"]), *self.extra_args]

    def start(self) -> LlamaServer:
        self.binary = Path(self.binary) if self.binary else build()
        self.model = Path(self.model) if self.model else write_model()
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        for attempt in range(3):  # a port picked free can be taken before the server binds it
            self.port = self.requested_port or free_port()
            self._log_file = open(self.log_path, "ab")
            self.process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=self._log_file,
                                            stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
            try:
                self._wait_healthy()
                log(f"serving {self.alias} at {self.base_url} (-np {self.slots}, -c {self.ctx}: "
                    f"{self.ctx_per_slot} tokens per slot; log {self.log_path})")
                return self
            except RuntimeError:
                self.stop()
                if self.requested_port or attempt == 2 or "bind" not in self.log_tail().lower():
                    raise
        raise AssertionError("unreachable")

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        with httpx.Client(trust_env=False, timeout=5) as client:
            while time.monotonic() < deadline:
                assert self.process is not None
                if self.process.poll() is not None:
                    raise RuntimeError(f"llama-server exited with {self.process.returncode}:\n{self.log_tail()}")
                try:
                    if client.get(f"{self.root}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                time.sleep(0.25)
        raise RuntimeError(f"llama-server not healthy after {self.startup_timeout:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def __enter__(self) -> LlamaServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def describe() -> dict[str, Any]:
    """What is cached, for reports."""
    info_file = server_dir() / "build-info.json"
    return {"binary": str(server_binary()), "build": json.loads(info_file.read_text()) if info_file.exists() else None,
            "model": str(model_path()), "shape": asdict(ModelShape())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="build llama-server into the cache (reused when present)")
    p_build.add_argument("--force", action="store_true")
    p_build.add_argument("--jobs", type=int, default=2)
    p_model = sub.add_parser("model", help="write the random-weight GGUF into the cache")
    p_model.add_argument("--force", action="store_true")
    p_model.add_argument("--seed", type=int, default=0)
    p_serve = sub.add_parser("serve", help="serve on 127.0.0.1 until Ctrl-C (or SIGTERM)")
    p_serve.add_argument("--slots", "-np", type=int, default=8)
    p_serve.add_argument("--ctx", "-c", type=int, default=8192)
    p_serve.add_argument("--port", type=int, default=0, help="0: a free port")
    p_serve.add_argument("--server-binary")
    p_serve.add_argument("--model")
    p_serve.add_argument("--no-prompt-cache", action="store_true",
                         help="--no-cache-prompt: no request reuses a slot's cached prompt")
    sub.add_parser("info", help="what is cached")
    args = parser.parse_args(argv)
    if args.command == "build":
        print(build(jobs=args.jobs, force=args.force))
    elif args.command == "model":
        print(write_model(ModelShape(seed=args.seed), force=args.force))
    elif args.command == "info":
        print(json.dumps(describe(), indent=2))
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so the with-block's exit kills the server
        with LlamaServer(slots=args.slots, ctx=args.ctx, port=args.port, binary=args.server_binary,
                         model=args.model, prompt_cache=not args.no_prompt_cache) as server:
            print(server.base_url, flush=True)
            try:
                while server.process is not None and server.process.poll() is None:
                    time.sleep(0.5)
            except KeyboardInterrupt:
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
