"""Former home of the collector, now the package `scm_xl.collect`; kept so old imports work."""

from __future__ import annotations

from scm_xl.collect import *  # noqa: F401,F403
from scm_xl.collect import __all__  # noqa: F401
