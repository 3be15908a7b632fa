"""warp-check: test transformer text classifiers against behavioural suites and repair them
with guarantees (WARP: a convex QP over a low-rank update of the layer before the head).

The core never imports pytest. Every public name below loads its module on first use
(PEP 562), so ``import warp_check`` costs only the standard library: a warm check loads a
suite and answers from its cache without numpy, the solvers, hypothesis or torch.

The layers, bottom up (docs/design.md has the table; tests/test_layers.py holds the imports to
it): ``perturb``, ``cache``, ``serial``; ``model`` (the classifier as encoder → v → head) and ``qp``
(the repair QP and its backends); ``repair`` (its settings and the loop); ``suite`` (warp.toml and
case files, read into those settings) and ``certify`` (certificates, verification, the saved
artefact); ``options`` and ``runs`` (check, repair and audit of a suite, reports); ``modes`` (the
run modes, one table) and ``extras`` (attacks, invariance checks, baselines, import, promote).
The plugin (``pytest_warp``) and the command (``cli``, ``commands``) use the names below.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from warp_check.cases import Case, Kind
from warp_check.errors import (
    ArtefactError,
    CertificateError,
    EngineError,
    ModelError,
    SettingsError,
    SuiteError,
    WarpError,
    WarpWarning,
    first_line,
    from_interrupt,
    reraise_interrupt,
)
from warp_check.qp.settings import SolverSettings
from warp_check.repair.settings import KeepChoice, NeighbourSettings, RepairSettings, SynonymUse
from warp_check.version import __version__

if TYPE_CHECKING:  # pragma: no cover  (what type checkers see; _LAZY says the same at run time)
    from warp_check.cache.warm import WarmEntry
    from warp_check.certify.artefact import write_artefact
    from warp_check.certify.binomial import change_bound
    from warp_check.certify.bounds import eps_star, lipschitz, local_radius
    from warp_check.certify.cases import certify_cases
    from warp_check.certify.certificate import (
        CERTIFICATE_NAME,
        FORMAT,
        CaseCertificate,
        Certificate,
        Lipschitz,
        TrafficRecord,
    )
    from warp_check.certify.chain import ChainVerification, Link, verify_chain
    from warp_check.certify.changes import measure_changes, traffic_inputs
    from warp_check.certify.falsify import AttackSettings, flip_radius, monte_carlo_flip_multiplier, pgd_worst_gap
    from warp_check.certify.traffic import Part as TrafficPart
    from warp_check.certify.traffic import TrafficSample, split_traffic
    from warp_check.certify.traffic import text_key as traffic_text_key
    from warp_check.certify.verify import Verification, verify
    from warp_check.extras.attacks import STATUS_MEANING as ATTACK_STATUS_MEANING
    from warp_check.extras.attacks import STATUSES as ATTACK_STATUSES
    from warp_check.extras.attacks import RecipeSettings, resolve_recipe, run_attack
    from warp_check.extras.attacks import check_out as check_attack_out
    from warp_check.extras.attacks import check_ready as check_recipe_ready
    from warp_check.extras.attacks import default_out as must_fix_file
    from warp_check.extras.baselines import TrainSettings
    from warp_check.extras.compare import METHODS as COMPARE_METHODS
    from warp_check.extras.compare import CompareSettings, compare_suite, write_comparison
    from warp_check.extras.compare import check_out_path as check_comparison_out
    from warp_check.extras.importer import (
        ADVGLUE_FIELDS,
        ImportSettings,
        LabelledRow,
        case_file_of,
        import_cases,
        read_labelled,
    )
    from warp_check.extras.importer import FORMATS as IMPORT_FORMATS
    from warp_check.extras.importer import format_of as import_format_of
    from warp_check.extras.invariance import (
        Counterexample,
        InvarianceFailure,
        assert_moves_toward,
        assert_same_label,
        predictor,
        record_counterexamples,
        scorer,
    )
    from warp_check.extras.neighbours import add_neighbours
    from warp_check.extras.predictions import import_predicted
    from warp_check.extras.promote import promote
    from warp_check.extras.split import SplitImport, import_split
    from warp_check.extras.traffic import load_traffic, read_traffic
    from warp_check.model.activations import ACTIVATIONS, Activation, get_activation
    from warp_check.model.adapter import ClassifierAdapter
    from warp_check.model.encode import Encoded, encode_cases
    from warp_check.model.head import DenseHead, top_left_singular_vectors
    from warp_check.model.hub_cache import HUB_ID, HubModel, ModelSource, resolve_model
    from warp_check.model.specs import HEAD_SPECS, HeadSpec, resolve_spec
    from warp_check.modes import MODES, RunJob, RunMode, mode_named
    from warp_check.options import (
        OPTION,
        OPTIONS,
        BadValue,
        Option,
        Problem,
        ValueKind,
        check_repair_overrides,
        check_traffic_overrides,
        overriding,
        setting_flags,
    )
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
    from warp_check.progress import Progress, ProgressStyle, write_text
    from warp_check.qp.problem import LinearisedProblem
    from warp_check.qp.solution import QPForm, QPSolution, QPStatus
    from warp_check.qp.solve import solve
    from warp_check.repair.loop import repair_head
    from warp_check.repair.records import CaseSet, RepairResult, RepairStatus
    from warp_check.runs.audit import audit
    from warp_check.runs.check import check, check_suite, check_warm, warm_entry
    from warp_check.runs.details import WITHOUT_SYNONYMS, RunDetails
    from warp_check.runs.evaluation import Evaluation, evaluate
    from warp_check.runs.history import Drawdown, LinkAnswers, chain_drawdown
    from warp_check.runs.load import load_adapter
    from warp_check.runs.modes import Mode, RunStatus
    from warp_check.runs.notices import collected as collected_notices
    from warp_check.runs.regressions import against_baseline
    from warp_check.runs.repair import repair as repair_suite
    from warp_check.runs.repair_cases import RepairOutcome, repair_cases
    from warp_check.runs.report import (
        REPORT_HTML,
        REPORT_JSON,
        check_report_destination,
        read_report,
        run_from_certificate,
        write_report,
    )
    from warp_check.runs.result import TRAFFIC, Outcome, RunResult, Tally, TrafficVerdict, Verdict, tally
    from warp_check.runs.tune import DEFAULT_FOLDS as TUNE_FOLDS
    from warp_check.runs.tune import Candidate, CandidateScore, TuneResult, candidates, check_tune, tune, write_choice
    from warp_check.runs.workdir import default_cache_dir, default_out_dir, model_cache_dir, user_cache_dir, workdir
    from warp_check.suite.case_files import Location
    from warp_check.suite.init import NewSuite, init_suite
    from warp_check.suite.loader import SUITE_FILE, Suite, load_suite
    from warp_check.suite.traffic import TrafficSettings

# Public name → the module that defines it ("module:name" where it is named otherwise there, or where the
# name would be a sub-package's), imported on first use.
_LAZY: dict[str, str] = {
    "TRAFFIC": "warp_check.runs.result",
    "TrafficPart": "warp_check.certify.traffic:Part",
    "TrafficRecord": "warp_check.certify.certificate",
    "TrafficSample": "warp_check.certify.traffic",
    "TrafficSettings": "warp_check.suite.traffic",
    "TrafficVerdict": "warp_check.runs.result",
    "change_bound": "warp_check.certify.binomial",
    "check_traffic_overrides": "warp_check.options",
    "load_traffic": "warp_check.extras.traffic",
    "measure_changes": "warp_check.certify.changes",
    "read_traffic": "warp_check.extras.traffic",
    "split_traffic": "warp_check.certify.traffic",
    "traffic_inputs": "warp_check.certify.changes",
    "traffic_text_key": "warp_check.certify.traffic:text_key",
    "WarmEntry": "warp_check.cache.warm",
    "write_artefact": "warp_check.certify.artefact",
    "eps_star": "warp_check.certify.bounds",
    "lipschitz": "warp_check.certify.bounds",
    "local_radius": "warp_check.certify.bounds",
    "certify_cases": "warp_check.certify.cases",
    "CaseCertificate": "warp_check.certify.certificate",
    "Certificate": "warp_check.certify.certificate",
    "CERTIFICATE_NAME": "warp_check.certify.certificate",
    "FORMAT": "warp_check.certify.certificate",
    "Lipschitz": "warp_check.certify.certificate",
    "verify_chain": "warp_check.certify.chain",
    "ChainVerification": "warp_check.certify.chain",
    "Link": "warp_check.certify.chain",
    "AttackSettings": "warp_check.certify.falsify",
    "flip_radius": "warp_check.certify.falsify",
    "monte_carlo_flip_multiplier": "warp_check.certify.falsify",
    "pgd_worst_gap": "warp_check.certify.falsify",
    "Verification": "warp_check.certify.verify",
    "verify": "warp_check.certify.verify",
    "ATTACK_STATUS_MEANING": "warp_check.extras.attacks:STATUS_MEANING",
    "ATTACK_STATUSES": "warp_check.extras.attacks:STATUSES",
    "check_attack_out": "warp_check.extras.attacks:check_out",
    "check_recipe_ready": "warp_check.extras.attacks:check_ready",
    "must_fix_file": "warp_check.extras.attacks:default_out",
    "RecipeSettings": "warp_check.extras.attacks",
    "resolve_recipe": "warp_check.extras.attacks",
    "run_attack": "warp_check.extras.attacks",
    "TrainSettings": "warp_check.extras.baselines",
    "check_comparison_out": "warp_check.extras.compare:check_out_path",
    "COMPARE_METHODS": "warp_check.extras.compare:METHODS",
    "compare_suite": "warp_check.extras.compare",
    "CompareSettings": "warp_check.extras.compare",
    "write_comparison": "warp_check.extras.compare",
    "ADVGLUE_FIELDS": "warp_check.extras.importer",
    "import_cases": "warp_check.extras.importer",
    "import_format_of": "warp_check.extras.importer:format_of",
    "IMPORT_FORMATS": "warp_check.extras.importer:FORMATS",
    "ImportSettings": "warp_check.extras.importer",
    "case_file_of": "warp_check.extras.importer",
    "LabelledRow": "warp_check.extras.importer",
    "read_labelled": "warp_check.extras.importer",
    "assert_moves_toward": "warp_check.extras.invariance",
    "assert_same_label": "warp_check.extras.invariance",
    "Counterexample": "warp_check.extras.invariance",
    "InvarianceFailure": "warp_check.extras.invariance",
    "predictor": "warp_check.extras.invariance",
    "record_counterexamples": "warp_check.extras.invariance",
    "scorer": "warp_check.extras.invariance",
    "add_neighbours": "warp_check.extras.neighbours",
    "import_predicted": "warp_check.extras.predictions",
    "promote": "warp_check.extras.promote",
    "SplitImport": "warp_check.extras.split",
    "import_split": "warp_check.extras.split",
    "Activation": "warp_check.model.activations",
    "ACTIVATIONS": "warp_check.model.activations",
    "get_activation": "warp_check.model.activations",
    "ClassifierAdapter": "warp_check.model.adapter",
    "encode_cases": "warp_check.model.encode",
    "Encoded": "warp_check.model.encode",
    "DenseHead": "warp_check.model.head",
    "top_left_singular_vectors": "warp_check.model.head",
    "HUB_ID": "warp_check.model.hub_cache",
    "HubModel": "warp_check.model.hub_cache",
    "ModelSource": "warp_check.model.hub_cache",
    "resolve_model": "warp_check.model.hub_cache",
    "HEAD_SPECS": "warp_check.model.specs",
    "HeadSpec": "warp_check.model.specs",
    "resolve_spec": "warp_check.model.specs",
    "mode_named": "warp_check.modes",
    "MODES": "warp_check.modes",
    "RunJob": "warp_check.modes",
    "RunMode": "warp_check.modes",
    "BadValue": "warp_check.options",
    "check_repair_overrides": "warp_check.options",
    "OPTION": "warp_check.options",
    "Option": "warp_check.options",
    "OPTIONS": "warp_check.options",
    "overriding": "warp_check.options",
    "Problem": "warp_check.options",
    "setting_flags": "warp_check.options",
    "ValueKind": "warp_check.options",
    "case_and_punctuation": "warp_check.perturb",
    "contractions": "warp_check.perturb",
    "negation_preserving": "warp_check.perturb",
    "perturbations": "warp_check.perturb",
    "typos": "warp_check.perturb",
    "wordnet_available": "warp_check.perturb",
    "wordnet_synonyms": "warp_check.perturb",
    "WordNetUnavailable": "warp_check.perturb",
    "Progress": "warp_check.progress",
    "ProgressStyle": "warp_check.progress",
    "write_text": "warp_check.progress",
    "LinearisedProblem": "warp_check.qp.problem",
    "QPForm": "warp_check.qp.solution",
    "QPSolution": "warp_check.qp.solution",
    "QPStatus": "warp_check.qp.solution",
    "solve": "warp_check.qp.solve",
    "repair_head": "warp_check.repair.loop",
    "CaseSet": "warp_check.repair.records",
    "RepairResult": "warp_check.repair.records",
    "RepairStatus": "warp_check.repair.records",
    "audit": "warp_check.runs.audit",
    "check": "warp_check.runs.check",
    "check_suite": "warp_check.runs.check",
    "check_warm": "warp_check.runs.check",
    "warm_entry": "warp_check.runs.check",
    "RunDetails": "warp_check.runs.details",
    "WITHOUT_SYNONYMS": "warp_check.runs.details",
    "evaluate": "warp_check.runs.evaluation",
    "Evaluation": "warp_check.runs.evaluation",
    "load_adapter": "warp_check.runs.load",
    "Mode": "warp_check.runs.modes",
    "RunStatus": "warp_check.runs.modes",
    "collected_notices": "warp_check.runs.notices:collected",
    "repair_cases": "warp_check.runs.repair_cases",
    "Candidate": "warp_check.runs.tune",
    "CandidateScore": "warp_check.runs.tune",
    "TuneResult": "warp_check.runs.tune",
    "TUNE_FOLDS": "warp_check.runs.tune:DEFAULT_FOLDS",
    "candidates": "warp_check.runs.tune",
    "tune": "warp_check.runs.tune",
    "write_choice": "warp_check.runs.tune",
    "check_tune": "warp_check.runs.tune",
    "RepairOutcome": "warp_check.runs.repair_cases",
    "Drawdown": "warp_check.runs.history",
    "LinkAnswers": "warp_check.runs.history",
    "chain_drawdown": "warp_check.runs.history",
    "against_baseline": "warp_check.runs.regressions",
    "repair_suite": "warp_check.runs.repair:repair",
    "check_report_destination": "warp_check.runs.report",
    "REPORT_HTML": "warp_check.runs.report",
    "REPORT_JSON": "warp_check.runs.report",
    "run_from_certificate": "warp_check.runs.report",
    "write_report": "warp_check.runs.report",
    "read_report": "warp_check.runs.report",
    "Outcome": "warp_check.runs.result",
    "RunResult": "warp_check.runs.result",
    "Verdict": "warp_check.runs.result",
    "Tally": "warp_check.runs.result",
    "tally": "warp_check.runs.result",
    "default_cache_dir": "warp_check.runs.workdir",
    "default_out_dir": "warp_check.runs.workdir",
    "model_cache_dir": "warp_check.runs.workdir",
    "user_cache_dir": "warp_check.runs.workdir",
    "workdir": "warp_check.runs.workdir",
    "Location": "warp_check.suite.case_files",
    "NewSuite": "warp_check.suite.init",
    "init_suite": "warp_check.suite.init",
    "load_suite": "warp_check.suite.loader",
    "Suite": "warp_check.suite.loader",
    "SUITE_FILE": "warp_check.suite.loader",
}


def __getattr__(name: str):
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'warp_check' has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


# Everything above and in _LAZY (tests/test_package.py holds them equal).
__all__ = [
    "ACTIVATIONS",
    "ADVGLUE_FIELDS",
    "ATTACK_STATUSES",
    "ATTACK_STATUS_MEANING",
    "Activation",
    "ArtefactError",
    "AttackSettings",
    "BadValue",
    "CERTIFICATE_NAME",
    "COMPARE_METHODS",
    "Case",
    "CaseCertificate",
    "CaseSet",
    "Certificate",
    "CertificateError",
    "ChainVerification",
    "ClassifierAdapter",
    "CompareSettings",
    "Counterexample",
    "DenseHead",
    "Drawdown",
    "Encoded",
    "EngineError",
    "Evaluation",
    "FORMAT",
    "HEAD_SPECS",
    "HUB_ID",
    "HeadSpec",
    "HubModel",
    "IMPORT_FORMATS",
    "ImportSettings",
    "InvarianceFailure",
    "KeepChoice",
    "Kind",
    "LabelledRow",
    "LinearisedProblem",
    "Link",
    "LinkAnswers",
    "Lipschitz",
    "Location",
    "MODES",
    "Mode",
    "ModelError",
    "ModelSource",
    "NeighbourSettings",
    "NewSuite",
    "OPTION",
    "OPTIONS",
    "Option",
    "Outcome",
    "Problem",
    "Progress",
    "ProgressStyle",
    "write_text",
    "QPForm",
    "QPSolution",
    "QPStatus",
    "REPORT_HTML",
    "REPORT_JSON",
    "RecipeSettings",
    "RepairOutcome",
    "RepairResult",
    "RepairSettings",
    "RepairStatus",
    "RunDetails",
    "RunJob",
    "RunMode",
    "RunResult",
    "RunStatus",
    "SUITE_FILE",
    "SettingsError",
    "SolverSettings",
    "SplitImport",
    "Suite",
    "SuiteError",
    "SynonymUse",
    "Tally",
    "TRAFFIC",
    "TrafficPart",
    "TrafficRecord",
    "TrafficSample",
    "TrafficSettings",
    "TrafficVerdict",
    "TrainSettings",
    "ValueKind",
    "Verdict",
    "Verification",
    "WITHOUT_SYNONYMS",
    "WarmEntry",
    "WarpError",
    "WarpWarning",
    "WordNetUnavailable",
    "__version__",
    "add_neighbours",
    "against_baseline",
    "assert_moves_toward",
    "assert_same_label",
    "audit",
    "case_and_punctuation",
    "case_file_of",
    "certify_cases",
    "chain_drawdown",
    "change_bound",
    "check",
    "check_attack_out",
    "check_comparison_out",
    "check_recipe_ready",
    "check_repair_overrides",
    "check_report_destination",
    "check_suite",
    "check_traffic_overrides",
    "check_warm",
    "collected_notices",
    "compare_suite",
    "contractions",
    "default_cache_dir",
    "default_out_dir",
    "encode_cases",
    "eps_star",
    "evaluate",
    "first_line",
    "flip_radius",
    "from_interrupt",
    "get_activation",
    "import_cases",
    "import_format_of",
    "import_predicted",
    "import_split",
    "init_suite",
    "lipschitz",
    "load_adapter",
    "load_suite",
    "load_traffic",
    "local_radius",
    "measure_changes",
    "mode_named",
    "model_cache_dir",
    "monte_carlo_flip_multiplier",
    "must_fix_file",
    "negation_preserving",
    "overriding",
    "perturbations",
    "pgd_worst_gap",
    "predictor",
    "promote",
    "read_labelled",
    "read_report",
    "read_traffic",
    "record_counterexamples",
    "repair_cases",
    "Candidate",
    "CandidateScore",
    "TuneResult",
    "TUNE_FOLDS",
    "candidates",
    "tune",
    "write_choice",
    "check_tune",
    "repair_head",
    "repair_suite",
    "reraise_interrupt",
    "resolve_model",
    "resolve_recipe",
    "resolve_spec",
    "run_attack",
    "run_from_certificate",
    "scorer",
    "setting_flags",
    "solve",
    "split_traffic",
    "tally",
    "top_left_singular_vectors",
    "traffic_inputs",
    "traffic_text_key",
    "typos",
    "user_cache_dir",
    "verify",
    "verify_chain",
    "warm_entry",
    "wordnet_available",
    "wordnet_synonyms",
    "workdir",
    "write_artefact",
    "write_comparison",
    "write_report",
]
