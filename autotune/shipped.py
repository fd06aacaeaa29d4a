"""Default tuning tables shipped with the package: ``tables/<device>.json``, one per GPU.

A table holds a choice per key, the key without its version fields (``engine.VERSION_FIELDS``), so
a table stays usable across triton and torch versions. Each entry says where it came from:
``"source": "modeled"`` (the cost model's choice, with the ``generator`` that made it) or
``"timed"`` (measured on that GPU, with its seconds). ``tritonml tune --write-table`` writes one;
the shipped H100 and A100 tables are modeled. Entries whose config is not among a problem's
candidates any more are ignored.
"""
from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path

from .cache import key_string
from .engine import VERSION_FIELDS

SCHEMA_VERSION = 1
TABLES_DIR = Path(__file__).parent / "tables"


def table_key(key: dict) -> str:
    """The text a table files ``key`` under: its fields without the versions."""
    return key_string({k: v for k, v in key.items() if k not in VERSION_FIELDS})


def path_for(device_name: str) -> Path:
    return TABLES_DIR / f"{device_name}.json"


def read(path: Path | str) -> dict:
    """A table file's ``{"schema", "device", "entries"}``; ValueError when it is not one."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"{path}: not a schema {SCHEMA_VERSION} tuning table")
    entries = data.get("entries")
    if not isinstance(entries, dict) or not all(
            isinstance(e, dict) and isinstance(e.get("config"), dict) and e.get("source")
            in ("modeled", "timed") for e in entries.values()):
        raise ValueError(f"{path}: malformed entries")
    return data


@functools.lru_cache(maxsize=None)
def _entries(device_name: str) -> dict:
    path = path_for(device_name)
    if not path.is_file():
        return {}
    return read(path)["entries"]


def lookup(device_name: str, key: dict) -> dict | None:
    """The shipped entry for ``key`` on ``device_name``, or None (no table, or no entry)."""
    return _entries(device_name).get(table_key(key))


def write(path: Path | str, device_name: str, entries: dict) -> None:
    """Write a table of ``entries`` (by ``table_key``) for ``device_name`` to ``path`` atomically."""
    path = Path(path)
    text = json.dumps({"schema": SCHEMA_VERSION, "device": device_name, "entries": entries},
                      sort_keys=True, indent=1) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    _entries.cache_clear()
