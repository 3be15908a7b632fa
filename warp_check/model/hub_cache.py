"""A Hub model in the local Hugging Face cache: found offline, its files read defensively.

warp-check never downloads. The files of the cache it depends on (``models--org--name/refs/<branch>``,
``snapshots/<commit>/``, the file listing ``trees/<commit>.json``) are checked before
huggingface_hub reads them, and anything huggingface_hub still raises is caught here, at the one
call: a folder where a file belongs, bytes that are not a commit or a listing that is not one is a
:class:`ModelError` naming the path and the fix, never an AttributeError from inside the library.
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warp_check.errors import ModelError, first_line, reraise_interrupt
from warp_check.json_bounded import read_json

COMMIT = re.compile(r"[0-9a-f]{40}")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
DEFAULT_REVISION = "main"  # a Hub id given without a revision: the branch huggingface_hub downloads
_REF_BYTES = 4096  # a ref file holds 40 characters; more is not a ref


@dataclass(frozen=True, kw_only=True)
class HubModel:
    """A Hub model as read from the local cache: its id, the revision asked for, the commit that is."""

    id: str
    revision: str
    commit: str

    def __str__(self) -> str:
        pinned = self.revision if self.revision == self.commit else f"{self.revision} = {self.commit}"
        return f"{self.id}@{pinned}"


@dataclass(frozen=True, kw_only=True)
class ModelSource:
    """Where a model given by its folder or its Hub id is read from: ``folder``, and the Hub model
    it is a snapshot of (None: a local folder)."""

    folder: Path
    hub: HubModel | None = None

    def __str__(self) -> str:
        return str(self.folder) if self.hub is None else f"{self.hub} ({self.folder})"


def resolve_model(given: str | Path | ModelSource, revision: str | None = None) -> ModelSource:
    """A model named by a local folder or by a Hub id (``org/name``, or ``org/name@revision``), read
    offline: a folder that exists wins over a Hub id spelt the same; a Hub id is read from the local
    Hugging Face cache at ``revision`` (default ``main``), never downloaded. Raises ModelError saying
    what is there and how to fetch what is not."""
    if isinstance(given, ModelSource):
        return given
    text = str(given)
    folder = Path(text).expanduser()
    if os.path.lexists(folder):
        if revision is not None:
            raise ModelError(f"{text!r} is a local folder: a revision ({revision!r}) applies to a Hub id only")
        return ModelSource(folder=folder)
    name, at, inline = text.partition("@")
    if at and revision is not None and inline != revision:
        raise ModelError(f"{text!r} names revision {inline!r} and the revision given is {revision!r}: give one")
    if not HUB_ID.fullmatch(name) or (at and not inline):
        raise ModelError(f"model {text!r} does not exist: give a model folder, or a Hub id (org/name){nearest(folder)}")
    wanted = inline or revision or DEFAULT_REVISION
    try:
        snapshot, commit = resolve_hub_model(name, wanted)
    except ModelError as exc:
        meant = nearest(folder) if isinstance(exc, HubModelMissing) else ""
        if meant:  # beside folders of a like name: a mistyped folder, not a Hub model
            raise ModelError(f"{text!r} is neither a folder here nor a Hub model in the local cache{meant}") from None
        raise ModelError(f"no model folder {text!r} here, and {exc}") from None
    return ModelSource(folder=snapshot, hub=HubModel(id=name, revision=wanted, commit=commit))


def nearest(folder: Path) -> str:
    """ "; did you mean …?" naming the folder beside ``folder`` whose name is closest to its name. Where
    ``folder`` names a folder above it that exists, that folder is what was meant (not a Hub id): its
    closest folder is named however far; in the working folder, only a close one."""
    parent = folder.parent
    try:
        beside = [p.name for p in parent.iterdir() if p.is_dir()] if parent.is_dir() else []
    except OSError:
        return ""
    if str(parent) == ".":
        close = difflib.get_close_matches(folder.name, beside, n=1, cutoff=0.6)
    else:
        close = sorted(sorted(beside), key=lambda name: -difflib.SequenceMatcher(None, folder.name, name).ratio())[:1]
    return f"; did you mean {str(parent / close[0])!r}?" if close else ""


class HubModelMissing(ModelError):
    """The local Hugging Face cache does not hold the Hub model at that revision."""


def resolve_hub_model(repo_id: str, revision: str) -> tuple[Path, str]:
    """(folder, commit) of a Hub model in the local Hugging Face cache (``HF_HUB_CACHE``,
    ``HF_HOME``), never the network: warp-check runs offline. Raises ModelError saying how to
    fetch it when the cache does not hold that revision, or what is wrong with the cache's files."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    cache = hub_cache_folder()
    fetch = f"hf download {repo_id} --revision {revision}"
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    commit = revision if COMMIT.fullmatch(revision) else _read_ref(repo / "refs" / revision, revision, fetch)
    if commit is not None:
        _check_snapshot(repo, commit, fetch)
    try:
        folder = Path(snapshot_download(repo_id, revision=revision, local_files_only=True, cache_dir=cache))
    except (LocalEntryNotFoundError, FileNotFoundError, ValueError):
        # Not huggingface_hub's own words: they advise local_files_only=False, and warp-check never downloads.
        raise HubModelMissing(
            f"the Hub model {repo_id!r} at revision {revision!r} is not in the local Hugging Face cache; "
            f"warp-check never downloads: fetch it once with {fetch}"
        ) from None
    except Exception as exc:  # noqa: BLE001 — the library's own failure on a damaged cache: a message
        reraise_interrupt(exc)
        raise ModelError(
            f"{repo}: huggingface_hub cannot read this cache folder ({type(exc).__name__}: {first_line(exc)}); "
            f"delete the folder and fetch the model again with {fetch}"
        ) from None
    return folder, folder.name


