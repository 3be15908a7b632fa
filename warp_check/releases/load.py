"""The suite's model, loaded; what the loader says is wrong becomes a SuiteError on warp.toml."""

from __future__ import annotations

from typing import TYPE_CHECKING

from warp_check.errors import ModelError, SettingsError
from warp_check.suite.loader import Suite

if TYPE_CHECKING:  # pragma: no cover
    from warp_check.model.adapter import ClassifierAdapter


def load_adapter(suite: Suite) -> ClassifierAdapter:
    """Load the suite's model; a head WARP cannot repair is a SuiteError on ``model.layer``."""
    from warp_check.model.adapter import ClassifierAdapter

    try:
        return ClassifierAdapter.from_pretrained(
            suite.model_dir,
            layer=suite.layer,
            max_length=suite.model.max_length,
            device=suite.model.device,
            threads=suite.model.threads,
            hub=suite.hub,
            engine=suite.model.engine,
            decision=suite.decision,
        )
    except ModelError as exc:
        text = str(exc)
        if text.startswith(("model folder", "cannot load the model")):
            where = "model.path"
        elif "max_length" in text:
            where = "model.max_length"
        elif text.startswith("device="):
            where = "model.device"
        else:
            where = "model.layer"
        if where == "model.path" and suite.model_overridden:  # given by a flag: the flag names it
            raise SettingsError("model", str(suite.model_dir), text) from None
        if suite.model.factory is not None and where == "model.path":
            where = "model.factory"
        raise suite.error(where, text) from None
