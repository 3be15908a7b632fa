"""warp-check: test transformer text classifiers against behavioural suites and repair them
with guarantees (WARP: a convex QP over a low-rank update of the layer before the head).

The core never imports pytest. Every public name below loads its module on first use
(PEP 562), so ``import warp_check`` costs only the standard library: a warm check
(warp_check.warm) loads a suite and answers from its cache without numpy (0.15 s), the
solvers, hypothesis (half a second) or torch.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING

from .cases import Case, Kind
from .errors import ArtefactError, CertificateError, ModelError, SettingsError, SolverError, SuiteError, WarpError
from .settings import RepairSettings, SolverSettings

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover  (what type checkers see; _LAZY says the same at run time)
    from .activations import ACTIVATIONS, Activation, get_activation
    from .artefact import CERTIFICATE_NAME, FORMAT, read_certificate, write_artefact
    from .certify import (
        AttackSettings,
        CaseCertificate,
        Lipschitz,
        certify_cases,
        eps_star,
        flip_radius,
        lipschitz,
        local_radius,
        monte_carlo_flip_multiplier,
        pgd_worst_gap,
    )
    from .head import DenseHead, top_left_singular_vectors
    from .invariance import (
        Counterexample,
        InvarianceFailure,
        assert_moves_toward,
        assert_same_label,
        predictor,
        record_counterexamples,
        scorer,
    )
    from .model import HEAD_SPECS, ClassifierAdapter, HeadSpec, resolve_spec
    from .pipeline import Evaluation, RepairOutcome, evaluate, repair_cases
    from .qp import LinearisedProblem, QPForm, QPSolution, QPStatus, solve
    from .repair import CaseSet, RepairResult, RepairStatus, repair
    from .report import write_report
    from .representations import Encoded, encode_cases
    from .session import Mode, RunResult, Verdict
    from .strategies import (
        WordNetUnavailable,
        case_and_punctuation,
        contractions,
        negation_preserving,
        perturbations,
        typos,
        wordnet_available,
        wordnet_synonyms,
    )
    from .suite import Suite, load_suite
    from .verify import Verification, verify

# Imported on first use: submodule → its public names.
_LAZY_MODULES: dict[str, tuple[str, ...]] = {
    "activations": ("ACTIVATIONS", "Activation", "get_activation"),
    "artefact": ("CERTIFICATE_NAME", "FORMAT", "read_certificate", "write_artefact"),
    "certify": (
        "AttackSettings",
        "CaseCertificate",
        "Lipschitz",
        "certify_cases",
        "eps_star",
        "flip_radius",
        "lipschitz",
        "local_radius",
        "monte_carlo_flip_multiplier",
        "pgd_worst_gap",
    ),
    "head": ("DenseHead", "top_left_singular_vectors"),
    "invariance": (
        "Counterexample",
        "InvarianceFailure",
        "assert_moves_toward",
        "assert_same_label",
        "predictor",
        "record_counterexamples",
        "scorer",
    ),
    "model": ("HEAD_SPECS", "ClassifierAdapter", "HeadSpec", "resolve_spec"),
    "pipeline": ("Evaluation", "RepairOutcome", "evaluate", "repair_cases"),
    "qp": ("LinearisedProblem", "QPForm", "QPSolution", "QPStatus", "solve"),
    "repair": ("CaseSet", "RepairResult", "RepairStatus", "repair"),
    "report": ("write_report",),
    "representations": ("Encoded", "encode_cases"),
    "session": ("Mode", "RunResult", "Verdict"),
    "strategies": (
        "WordNetUnavailable",
        "case_and_punctuation",
        "contractions",
        "negation_preserving",
        "perturbations",
        "typos",
        "wordnet_available",
        "wordnet_synonyms",
    ),
    "suite": ("Suite", "load_suite"),
    "verify": ("Verification", "verify"),
}
_LAZY = {name: module for module, names in _LAZY_MODULES.items() for name in names}

# Functions named like the module that defines them. The import system binds a submodule on
# its package when it first loads it; loaded lazily, warp_check.verify would turn from the
# function into the module at whatever moment something first imported warp_check.verify.
_FUNCTIONS_OVER_MODULES = frozenset({"repair", "verify"})


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: object) -> None:
        if name in _FUNCTIONS_OVER_MODULES and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'warp_check' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# Everything above and in _LAZY (tests/test_package.py holds them equal).
__all__ = [
    "ACTIVATIONS",
    "Activation",
    "ArtefactError",
    "AttackSettings",
    "CERTIFICATE_NAME",
    "Case",
    "CaseCertificate",
    "CaseSet",
    "CertificateError",
    "ClassifierAdapter",
    "Counterexample",
    "DenseHead",
    "Encoded",
    "Evaluation",
    "FORMAT",
    "HEAD_SPECS",
    "HeadSpec",
    "InvarianceFailure",
    "Kind",
    "LinearisedProblem",
    "Lipschitz",
    "Mode",
    "ModelError",
    "QPForm",
    "QPSolution",
    "QPStatus",
    "RepairOutcome",
    "RepairResult",
    "RepairSettings",
    "RepairStatus",
    "RunResult",
    "SettingsError",
    "SolverError",
    "SolverSettings",
    "Suite",
    "SuiteError",
    "Verdict",
    "Verification",
    "WarpError",
    "WordNetUnavailable",
    "assert_moves_toward",
    "assert_same_label",
    "case_and_punctuation",
    "certify_cases",
    "contractions",
    "encode_cases",
    "eps_star",
    "evaluate",
    "flip_radius",
    "get_activation",
    "lipschitz",
    "load_suite",
    "local_radius",
    "monte_carlo_flip_multiplier",
    "negation_preserving",
    "perturbations",
    "pgd_worst_gap",
    "predictor",
    "read_certificate",
    "record_counterexamples",
    "repair",
    "repair_cases",
    "resolve_spec",
    "scorer",
    "solve",
    "top_left_singular_vectors",
    "verify",
    "typos",
    "wordnet_available",
    "wordnet_synonyms",
    "write_artefact",
    "write_report",
    "__version__",
]
