"""Representations v of every case: one batched encoder pass, unpadded, cached on disk.

Everything upstream of the repair layer is frozen during repair, so v depends only on the
upstream parameters and the tokenised input: the cache (:mod:`warp_check.cache.shards`) is
keyed by the digests of both, and the repaired model, whose upstream is the same, needs no
encoder pass either.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from warp_check.cache.shards import ShardStore
from warp_check.cases import Case, Kind
from warp_check.errors import SuiteError, TokenizerFailure
from warp_check.model.adapter import SentenceRefused
from warp_check.model.batches import length_batches
from warp_check.model.engines.settings import Engine
from warp_check.model.hashing import input_sha256, upstream_sha256
from warp_check.model.threads import torch_threads
from warp_check.progress import Progress, as_progress
from warp_check.validation import is_decimal

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter


@dataclass(frozen=True)
class Encoded:
    """v for each case id, in the order asked. Counted per distinct input: how many came from the cache,
    how many were encoded; a case whose input is an earlier case's (``identical``) shares its v."""

    ids: tuple[str, ...]
    V: np.ndarray  # (n, d_in) float32
    from_cache: int
    encoded: int
    upstream_sha256: str | None  # the cache's key for the model; None: no cache asked for, not computed
    input_keys: tuple[str, ...] = ()  # per case, the key its v is cached under (empty: not known)

    @property
    def identical(self) -> int:
        """Cases whose input to the model is an earlier case's: encoded once (0 where keys are not known)."""
        return len(self.input_keys) - len(set(self.input_keys))

    def rows(self, ids: Sequence[str]) -> np.ndarray:
        index = {case_id: i for i, case_id in enumerate(self.ids)}
        return self.V[[index[i] for i in ids]]


def encode_cases(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    *,
    batch_size: int = 32,
    cache_dir: str | Path | None = None,
    progress: bool | Progress = True,
    check: bool = True,
) -> Encoded:
    """v for every case: from the cache where present, else one pass in batches of one length.

    With ``check`` the model's logits of every freshly encoded case are compared with the
    head's factorisation (the load-time check, on the real inputs, at no extra cost).
    """
    ids = tuple(case.id for case in cases)
    features = _tokenized(adapter, cases)
    keys = [input_sha256(f) for f in features]
    check_inputs(adapter, cases, features)
    # Hashing every upstream parameter was a third of a MiniLM pass in a profile on an H100: only for a cache.
    upstream = upstream_sha256(adapter) if cache_dir is not None else None
    store = ShardStore(Path(cache_dir) / upstream) if upstream is not None else None
    d_in = adapter.width
    same_as: dict[int, int] = {}  # a later case with an earlier case's input → that case: encoded once
    first: dict[str, int] = {}
    for i, key in enumerate(keys):
        if (j := first.setdefault(key, i)) != i:
            same_as[i] = j
    if store is not None:
        found, V = store.lookup(keys, d_in)
    else:
        found, V = np.zeros(len(keys), dtype=bool), np.zeros((len(cases), d_in), dtype=np.float32)
    missing = [i for i in range(len(keys)) if i not in same_as and not found[i]]  # each input the cache lacks, once
    if missing and adapter.engine.kind is Engine.RAY:
        from warp_check.model.engines.ray import encode_on_ray

        rows = [features[i] for i in missing]
        V[missing] = encode_on_ray(
            adapter, rows, batch_size=batch_size, upstream=upstream, check=check, progress=progress
        )
    elif missing:
        head = adapter.head() if check else None
        with as_progress(progress).step("encoding cases", total=len(missing)) as step:
            with torch_threads(adapter.threads):
                for chunk in length_batches([len(features[i]["input_ids"]) for i in missing], batch_size):
                    chunk = [missing[j] for j in chunk]
                    v, logits = adapter.forward_batch([features[i] for i in chunk])
                    if check:
                        adapter.check_logits(v, logits, head)
                    V[chunk] = v
                    step.advance(len(chunk))
    if missing and store is not None:
        store.save([keys[i] for i in missing], V[missing])
    for i, j in same_as.items():
        V[i] = V[j]
    return Encoded(ids, V, len(cases) - len(missing) - len(same_as), len(missing), upstream, tuple(keys))


