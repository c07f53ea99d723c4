"""Independent measurements at once.

A measurement on the simulator spends its time waiting on the simulated GPU's steps, not on a
core, and each simulator keeps its own clock (absolute step deadlines), so measurements on
simulators of their own run side by side and measure what they would one after another."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def in_parallel(*calls: Callable[[], T]) -> list[T]:
    """Each call in a thread of its own; their results in the calls' order (the first failure raised)."""
    with ThreadPoolExecutor(max_workers=len(calls), thread_name_prefix="measure") as pool:
        futures = [pool.submit(call) for call in calls]
        return [future.result() for future in futures]
