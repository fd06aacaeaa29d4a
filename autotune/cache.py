"""A persistent, process-safe store of tuning results: one JSON file, one in-process dict in front.

The file lives in ``cache_dir()`` (``TRITONML_CACHE_DIR`` when set, else the user's cache directory)
and is named after the schema version, ``autotune-v{SCHEMA_VERSION}.json``; the version is also
written inside it. Its shape::

    {"schema": 1, "entries": {"<canonical key JSON>": {"config": {...}, "seconds": 1.5e-05}, ...}}

Safety rules, each for a reason:
- JSON only, never pickle: the file sits in a user-writable directory, and loading it must not run code.
- Writes are read-merge-write under an exclusive lock (``fcntl.flock`` on ``<file>.lock``): two
  processes tuning different keys at once both keep their entries. Windows has no ``fcntl``; there
  the lock is skipped, so concurrent writers may drop each other's entries (never corrupt the file).
- The new file is written to a temporary file in the same directory and moved over the old one with
  ``os.replace``: readers, who take no lock, see the old file or the new one, never half of one.
- A file that cannot be read as this schema (corrupt, truncated, another version) is treated as
  empty, with one ``CacheFileWarning`` per path per process, and is replaced on the next write. A
  file that cannot be written leaves the results in memory, again with one warning: tuning results
  are an optimization, never a reason to fail.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no advisory locks (see the module docstring)
    fcntl = None

SCHEMA_VERSION = 1
FILE_NAME = f"autotune-v{SCHEMA_VERSION}.json"
CACHE_DIR_ENV = "TRITONML_CACHE_DIR"


class CacheFileWarning(UserWarning):
    """The cache file could not be read or written; tuning goes on without it."""


def cache_dir() -> Path:
    """Where the cache file lives: ``$TRITONML_CACHE_DIR`` when set, else the user's cache directory.

    The default follows platformdirs' ``user_cache_dir`` without depending on it: on Linux
    ``$XDG_CACHE_HOME/tritonml`` (only an absolute ``XDG_CACHE_HOME`` counts, as the XDG spec says)
    or ``~/.cache/tritonml``; on macOS ``~/Library/Caches/tritonml``; on Windows
    ``%LOCALAPPDATA%\\tritonml\\Cache``.
    """
    override = os.environ.get(CACHE_DIR_ENV)
    if override:
        return Path(override).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "tritonml" / "Cache"
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "tritonml"
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "tritonml"


def key_string(key: dict) -> str:
    """The canonical text of a key: the same dict, in any field order, gives the same string."""
    return json.dumps(key, sort_keys=True, separators=(",", ":"), allow_nan=False)


# Paths already warned about in this process: a broken file is reported once, not on every lookup.
_warned: set[str] = set()
_warned_lock = threading.Lock()


def _warn_once(path: Path, message: str) -> None:
    with _warned_lock:
        if str(path) in _warned:
            return
        _warned.add(str(path))
    warnings.warn(f"tritonml tuning cache {path}: {message}", CacheFileWarning, stacklevel=4)


def _parse(text: str) -> dict[str, dict]:
    """The entries of a cache file's text; ValueError when it is not this schema's file."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    if data.get("schema") != SCHEMA_VERSION:
        raise ValueError(f"schema {data.get('schema')!r}, expected {SCHEMA_VERSION}")
    entries = data.get("entries")
    if not isinstance(entries, dict) or not all(
            isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("config"), dict)
            for k, v in entries.items()):
        raise ValueError("malformed entries")
    return entries


def read_entries(path: Path) -> dict[str, dict]:
    """The entries stored at ``path``; empty (with one warning) when the file is missing or unusable."""
    try:
        text = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # no file yet; a write will say if it cannot make one
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        _warn_once(path, f"cannot be read ({exc}); treated as empty")
        return {}
    try:
        return _parse(text)
    except (ValueError, RecursionError) as exc:  # json.JSONDecodeError is a ValueError
        _warn_once(path, f"ignored and will be replaced ({exc})")
        return {}


@contextmanager
def _file_lock(path: Path):
    """Exclusive lock on ``<path>.lock`` between processes (POSIX); nothing on Windows."""
    if fcntl is None:
        yield
        return
    with open(f"{path}.lock", "a") as lock_file:
        fcntl.flock(lock_file.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file.fileno(), fcntl.LOCK_UN)


def _write_atomically(path: Path, entries: dict[str, dict]) -> None:
    text = json.dumps({"schema": SCHEMA_VERSION, "entries": entries},
                      sort_keys=True, indent=1, allow_nan=False)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class TuningCache:
    """Tuning results by key: a dict in memory, loaded from and merged into the JSON file.

    The file is read once, on the first lookup; after that, lookups touch only memory. A write
    re-reads the file under the lock, so entries that other processes added meanwhile are kept, and
    also become visible here.
    """

    def __init__(self, path: Path | str | None = None):
        self.path = Path(path) if path is not None else cache_dir() / FILE_NAME
        self._entries: dict[str, dict] | None = None
        self._lock = threading.Lock()

    def _loaded(self) -> dict[str, dict]:
        if self._entries is None:
            self._entries = read_entries(self.path)
        return self._entries

    def get(self, key: dict) -> dict | None:
        """The stored entry (``{"config": ..., ...}``) for ``key``, or None."""
        with self._lock:
            return self._loaded().get(key_string(key))

    def put(self, key: dict, entry: dict) -> None:
        """Store ``entry`` (a JSON-able dict with a ``"config"`` dict) for ``key``, in memory and on disk."""
        if not isinstance(entry.get("config"), dict):
            raise ValueError("a cache entry needs a 'config' dict")
        name = key_string(key)
        json.dumps(entry, allow_nan=False)  # fail here, before touching the file, if not JSON-able
        with self._lock:
            self._loaded()[name] = entry
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with _file_lock(self.path):
                    merged = read_entries(self.path)
                    merged[name] = entry
                    _write_atomically(self.path, merged)
            except OSError as exc:
                _warn_once(self.path, f"cannot be written ({exc}); results kept in memory only")
                return
            # What other processes wrote is now ours too; our own entries win for our keys.
            self._entries = {**merged, **self._entries}

    def entries(self) -> dict[str, dict]:
        """Every stored entry by key text, as the file holds them now (re-read), merged with this
        process's own."""
        with self._lock:
            return {**read_entries(self.path), **self._loaded()}

    def clear(self) -> None:
        """Forget every entry, in memory and on disk (the file is removed under the lock)."""
        with self._lock:
            self._entries = {}
            if not self.path.parent.is_dir():
                return
            with _file_lock(self.path):
                try:
                    self.path.unlink()
                except FileNotFoundError:
                    pass

    def __len__(self) -> int:
        with self._lock:
            return len(self._loaded())


_default: dict[Path, TuningCache] = {}
_default_lock = threading.Lock()


def default_cache() -> TuningCache:
    """The process's cache for the current ``cache_dir()`` (one per directory, so a changed
    ``TRITONML_CACHE_DIR`` takes effect at the next call)."""
    path = cache_dir() / FILE_NAME
    with _default_lock:
        if path not in _default:
            _default[path] = TuningCache(path)
        return _default[path]
