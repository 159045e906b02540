"""Facts about this machine that attnlab keys caches and reports on (standard library only).

Shape:
    no tensors.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

__all__ = ["cache_root", "cpu_name", "cpu_flags", "read_json_cache", "write_json_cache"]


def cache_root() -> Path:
    """Where attnlab caches what it measured or built on this machine: ``$ATTNLAB_CACHE``, else
    ``$XDG_CACHE_HOME/attnlab``, else ``~/.cache/attnlab``."""
    root = os.environ.get("ATTNLAB_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "attnlab"
    )
    return Path(root)


def read_json_cache(path: Path) -> dict:
    """A JSON object cached at ``path``; ``{}`` when it is missing, unreadable or not an object
    (a cache only saves measuring again)."""
    try:
        known = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def write_json_cache(path: Path, known: dict) -> None:
    """Write ``known`` to a file of this process's own, then rename it over ``path``: another
    process (a parallel test worker, another rank) reading it sees the old file or the new one,
    never half of one. An unwritable cache is not an error: it only means measuring again."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1))
        tmp.replace(path)
    except OSError:
        pass


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
