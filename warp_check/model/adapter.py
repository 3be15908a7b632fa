"""A sequence classifier seen as encoder → v → W_c σ(W v + b) + b_c.

v is captured by a forward pre-hook on the repair layer, so it is exact for any model, and the
factorisation is checked against the model's own logits before anything relies on it.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from warp_check.decisions import SINGLE_LABEL, DecisionKind, deciding_config
from warp_check.errors import ModelError, TokenizerFailure, first_line, reraise_interrupt
from warp_check.model.activations import get_activation
from warp_check.model.discovery import find_head, pooled_positions
from warp_check.model.engines.settings import LOCAL, EngineSettings
from warp_check.model.head import ROUNDING_ULPS, DenseHead, unit_roundoff
from warp_check.model.hub_cache import HUB_ID, HubModel, resolve_model
from warp_check.model.loading import load_model_folder
from warp_check.model.normed_head import LayerNormMap, NormedHead
from warp_check.model.specs import FFN_LAYER, HEAD_SPECS, HeadSpec, resolve_spec, token_ffn_spec, token_head_spec
from warp_check.model.threads import capped_threads
from warp_check.validation import is_decimal

if TYPE_CHECKING:  # pragma: no cover
    import torch

# How closely the head, recomputed in float64 from the weights and v, must give the model's own
# logits, by the dtype the model computes in: its rounding of each layer's output is the error.
EQUIVALENCE_TOLERANCE: dict[str, float] = {"float64": 1e-5, "float32": 1e-5, "float16": 1e-2, "bfloat16": 6e-2}
PROBE_TEXTS = ("a plain probe sentence.", "another, longer probe sentence to check the head with.")


class SentenceRefused(TokenizerFailure):
    """A sentence a token classifier cannot be asked about as given (longer than its window, a word
    with no sub-token): ``reason`` says why, for the case's file and line."""


# A per-word row's feature: the position of its word's first sub-token (not a forward argument).
WORD_POSITION = "word_position"


def decision_of_model(model: Any) -> DecisionKind:
    """The kind a model's config names by its architecture or problem_type; single label where none."""
    config = getattr(model, "config", None)
    kind = deciding_config(getattr(config, "architectures", None), getattr(config, "problem_type", None))
    return kind or SINGLE_LABEL


def _sentence_key(feature: dict[str, list[int]]) -> str:
    """What the model is run on for a per-word row: its input, whichever word the row decides."""
    return repr(sorted((k, v) for k, v in feature.items() if k != WORD_POSITION))


def equivalence_tolerance(dtype: str) -> float:
    """Absolute and relative tolerance of the head-equivalence check for a model computing in ``dtype``."""
    return EQUIVALENCE_TOLERANCE.get(dtype, EQUIVALENCE_TOLERANCE["float32"])


def _submodule(model: Any, name: str, role: str):
    import torch

    try:
        module = model.get_submodule(name)
    except AttributeError:
        raise ModelError(f"{role} '{name}' does not exist in {type(model).__name__}") from None
    if not isinstance(module, torch.nn.Linear):
        raise ModelError(
            f"{role} '{name}' is a {type(module).__name__}, not a dense (nn.Linear) layer: "
            "WARP repairs a dense → activation → linear head, or the final linear layer"
        )
    return module


def _input_limit(model: Any, tokenizer: Any) -> int:
    """The most tokens the model's forward pass takes (a very large number when it does not say)."""
    limits = [getattr(tokenizer, "model_max_length", None), position_capacity(model)]
    usable = [n for n in limits if isinstance(n, int) and 0 < n < 1_000_000]  # HF's "unset" is ~1e30
    return min(usable, default=1_000_000)


