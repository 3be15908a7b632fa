"""A suite's baseline model (the last release): what its folder must be (a saved model with the
suite's classes), and the suite loaded on it, whose check is the one computation the regression gate
(:mod:`warp_check.modes.baseline`) and a repair's restored regressions (:mod:`warp_check.modes.repair`)
share. Apart from :mod:`warp_check.releases.restore`, so that the gate needs neither the chain of
certificates nor numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from warp_check.errors import ModelError
from warp_check.model.loading import read_config
from warp_check.suite.loader import Suite, load_suite
from warp_check.suite.model_source import model_labels
from warp_check.suite.toml_lines import SuiteToml


def check_baseline(suite: Suite, baseline: str | Path) -> None:
    """Refuse, before any work, a baseline that cannot answer the suite's cases as the model under
    test does: a folder without a model (config.json, weights) or whose classes are not the suite's.
    Loading the suite on it would blame warp.toml's model.path, or the suite's case files for a label
    the baseline does not name ("unknown label 'positive'"), for what is the baseline's."""
    folder = Path(baseline)
    where = f"the baseline {folder}"
    if not folder.is_dir():
        raise ModelError(f"{where} is not a folder (the last release's model)")
    if not (folder / "config.json").is_file():
        raise ModelError(f"{where} has no config.json: a baseline is a saved model folder (config.json and weights)")
    if not any(folder.glob("*.safetensors")) and not any(folder.glob("pytorch_model*.bin")):
        raise ModelError(
            f"{where} has no weights (*.safetensors): a baseline is a saved model folder; copy the release's "
            "weights into it or name the folder that holds them"
        )
    try:
        read_config(folder)
    except ModelError as exc:
        raise ModelError(f"the baseline's {exc}") from None
    id2label, classes = model_labels(SuiteToml(suite.toml), folder)
    if classes is not None and suite.num_classes is not None and classes != suite.num_classes:
        raise ModelError(
            f"{where} has {classes} classes, the model under test {suite.num_classes}: a baseline must be "
            "a release of the same classifier, with the same classes"
        )
    theirs = {name: index for index, name in sorted(id2label.items())}
    if _names_its_labels(suite) or theirs == suite.labels:
        return  # the suite's [labels] name the classes: the models' own names do not matter
    raise ModelError(
        f"{where}: its labels are {_shown(theirs)}, the suite's (and the model under test's) "
        f"{_shown(suite.labels)}: a baseline must name the same labels; save it with the model under "
        "test's id2label and label2id in its config.json, or name the classes in the suite's [labels]"
    )


def _names_its_labels(suite: Suite) -> bool:
    """Whether warp.toml names the classes (``[labels]``, ``labels = [...]``) instead of the model."""
    return any(key == "labels" or key.startswith("labels.") for key in suite.key_lines)


def _shown(labels: dict[str, int]) -> str:
    """Label names in class order ("LABEL_0, LABEL_1"), or that the model names none."""
    return ", ".join(sorted(labels, key=labels.__getitem__)) or "none (config.json has no id2label)"


def suite_on_baseline(suite: Suite, baseline: str | Path, compute: Mapping[str, Any] | None = None) -> Suite:
    """``suite`` loaded on the model folder ``baseline`` (refused first by :func:`check_baseline`),
    its encoder run as ``compute`` says (device, batch_size, threads)."""
    check_baseline(suite, baseline)
    on_baseline = load_suite(suite.toml, model=baseline)
    return on_baseline.with_compute(**compute) if compute else on_baseline


__all__ = ["check_baseline", "suite_on_baseline"]
