"""scm-xl: measure an LLM endpoint, calibrate a readable throughput model in a live-formula workbook."""

from __future__ import annotations

__version__ = "0.1.0"