def input_keys(adapter: ClassifierAdapter, cases: Sequence[Case]) -> list[str | None]:
    """What the model sees of each case, as the key its v is cached under (None: no text at all,
    which :func:`check_inputs` refuses)."""
    features = _tokenized(adapter, cases)
    no_text = _sees_no_text(adapter)
    return [None if no_text(f) else input_sha256(f) for f in features]


def _tokenized(adapter: ClassifierAdapter, cases: Sequence[Case]) -> list[dict]:
    """The cases' encodings; a case the tokenizer fails on is refused naming its file and line."""
    try:
        return adapter.tokenize([c.text for c in cases], [c.text_pair for c in cases])
    except SentenceRefused as exc:
        raise _case_error(cases[exc.index], "tokens", exc.reason) from None
    except TokenizerFailure as exc:
        case = cases[exc.index]
        raise _case_error(
            case,
            "text",
            f"the model's tokenizer fails on this case ({exc.reason}): remove the case, or check the tokenizer "
            "files beside the model",
        ) from None


def check_inputs(adapter: ClassifierAdapter, cases: Sequence[Case], features: list[dict]) -> None:
    """Refuse, naming the case's file:line, an input the model sees as no text: nothing but special
    and unknown tokens (a text of emoji for an English vocabulary, say)."""
    no_text = _sees_no_text(adapter)
    for case, feature in zip(cases, features, strict=True):
        if no_text(feature):
            tokens = adapter.tokenizer.convert_ids_to_tokens(feature["input_ids"])
            raise _case_error(
                case,
                "text",
                f"tokenizes to nothing but special and unknown tokens ({' '.join(tokens)}): the model sees no "
                "text in it; remove the case or write it in words the model knows",
            )


def _sees_no_text(adapter: ClassifierAdapter) -> Callable[[dict], bool]:
    """Whether a tokenized input is nothing but the tokenizer's special and unknown tokens."""
    special = set(getattr(adapter.tokenizer, "all_special_ids", ()) or ())
    return lambda feature: bool(special) and all(token in special for token in feature["input_ids"])


def check_no_conflicts(adapter: ClassifierAdapter, cases: Sequence[Case], input_keys: Sequence[str]) -> None:
    """Refuse two must_fix / must_keep cases the tokenizer makes one input (lowercasing, truncation at
    the adapter's ``max_length``) whose answers conflict as the model's kind of decision judges them
    (single label: two classes; several labels: a label on in one and off in the other), naming both:
    no repair can satisfy both, and no setting helps."""
    decision, num_classes = adapter.decision, adapter.num_classes

    def name(label: int) -> str:
        return repr(adapter.label_name(label))

    earlier: dict[str, list[Case]] = {}  # per input, its cases of distinct answers
    for case, key in zip(cases, input_keys, strict=True):
        if case.kind is Kind.AUX:
            continue
        same = earlier.setdefault(key, [])
        for other in same:
            conflict = decision.conflict(other.label, case.label, name, num_classes)
            if conflict is not None:
                raise _case_error(
                    case,
                    conflict.field,
                    f"case {case.id!r} (asks {decision.stated(case.label, name)}, {case.kind.value}) and case "
                    f"{other.id!r} at {other.origin or '?'} (asks {decision.stated(other.label, name)}, "
                    f"{other.kind.value}) are the same input to the model: its tokenizer gives both the same "
                    f"token ids (lowercasing, or truncation at max_length {adapter.max_length}), "
                    f"{'and ' + conflict.reason + ', ' if conflict.reason else ''}so no model can satisfy both "
                    "and no setting helps; relabel or remove one",
                )
        if all(other.label != case.label for other in same):
            same.append(case)


def _case_error(case: Case, field: str, message: str) -> SuiteError:
    path, _, line = (case.origin or "").rpartition(":")
    if not is_decimal(line):
        return SuiteError(f"case {case.id!r}: {message}", field=field)
    return SuiteError(message, path=path, line=int(line), field=field)
