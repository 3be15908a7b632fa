"""Releases of the tiny model for the tests that span them: a copy whose classifier leans one way,
as a release fine-tuned elsewhere that broke some of the last one's cases."""

from __future__ import annotations

import shutil
from pathlib import Path


def leaning(source: Path, out: Path, shift: float) -> Path:
    """A copy of ``source`` whose classifier bias leans ``shift`` towards class 1 ('positive'), so it
    gets some of the negative cases ``source`` got right wrong; its certificate (if any) copied as it was."""
    from safetensors.torch import load_file, save_file

    out = Path(shutil.copytree(source, out))
    weights = load_file(str(out / "model.safetensors"))
    weights["classifier.bias"] += weights["classifier.bias"].new_tensor([-shift, shift])
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out
