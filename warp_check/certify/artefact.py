"""The certified artefact: a Hugging Face folder plus ``warp_certificate.json``, written atomically.

The folder is assembled under a temporary name beside its destination and put in its place
in one step (an atomic exchange with an older artefact where the system has one), so a reader
sees the older artefact or the new one, never half of one and never nothing where there was
something; the input model is never written to. The certificate carries SHA-256 hashes of
the repair layer and of every other parameter, so anyone can check later what changed.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.certify.certificate import CERTIFICATE_NAME, Certificate
from warp_check.errors import ArtefactError, CertificateError
from warp_check.files import as_if_created
from warp_check.model.hashing import parameter_hashes
from warp_check.model.loading import quiet_transformers_progress


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    _fsync_dir(folder)


def check_destination(out_dir: str | Path, source: str | Path | None) -> Path:
    """Refuse destinations that would overwrite the input or a folder that is not ours."""
    out = Path(out_dir).resolve()
    if source is not None:
        src = Path(source).resolve()
        if out == src or src in out.parents or out in src.parents:
            raise ArtefactError(
                f"output folder {str(out)!r} overlaps the input model {str(src)!r}; "
                "the input model is never overwritten: choose another output folder"
            )
    if out.exists():
        if not out.is_dir():
            raise ArtefactError(f"output path {str(out)!r} exists and is not a folder")
        if any(out.iterdir()) and not (out / CERTIFICATE_NAME).is_file():
            raise ArtefactError(
                f"output folder {str(out)!r} is not empty and holds no {CERTIFICATE_NAME}: "
                "refusing to replace a folder warp-check did not write"
            )
    return out


WRITE_LOCK_TIMEOUT_S = 300.0  # another writer of the same folder holds the lock only while it saves


@dataclass(frozen=True)
class Destination:
    """An output folder as a run found it when it started: absent (None) or which folder was there."""

    path: Path
    identity: tuple[int, int, int] | None  # (device, inode, mtime_ns) of the folder


def _identity(out: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(out)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns)


def claim_destination(out_dir: str | Path, source: str | Path | None) -> Destination:
    """Check ``out_dir`` (see :func:`check_destination`) and note what is there now.

    :func:`write_artefact` refuses to write if another process replaced the folder in the
    meantime: of two runs repairing into one folder at once, the first to finish wins and the
    other fails with a message instead of silently replacing the winner's model.
    """
    out = check_destination(out_dir, source)
    check_room(out, source)
    return Destination(out, _identity(out))


# Free space asked beyond the input model's own size: the certificate, a tokenizer saved anew.
ROOM_MARGIN = 1.1
ROOM_MIN_BYTES = 1 << 20


def check_room(out: Path, source: str | Path | None) -> None:
    """Refuse, before any work, an output folder that cannot be written or cannot hold the model.

    The repaired model is as large as the input model (same tensors, same dtype): that much free
    space, with a margin, must be where ``out`` will be made. The probe file is removed at once.
    """
    where = out if out.is_dir() else next(p for p in out.parents if p.exists())
    try:
        fd, probe = tempfile.mkstemp(dir=where, prefix=".warp-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ArtefactError(
            f"output folder {str(out)!r} cannot be written ({exc.strerror or exc} in {str(where)!r}): "
            "nothing was done; choose another output folder"
        ) from None
    if source is None or not Path(source).is_dir():
        return
    size = sum(f.stat().st_size for f in Path(source).iterdir() if f.is_file())
    needed = max(int(ROOM_MARGIN * size), ROOM_MIN_BYTES)
    free = shutil.disk_usage(where).free
    if free < needed:
        raise ArtefactError(
            f"output folder {str(out)!r}: {free / 2**20:.1f} MiB free there, the repaired model needs about "
            f"{needed / 2**20:.1f} MiB: nothing was done; free space or choose another output folder"
        )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _remove_stale(out: Path) -> None:
    """What writers that died (killed mid-save) left beside ``out``, named with their pid: a temp
    folder is removed; an older artefact a two-step replacement had moved away goes back in place
    if nothing took it."""
    pattern = re.compile(rf"^\.{re.escape(out.name)}\.(tmp|old)-(\d+)-")
    for sibling in sorted(out.parent.iterdir()):
        m = pattern.match(sibling.name)
        if not m or int(m[2]) == os.getpid() or _pid_alive(int(m[2])):
            continue
        if m[1] == "old" and (sibling / "old").is_dir() and not out.exists():
            os.rename(sibling / "old", out)
        shutil.rmtree(sibling, ignore_errors=True)


# renameat2(2)'s RENAME_EXCHANGE: swap two paths in one step (Linux ≥ 3.15, glibc ≥ 2.28).
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def _exchange(a: Path, b: Path) -> bool:
    """Swap the folders ``a`` and ``b`` atomically; False where the system or the file system
    cannot (the caller falls back to two renames)."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def _put_in_place(tmp: Path, out: Path) -> None:
    """The finished folder ``tmp`` becomes ``out``; an older ``out`` is removed only once it has."""
    if not out.exists():
        os.rename(tmp, out)
        return
    if _exchange(tmp, out):
        _fsync_dir(out.parent)
        shutil.rmtree(tmp, ignore_errors=True)  # the older artefact, now under the temp name
        return
    # Two renames: a writer killed between them leaves the older artefact in .<out>.old-<pid>-*,
    # and the next writer puts it back (_remove_stale) if nothing else took its place.
    trash = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.old-{os.getpid()}-"))
    os.rename(out, trash / "old")
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(trash / "old", out)  # the previous model goes back where it was
        os.rmdir(trash)
        raise
    shutil.rmtree(trash, ignore_errors=True)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_artefact(
    model: Any,
    tokenizer: Any,
    certificate: Certificate,
    out_dir: str | Path,
    *,
    source: str | Path | None,
    repair_layer: str,
    expect: Destination | None = None,
) -> Path:
    """Save model + tokenizer + certificate into ``out_dir`` atomically; returns the folder.

    The certificate is written with the hashes of the model as reloaded from the written
    files, so they describe exactly what a later reader will load. With ``expect``
    (from :func:`claim_destination` when the run started), a folder that another process
    wrote since then is not replaced: an ArtefactError says so and nothing is written.
    """
    out = check_destination(out_dir, source)
    out.parent.mkdir(parents=True, exist_ok=True)
    with _folder_lock(out):
        if expect is not None and _identity(out) != expect.identity:
            raise ArtefactError(
                f"output folder {str(out)!r} was written by another process while this repair ran "
                f"({'it was absent' if expect.identity is None else 'another folder was there'} when this run "
                "started); refusing to replace it, nothing was written: rerun, or give each run its own output folder"
            )
        _remove_stale(out)
        return _write(model, tokenizer, certificate, out, repair_layer)


