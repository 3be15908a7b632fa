"""warp-check: test transformer text classifiers against behavioural suites and repair them
with guarantees (WARP: a convex QP over a low-rank update of the layer before the head).

The core never imports pytest; heavy libraries (torch, transformers, osqp) load lazily, and so
do the hypothesis-based helpers (``strategies``, ``invariance``): importing hypothesis costs half
a second, which a warm check (warp_check.warm) does not pay.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .activations import ACTIVATIONS, Activation, get_activation
from .artefact import CERTIFICATE_NAME, FORMAT, read_certificate, write_artefact
from .cases import Case, Kind
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
from .errors import (
    ArtefactError,
    CertificateError,
    ModelError,
    SettingsError,
    SolverError,
    SuiteError,
    WarpError,
)
from .head import DenseHead, top_left_singular_vectors
from .model import HEAD_SPECS, ClassifierAdapter, HeadSpec, resolve_spec
from .pipeline import Evaluation, RepairOutcome, evaluate, repair_cases
from .qp import LinearisedProblem, QPForm, QPSolution, QPStatus, SolverSettings, solve
from .repair import CaseSet, RepairResult, RepairSettings, RepairStatus, repair
from .report import write_report
from .representations import Encoded, encode_cases
from .session import Mode, RunResult, Verdict
from .suite import Suite, load_suite
from .verify import Verification, verify

# Imported on first use (PEP 562): name → submodule.
_LAZY = {
    **dict.fromkeys(
        (
            "Counterexample",
            "InvarianceFailure",
            "assert_moves_toward",
            "assert_same_label",
            "predictor",
            "record_counterexamples",
            "scorer",
        ),
        "invariance",
    ),
    **dict.fromkeys(
        (
            "WordNetUnavailable",
            "case_and_punctuation",
            "contractions",
            "negation_preserving",
            "perturbations",
            "typos",
            "wordnet_available",
            "wordnet_synonyms",
        ),
        "strategies",
    ),
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'warp_check' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

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
    "ModelError",
    "Mode",
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
    "certify_cases",
    "encode_cases",
    "eps_star",
    "evaluate",
    "flip_radius",
    "get_activation",
    "lipschitz",
    "load_suite",
    "local_radius",
    "monte_carlo_flip_multiplier",
    "pgd_worst_gap",
    "read_certificate",
    "repair",
    "repair_cases",
    "resolve_spec",
    "solve",
    "top_left_singular_vectors",
    "verify",
    "write_artefact",
    "write_report",
    "__version__",
    "assert_moves_toward",
    "assert_same_label",
    "case_and_punctuation",
    "contractions",
    "negation_preserving",
    "perturbations",
    "predictor",
    "record_counterexamples",
    "scorer",
    "typos",
    "wordnet_available",
    "wordnet_synonyms",
]
