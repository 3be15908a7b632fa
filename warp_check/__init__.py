"""warp-check: test transformer text classifiers against behavioural suites and repair them
with guarantees (WARP: a convex QP over a low-rank update of the layer before the head).

The core never imports pytest. The public names are one table, ``_PUBLIC`` (name -> the module that
defines it); each loads its module on first use (PEP 562, :mod:`warp_check.lazy`), so ``import
warp_check`` costs only the standard library: a warm check loads a suite and answers from its cache
without numpy, the solvers, hypothesis or torch. ``__all__`` is the table's names; the
``TYPE_CHECKING`` imports are what type checkers read, and tests/test_package.py holds them equal to
the table.

The layers, bottom up (docs/design.md has the table; tests/test_layers.py holds the imports to
it): ``decisions`` (the kinds of decision, one table); ``perturb``, ``cache``, ``serial``; ``model``
(the classifier as encoder → v → head) and ``qp`` (the repair QP and its backends); ``repair`` (its
settings and the loop); ``suite`` (warp.toml and case files, read into those settings) and
``certify`` (the certificate file, verification, the saved artefact); ``certificates`` (Cert 1–4,
one module each in one table) and ``options``; ``pipeline`` (a suite's cases through the model and
a repair); ``budget`` (a traffic budget, tune) and ``sources`` (import, split, promote, traffic);
``runs`` (check, repair and audit of a suite); ``modes`` (the run modes, one table), ``reports`` and
``extras`` (what needs an optional package: attacks, LoRA and fine-tuning baselines, invariance).
The plugin (``pytest_warp``) and the command (``cli``, ``commands``) use the names below, and
:mod:`warp_check.frontend` for what only they need (option declarations, the run modes' table,
checks made before a run's work, output helpers), which is not public API.
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports are for type checkers; __all__ is made from the table)
from __future__ import annotations

from typing import TYPE_CHECKING

from warp_check.lazy import exports
from warp_check.version import __version__

if TYPE_CHECKING:  # pragma: no cover  (what type checkers see; _PUBLIC says the same at run time)
    from warp_check.budget.tune import Candidate, CandidateScore, TuneResult, candidates, tune, write_choice
    from warp_check.cases import Case, Kind
    from warp_check.certificates.cases import certify_cases
    from warp_check.certificates.chain import ChainVerification, Link, verify_chain
    from warp_check.certificates.traffic.changes import measure_changes, traffic_inputs
    from warp_check.certificates.traffic.reading import load_traffic, read_traffic
    from warp_check.certificates.traffic.sample import Part as TrafficPart
    from warp_check.certificates.traffic.sample import TrafficSample, split_traffic
    from warp_check.certificates.traffic.sample import text_key as traffic_text_key
    from warp_check.certificates.traffic.settings import TrafficSettings
    from warp_check.certificates.verify import Verification, verify
    from warp_check.certify.artefact import write_artefact
    from warp_check.certify.binomial import change_bound
    from warp_check.certify.bounds import eps_star, lipschitz, local_radius
    from warp_check.certify.certificate import (
        CERTIFICATE_NAME,
        FORMAT,
        CaseCertificate,
        Certificate,
        Lipschitz,
        TrafficRecord,
    )
    from warp_check.certify.falsify import AttackSettings, flip_radius, monte_carlo_flip_multiplier, pgd_worst_gap
    from warp_check.data_files import ImportSettings
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
        reraise_interrupt,
    )
    from warp_check.extras.attacks import RecipeSettings, resolve_recipe, run_attack
    from warp_check.extras.baselines import TrainSettings
    from warp_check.extras.compare import CompareSettings, compare_suite, write_comparison
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
    from warp_check.model.hub_cache import HubModel, ModelSource, resolve_model
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
    from warp_check.pipeline.evaluation import Evaluation, evaluate
    from warp_check.progress import Progress, ProgressStyle
    from warp_check.qp.problem import LinearisedProblem
    from warp_check.qp.settings import SolverSettings
    from warp_check.qp.solution import QPForm, QPSolution, QPStatus
    from warp_check.qp.solve import solve
    from warp_check.releases.load import load_adapter
    from warp_check.repair.loop import repair_head
    from warp_check.repair.records import CaseSet, RepairResult, RepairStatus
    from warp_check.repair.settings import KeepChoice, NeighbourSettings, RepairSettings, SynonymUse
    from warp_check.reports.folder import REPORT_HTML, REPORT_JSON, read_report, run_from_certificate, write_report
    from warp_check.reports.releases import write_history_report
    from warp_check.runs.audit import audit
    from warp_check.runs.check import check, check_suite, check_warm
    from warp_check.runs.details import WITHOUT_SYNONYMS, RunDetails
    from warp_check.runs.history import Drawdown, LinkAnswers, chain_drawdown
    from warp_check.runs.modes import Mode, RunStatus
    from warp_check.runs.regressions import against_baseline
    from warp_check.runs.releases_history import ReleaseHistory, chain_models, release_history
    from warp_check.runs.repair import repair as repair_suite
    from warp_check.runs.repair_cases import RepairOutcome, repair_cases
    from warp_check.runs.result import TRAFFIC, Outcome, RunResult, Tally, TrafficVerdict, Verdict
    from warp_check.runs.workdir import default_cache_dir, default_out_dir, user_cache_dir, workdir
    from warp_check.sources.conll import ConllImport, import_conll, read_conll
    from warp_check.sources.importer import LabelledRow, import_cases, read_labelled
    from warp_check.sources.neighbours import add_neighbours
    from warp_check.sources.predictions import import_predicted
    from warp_check.sources.promote import promote
    from warp_check.sources.split import SplitImport, import_split
    from warp_check.sources.tagged_by_model import TaggedImport, import_tagged_by_model
    from warp_check.suite.case_files import Location
    from warp_check.suite.deferred import Deferral, budget_reason, defer_cases, restore_deferred
    from warp_check.suite.deferred_file import DeferredCase
    from warp_check.suite.init import NewSuite, init_suite
    from warp_check.suite.loader import Suite, load_suite

# The public names: name -> the module that defines it ("module:name" where it is named otherwise there,
# or where the name would be a sub-package's), imported on first use.
_PUBLIC: dict[str, str] = {
    "Case": "warp_check.cases",
    "Kind": "warp_check.cases",
    "write_artefact": "warp_check.certify.artefact",
    "change_bound": "warp_check.certify.binomial",
    "eps_star": "warp_check.certify.bounds",
    "lipschitz": "warp_check.certify.bounds",
    "local_radius": "warp_check.certify.bounds",
    "certify_cases": "warp_check.certificates.cases",
    "CaseCertificate": "warp_check.certify.certificate",
    "Certificate": "warp_check.certify.certificate",
    "CERTIFICATE_NAME": "warp_check.certify.certificate",
    "FORMAT": "warp_check.certify.certificate",
    "Lipschitz": "warp_check.certify.certificate",
    "TrafficRecord": "warp_check.certify.certificate",
    "ChainVerification": "warp_check.certificates.chain",
    "Link": "warp_check.certificates.chain",
    "verify_chain": "warp_check.certificates.chain",
    "measure_changes": "warp_check.certificates.traffic.changes",
    "traffic_inputs": "warp_check.certificates.traffic.changes",
    "AttackSettings": "warp_check.certify.falsify",
    "flip_radius": "warp_check.certify.falsify",
    "monte_carlo_flip_multiplier": "warp_check.certify.falsify",
    "pgd_worst_gap": "warp_check.certify.falsify",
    "split_traffic": "warp_check.certificates.traffic.sample",
    "traffic_text_key": "warp_check.certificates.traffic.sample:text_key",
    "TrafficPart": "warp_check.certificates.traffic.sample:Part",
    "TrafficSample": "warp_check.certificates.traffic.sample",
    "Verification": "warp_check.certificates.verify",
    "verify": "warp_check.certificates.verify",
    "ArtefactError": "warp_check.errors",
    "CertificateError": "warp_check.errors",
    "EngineError": "warp_check.errors",
    "first_line": "warp_check.errors",
    "ModelError": "warp_check.errors",
    "reraise_interrupt": "warp_check.errors",
    "SettingsError": "warp_check.errors",
    "SuiteError": "warp_check.errors",
    "WarpError": "warp_check.errors",
    "WarpWarning": "warp_check.errors",
    "RecipeSettings": "warp_check.extras.attacks",
    "resolve_recipe": "warp_check.extras.attacks",
    "run_attack": "warp_check.extras.attacks",
    "TrainSettings": "warp_check.extras.baselines",
    "compare_suite": "warp_check.extras.compare",
    "CompareSettings": "warp_check.extras.compare",
    "write_comparison": "warp_check.extras.compare",
    "import_cases": "warp_check.sources.importer",
    "ImportSettings": "warp_check.data_files",
    "LabelledRow": "warp_check.sources.importer",
    "read_labelled": "warp_check.sources.importer",
    "assert_moves_toward": "warp_check.extras.invariance",
    "assert_same_label": "warp_check.extras.invariance",
    "Counterexample": "warp_check.extras.invariance",
    "InvarianceFailure": "warp_check.extras.invariance",
    "predictor": "warp_check.extras.invariance",
    "record_counterexamples": "warp_check.extras.invariance",
    "scorer": "warp_check.extras.invariance",
    "add_neighbours": "warp_check.sources.neighbours",
    "import_predicted": "warp_check.sources.predictions",
    "promote": "warp_check.sources.promote",
    "defer_cases": "warp_check.suite.deferred",
    "restore_deferred": "warp_check.suite.deferred",
    "budget_reason": "warp_check.suite.deferred",
    "Deferral": "warp_check.suite.deferred",
    "DeferredCase": "warp_check.suite.deferred_file",
    "import_split": "warp_check.sources.split",
    "import_conll": "warp_check.sources.conll",
    "read_conll": "warp_check.sources.conll",
    "ConllImport": "warp_check.sources.conll",
    "SplitImport": "warp_check.sources.split",
    "import_tagged_by_model": "warp_check.sources.tagged_by_model",
    "TaggedImport": "warp_check.sources.tagged_by_model",
    "load_traffic": "warp_check.certificates.traffic.reading",
    "read_traffic": "warp_check.certificates.traffic.reading",
    "Activation": "warp_check.model.activations",
    "ACTIVATIONS": "warp_check.model.activations",
    "get_activation": "warp_check.model.activations",
    "ClassifierAdapter": "warp_check.model.adapter",
    "encode_cases": "warp_check.model.encode",
    "Encoded": "warp_check.model.encode",
    "DenseHead": "warp_check.model.head",
    "top_left_singular_vectors": "warp_check.model.head",
    "HubModel": "warp_check.model.hub_cache",
    "ModelSource": "warp_check.model.hub_cache",
    "resolve_model": "warp_check.model.hub_cache",
    "HEAD_SPECS": "warp_check.model.specs",
    "HeadSpec": "warp_check.model.specs",
    "resolve_spec": "warp_check.model.specs",
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
    "LinearisedProblem": "warp_check.qp.problem",
    "SolverSettings": "warp_check.qp.settings",
    "QPForm": "warp_check.qp.solution",
    "QPSolution": "warp_check.qp.solution",
    "QPStatus": "warp_check.qp.solution",
    "solve": "warp_check.qp.solve",
    "repair_head": "warp_check.repair.loop",
    "CaseSet": "warp_check.repair.records",
    "RepairResult": "warp_check.repair.records",
    "RepairStatus": "warp_check.repair.records",
    "KeepChoice": "warp_check.repair.settings",
    "NeighbourSettings": "warp_check.repair.settings",
    "RepairSettings": "warp_check.repair.settings",
    "SynonymUse": "warp_check.repair.settings",
    "audit": "warp_check.runs.audit",
    "check": "warp_check.runs.check",
    "check_suite": "warp_check.runs.check",
    "check_warm": "warp_check.runs.check",
    "RunDetails": "warp_check.runs.details",
    "WITHOUT_SYNONYMS": "warp_check.runs.details",
    "evaluate": "warp_check.pipeline.evaluation",
    "Evaluation": "warp_check.pipeline.evaluation",
    "chain_drawdown": "warp_check.runs.history",
    "Drawdown": "warp_check.runs.history",
    "LinkAnswers": "warp_check.runs.history",
    "ReleaseHistory": "warp_check.runs.releases_history",
    "chain_models": "warp_check.runs.releases_history",
    "release_history": "warp_check.runs.releases_history",
    "write_history_report": "warp_check.reports.releases",
    "load_adapter": "warp_check.releases.load",
    "Mode": "warp_check.runs.modes",
    "RunStatus": "warp_check.runs.modes",
    "against_baseline": "warp_check.runs.regressions",
    "repair_suite": "warp_check.runs.repair:repair",
    "repair_cases": "warp_check.runs.repair_cases",
    "RepairOutcome": "warp_check.runs.repair_cases",
    "read_report": "warp_check.reports.folder",
    "REPORT_HTML": "warp_check.reports.folder",
    "REPORT_JSON": "warp_check.reports.folder",
    "run_from_certificate": "warp_check.reports.folder",
    "write_report": "warp_check.reports.folder",
    "Outcome": "warp_check.runs.result",
    "RunResult": "warp_check.runs.result",
    "Tally": "warp_check.runs.result",
    "TRAFFIC": "warp_check.runs.result",
    "TrafficVerdict": "warp_check.runs.result",
    "Verdict": "warp_check.runs.result",
    "Candidate": "warp_check.budget.tune",
    "candidates": "warp_check.budget.tune",
    "CandidateScore": "warp_check.budget.tune",
    "tune": "warp_check.budget.tune",
    "TuneResult": "warp_check.budget.tune",
    "write_choice": "warp_check.budget.tune",
    "default_cache_dir": "warp_check.runs.workdir",
    "default_out_dir": "warp_check.runs.workdir",
    "user_cache_dir": "warp_check.runs.workdir",
    "workdir": "warp_check.runs.workdir",
    "Location": "warp_check.suite.case_files",
    "init_suite": "warp_check.suite.init",
    "NewSuite": "warp_check.suite.init",
    "load_suite": "warp_check.suite.loader",
    "Suite": "warp_check.suite.loader",
    "TrafficSettings": "warp_check.certificates.traffic.settings",
}

__getattr__, __dir__ = exports(_PUBLIC, globals())
__all__ = ["__version__", *_PUBLIC]
