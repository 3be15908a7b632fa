"""The paper's gradient baselines: same-layer LoRA and all-layers full fine-tuning.

Both train a deep copy of the model in memory on the union of the must_fix and must_keep
cases with cross-entropy (paper §4.1, "Baselines"); the input model is never modified and
nothing is written. Settings follow the paper: learning rate 1e-4, batch size 16, at most
300 epochs, early stopping with patience 5 and threshold 1e-6.

Early stopping: the paper names patience and threshold but no validation set, and its
baselines train on the union of the repair and remain sets, so what is monitored here is
the training loss, the mean cross-entropy over that union in each epoch (with dropout, as
trained). Training stops when it has not fallen by more than ``threshold`` for
``patience`` epochs in a row, or after ``max_epochs``. The weights of the last epoch are
kept, as the paper describes (and as Keras' ``EarlyStopping`` does by default); with
``restore_best`` those of the epoch with the lowest training loss are, which can differ when
the loss rose in the last ``patience`` epochs (benchmarks/RESULTS.md: full fine-tuning on SST-2
with the tanh model). The optimiser is AdamW (no weight decay) at a constant learning rate:
the paper names no schedule.
"""

from __future__ import annotations

import copy
import importlib.util
import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from warp_check.cases import Case, Kind
from warp_check.errors import SettingsError, WarpError
from warp_check.model.adapter import WORD_POSITION
from warp_check.validation import require_integer, require_number

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    """How the baselines train (paper §4.1). Validated on construction; errors name the field."""

    lr: float = 1e-4
    batch_size: int = 16
    max_epochs: int = 300
    patience: int = 5  # epochs without an improvement of the training loss by more than threshold
    threshold: float = 1e-6
    lora_rank: int = 2
    lora_alpha: float = 4.0
    seed: int = 0
    restore_best: bool = False  # return the weights of the lowest-loss epoch, not the last one's

    def __post_init__(self) -> None:
        for name in ("batch_size", "max_epochs", "patience", "lora_rank"):
            require_integer(name, getattr(self, name), 1)
        require_integer("seed", self.seed, 0)
        for name, allow_zero in (("lr", False), ("lora_alpha", False), ("threshold", True)):
            require_number(name, getattr(self, name), allow_zero=allow_zero)
        if not isinstance(self.restore_best, bool):
            raise SettingsError("restore_best", self.restore_best, "must be true or false")


@dataclass(frozen=True)
class Trained:
    """A baseline's trained copy of the model (plain, adapters merged) and how training went."""

    method: str  # "lora" | "full_ft"
    model: Any  # the trained transformers model, eval mode
    trainable_parameters: int
    epochs: int
    stop_reason: str  # "early_stopping" | "max_epochs"
    losses: tuple[float, ...]  # training loss per epoch
    seconds: float
    kept_epoch: int  # whose weights the model has: the last epoch, or the best with restore_best


Progress = Callable[[str], None]


def require_peft() -> None:
    """Raise a WarpError saying how to install peft, when the LoRA baseline cannot run."""
    if importlib.util.find_spec("peft") is None:
        raise WarpError(
            "the LoRA baseline needs peft, which is not installed: pip install 'warp-check[compare]' "
            "(or leave lora out of --methods)"
        )


# Called after each training epoch with (epoch, its mean training loss, the model with that epoch's
# weights in place): what scores a baseline epoch by epoch. Training sets train() again before the
# next epoch, so a hook may switch to eval() (no dropout drawn: the run stays the baseline's own).
AfterEpoch = Callable[[int, float, Any], None]


def train_lora(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    settings: TrainSettings | None = None,
    *,
    progress: Progress | None = None,
    after_epoch: AfterEpoch | None = None,
) -> Trained:
    """Rank-r LoRA (peft, scale α/r) on the repair layer only; nothing else trains.

    Returns the model with the adapter merged into the repair layer's weight, so it is an
    ordinary model whose only changed tensor is ``<repair_layer>.weight``. ``after_epoch``: see
    :data:`AfterEpoch` (the model it is given is the unmerged one, whose forward is the merged one's).
    """
    require_peft()
    from peft import LoraConfig, get_peft_model  # the compare extra: only the LoRA baseline needs it

    settings = settings or TrainSettings()
    start = time.perf_counter()
    with _forked_rng(settings.seed, adapter.device):
        model = copy.deepcopy(adapter.model)
        config = LoraConfig(
            r=settings.lora_rank,
            lora_alpha=settings.lora_alpha,
            target_modules=[adapter.spec.repair_layer],
            lora_dropout=0.0,
            bias="none",
        )
        # No task_type: peft would then also train the classifier (modules_to_save), and the
        # paper's baseline has the same 2·r·d decision variables as WARP, no more.
        with warnings.catch_warnings():  # peft 0.21 asks transformers 5 a deprecated question
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing", category=FutureWarning)
            peft_model = get_peft_model(model, config)
        params = [p for p in peft_model.parameters() if p.requires_grad]
        fit = _fit(adapter, peft_model, params, cases, settings, "lora", progress, after_epoch)
        merged = peft_model.merge_and_unload().eval()
    return fit.trained("lora", merged, sum(p.numel() for p in params), _since(start))


