"""scm-xl run as a person runs it: a process of its own (several can run at once, which click's
CliRunner, swapping sys.stdout, cannot)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

CLI = [sys.executable, "-c", "import sys; from scm_xl.cli import main; sys.exit(main())"]


@dataclass(frozen=True)
class Ran:
    exit_code: int
    output: str  # stdout then stderr, as a terminal shows both


def scm_xl(*args: object, timeout: float = 300) -> Ran:
    """`scm-xl ARGS` in a subprocess, stdin closed; its exit code and output."""
    done = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return Ran(done.returncode, done.stdout + done.stderr)
