"""The explorer's interface strings: one catalog per language (``strings/LANG.yaml``).

The pages read them from ``/static/i18n.js``, which this module writes from the catalogs (so the
pages keep their synchronous ``Attn.t(key)``); Python reads them with :func:`t`. The lesson's own
text is not here: it lives in ``lesson/content/LANG/*.md``.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path

import yaml

__all__ = ["LANGS", "STRINGS_DIR", "catalog", "t", "script"]

LANGS = ("en", "ja")
STRINGS_DIR = Path(str(resources.files("attnlab.web") / "strings"))


@functools.cache
def catalog(lang: str) -> dict[str, str]:
    """Every interface string of ``lang`` by key (``ValueError`` naming the file if it is malformed)."""
    if lang not in LANGS:
        raise ValueError(f"no interface strings for language {lang!r}; there are {list(LANGS)}")
    path = STRINGS_DIR / f"{lang}.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise ValueError(f"{path}: {err}") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError(f"{path}: the catalog is a mapping of keys to strings")
    return data


def t(lang: str, key: str, **values: object) -> str:
    """The string ``key`` in ``lang`` with its ``{name}`` placeholders filled."""
    text = catalog(lang)[key]
    for name, value in values.items():
        text = text.replace("{" + name + "}", str(value))
    return text


@functools.cache
def script() -> str:
    """``/static/i18n.js``: both catalogs as ``window.ATTN_STRINGS``."""
    both = {lang: catalog(lang) for lang in LANGS}
    return (
        "// Written by attnlab.web.i18n from strings/en.yaml and strings/ja.yaml.\nwindow.ATTN_STRINGS = "
        + json.dumps(both, ensure_ascii=False, indent=1)
        + ";\n"
    )