@contextlib.contextmanager
def _folder_lock(out: Path) -> Iterator[None]:
    """Serialise writers of ``out``: an exclusive flock on its parent folder while one saves.

    A lock on the folder itself leaves no lock file behind, and the kernel releases it when
    its holder dies, so a writer killed mid-save never blocks the next one.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: no flock; the identity check still applies
        yield
        return
    fd = os.open(out.parent, os.O_RDONLY)
    try:
        deadline = time.monotonic() + WRITE_LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ArtefactError(
                        f"output folder {str(out)!r}: another process has been writing beside it for "
                        f"{WRITE_LOCK_TIMEOUT_S:g} s; nothing was written: choose another output folder"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


def _write(model: Any, tokenizer: Any, certificate: Certificate, out: Path, repair_layer: str) -> Path:
    # The pid in the name lets a later writer remove what a killed one left behind.
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.tmp-{os.getpid()}-"))
    try:
        with quiet_transformers_progress():
            model.save_pretrained(tmp, safe_serialization=True)
            if tokenizer is not None:
                tokenizer.save_pretrained(tmp)
        certificate.with_hashes(*folder_hashes(tmp, repair_layer)).write(tmp / CERTIFICATE_NAME)
        for path in [tmp, *tmp.rglob("*")]:  # the folder and safetensors' own temp-file writes
            as_if_created(path, directory=path.is_dir())
        _fsync_tree(tmp)
        _put_in_place(tmp, out)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if type(exc).__name__ == "SafetensorError" and "No space left on device" in str(exc):
            # safetensors reports a full disk as its own error, not an OSError: the same message
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(out)) from None
        raise
    return out


def folder_weights(model_dir: str | Path) -> dict[str, Any]:
    """Every tensor of a saved model folder, read from its safetensors files only (never a pickle)."""
    from safetensors.torch import load_file  # loads torch: only where weights are read

    shards = sorted(Path(model_dir).glob("*.safetensors"))
    if not shards:
        raise CertificateError(f"{str(model_dir)!r} holds no *.safetensors weights to hash")
    state = {}
    for shard in shards:
        state.update(load_file(str(shard)))
    return state


def folder_hashes(model_dir: str | Path, repair_layer: str) -> tuple[str, str]:
    """The two hashes (repair layer, every other parameter) of a saved model folder."""
    return parameter_hashes(folder_weights(model_dir), repair_layer)
