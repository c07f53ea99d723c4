"""One self-contained HTML report of a calibration: the answer, coefficient tables, rows,
charts and a live calculator, bilingual, offline (no CDN, no request of any kind)."""

from __future__ import annotations

from scm_xl.htmlreport.page import render_report, report_context, write_report

__all__ = ["render_report", "report_context", "write_report"]