def position_capacity(model: Any) -> int | None:
    """How many positions the model's position table really has room for (None: no limit known).

    RoBERTa-style embeddings (RoBERTa, XLM-R, CamemBERT, Longformer, MPNet, data2vec-text, ...)
    number positions from ``padding_idx + 1``: their table of n rows takes n − padding_idx − 1
    tokens, not ``max_position_embeddings``.
    """
    import torch

    config = getattr(model, "config", None)
    positions = getattr(config, "max_position_embeddings", None)
    base = getattr(model, "base_model", model)
    embeddings = getattr(base, "embeddings", None)
    table = getattr(embeddings, "position_embeddings", None)
    offset = getattr(embeddings, "padding_idx", None)
    if isinstance(table, torch.nn.Embedding) and isinstance(offset, int):
        return int(table.num_embeddings) - offset - 1
    return positions if isinstance(positions, int) else None


def resolve_device(device: str) -> str:
    """``auto``: the first CUDA device when torch sees one, else the CPU; anything else as given,
    checked (``cpu``, ``cuda``, ``cuda:N``)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        index = device.partition(":")[2]
        if index and not is_decimal(index):
            raise ModelError(f"device={device!r}: give 'auto', 'cpu', 'cuda' or 'cuda:N'")
        if not torch.cuda.is_available():
            raise ModelError(f"device={device!r}: torch sees no CUDA device here; use 'cpu' or 'auto'")
        if index and int(index) >= torch.cuda.device_count():
            raise ModelError(f"device={device!r}: torch sees {torch.cuda.device_count()} CUDA device(s)")
        return device
    raise ModelError(f"device={device!r}: give 'auto', 'cpu', 'cuda' or 'cuda:N'")


def _tokenizer_failure(
    tokenizer: Any,
    texts: Sequence[str],
    pairs: Sequence[str | None],
    max_length: int,
    exc: Exception,
    source: str | None,
) -> TokenizerFailure:
    """The first text the tokenizer fails on alone (the batch's first where none fails alone), as an
    error naming it: a tokenizer that fails on plain text is damaged or not this model's (a WordPiece
    vocabulary without its [UNK] token fails on any word it does not know)."""
    failing, why = 0, exc
    for i, (text, pair) in enumerate(zip(texts, pairs, strict=True)) if len(texts) > 1 else ():
        try:
            tokenizer([text], None if pair is None else [pair], truncation=True, max_length=max_length)
        except Exception as alone:  # noqa: BLE001 — any failure of this text alone names it
            reraise_interrupt(alone)
            failing, why = i, alone
            break
    where = f"model folder {source!r}: its tokenizer" if source else "the tokenizer"
    shown = texts[failing] if len(texts[failing]) <= 60 else texts[failing][:59] + "…"
    paired = " with its text_pair" if pairs[failing] is not None else ""
    reason = f"{type(why).__name__}: {first_line(why)}"
    return TokenizerFailure(
        f"{where} fails on the text {shown!r}{paired} ({reason}): the tokenizer files may be damaged or "
        "belong to another model",
        index=failing,
        reason=reason,
    )


def _check_tokenizer(tokenizer: Any, max_length: int, source: str) -> None:
    """The folder's tokenizer takes the probe texts, before anything else runs it."""
    try:
        tokenizer(list(PROBE_TEXTS), truncation=True, max_length=max_length)
    except Exception as exc:  # noqa: BLE001 — the tokenizer's own failure: say on which text
        reraise_interrupt(exc)
        raise _tokenizer_failure(tokenizer, PROBE_TEXTS, [None] * len(PROBE_TEXTS), max_length, exc, source) from None


def _probe_batch(model: Any, tokenizer: Any, max_length: int) -> dict[str, Any]:
    """The forward arguments of the probe texts (one text where nothing can pad)."""
    keys = set(inspect.signature(model.forward).parameters)
    config_pad = getattr(getattr(model, "config", None), "pad_token_id", None)
    pad = config_pad is not None and tokenizer.pad_token_id is not None
    texts = list(PROBE_TEXTS) if pad else list(PROBE_TEXTS[:1])
    limit = min(int(max_length), _input_limit(model, tokenizer))
    encoded = tokenizer(texts, truncation=True, max_length=limit, padding=pad, return_tensors="pt")
    return {k: v for k, v in encoded.items() if k in keys}


