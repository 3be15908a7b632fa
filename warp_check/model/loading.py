"""Loading a model folder: offline, weights only, and every failure a sentence about the folder."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from warp_check.decisions import deciding, deciding_config
from warp_check.errors import ModelError, exception_chain, first_line, reraise_interrupt


def _is_lfs_pointer(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(40).startswith(b"version https://git-lfs")


@contextlib.contextmanager
def quiet_transformers_progress() -> Iterator[None]:
    """transformers 5 draws a progress bar on every load and save, and a load report of missing
    keys that warp-check turns into its own error: noise in a test report."""
    from transformers.utils import logging as hf_logging

    was_enabled = hf_logging.is_progress_bar_enabled()
    verbosity = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if was_enabled:
            hf_logging.enable_progress_bar()


def load_model_folder(path: str | Path) -> tuple[Any, Any]:
    """(model, tokenizer) from a local Hugging Face folder, offline; never runs remote code.

    Any failure is the folder's: a ModelError that names it and says what is wrong.
    """
    import transformers
    from transformers import AutoTokenizer

    path = Path(path)
    if not path.is_dir():
        raise ModelError(f"model folder {str(path)!r} does not exist")
    weights = list(path.glob("*.safetensors")) + list(path.glob("pytorch_model*.bin"))
    if not (path / "config.json").is_file() or not weights:
        what = "config.json" if not (path / "config.json").is_file() else "weights (*.safetensors)"
        raise ModelError(f"model folder {str(path)!r} has no {what}: not a Hugging Face model folder")
    auto_class = getattr(transformers, auto_model(read_config(path)))
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ModelError(
            f"model folder {str(path)!r} has no tokenizer files ({', '.join(TOKENIZER_FILES[:2])}, ...): save the "
            "tokenizer beside the model (tokenizer.save_pretrained(folder)); a model is never run with a guessed one"
        )
    try:
        with quiet_transformers_progress():
            # dtype="auto": the checkpoint's own dtype (transformers 4 would load float32 otherwise)
            model, info = auto_class.from_pretrained(
                path, trust_remote_code=False, local_files_only=True, output_loading_info=True, dtype="auto"
            )
            tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=False, local_files_only=True)
            if auto_class is transformers.AutoModelForTokenClassification:
                tokenizer = words_tokenizer(path, tokenizer)
    except Exception as exc:  # noqa: BLE001 — any loader failure is the folder's fault: say which
        reraise_interrupt(exc)
        pointer = next((w.name for w in weights if _is_lfs_pointer(w)), None)
        if pointer is not None:
            raise ModelError(
                f"model folder {str(path)!r}: {pointer} is a Git LFS pointer, not weights; run `git lfs pull`"
            ) from None
        # torch.load(weights_only=True) met more than tensors; transformers 4 re-raises it as an
        # OSError about TF checkpoints, with the UnpicklingError further down the chain.
        unpickling = next((e for e in exception_chain(exc) if type(e).__name__ == "UnpicklingError"), None)
        if unpickling is not None:
            found = re.search(r"Unsupported global: ([^.]*)", str(unpickling))
            what = f" ({found[1].strip()})" if found else ""
            raise ModelError(
                f"cannot load the model in {str(path)!r}: its pickled weights hold Python objects, not only "
                f"tensors{what}; warp-check loads weights only and never runs code from a model folder: "
                "convert the checkpoint to safetensors where you trust it"
            ) from None
        why = f"{type(exc).__name__}: {first_line(exc)}"
        raise ModelError(f"cannot load the model in {str(path)!r}: {why}") from exc
    _check_whole(path, info)
    return model, tokenizer


def auto_model(config: dict[str, Any]) -> str:
    """The transformers auto class that loads a model of ``config``: a token classifier's where a
    kind deciding per word decides its architecture, else a sequence classifier's."""
    kind = deciding_config(config.get("architectures"), config.get("problem_type"))
    per_word = kind is not None and kind.per_word
    return "AutoModelForTokenClassification" if per_word else "AutoModelForSequenceClassification"


def words_tokenizer(path: Path, tokenizer: Any) -> Any:
    """A tokenizer that takes a sentence's words (``is_split_into_words``). Byte-level BPE ones
    (RoBERTa, GPT-2) do only when told each word follows a space, as a word inside a sentence does."""
    from transformers import AutoTokenizer

    if getattr(tokenizer, "add_prefix_space", None) is False:
        return AutoTokenizer.from_pretrained(
            path, trust_remote_code=False, local_files_only=True, add_prefix_space=True
        )
    return tokenizer


# What a model folder's tokenizer can be saved as; save_pretrained writes the first two.
TOKENIZER_FILES = (
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.txt",
    "vocab.json",
    "spiece.model",
    "sentencepiece.bpe.model",
    "tokenizer.model",
)


def read_config(path: str | Path) -> dict[str, Any]:
    """``config.json`` of a model folder, checked for what WARP can repair.

    Raises ModelError (naming the folder) when it is not a JSON object, or when the head is a
    regression head or one no registered kind of decision decides (warp_check.decisions: a
    multi-label head's independent sigmoid decisions have none yet).
    """
    path = Path(path)
    where = f"model folder {str(path)!r}: config.json"
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # RecursionError: nested too deep
        why = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise ModelError(f"{where} cannot be read ({why})") from None
    if not isinstance(config, dict):
        raise ModelError(f"{where} is a JSON {type(config).__name__}, not an object: not a Hugging Face config")
    problem = config.get("problem_type")
    labels = config.get("id2label")
    count = config.get("num_labels", len(labels) if isinstance(labels, dict) else None)
    if problem == "regression" or count == 1:
        raise ModelError(
            f"{where}: a regression head ({'problem_type regression' if problem == 'regression' else 'num_labels 1'}): "
            "WARP repairs classifiers, whose prediction is the argmax of ≥ 2 logits; a regression value has no "
            "margin to certify"
        )
    if problem == "multi_label_classification" and deciding(problem) is None:
        raise ModelError(
            f"{where}: a multi-label head (problem_type multi_label_classification): each label is its own "
            "sigmoid decision, and WARP's certificates are about an argmax over the classes; repairing it as one "
            "would change the labels' decisions silently"
        )
    return config


def _check_whole(path: Path, info: dict[str, Any]) -> None:
    """Refuse a folder whose weights do not fill the model: transformers would initialise the missing
    tensors at random, and the suite would run on a model nobody trained."""
    problems = []
    for key, what in (
        ("missing_keys", "missing"),
        ("unexpected_keys", "unexpected"),
        ("mismatched_keys", "of the wrong size"),
    ):
        names = sorted(str(k if isinstance(k, str) else k[0]) for k in info.get(key) or ())
        if names:
            shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
            problems.append(f"{len(names)} parameter(s) {what} ({shown})")
    if problems:
        raise ModelError(
            f"model folder {str(path)!r} does not load whole: " + "; ".join(problems) + ": the weights do not "
            "match the config's architecture (a damaged or partial checkpoint); warp-check never runs a model "
            "with randomly initialised weights"
        )
