"""Files of a model folder: paths named inside it stay inside it; written files follow the umask.

A model folder (an attnlab checkpoint, a HuggingFace checkpoint) names some of its own files in
its index files: ``tokenizers.json`` lists each tokenizer's files, ``model.safetensors.index.json``
maps every tensor to a shard. Such a name comes from the folder, not from the code, so a crafted
folder could name ``../../etc/passwd``, an absolute path, or a symbolic link that leads out of the
folder, and the loader would read that file. :func:`contained_path` is the one check every reader
applies to a name taken from a file.

Files written through a temporary file and a rename (``tempfile.mkstemp``, safetensors'
``save_file``) are created with mode 0600, while a plain ``open()`` gives ``0o666`` less the
umask, as ``config.json`` gets. :func:`new_file_mode` is that mode, to ``chmod`` such a file to.
:func:`fsync_dir` makes a folder's new entries and renames durable (the atomic saves rely on it).

This module uses the standard library only, so that every layer (checkpoint, data, models) can
import it.
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path, PurePosixPath, PureWindowsPath

__all__ = ["contained_path", "fsync_dir", "new_file_mode", "write_text_atomically"]

_UMASK_LOCK = threading.Lock()


def contained_path(folder: str | os.PathLike, name: object, *, source: str | os.PathLike, what: str = "entry") -> Path:
    """``folder / name``, checked to lie inside ``folder`` once symbolic links are resolved.

    Args:
        folder: the model folder.
        name: a relative path read from ``source`` (e.g. a shard name in a safetensors index).
        source: the file that named ``name``, for the error message.
        what: what ``name`` is in ``source`` (e.g. ``"weight_map entry"``), for the error message.

    Returns:
        ``folder / name`` (not resolved: error messages and callers keep the folder's spelling).

    Raises:
        ValueError: ``name`` is not a string, is empty, absolute (POSIX or Windows spelling), has a
            ``..`` part, or leads out of ``folder`` through a symbolic link. The one-line message
            names ``source`` and the bad entry.
    """
    folder = Path(folder)
    where = f"{source}: {what} {name!r}"
    if not isinstance(name, str):
        # ValueError, not TypeError: the caller passed what the file holds; the file is wrong.
        raise ValueError(f"{where} must be a file name (a string), got {type(name).__name__}")  # noqa: TRY004
    if not name or "\0" in name:
        raise ValueError(f"{where} is not a file name")
    # Both spellings: a folder written on Windows may say C:\... or ..\..; on POSIX a backslash
    # is an ordinary character, but no file attnlab or HuggingFace writes has one.
    for pure in (PurePosixPath(name), PureWindowsPath(name)):
        if pure.is_absolute() or pure.anchor or ".." in pure.parts:
            raise ValueError(f"{where} must be a relative path inside {folder}")
    path = folder / name
    root = folder.resolve()
    target = path.resolve()
    if target != root and root not in target.parents:
        raise ValueError(
            f"{where} leads out of {folder} (to {target}, through a symbolic link); "
            "copy the files into the folder (e.g. cp -rL)"
        )
    return path


def fsync_dir(path: str | os.PathLike) -> None:
    """Make a directory's entries (new files, renames) durable. Windows cannot open a directory
    and some filesystems refuse to fsync one; there the rename's own guarantees are all we get."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def new_file_mode() -> int:
    """The permission bits ``open()`` gives a new file: ``0o666`` less the process umask."""
    try:
        # Linux ≥ 4.7 reports the umask without changing it.
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    # Elsewhere the only way to read the umask is to set it and put it back. Set to 0o077 in
    # between, so a file another thread creates meanwhile comes out private rather than open;
    # the lock keeps two callers from reading each other's temporary value.
    with _UMASK_LOCK:
        umask = os.umask(0o077)
        os.umask(umask)
    return 0o666 & ~umask


def write_text_atomically(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary sibling and a rename: a reader sees
    the old file or the new one, never half of one; the file gets :func:`new_file_mode`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, new_file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
