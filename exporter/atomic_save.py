"""Atomic saves to a path: stage, commit, clean up after killed saves.

The guarantee: a save to a path that stops at any point (an exception, a full disk, SIGKILL)
leaves at the destination either the previous file(s) or the new one(s), each whole, and never a
model beside another save's weights. How:

* Everything is written under names no reader opens: a staging directory
  ``.<name>.<tag>.tmp`` beside the (real) target, ``<tag>`` being a host hash, the pid and a
  random part. It is flushed to disk (``fsync``) before anything visible changes.
* An ``os.replace`` of the model file is the commit point. A model with external data is first
  committed pointing at a data file named for this save alone (``.<name>.<tag>.data``); the
  previous ``<name>.data`` is then no longer read by any model, so that file is replaced by a
  hard link to the new data, and a second replace points the model at ``<name>.data``. The
  layout stays the promised ``<name>`` + ``<name>.data``; an interruption between the two
  replaces leaves the new model reading the per-save file (still loadable and consistent).
* After the commit, the data files the previous model read and the new one does not are
  removed (only files named like ours: ``<name>.data`` or ``.<name>.<tag>.data``). Their list
  is written in the staging directory before the commit, so a save killed after its commit
  has them removed by the next one.
* Leftovers of saves killed earlier (``.<name>.<tag>.tmp`` / ``.data`` no model reads, and the
  older ``.<name>-XXXXXXXX`` staging directories and probe files) are removed by the next save
  to the same target: at once when their pid, on this host, is not running; else once nothing in
  them changed for :data:`STALE_SECONDS` (another host's save, or a reused pid).
* A symlink destination is written through: the files are written beside the file it points to.
* The commit phase (not the long write) holds an ``flock`` on the directory, so two processes
  saving to the same target cannot interleave their replaces.

Before anything is written, :func:`check_destination` says why a path cannot be written, in
words (:mod:`exporter.os_reasons`); a front end calls it before a long export.

Tests (``tests/exporter/test_save_interrupted.py``) kill a save at each :func:`_step` and load
the result in onnxruntime.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import SerializeError
from .os_reasons import _file_in_the_way, _nearest_existing, os_reason

if TYPE_CHECKING:
    import onnx

__all__ = ["STALE_SECONDS", "check_destination", "remove_leftovers"]

# A leftover whose owner cannot be asked (another host's save, a pid now running something
# else, an older release's staging directory) is removed once nothing in it changed for this
# long: a live save keeps writing its files, and commits seconds after its last write.
STALE_SECONDS = 3600.0

# Called with a step's name between the steps of a save to a path (tests kill the process there).
_step_hook: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if _step_hook is not None:
        _step_hook(name)


# -- the destination -------------------------------------------------------------------------


def _real_target(target: Path) -> Path:
    """Where a save to ``target`` writes: through a symlink, the file it points to."""
    return Path(os.path.realpath(target)) if target.is_symlink() else target


def check_destination(target: Any, *, create_parents: bool = False) -> Path:
    """Raise :class:`SerializeError` unless a file can be written at ``target`` (through a
    symlink, at the file it points to): it is not a directory, and its directory exists (is
    created with ``create_parents``) and accepts a new file (tried with a file named like a
    save's leftovers, removed at once). The error names the directory, says in words what the
    OS said, and what to do. Cheap: call it before a long export."""
    target = Path(target)
    real = _real_target(target)
    if real.is_dir():
        raise SerializeError(
            f"{str(target)!r} is a directory, not a file name",
            hint=f"give a file inside it: {str(target / 'model.onnx')!r}",
        )
    directory = real.parent
    if create_parents:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            reason = os_reason(exc, _nearest_existing(directory))
            raise SerializeError(f"cannot create the directory {str(directory)!r}: {reason.words}", hint=reason.fix) from exc
    elif not directory.is_dir():
        blocker = _file_in_the_way(directory)
        if blocker is not None:
            raise SerializeError(
                f"cannot write in {str(directory)!r}: {str(blocker)!r} is a file, not a directory (ENOTDIR)",
                hint=f"choose another path, or move the file {str(blocker)!r} away",
            )
        raise SerializeError(
            f"directory {str(directory)!r} does not exist",
            hint=f"create it first: Path({str(directory)!r}).mkdir(parents=True)",
        )
    probe = directory / _private_name(real.name, "tmp")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as exc:
        reason = os_reason(exc, directory)
        raise SerializeError(f"cannot create a file in {str(directory)!r}: {reason.words}", hint=reason.fix) from exc
    with contextlib.suppress(OSError):
        os.unlink(probe)
    return target


# -- private names, leftovers ----------------------------------------------------------------

_HOST = hashlib.sha1(socket.gethostname().encode(), usedforsecurity=False).hexdigest()[:8]


def _private_name(name: str, kind: str) -> str:
    """``.<name>.<host>-<pid>-<random>.<kind>``: a name no reader opens, saying whose it is."""
    return f".{name}.{_HOST}-{os.getpid()}-{secrets.token_hex(4)}.{kind}"


def _private_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"\.{re.escape(name)}\.(?P<host>[0-9a-f]{{8}})-(?P<pid>\d+)-[0-9a-f]{{8}}\.(?P<kind>tmp|data)")


def _legacy_pattern(name: str) -> re.Pattern[str]:
    """Staging directories and probe files of releases before the private names."""
    return re.compile(rf"\.{re.escape(name)}-(probe-)?[a-z0-9_]{{8}}")


def _looks_legacy(path: Path, name: str) -> bool:
    """Whether ``path`` (named like an older release's leftover) holds only what that release
    left: an empty probe file, or a staging directory of files named after the target (so a
    user's ``.model.onnx-original`` is never taken for one)."""
    try:
        if path.is_symlink():
            return False
        if path.is_file():
            return "-probe-" in path.name and path.stat().st_size == 0
        return path.is_dir() and all(entry.startswith((name, f".{name}")) for entry in os.listdir(path))
    except OSError:
        return False


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid() or os.name == "nt":  # on Windows os.kill(pid, 0) would end the process
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: another user's live process
        return True
    return True


def _last_change(path: Path) -> float:
    """The newest mtime of ``path`` and, for a directory, of everything in it."""
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for entry in (*dirs, *files):
                with contextlib.suppress(OSError):
                    newest = max(newest, os.lstat(os.path.join(root, entry)).st_mtime)
    return newest


def _is_abandoned(path: Path, *, host: str | None, pid: int | None) -> bool:
    if host == _HOST and pid is not None and not _pid_alive(pid):
        return True
    try:
        return time.time() - _last_change(path) > STALE_SECONDS
    except OSError:
        return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def remove_leftovers(real: Path) -> list[str]:
    """Remove the leftovers of earlier saves of ``real`` that were killed (see the module
    docstring: our private names, not read by the model now at ``real``, abandoned); return
    their names."""
    directory = real.parent
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    private, legacy = _private_pattern(real.name), _legacy_pattern(real.name)
    candidates = [n for n in names if private.fullmatch(n) or (legacy.fullmatch(n) and _looks_legacy(directory / n, real.name))]
    if not candidates:
        return []
    read_now = _locations(real)
    removed = []
    for name in candidates:
        match = private.fullmatch(name)
        if name in read_now:
            continue  # a save killed between its two commits: the model reads this file
        host, pid = (match["host"], int(match["pid"])) if match else (None, None)
        if _is_abandoned(directory / name, host=host, pid=pid):
            _finish_removals(directory / name, real.name, read_now)
            _remove(directory / name)
            removed.append(name)
    return removed


def _finish_removals(staging: Path, name: str, read_now: set[str]) -> None:
    """Remove what an abandoned save's journal lists that the model now at ``name`` does not
    read (its commit may have happened before it was killed)."""
    try:
        obsolete = json.loads((staging / _JOURNAL).read_text())
    except (OSError, ValueError):
        return
    if isinstance(obsolete, list):
        _remove_files(staging.parent, [n for n in obsolete if isinstance(n, str) and n not in read_now and _ours(n, name)])


def _locations(model_path: Path) -> set[str]:
    """The external-data files the ONNX model at ``model_path`` reads (empty if it reads none,
    or is not an ONNX model). Loads the model only when a data file named like ours exists."""
    directory, name = model_path.parent, model_path.name
    private = _private_pattern(name)
    try:
        if not model_path.is_file() or not any(n == f"{name}.data" or private.fullmatch(n) for n in os.listdir(directory)):
            return set()
        import onnx

        proto = onnx.load(str(model_path), load_external_data=False)
    except Exception:  # noqa: BLE001 - not an ONNX model (or unreadable): it reads no data file of ours
        return set()
    return {entry.value for tensor in _tensors_of(proto.graph) for entry in tensor.external_data if entry.key == "location"}


def _ours(location: str, name: str) -> bool:
    """Whether a data file a model at ``name`` reads is one a save of ours wrote."""
    if location == f"{name}.data":
        return True
    match = _private_pattern(name).fullmatch(location)
    return match is not None and match["kind"] == "data"


def _obsolete(name: str, before: set[str], after: set[str]) -> list[str]:
    """The data files (ours) to remove once a model reading ``after`` replaced one reading
    ``before``. A previous model that read a per-save file was killed between its commits, so
    the ``<name>.data`` beside it is stale too."""
    stale = set(before)
    if any(_private_pattern(name).fullmatch(location) for location in before):
        stale.add(f"{name}.data")
    return sorted(location for location in stale - after if _ours(location, name))


def _journal(staging: Path, obsolete: list[str]) -> None:
    """Write down, before the commit, what to remove after it: if the save is killed in
    between, :func:`remove_leftovers` finds the list in the abandoned staging directory."""
    journal = staging / _JOURNAL
    journal.write_text(json.dumps(obsolete))
    _fsync(journal)
    _step("journal written")  # a save killed here has not committed: its list names files a model still reads


_JOURNAL = "obsolete.json"


def _remove_files(directory: Path, names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / name)


# -- durable writes, the commit lock ---------------------------------------------------------


def _fsync(path: Path) -> None:
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) if path.is_dir() else os.O_RDONLY
    try:
        fd = os.open(path, flags)
    except OSError:
        if path.is_dir():
            return  # a directory cannot be opened on this platform
        raise
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF, errno.ENOTSUP):  # a file system without fsync
            raise
    finally:
        os.close(fd)


def _keep_mode(replaced: Path, staged: Path) -> None:
    """Give ``staged`` the permission bits of the file it replaces (a fresh file gets the umask's)."""
    with contextlib.suppress(OSError):
        shutil.copymode(replaced, staged)


@contextlib.contextmanager
def _commit_lock(directory: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``directory`` while a save commits (no-op where unsupported)."""
    try:
        import fcntl

        fd = os.open(directory, os.O_RDONLY)
    except (ImportError, OSError):
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def _staging(given: Path) -> Iterator[tuple[Path, Path]]:
    """``(real target, staging directory)`` for a save to ``given``: checks the destination,
    removes leftovers of killed saves, and removes the staging directory however the save ends.
    Errors other than :class:`SerializeError` become one naming the target and the OS reason."""
    check_destination(given)
    real = _real_target(given)
    remove_leftovers(real)
    _step("leftovers removed")
    staging = real.parent / _private_name(real.name, "tmp")
    try:
        staging.mkdir()
        _step("staging created")
        yield real, staging
    except SerializeError:
        raise
    except OSError as exc:
        reason = os_reason(exc, real.parent)
        raise SerializeError(f"could not write {str(given)!r}: {reason.words}", hint=reason.fix) from exc
    except Exception as exc:
        raise SerializeError(f"could not write {str(given)!r}: {exc}", hint="check the path and free disk space") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _write_atomically(target: Path, write: Callable[[Path], None], *, onnx_model: bool = False) -> Path:
    """``write(directory)`` writes ``directory / target.name`` in a fresh staging directory
    beside the real ``target``; one ``os.replace`` moves it into place. With ``onnx_model``, the
    data files (ours) of an external-data model it replaces are removed after. Returns ``target``."""
    target = Path(target)
    with _staging(target) as (real, staging):
        write(staging)
        staged = staging / target.name
        _keep_mode(real, staged)
        _fsync(staged)
        _step("file written")
        with _commit_lock(real.parent):
            obsolete = _obsolete(real.name, _locations(real), set()) if onnx_model else []
            if onnx_model:  # always, even empty: a save's steps do not depend on what it replaces
                _journal(staging, obsolete)
            os.replace(staged, real)
            _fsync(real.parent)
            _step("committed")
            _remove_files(real.parent, obsolete)
        _step("old data removed")
    return target


def _write_external_atomically(target: Path, stage: Callable[[Path], None]) -> Path:
    """``stage(model_path)`` writes a model at ``model_path`` (in a fresh staging directory)
    reading its weights from ``<model_path>.data`` beside it; they are committed at ``target``
    as ``<name>`` + ``<name>.data`` (see the module docstring for the order). Returns ``target``."""
    import onnx

    target = Path(target)
    with _staging(target) as (real, staging):
        directory, name = real.parent, real.name
        stable = f"{name}.data"
        staged_model = staging / name
        stage(staged_model)
        _keep_mode(real, staged_model)
        if not (staging / stable).exists():  # every weight was small enough to stay inline
            _fsync(staged_model)
            _step("model written")
            with _commit_lock(directory):
                obsolete = _obsolete(name, _locations(real), set())
                _journal(staging, obsolete)
                os.replace(staged_model, real)
                _fsync(directory)
                _step("committed")
                _remove_files(directory, obsolete)
            _step("old data removed")
            return target
        _keep_mode(directory / stable, staging / stable)
        _fsync(staging / stable)
        _step("model and data written")
        per_save = _private_name(name, "data")
        committed = False
        try:
            os.replace(staging / stable, directory / per_save)
            _step("data moved beside the target")
            proto = onnx.load(str(staged_model), load_external_data=False)
            _relocate(proto, {stable: per_save})
            reading_per_save = staging / f"{name}.per-save"
            reading_per_save.write_bytes(proto.SerializeToString())  # weights are references: a small proto
            _keep_mode(real, reading_per_save)
            _fsync(reading_per_save)
            _fsync(staged_model)
            _step("models written")
            with _commit_lock(directory):
                obsolete = _obsolete(name, _locations(real), {stable})
                _journal(staging, obsolete)
                os.replace(reading_per_save, real)  # the commit point
                committed = True
                _fsync(directory)
                _step("committed")
                link = staging / f"{stable}.link"
                try:
                    os.link(directory / per_save, link)
                except OSError:  # a file system without hard links: a copy, same bytes
                    shutil.copyfile(directory / per_save, link)
                    _fsync(link)
                os.replace(link, directory / stable)  # no model reads <name>.data now
                _step("data linked to its stable name")
                os.replace(staged_model, real)  # the same model, reading <name>.data
                _fsync(directory)
                _step("model reads the stable name")
                os.unlink(directory / per_save)
                _step("per-save name removed")
                _remove_files(directory, obsolete)
        except BaseException:
            if not committed:  # after the commit the model reads it: the next save removes it
                with contextlib.suppress(OSError):
                    os.unlink(directory / per_save)
            raise
        _step("old data removed")
    return target


def _relocate(proto: onnx.ModelProto, renames: dict[str, str]) -> None:
    for tensor in _tensors_of(proto.graph):
        for entry in tensor.external_data:
            if entry.key == "location" and entry.value in renames:
                entry.value = renames[entry.value]


def _tensors_of(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor of ``graph``: its initializers and its nodes' tensor attributes, subgraphs included."""
    import onnx

    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.TENSOR:
                yield attribute.t
            elif attribute.type == onnx.AttributeProto.GRAPH:
                yield from _tensors_of(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    yield from _tensors_of(sub)