def hub_cache_folder() -> Path:
    """Where huggingface_hub keeps models: ``HF_HUB_CACHE``, else ``HF_HOME/hub``, else its default;
    read from the environment now (huggingface_hub reads it once, at import)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE)


def _read_ref(ref: Path, revision: str, fetch: str) -> str | None:
    """The commit the branch or tag file ``ref`` names; None when there is no such file (the
    library then says the revision is not in the cache)."""
    if not os.path.lexists(ref):
        return None
    fix = f"delete it and fetch the model again with {fetch}"
    if ref.is_dir():
        raise ModelError(f"{ref}: a folder where the Hugging Face cache keeps the commit of {revision!r}; {fix}")
    try:
        with open(ref, "rb") as handle:
            raw = handle.read(_REF_BYTES + 1)
    except OSError as exc:
        raise ModelError(f"{ref}: cannot be read ({exc.strerror or exc}); {fix}") from None
    text = raw.decode("ascii", errors="replace")
    if not COMMIT.fullmatch(text):
        shown = repr(text[:48]) + ("…" if len(text) > 48 else "")
        raise ModelError(f"{ref}: holds {shown}, not the commit of {revision!r} (40 hex digits); {fix}")
    return text


def _check_snapshot(repo: Path, commit: str, fetch: str) -> None:
    """The snapshot folder and the file listing of ``commit``, when there are: each what it should be."""
    snapshot = repo / "snapshots" / commit
    if os.path.lexists(snapshot) and not snapshot.is_dir():
        raise ModelError(
            f"{snapshot}: not a folder, where the Hugging Face cache keeps the model's files; "
            f"delete it and fetch the model again with {fetch}"
        )
    listing = repo / "trees" / f"{commit}.json"
    if not os.path.lexists(listing):
        return  # written by newer huggingface_hub only; without it the snapshot folder is taken as it is
    fix = f"delete it (huggingface_hub writes it again with {fetch})"
    data = read_json(listing, error=lambda message: ModelError(f"{message}; {fix}"), what="file listing")
    problem = _listing_problem(data)
    if problem is not None:
        raise ModelError(f"{listing}: not a Hugging Face file listing ({problem}); {fix}")


def _listing_problem(data: Any) -> str | None:
    """What makes ``data`` not a listing huggingface_hub reads (``{"format_version": 1, "files":
    {name: {"size": ..., "blob_id": ...}}}``), or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    if data.get("format_version") != 1:
        return None  # a format huggingface_hub does not know: it ignores the file
    files = data.get("files")
    if not isinstance(files, dict):
        return f"'files' is {type(files).__name__}, not an object"
    for name, info in files.items():
        if not isinstance(info, dict) or "size" not in info or "blob_id" not in info:
            return f"the entry of {name!r} has no size and blob_id"
    return None
