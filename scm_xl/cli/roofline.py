"""CLI commands (filled in by its area)."""

from __future__ import annotations

commands: list = []
