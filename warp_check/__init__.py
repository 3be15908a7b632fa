"""warp-check: test transformer text classifiers against behavioural suites and repair them
with guarantees (WARP: a convex QP over a low-rank update of the layer before the head).

The core never imports pytest. Every public name below loads its module on first use
(PEP 562), so ``import warp_check`` costs only the standard library: a warm check loads a
suite and answers from its cache without numpy, the solvers, hypothesis or torch.

The layers, bottom up: ``suite`` (warp.toml and case files), ``model`` (the classifier as
encoder → v → head), ``cache``, ``perturb`` (text perturbations as hypothesis strategies),
``qp`` (the repair QP and its backends), ``repair`` (the loop), ``certify`` (certificates,
verification, the saved artefact), ``runs`` (check, repair and audit of a suite, reports),
``extras`` (attacks, invariance checks, baselines).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from warp_check.cases import Case, Kind
from warp_check.errors import ArtefactError, CertificateError, ModelError, SettingsError, SuiteError, WarpError
from warp_check.qp.settings import SolverSettings
from warp_check.repair.settings import RepairSettings
from warp_check.version import __version__

if TYPE_CHECKING:  # pragma: no cover  (what type checkers see; _LAZY says the same at run time)
    from warp_check.certify.artefact import write_artefact
    from warp_check.certify.bounds import eps_star, lipschitz, local_radius
    from warp_check.certify.cases import certify_cases
    from warp_check.certify.certificate import CERTIFICATE_NAME, FORMAT, CaseCertificate, Certificate, Lipschitz
    from warp_check.certify.falsify import AttackSettings, flip_radius, monte_carlo_flip_multiplier, pgd_worst_gap
    from warp_check.certify.verify import Verification, verify
    from warp_check.extras.invariance import (
        Counterexample,
        InvarianceFailure,
        assert_moves_toward,
        assert_same_label,
        predictor,
        record_counterexamples,
        scorer,
    )
    from warp_check.model.activations import ACTIVATIONS, Activation, get_activation
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.model.encode import Encoded, encode_cases
    from warp_check.model.head import DenseHead, top_left_singular_vectors
    from warp_check.model.specs import HEAD_SPECS, HeadSpec, resolve_spec
    from warp_check.perturb import (
        WordNetUnavailable,
        case_and_punctuation,
        contractions,
        negation_preserving,
        perturbations,
        typos,
        wordnet_available,
        wordnet_synonyms,
    )
    from warp_check.qp.problem import LinearisedProblem
    from warp_check.qp.solution import QPForm, QPSolution, QPStatus
    from warp_check.qp.solve import solve
    from warp_check.repair.loop import repair_head
    from warp_check.repair.records import CaseSet, RepairResult, RepairStatus
    from warp_check.runs.evaluation import Evaluation, evaluate
    from warp_check.runs.modes import Mode, RunStatus
    from warp_check.runs.repair_cases import RepairOutcome, repair_cases
    from warp_check.runs.report import write_report
    from warp_check.runs.result import RunResult, Verdict
    from warp_check.suite.loader import Suite, load_suite

# Public name → the module that defines it, imported on first use.
_LAZY: dict[str, str] = {
    "write_artefact": "warp_check.certify.artefact",
    "eps_star": "warp_check.certify.bounds",
    "lipschitz": "warp_check.certify.bounds",
    "local_radius": "warp_check.certify.bounds",
    "certify_cases": "warp_check.certify.cases",
    "CERTIFICATE_NAME": "warp_check.certify.certificate",
    "FORMAT": "warp_check.certify.certificate",
    "CaseCertificate": "warp_check.certify.certificate",
    "Certificate": "warp_check.certify.certificate",
    "Lipschitz": "warp_check.certify.certificate",
    "AttackSettings": "warp_check.certify.falsify",
    "flip_radius": "warp_check.certify.falsify",
    "monte_carlo_flip_multiplier": "warp_check.certify.falsify",
    "pgd_worst_gap": "warp_check.certify.falsify",
    "Verification": "warp_check.certify.verify",
    "verify": "warp_check.certify.verify",
    "assert_moves_toward": "warp_check.extras.invariance",
    "assert_same_label": "warp_check.extras.invariance",
    "Counterexample": "warp_check.extras.invariance",
    "InvarianceFailure": "warp_check.extras.invariance",
    "predictor": "warp_check.extras.invariance",
    "record_counterexamples": "warp_check.extras.invariance",
    "scorer": "warp_check.extras.invariance",
    "case_and_punctuation": "warp_check.perturb",
    "contractions": "warp_check.perturb",
    "negation_preserving": "warp_check.perturb",
    "perturbations": "warp_check.perturb",
    "typos": "warp_check.perturb",
    "wordnet_available": "warp_check.perturb",
    "wordnet_synonyms": "warp_check.perturb",
    "WordNetUnavailable": "warp_check.perturb",
    "Activation": "warp_check.model.activations",
    "ACTIVATIONS": "warp_check.model.activations",
    "get_activation": "warp_check.model.activations",
    "ClassifierAdapter": "warp_check.model.adapter",
    "encode_cases": "warp_check.model.encode",
    "Encoded": "warp_check.model.encode",
    "DenseHead": "warp_check.model.head",
    "top_left_singular_vectors": "warp_check.model.head",
    "HEAD_SPECS": "warp_check.model.specs",
    "HeadSpec": "warp_check.model.specs",
    "resolve_spec": "warp_check.model.specs",
    "LinearisedProblem": "warp_check.qp.problem",
    "QPForm": "warp_check.qp.solution",
    "QPSolution": "warp_check.qp.solution",
    "QPStatus": "warp_check.qp.solution",
    "solve": "warp_check.qp.solve",
    "CaseSet": "warp_check.repair.records",
    "repair_head": "warp_check.repair.loop",
    "RepairResult": "warp_check.repair.records",
    "RepairStatus": "warp_check.repair.records",
    "evaluate": "warp_check.runs.evaluation",
    "Evaluation": "warp_check.runs.evaluation",
    "repair_cases": "warp_check.runs.repair_cases",
    "RepairOutcome": "warp_check.runs.repair_cases",
    "write_report": "warp_check.runs.report",
    "Mode": "warp_check.runs.modes",
    "RunStatus": "warp_check.runs.modes",
    "RunResult": "warp_check.runs.result",
    "Verdict": "warp_check.runs.result",
    "load_suite": "warp_check.suite.loader",
    "Suite": "warp_check.suite.loader",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'warp_check' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
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
    "Certificate",
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
    "RunStatus",
    "SettingsError",
    "SolverSettings",
    "Suite",
    "SuiteError",
    "Verdict",
    "Verification",
    "WarpError",
    "WordNetUnavailable",
    "__version__",
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
    "record_counterexamples",
    "repair_cases",
    "repair_head",
    "resolve_spec",
    "scorer",
    "solve",
    "top_left_singular_vectors",
    "typos",
    "verify",
    "wordnet_available",
    "wordnet_synonyms",
    "write_artefact",
    "write_report",
]
