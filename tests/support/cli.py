"""scm-xl run as a person runs it: a process of its own (several can run at once, which click's
CliRunner, swapping sys.stdout, cannot)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass

CLI = [sys.executable, "-c", "import sys; from scm_xl.cli import main; sys.exit(main())"]


@dataclass(frozen=True)
class Ran:
    exit_code: int
    output: str  # stdout then stderr, as a terminal shows both
    stdout: str = ""


def scm_xl(*args: object, timeout: float = 300) -> Ran:
    """`scm-xl ARGS` in a subprocess, stdin closed; its exit code and output."""
    done = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return Ran(done.returncode, done.stdout + done.stderr, done.stdout)


class Started:
    """`scm-xl ARGS` started now and waited for when its result is asked: a command that spends its
    time waiting on real time (`scm-xl demo`'s simulators) runs while a module's other tests run.
    Its output goes to temporary files (a pipe could fill and stop it while nobody reads)."""

    def __init__(self, *args: object, timeout: float = 300) -> None:
        self._out = tempfile.TemporaryFile("w+", encoding="utf-8")
        self._err = tempfile.TemporaryFile("w+", encoding="utf-8")
        self._timeout = timeout
        self._process = subprocess.Popen([*CLI, *map(str, args)], stdout=self._out, stderr=self._err,
                                         stdin=subprocess.DEVNULL, text=True)

    def result(self) -> Ran:
        """Its exit code and output, once it has ended (waited for, at most `timeout` seconds)."""
        code = self._process.wait(timeout=self._timeout)
        self._out.seek(0)
        self._err.seek(0)
        out = self._out.read()
        return Ran(code, out + self._err.read(), out)

    def stop(self) -> None:
        """Ended, killed if it still runs (its result was never asked for); its files closed."""
        if self._process.poll() is None:
            self._process.kill()
        self._process.wait()
        self._out.close()
        self._err.close()
