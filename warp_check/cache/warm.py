"""Warm checks: a plain check answered from the cache, without loading the model.

What a check reports of a case (prediction and gap) follows from the model's logits on it,
and those follow from the model folder's content, the suite's ``layer`` and ``max_length``,
the libraries that tokenise and run the model, and the case's text. After a check that
loaded the model, a *warm entry* remembers the float64 logits of every case it checked, under
a key made of all of those but the text (each case is found by the digest of its text). A
later check of the same suite finds the entry from the folder's content digest
(:mod:`warp_check.cache.fingerprint`, a stat memo: unchanged files are not read again) and answers
with the decision's own plain-Python arithmetic (:meth:`warp_check.decisions.DecisionKind.answer_of`,
the twin of its numpy one), so a warm check's numbers are bit-identical to a cold one's and it imports neither
torch nor numpy. Any change to any of those, or a case the entry does not know, is a miss,
and the check loads the model as before.

Layout: ``<cache_dir>/warm/<key>.json`` (one per folder content, layer, max_length and
library versions) and ``<cache_dir>/warm/digests.json`` (the file-digest memo). Written
atomically; a damaged entry is only a miss.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from warp_check.cache.fingerprint import FileDigests, folder_sha256
from warp_check.cases import Case
from warp_check.decisions import SINGLE_LABEL, DecisionKind
from warp_check.files import write_text_atomically

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

FORMAT = "warp-check-warm/2"
WARM_DIR = "warm"
ENTRY_SUFFIX = ".warm.json"
# What turns a folder's files into logits: tokenisation and the forward pass. A new version of
# any of these may change either, so it is a different entry.
LIBRARIES = ("warp-check", "transformers", "tokenizers", "torch", "safetensors")


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def case_sha256(case: Case) -> str:
    """What tokenisation sees of a case (with the folder's tokenizer and max_length)."""
    return hashlib.sha256(json.dumps([case.text, case.text_pair]).encode()).hexdigest()


@dataclass(frozen=True)
class WarmEntry:
    """What checks on a model folder's exact content answered, case by case."""

    key: str
    head_name: str  # "repair_layer → activation → classifier"
    num_classes: int
    logits: Mapping[str, Sequence[float]]  # case_sha256 → the model's logits on that case

    def answers(self, cases: Sequence[Case], decision: DecisionKind = SINGLE_LABEL) -> list[tuple[int, float]] | None:
        """(prediction, gap) of every case as ``decision`` makes them, or None if any case is not in the entry."""
        if self.num_classes < 2:
            return None
        found = [self.logits.get(case_sha256(c)) for c in cases]
        try:
            if any(not isinstance(z, list) or len(z) != self.num_classes for z in found):
                return None
            return [decision.answer_of(z, c.label) for z, c in zip(found, cases, strict=True)]  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return None  # a damaged entry (a logit that is not a number) is only a miss


def entry_key(
    model_dir: str | Path, layer: Any, max_length: int, digests: FileDigests, decision: str = SINGLE_LABEL.name
) -> str:
    """The entry's name: the folder's content, the suite's layer and max_length, the libraries, and
    the kind of decision its checks answered as (another kind's check is another entry).

    Raises OSError if the folder cannot be read.
    """
    identity = {
        "format": FORMAT,
        "folder_sha256": folder_sha256(model_dir, digests),
        "layer": repr(layer),
        "max_length": int(max_length),
        "versions": _versions(),
        "decision": decision,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()


def _entry_path(
    model_dir: str | Path, layer: Any, max_length: int, cache_dir: str | Path, decision: str
) -> Path | None:
    """Where the entry for the folder as it is now lives (None: the folder cannot be read)."""
    digests = FileDigests(Path(cache_dir) / WARM_DIR / "digests.json")
    try:
        key = entry_key(model_dir, layer, max_length, digests, decision)
        return Path(cache_dir) / WARM_DIR / f"{key}{ENTRY_SUFFIX}"
    except OSError:
        return None
    finally:
        digests.save()


def lookup(
    model_dir: str | Path, layer: Any, max_length: int, cache_dir: str | Path, *, decision: str = SINGLE_LABEL.name
) -> WarmEntry | None:
    """The warm entry for this model folder as it is now, or None (then load the model).

    Reads only: with no entry at all in the cache, nothing is hashed and nothing written.
    """
    if not any((Path(cache_dir) / WARM_DIR).glob(f"[!.]*{ENTRY_SUFFIX}")):
        return None
    path = _entry_path(model_dir, layer, max_length, cache_dir, decision)
    return None if path is None else _read(path)


def _read(path: Path) -> WarmEntry | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None  # absent, unreadable or damaged: a miss
    try:
        if data["format"] != FORMAT or data["key"] != path.name.removesuffix(ENTRY_SUFFIX):
            return None
        logits = data["logits"]
        if not isinstance(logits, dict):
            return None
        return WarmEntry(data["key"], str(data["head_name"]), int(data["num_classes"]), logits)
    except (KeyError, TypeError, ValueError):
        return None


def record(
    model_dir: str | Path | None,
    head_name: str,
    cases: Sequence[Case],
    logits: np.ndarray,
    cache_dir: str | Path,
    *,
    layer: Any,
    max_length: int,
    decision: str = SINGLE_LABEL.name,
) -> Path | None:
    """Remember, for the model folder a check loaded, the logits of every case it checked.

    ``logits`` are the check's own (float64, one row per case). ``layer`` and ``max_length``
    are what the suite asked for (the adapter may have capped ``max_length`` at the
    tokenizer's): the lookup knows only those. An entry of earlier runs on the same folder is
    merged (a suite that grows keeps its older cases warm). Returns the entry's path, or None
    when there is no folder or the cache cannot be written (never an error).
    """
    if model_dir is None or not Path(model_dir).is_dir():
        return None
    path = _entry_path(model_dir, layer, max_length, cache_dir, decision)
    if path is None or len(logits) != len(cases):
        return None
    answers = {case_sha256(c): [float(z) for z in row] for c, row in zip(cases, logits, strict=True)}
    earlier = _read(path)
    if earlier is not None and earlier.num_classes == logits.shape[1]:
        if all(earlier.logits.get(k) == v for k, v in answers.items()):
            return path  # nothing new
        answers = dict(earlier.logits) | answers
    entry = {
        "format": FORMAT,
        "key": path.name.removesuffix(ENTRY_SUFFIX),
        "model_dir": str(model_dir),
        "head_name": head_name,
        "num_classes": int(logits.shape[1]),
        "logits": answers,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(path, json.dumps(entry))
    except OSError:
        return None
    return path
