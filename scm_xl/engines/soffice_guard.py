"""Keeps one soffice run from outliving scm-xl: started by the libreoffice engine, standard library only.

    python -I soffice_guard.py WORKDIR -- soffice ARGS...

It runs soffice in a process group of its own, with its output in WORKDIR/soffice.log,
and prints "exit N" on its standard output when soffice ends. When its standard input
reaches end of file (the engine is done with WORKDIR, or the engine died, even by
kill -9) or it gets SIGTERM (on Linux also sent when its parent dies), it kills
soffice's whole process group, waits until those processes are gone, removes WORKDIR
and exits. soffice itself starts a second process (oosplash, then soffice.bin), so
a signal to the first alone would orphan the one doing the work.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_lock = threading.RLock()  # SIGTERM's handler may run while the main thread is in _shutdown already
_stopping = threading.Event()


def main(argv: list[str]) -> None:
    workdir, separator, *command = argv
    if separator != "--" or not command:
        sys.exit("usage: soffice_guard.py WORKDIR -- COMMAND...")
    parent = os.getppid()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the engine decides what Ctrl-C ends
    _linux_prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    _linux_prctl(PR_SET_CHILD_SUBREAPER, 1)  # soffice.bin, orphaned by oosplash, comes to us to be reaped
    with open(os.path.join(workdir, "soffice.log"), "wb") as log:
        soffice = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                   process_group=0)
    signal.signal(signal.SIGTERM, lambda signum, frame: _shutdown(soffice.pid, workdir, 128 + signum))
    if os.getppid() != parent:  # the engine died before the death signal was armed
        _shutdown(soffice.pid, workdir, 1)
    threading.Thread(target=_until_end_of_input, args=(soffice.pid, workdir), daemon=True).start()
    code = soffice.wait()
    if not _stopping.is_set():
        try:
            sys.stdout.write(f"exit {code}\n")
            sys.stdout.flush()
        except OSError:
            pass  # the engine is gone: end of input follows
    # Never return: an interpreter shutting down would freeze the thread that is cleaning up.
    while True:
        time.sleep(60)  # the input thread or SIGTERM ends the process, with os._exit


def _until_end_of_input(group: int, workdir: str) -> None:
    while os.read(0, 4096):
        pass
    _shutdown(group, workdir, 0)


def _shutdown(group: int, workdir: str, code: int) -> None:
    _stopping.set()
    with _lock:
        try:
            os.killpg(group, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            _reap()
            try:
                os.killpg(group, 0)
            except ProcessLookupError:
                break  # every process of the group is gone: nothing writes in workdir any more
            time.sleep(0.01)
        shutil.rmtree(workdir, ignore_errors=True)
        os._exit(code)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _linux_prctl(option: int, value: int) -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


if __name__ == "__main__":
    main(sys.argv[1:])