def train_full(
    adapter: ClassifierAdapter,
    cases: Sequence[Case],
    settings: TrainSettings | None = None,
    *,
    progress: Progress | None = None,
    after_epoch: AfterEpoch | None = None,
) -> Trained:
    """All layers unfrozen, end to end (the paper's strongest gradient baseline); ``after_epoch``:
    see :data:`AfterEpoch`."""
    settings = settings or TrainSettings()
    start = time.perf_counter()
    with _forked_rng(settings.seed, adapter.device):
        model = copy.deepcopy(adapter.model)
        for parameter in model.parameters():
            parameter.requires_grad_(True)
        params = list(model.parameters())
        fit = _fit(adapter, model, params, cases, settings, "full_ft", progress, after_epoch)
    return fit.trained("full_ft", model.eval(), sum(p.numel() for p in params), _since(start))


def training_cases(cases: Sequence[Case]) -> list[Case]:
    """What the baselines train on: must_fix ∪ must_keep (aux is GSN-FT data, not a test)."""
    return [c for c in cases if c.kind in (Kind.MUST_FIX, Kind.MUST_KEEP)]


@dataclass(frozen=True)
class _Fit:
    losses: tuple[float, ...]
    stop_reason: str
    kept_epoch: int

    def trained(self, method: str, model: Any, trainable_parameters: int, seconds: float) -> Trained:
        return Trained(
            method=method,
            model=model,
            trainable_parameters=trainable_parameters,
            epochs=len(self.losses),
            stop_reason=self.stop_reason,
            losses=self.losses,
            seconds=seconds,
            kept_epoch=self.kept_epoch,
        )


def _fit(
    adapter,
    model,
    params,
    cases,
    settings: TrainSettings,
    name: str,
    progress: Progress | None,
    after_epoch: AfterEpoch | None = None,
) -> _Fit:
    import torch

    cases = training_cases(cases)
    if not cases:
        raise SettingsError("cases", len(cases), "the baselines need must_fix or must_keep cases to train on")
    features = adapter.tokenize([c.text for c in cases], [c.text_pair for c in cases])
    decision = adapter.decision  # what the cases' labels state, and the loss training towards them descends
    labels = torch.as_tensor(decision.answers([c.label for c in cases], adapter.num_classes), device=adapter.device)
    optimiser = torch.optim.AdamW(params, lr=settings.lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(settings.seed)
    losses: list[float] = []
    best, stale, reason = math.inf, 0, "max_epochs"
    lowest, best_state, best_epoch = math.inf, None, 0  # for restore_best: a copy of params only
    for epoch in range(1, settings.max_epochs + 1):
        model.train()
        order = torch.randperm(len(cases), generator=generator).tolist()
        total = 0.0
        for begin in range(0, len(order), settings.batch_size):
            rows = order[begin : begin + settings.batch_size]
            batch = adapter.padded([features[i] for i in rows])  # on the model's device
            logits = model(**batch).logits
            if decision.per_word:  # a row is one word: its logits are its first sub-token's
                at = torch.as_tensor([features[i][WORD_POSITION][0] for i in rows], device=logits.device)
                logits = logits[torch.arange(len(rows), device=logits.device), at]
            loss = decision.training_loss(logits, labels[rows])
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * len(rows)
        losses.append(total / len(cases))
        if progress is not None:
            progress(f"{name}: epoch {epoch}/{settings.max_epochs}, training loss {losses[-1]:.6f}")
        if after_epoch is not None:
            after_epoch(epoch, losses[-1], model)
        if settings.restore_best and losses[-1] < lowest:
            lowest, best_epoch = losses[-1], epoch
            best_state = [p.detach().clone() for p in params]
        if losses[-1] < best - settings.threshold:
            best, stale = losses[-1], 0
        else:
            stale += 1
            if stale >= settings.patience:
                reason = "early_stopping"
                break
    kept = len(losses)
    if best_state is not None and best_epoch != kept:
        with torch.no_grad():
            for parameter, saved in zip(params, best_state, strict=True):
                parameter.copy_(saved)
        kept = best_epoch
    model.eval()
    return _Fit(tuple(losses), reason, kept)


class _forked_rng:
    """Seed torch for one training run without disturbing the caller's random state (the CPU's,
    and the GPU's the model trains on: dropout draws there)."""

    def __init__(self, seed: int, device: str = "cpu") -> None:
        self.seed = seed
        self.device = device

    def __enter__(self) -> None:
        import torch

        # manual_seed seeds every GPU's generator: every one is forked, not only the model's.
        gpus = list(range(torch.cuda.device_count())) if torch.device(self.device).type == "cuda" else []
        self._fork = torch.random.fork_rng(devices=gpus)
        self._fork.__enter__()
        torch.manual_seed(self.seed)

    def __exit__(self, *exc: object) -> None:
        self._fork.__exit__(*exc)


def _since(start: float) -> float:
    return time.perf_counter() - start


__all__ = ["TrainSettings", "Trained", "train_full", "train_lora", "training_cases"]
