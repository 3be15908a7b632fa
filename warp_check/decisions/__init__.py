"""Kinds of decision: what a prediction is, what a case asks, and the margins a repair lifts.

:data:`~warp_check.decisions.registry.DECISIONS` holds them by name; single-label argmax is the
first. A new kind is one module (a :class:`~warp_check.decisions.base.DecisionKind`) and one
``register`` call.
"""

from warp_check.decisions.base import (
    AnswerError,
    Conflict,
    Constraints,
    DecisionKind,
    LabelF1,
    LabelSpace,
    Margins,
    PartAnswer,
    PartChange,
    logit_of,
)
from warp_check.decisions.multi_label import MultiLabel
from warp_check.decisions.registry import DECISIONS, answer_fields, deciding, deciding_config, decision, register
from warp_check.decisions.single_label import SingleLabel
from warp_check.decisions.token_tags import TokenTags

SINGLE_LABEL = DECISIONS[SingleLabel.name]
MULTI_LABEL = DECISIONS[MultiLabel.name]
TOKEN_TAGS = DECISIONS[TokenTags.name]

__all__ = [
    "DECISIONS",
    "MULTI_LABEL",
    "SINGLE_LABEL",
    "TOKEN_TAGS",
    "AnswerError",
    "Conflict",
    "Constraints",
    "DecisionKind",
    "LabelF1",
    "LabelSpace",
    "Margins",
    "MultiLabel",
    "PartAnswer",
    "PartChange",
    "SingleLabel",
    "TokenTags",
    "answer_fields",
    "deciding",
    "deciding_config",
    "decision",
    "logit_of",
    "register",
]
