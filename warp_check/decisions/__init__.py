"""Kinds of decision: what a prediction is, what a case asks, and the margins a repair lifts.

:data:`~warp_check.decisions.registry.DECISIONS` holds them by name; single-label argmax is the
first. A new kind is one module (a :class:`~warp_check.decisions.base.DecisionKind`) and one
``register`` call.
"""

from warp_check.decisions.base import Column, DecisionKind, LabelSpace, Margins
from warp_check.decisions.registry import DECISIONS, deciding, decision, register
from warp_check.decisions.single_label import SingleLabel

SINGLE_LABEL = DECISIONS[SingleLabel.name]

__all__ = [
    "DECISIONS",
    "SINGLE_LABEL",
    "Column",
    "DecisionKind",
    "LabelSpace",
    "Margins",
    "SingleLabel",
    "deciding",
    "decision",
    "register",
]
