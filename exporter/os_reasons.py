"""What the OS said, in words: an :class:`OSError` raised while creating something in a
directory becomes an :class:`OsReason` (what happened, naming its code and message, and what to
do). Used for every message about an output path (:func:`exporter.atomic_save.check_destination`,
a failed save)."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OsReason", "os_reason"]


@dataclass(frozen=True)
class OsReason:
    """Why the OS refused, in words (``words``, with its code and message), and what to do."""

    words: str
    fix: str


def os_reason(exc: OSError, directory: Path) -> OsReason:
    """:class:`OsReason` for ``exc``, raised while creating something in ``directory``."""
    code = exc.errno
    said = f"{errno.errorcode.get(code, code)}: {exc.strerror}" if code is not None and exc.strerror else None
    where = repr(str(directory))
    writable = "choose an output path in a directory you can write to (your home directory, the current directory)"
    if said is None:
        return OsReason(str(exc), "check the path and free disk space")
    if code == errno.ENOENT and directory.is_dir():
        return OsReason(f"the file system refuses new files there (the OS said {said}, although {where} exists: "
                        "a virtual file system such as /proc holds no files of yours)", writable)
    if code == errno.ENOENT:
        return OsReason(f"{where} does not exist ({said})", f"create it first: Path({str(directory)!r}).mkdir(parents=True)")
    if code == errno.ENOTDIR or (code == errno.EEXIST and _file_in_the_way(directory) is not None):
        blocker = _file_in_the_way(directory)
        if blocker is not None:
            return OsReason(f"{str(blocker)!r} is a file, not a directory ({said})",
                            f"choose another path, or move the file {str(blocker)!r} away")
    if code == errno.EACCES:
        return OsReason(f"you have no permission to create files in {where} ({said})",
                        f"{writable}, or change its permissions (ls -ld {str(directory)!r})")
    if code == errno.EPERM:
        return OsReason(f"the OS does not permit creating files in {where} ({said})", writable)
    if code == errno.EROFS:
        return OsReason(f"{where} is on a read-only file system ({said})", f"{writable}; this file system is mounted read-only")
    if code == errno.ENOSPC:
        return OsReason(f"the disk is full ({said})", "free disk space, or save to another disk")
    if code == getattr(errno, "EDQUOT", None):
        return OsReason(f"your disk quota is used up ({said})", "free space in your quota, or save elsewhere")
    if code == errno.ENAMETOOLONG:
        return OsReason(f"the file name is too long ({said})", "choose a shorter file name")
    return OsReason(said, "check the path and free disk space")


def _file_in_the_way(directory: Path) -> Path | None:
    """The nearest existing ancestor of ``directory`` (itself included) that is not a directory."""
    for candidate in (directory, *directory.parents):
        if candidate.exists() or candidate.is_symlink():
            return None if candidate.is_dir() else candidate
    return None


def _nearest_existing(directory: Path) -> Path:
    """The nearest ancestor of ``directory`` (itself included) that exists."""
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            return candidate
    return directory

