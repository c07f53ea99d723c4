"""`scm-xl serve-sim` in a subprocess (optionally pinned to one core), shared by the benchmarks."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import httpx


class Simulator:
    def __init__(self, args: list[str], core: int | None = None) -> None:
        command = [sys.executable, "-c", "import sys; from scm_xl.cli import main; sys.exit(main())",
                   "serve-sim", "--host", "127.0.0.1", "--port", "0", *args]
        preexec = (lambda: os.sched_setaffinity(0, {core})) if core is not None else None
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        preexec_fn=preexec)
        line = self.process.stdout.readline() if self.process.stdout else ""
        if "http://127.0.0.1:" not in line:
            self.process.kill()
            stderr = self.process.stderr.read() if self.process.stderr else ""
            raise RuntimeError(f"the simulator did not start: {line!r} {stderr}")
        self.base_url = line.strip().rsplit(" ", 1)[-1]  # http://127.0.0.1:PORT/v1
        self.root = self.base_url.removesuffix("/v1")

    def get(self, path: str) -> Any:
        """A JSON endpoint of the simulator, e.g. /sim/stats or /sim/requests."""
        with httpx.Client(trust_env=False, timeout=120) as client:
            return client.get(f"{self.root}{path}").json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def add_core_options(parser: Any) -> None:
    """--client-core / --server-core: the collector and the simulator each on a core of its own."""
    parser.add_argument("--client-core", type=int, default=0)
    parser.add_argument("--server-core", type=int, default=1)


def pin_client(args: Any) -> None:
    """Record the load average, then pin this (the collector's) process to its core; with one core,
    collector and simulator share it and the run says so."""
    if len(os.sched_getaffinity(0)) < 2:
        print("warning: fewer than 2 cores; collector and simulator share one", file=sys.stderr)
        args.client_core = args.server_core = min(os.sched_getaffinity(0))
    args.load_before = os.getloadavg()[0]
    os.sched_setaffinity(0, {args.client_core})