class ClassifierAdapter:
    """A sequence classifier seen as encoder → v → W_c σ(W v + b) + b_c."""

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        spec: HeadSpec,
        *,
        max_length: int = 128,
        source: str | None = None,
        check: bool = True,
        device: str = "cpu",
        threads: int | None = None,
        hub: HubModel | None = None,
        engine: EngineSettings = LOCAL,
        decision: DecisionKind | None = None,
    ) -> None:
        self.device = resolve_device(device)
        self.engine = engine  # where encode_cases runs the encoder pass
        # what the logits decide (None: the kind the config's architecture or problem_type names, else single label)
        self.decision = decision or decision_of_model(model)
        # torch CPU threads while encoding; None: model.threads.default_threads()
        self.threads = None if threads is None else capped_threads(threads)
        self.model = model.eval().to(self.device)
        self.tokenizer = tokenizer
        self.spec = spec
        # Longer inputs than the model has positions for crash its forward pass: truncate to
        # what it takes (the tokenizer's model_max_length, as Hugging Face's own default does).
        self.max_length = min(int(max_length), _input_limit(model, tokenizer))
        added = tokenizer.num_special_tokens_to_add() if hasattr(tokenizer, "num_special_tokens_to_add") else 0
        if self.max_length <= added:
            raise ModelError(
                f"max_length={self.max_length} leaves no room for text: the tokenizer adds {added} special "
                f"token(s) to every input; give max_length {added + 1} or more (128 is the default)"
            )
        self.source = source
        self.hub = hub  # the Hub model ``source`` is a snapshot of (None: a local folder)
        self.activation = get_activation(spec.activation)
        self.repair_layer = _submodule(model, spec.repair_layer, "repair layer")
        # The layer whose output is the logits: the classifier, or the repair layer itself.
        self.classifier = None if spec.classifier is None else _submodule(model, spec.classifier, "classifier")
        self.logits_layer = self.classifier if self.classifier is not None else self.repair_layer
        if self.classifier is not None and self.repair_layer.out_features != self.classifier.in_features:
            raise ModelError(
                f"repair layer '{spec.repair_layer}' outputs {self.repair_layer.out_features} features "
                f"but classifier '{spec.classifier}' takes {self.classifier.in_features}"
            )
        self.norm, self.residual_module = self._ffn_modules(model, spec)
        self.dtype = str(self.repair_layer.weight.dtype).removeprefix("torch.")
        self._forward_keys = set(inspect.signature(model.forward).parameters)
        # Without a pad token the model cannot tell padding from text (decoder-only classifiers pool
        # the last non-pad token): such a model sees one input at a time, unpadded.
        pad_id = getattr(getattr(model, "config", None), "pad_token_id", None)
        self.one_at_a_time = pad_id is None or getattr(tokenizer, "pad_token_id", None) is None
        if check:
            self.check_finite()
            self.check_equivalence(self.probe_texts)

    def _ffn_modules(self, model: Any, spec: HeadSpec) -> tuple[Any, Any]:
        """The FFN-output form's LayerNorm and the module its residual enters (None, None for the
        other forms), refused by name where they are not what the form needs."""
        import torch

        if spec.ffn is None:
            return None, None
        family = getattr(getattr(model, "config", None), "model_type", None)
        if not self.decision.per_word:
            raise ModelError(
                f"layer = {FFN_LAYER!r} repairs a token classifier's last feed-forward output layer; "
                f"{type(model).__name__} ({family}) decides whole texts: use layer = 'auto'"
            )
        try:
            norm = model.get_submodule(spec.ffn.norm)
            residual = model.get_submodule(spec.ffn.residual_module)
        except AttributeError as exc:
            raise ModelError(
                f"the FFN-output form's module does not exist in {type(model).__name__} ({family}): {exc}"
            ) from None
        shape = (self.repair_layer.out_features,)
        if not (
            isinstance(norm, torch.nn.LayerNorm)
            and tuple(norm.normalized_shape) == shape
            and norm.weight is not None
            and norm.bias is not None
        ):
            raise ModelError(
                f"'{spec.ffn.norm}' in {type(model).__name__} ({family}) is a {type(norm).__name__}, not a LayerNorm "
                f"with weight and bias over the {shape[0]} outputs of '{spec.repair_layer}': the FFN-output form "
                "does not apply; repair the classifier: layer = 'auto'"
            )
        return norm, residual

    @property
    def width(self) -> int:
        """The columns of a row's representation: v, and for the FFN-output form the residual r after it."""
        extra = self.repair_layer.out_features if self.spec.ffn is not None else 0
        return int(self.repair_layer.in_features) + extra

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        layer: str | HeadSpec | Sequence[str] = "auto",
        max_length: int = 128,
        check: bool = True,
        device: str = "cpu",
        threads: int | None = None,
        revision: str | None = None,
        hub: HubModel | None = None,
        engine: EngineSettings = LOCAL,
        decision: DecisionKind | None = None,
    ) -> ClassifierAdapter:
        """Load a model offline (never running remote code) onto ``device``: a local Hugging Face folder,
        or a Hub id (``org/name``, at ``revision``, default main) read from the local Hugging Face cache,
        never downloaded; a folder that exists wins over a Hub id spelt the same. ``hub``: the Hub model
        the folder ``path`` is a snapshot of, where the caller resolved it."""
        hub_like = HUB_ID.fullmatch(str(path).partition("@")[0]) and not Path(path).expanduser().exists()
        if hub is None and (revision is not None or hub_like):
            source = resolve_model(path, revision)
            path, hub = source.folder, source.hub
        model, tokenizer = load_model_folder(path)
        _check_tokenizer(tokenizer, max_length, str(path))
        model = model.to(resolve_device(device))
        where = {
            "max_length": max_length,
            "source": str(path),
            "check": check,
            "device": device,
            "threads": threads,
            "hub": hub,
            "engine": engine,
            "decision": decision,
        }
        if isinstance(layer, str) and layer in ("auto", "final", FFN_LAYER):
            return cls.found(model, tokenizer, layer, **where)
        return cls(model, tokenizer, resolve_spec(model, layer), **where)

    @classmethod
    def found(
        cls,
        model: Any,
        tokenizer: Any,
        layer: str,
        *,
        max_length: int,
        source: str | None,
        check: bool = True,
        device: str = "cpu",
        threads: int | None = None,
        hub: HubModel | None = None,
        engine: EngineSettings = LOCAL,
        decision: DecisionKind | None = None,
    ) -> ClassifierAdapter:
        """``layer = "auto"``: the per-architecture table's head where it reproduces the logits, else the
        head traced from the model itself (dense → σ → linear, or the final linear layer); a dense head
        found so falls back to the final linear layer where its repair does not converge.
        ``layer = "final"``: the final linear layer, whatever comes before it. A token classifier's head
        is its classifier, the final linear layer, either way. ``layer = "ffn_output"``: a token
        classifier's last feed-forward output layer (:func:`token_ffn_spec`)."""
        per_word = (decision or decision_of_model(model)).per_word
        table = HEAD_SPECS.get(getattr(getattr(model, "config", None), "model_type", None))
        if layer == "auto" and table is not None and not per_word:
            spec = replace(table, found_by=f"the head table's entry for {model.config.model_type}").falling_back()
            try:
                adapter = cls(
                    model,
                    tokenizer,
                    spec,
                    max_length=max_length,
                    source=source,
                    check=False,
                    device=device,
                    threads=threads,
                    hub=hub,
                    engine=engine,
                    decision=decision,
                )
            except ModelError:
                adapter = None  # an architecture variant the table does not describe: trace it
            if adapter is not None and check:
                adapter.check_finite()
                try:
                    adapter.check_equivalence(adapter.probe_texts)
                except ModelError:
                    adapter = None
            if adapter is not None:
                return adapter
        if layer == FFN_LAYER:
            spec = token_ffn_spec(model)
        elif per_word:
            spec = token_head_spec(model)
        else:
            dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
            tolerance = equivalence_tolerance(dtype)
            batch = {k: v.to(resolve_device(device)) for k, v in _probe_batch(model, tokenizer, max_length).items()}
            spec = find_head(model, batch, atol=tolerance, rtol=tolerance)
            if layer == "final" and spec.classifier is not None:
                spec = HeadSpec.final_linear(spec.classifier, found_by="layer = 'final': the final linear layer")
            elif layer == "auto":
                spec = spec.falling_back()
        return cls(
            model,
            tokenizer,
            spec,
            max_length=max_length,
            source=source,
            check=check,
            device=device,
            threads=threads,
            hub=hub,
            engine=engine,
            decision=decision,
        )

    def with_spec(self, spec: HeadSpec) -> ClassifierAdapter:
        """The same model and tokenizer seen through another head (``spec``), checked against the logits.

        The model is shared, not copied: nothing here changes it.
        """
        return ClassifierAdapter(
            self.model,
            self.tokenizer,
            spec,
            max_length=self.max_length,
            source=self.source,
            device=self.device,
            threads=self.threads,
            hub=self.hub,
            engine=self.engine,
            decision=self.decision,
        )

    @property
    def num_classes(self) -> int:
        return int(self.logits_layer.out_features)

    @property
    def labels(self) -> dict[str, int]:
        """The model's label names, name → class id (its config's id2label), for ``Case.labelled``; empty
        where two classes share a name or the config names none."""
        raw = getattr(getattr(self.model, "config", None), "id2label", None) or {}
        labels = {str(name): int(index) for index, name in raw.items() if 0 <= int(index) < self.num_classes}
        return labels if len(labels) == len(raw) else {}

    def label_name(self, label: int) -> str:
        """Class ``label`` as the model's config names it (its id2label), else its id."""
        names = getattr(getattr(self.model, "config", None), "id2label", None) or {}
        return str(names.get(label, label))

    # -- the head as numbers ----------------------------------------------------------
    def head(self) -> DenseHead:
        """The head in float64; the final-linear form as W v + b with an identity classifier."""

        def arr(t) -> np.ndarray:
            return t.detach().cpu().double().numpy()

        def bias(layer) -> np.ndarray:  # a missing bias is zero, and stays zero
            return np.zeros(layer.out_features) if layer.bias is None else arr(layer.bias)

        W, b = arr(self.repair_layer.weight), bias(self.repair_layer)
        if self.norm is not None:
            norm = LayerNormMap(gamma=arr(self.norm.weight), beta=arr(self.norm.bias), eps=float(self.norm.eps))
            Wc, bc = arr(self.classifier.weight), bias(self.classifier)
            activation, dtype, decision = self.activation, self.dtype, self.decision
            return NormedHead(W, b, Wc, bc, activation, storage_dtype=dtype, decision=decision, norm=norm)
        if self.classifier is None:
            Wc, bc = np.eye(W.shape[0]), np.zeros(W.shape[0])
        else:
            Wc, bc = arr(self.classifier.weight), bias(self.classifier)
        # GSN-FT tunes b, W_c and b_c: not where a bias is missing or the classifier is the identity.
        fixed = self.classifier is None or self.repair_layer.bias is None or self.classifier.bias is None
        return DenseHead(
            W, b, Wc, bc, self.activation, storage_dtype=self.dtype, fixed_head=fixed, decision=self.decision
        )

    def with_head(self, head: DenseHead) -> ClassifierAdapter:
        """A new adapter over a deep copy of the model carrying ``head``'s weights.

        The input model is never modified.
        """
        import torch

        model = copy.deepcopy(self.model)
        new = ClassifierAdapter(
            model,
            self.tokenizer,
            self.spec,
            max_length=self.max_length,
            source=self.source,
            check=False,
            device=self.device,
            threads=self.threads,
            hub=self.hub,
            engine=self.engine,
            decision=self.decision,
        )
        layers = [(self.spec.repair_layer, new.repair_layer, head.W, head.b)]
        if new.classifier is not None and self.spec.ffn is None:  # the FFN-output form changes W alone
            layers.append((self.spec.classifier, new.classifier, head.Wc, head.bc))
        with torch.no_grad():
            for name, module, weight, bias in layers:
                module.weight.copy_(torch.as_tensor(weight, dtype=module.weight.dtype))
                if module.bias is not None:
                    module.bias.copy_(torch.as_tensor(bias, dtype=module.bias.dtype))
                elif np.any(bias != 0):
                    raise ModelError(f"layer '{name}' has no bias to carry a changed one")
        return new

    # -- encoding -----------------------------------------------------------------------
    @property
    def probe_texts(self) -> tuple[str, ...]:
        """The texts the head is checked on at load: for a kind deciding per word, the probe sentences'
        first and last words."""
        if not self.decision.per_word:
            return PROBE_TEXTS
        from warp_check.decisions.token_tags import row_text

        probes = []
        for text in PROBE_TEXTS:
            words = text.split()
            # A sentence over the window is refused, never truncated: a probe keeps the words that fit.
            while (
                len(words) > 1
                and len(self.tokenizer(words, is_split_into_words=True, verbose=False)["input_ids"]) > self.max_length
            ):
                words.pop()
            probes += [row_text(words, 0), row_text(words, len(words) - 1)]
        return tuple(probes)

    def tokenize(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> list[dict[str, list[int]]]:
        """One encoding per text (no padding), limited to the keys the model's forward takes; for a
        kind deciding per word, with the position of the word's first sub-token (:data:`WORD_POSITION`)."""
        if not texts:
            return []  # Hugging Face tokenizers fail on an empty batch (IndexError)
        if self.decision.per_word:
            return self._tokenize_words(texts, pairs)
        pairs = list(pairs) if pairs is not None else [None] * len(texts)
        if any(p is not None for p in pairs) and not all(p is not None for p in pairs):
            return [self.tokenize([t], [p])[0] for t, p in zip(texts, pairs, strict=True)]
        try:
            encoded = self.tokenizer(
                list(texts),
                list(pairs) if pairs and pairs[0] is not None else None,
                truncation=True,
                max_length=self.max_length,
            )
        except Exception as exc:  # noqa: BLE001 — the tokenizer's own failure: say on which text
            reraise_interrupt(exc)
            raise _tokenizer_failure(self.tokenizer, texts, pairs, self.max_length, exc, self.source) from None
        keys = [k for k in encoded.keys() if k in self._forward_keys]
        return [{k: list(encoded[k][i]) for k in keys} for i in range(len(texts))]

    def _tokenize_words(self, texts: Sequence[str], pairs: Sequence[str | None] | None) -> list[dict[str, list[int]]]:
        """Each row's sentence as its words (``is_split_into_words``), untruncated: a sentence longer than
        the model's window is refused, since truncation would drop words silently."""
        sentences = []
        for i, text in enumerate(texts):
            try:
                if pairs is not None and pairs[i] is not None:
                    raise ValueError("a token classifier tags one sentence: a text_pair has no words it tags")
                sentences.append(self.decision.word_of(text))
            except ValueError as exc:
                raise SentenceRefused(str(exc), index=i, reason=str(exc)) from None
        words = [list(w) for w, _ in sentences]
        try:
            encoded = self.tokenizer(words, is_split_into_words=True, truncation=False, verbose=False)
        except Exception as exc:  # noqa: BLE001 — the tokenizer's own failure: say on which text
            reraise_interrupt(exc)
            raise _tokenizer_failure(
                self.tokenizer, texts, [None] * len(texts), self.max_length, exc, self.source
            ) from None
        keys = [k for k in encoded.keys() if k in self._forward_keys]
        features = []
        for i, (sentence, word) in enumerate(sentences):
            ids = encoded["input_ids"][i]
            if len(ids) > self.max_length:
                why = (
                    f"the sentence of {len(sentence)} words is {len(ids)} sub-tokens, longer than the model's window "
                    f"of {self.max_length}: truncation would drop words silently; split the sentence"
                )
                raise SentenceRefused(why, index=i, reason=why)
            word_ids = encoded.word_ids(i)
            if word not in word_ids:
                why = f"word {word} {sentence[word]!r} tokenizes to no sub-token: the model sees no word there"
                raise SentenceRefused(why, index=i, reason=why)
            feature = {k: list(encoded[k][i]) for k in keys}
            feature[WORD_POSITION] = [word_ids.index(word)]
            features.append(feature)
        return features

    def padded(self, features: list[dict[str, list[int]]]) -> dict[str, Any]:
        """The model's forward arguments for ``features``, padded to the longest."""
        import torch

        keys = [k for k in features[0] if k in self._forward_keys]
        if len({len(f["input_ids"]) for f in features}) == 1 and all(k in f for f in features for k in keys):
            # One length, nothing to pad (the encoder's batches): the tokenizer's pad walks every
            # token in Python, a fifth of a MiniLM pass in a profile on an H100.
            return {k: torch.tensor([f[k] for f in features], device=self.device) for k in keys}
        batch = self.tokenizer.pad(features, return_tensors="pt")
        return {k: v.to(self.device) for k, v in batch.items() if k in self._forward_keys}

    def forward_batch(self, features: list[dict[str, list[int]]]) -> tuple[np.ndarray, np.ndarray]:
        """(v, logits) for one batch: v is the repair layer's input, at the position the model pools
        (found where the logits layer's per-position output is the logits) when it runs on every one."""
        if self.one_at_a_time and len(features) > 1:
            parts = [self.forward_batch([f]) for f in features]
            return np.vstack([p[0] for p in parts]), np.vstack([p[1] for p in parts])
        import torch

        # A kind deciding per word: the rows of one sentence (one input, several words) share one pass.
        run, sentence = features, list(range(len(features)))
        if self.decision.per_word:
            first: dict[str, int] = {}
            sentence = [first.setdefault(_sentence_key(f), len(first)) for f in features]
            run = [features[sentence.index(s)] for s in range(len(first))]
        inputs: list[torch.Tensor] = []
        outputs: list[torch.Tensor] = []
        residuals: list[torch.Tensor] = []
        handles = [
            self.repair_layer.register_forward_pre_hook(lambda _m, args: inputs.append(args[0].detach())),
            self.logits_layer.register_forward_hook(lambda _m, _a, out: outputs.append(out.detach())),
        ]
        if self.residual_module is not None:  # the residual the FFN-output form's LayerNorm adds, exact
            at = self.spec.ffn.residual_arg
            handles.append(
                self.residual_module.register_forward_pre_hook(lambda _m, args: residuals.append(args[at].detach()))
            )
        try:
            with torch.inference_mode():
                logits = self.model(**self.padded(run)).logits
        finally:
            for handle in handles:
                handle.remove()
        per_position_logits = len(outputs) == 1 and outputs[0].ndim == 3
        if len(inputs) != 1 or not (inputs[0].ndim == 2 or (inputs[0].ndim == 3 and per_position_logits)):
            shape = tuple(inputs[0].shape) if inputs else None
            raise ModelError(
                f"repair layer '{self.spec.repair_layer}' was called {len(inputs)} time(s) with input "
                f"shape {shape}; WARP needs exactly one call on a (batch, features) input, or on every "
                "position when the model takes its logits from one position of the final layer"
            )
        v = inputs[0]
        if self.residual_module is not None:
            if len(residuals) != 1 or residuals[0].shape[:-1] != v.shape[:-1]:
                raise ModelError(
                    f"'{self.spec.ffn.residual_module}' was called {len(residuals)} time(s), not once on the "
                    f"positions '{self.spec.repair_layer}' ran on: the FFN-output form does not apply"
                )
            v = torch.cat([v, residuals[0].to(v.dtype)], dim=-1)
        if self.decision.per_word:  # each row's word: its first sub-token's state and tag logits
            rows = torch.as_tensor(sentence, device=v.device)
            at = torch.as_tensor([f[WORD_POSITION][0] for f in features], device=v.device)
            picked = logits[rows.to(logits.device), at.to(logits.device)]
            return v[rows, at].float().cpu().numpy(), picked.float().cpu().numpy()
        if v.ndim == 3:  # run on every position; the model pooled one of them into the logits
            per_position = outputs[0].double().cpu().numpy()
            positions = pooled_positions(per_position, logits.double().cpu().numpy())
            v = v[torch.arange(v.shape[0]), torch.as_tensor(positions)]
        return v.float().cpu().numpy(), logits.float().cpu().numpy()

    def check_equivalence(self, texts: Sequence[str], pairs: Sequence[str | None] | None = None) -> float:
        """Max |model logits − W_c σ(W v + b) − b_c| on ``texts``; raises if above 1e-5."""
        features = self.tokenize(texts, pairs)
        V, logits = self.forward_batch(features)
        return self.check_logits(V, logits)

    def check_finite(self) -> None:
        """Raise if any parameter holds NaN/Inf: every gap would be NaN, and no repair can help."""
        import torch

        for name, tensor in self.model.state_dict().items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                count = int((~torch.isfinite(tensor)).sum())
                where = f"model folder {self.source!r}: " if self.source else ""
                raise ModelError(
                    f"{where}parameter '{name}' holds {count} NaN/Inf value(s) of {tensor.numel()}: "
                    "the weights are corrupt (a diverged training run or a damaged file); WARP cannot repair them"
                )

    def check_logits(self, V: np.ndarray, logits: np.ndarray, head: DenseHead | None = None) -> float:
        """Max |logits − the head's logits of V|, raising where the head does not reproduce them.
        ``head``: this adapter's :meth:`head`, when the caller checks many batches (it copies the
        head's weights off the device and into float64)."""
        head = self.head() if head is None else head
        recomputed = head.logits(np.asarray(V, dtype=np.float64))
        error = np.abs(recomputed - logits)
        tolerance = equivalence_tolerance(self.dtype)
        allowed = tolerance + tolerance * np.abs(logits)
        if not np.all(error <= allowed):
            # Plus ROUNDING_ULPS of the dtype's rounding of the terms summed (a repair may grow weights
            # that cancel to small logits), measured only here: every encoded batch passes this check.
            allowed = allowed + ROUNDING_ULPS * unit_roundoff(self.dtype) * head.logits_scale(V)
        # A head that is not this model's is off by about the logits themselves.
        if not np.all(error <= allowed):
            raise ModelError(
                f"the head at {self.spec.quoted} does not reproduce the model's logits (max error "
                f"{float(error.max()):.3g} > {tolerance:g} for {self.dtype} weights): something between these "
                "layers is not dense → activation → linear, so WARP cannot repair this layer; "
                "layer = 'auto' finds the head from the model, layer = [final_layer] repairs the last linear layer"
            )
        return float(error.max())

    def upstream_parameters(self) -> list[tuple[str, Any]]:
        """Every parameter except those of the head: all that v depends on."""
        head = {f"{name}." for name in (self.spec.repair_layer, self.spec.classifier) if name is not None}
        return [
            (name, tensor)
            for name, tensor in self.model.state_dict().items()
            if not any(name.startswith(prefix) for prefix in head)
        ]
