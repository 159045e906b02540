"""Facts about this machine that attnlab keys caches and reports on (standard library only).

Shape:
    no tensors.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

__all__ = ["cache_root", "cpu_name", "cpu_flags"]


def cache_root() -> Path:
    """Where attnlab caches what it measured or built on this machine: ``$ATTNLAB_CACHE``, else
    ``$XDG_CACHE_HOME/attnlab``, else ``~/.cache/attnlab``."""
    root = os.environ.get("ATTNLAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "attnlab"
    )
    return Path(root)


def _cpuinfo(*prefixes: str) -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(prefixes):
                return line.split(":", 1)[1].strip() if ":" in line else line
    except OSError:
        pass
    return None


def cpu_name() -> str:
    """The CPU's model name, as ``lscpu`` shows it (or the platform's processor string)."""
    return _cpuinfo("model name") or platform.processor() or platform.machine() or "unknown CPU"


def cpu_flags() -> str:
    """The CPU's instruction-set flags (x86 ``flags``, Arm ``Features``), or the platform's
    processor string: what decides whether a build or a measurement holds on another machine."""
    return _cpuinfo("flags", "Features") or platform.processor() or platform.machine()
