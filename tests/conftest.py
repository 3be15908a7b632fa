"""Shared fixtures: tiny trained HF classifiers (built once per run) and per-test determinism."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from pathlib import Path

# The tests pin numbers a CPU computes (which variants a tiny model gets wrong, which head form
# converges, a cache read back bit for bit): on a GPU, device = "auto" moves them by a few ulps and
# some tests with them (seen on an H100). Hidden from the tests, and from the pytest runs they start,
# unless WARP_TEST_CUDA=1 asks for the GPU (where the tests marked for it run).
if os.environ.get("WARP_TEST_CUDA") != "1":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from filelock import FileLock  # noqa: E402
from hypothesis import settings as hypothesis_settings  # noqa: E402
from testkit.tiny_models import build_bert, build_distilbert, build_electra, build_roberta  # noqa: E402

# nltk fixes its data path when first imported, from HOME: imported here, before pytester points HOME
# at a temporary folder, it finds ~/nltk_data as a user's own run would.
try:
    import nltk  # noqa: F401
except ImportError:
    pass

# The README's test command gates a release on its exit code, so every machine runs the same
# examples (a fresh clone's random draws once found a seed the suite had never met). Exploring for
# new counterexamples is a developer's choice: ``pytest --hypothesis-profile explore``.
hypothesis_settings.register_profile("same-everywhere", derandomize=True, database=None)
hypothesis_settings.register_profile("explore")
hypothesis_settings.load_profile("same-everywhere")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files holding slow tests run first, each file's tests in their order: xdist hands a file whole
    to one worker (loadfile, below), and a slow file dealt last keeps one worker busy while the
    others wait (CI's two cores)."""
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: item.path not in slow)  # stable: the rest keep their order


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, send each test file whole to one worker (``--dist loadfile``) unless the
    command line chose a distribution.

    Most files share a module- or session-scoped fixture that repairs or loads a tiny model (seconds
    each); xdist's default ``load`` deals a file's tests to every worker, and each worker then
    builds that fixture again. Files are dealt largest first, so the workers still end together.
    """
    if getattr(config.option, "dist", "no") != "load" or config.option.distload:  # -d is --dist=load
        return
    given = (*config.invocation_params.args, *config.getini("addopts"), *os.environ.get("PYTEST_ADDOPTS", "").split())
    if not any(arg == "--dist" or arg.startswith("--dist=") for arg in given):
        config.option.dist = "loadfile"


@pytest.fixture(autouse=True)
def _deterministic() -> Iterator[None]:
    """One CPU thread and fixed seeds, so float results and sampled data repeat run to run."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(autouse=True)
def _user_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The user's representation cache (a model verified outside any suite) is the run's own, never ~/.cache."""
    from warp_check.runs import workdir

    folder = tmp_path_factory.getbasetemp() / "user-cache"
    # internal: XDG_CACHE_HOME would move Hugging Face's and the example models' caches too, in subprocesses
    monkeypatch.setattr(workdir, "user_cache_dir", lambda: folder)


def _model_dir(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    """Build ``name`` once per run and return its folder; treat it as read-only.

    Under pytest-xdist every worker has its own session, so the folder lives in the
    directory the workers share and a file lock lets the first worker build it while the
    others wait and reuse it. It is built under a temporary name and renamed when
    complete, so nobody sees a half-written checkpoint.
    """
    root = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    out = root / "tiny_models" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{out}.lock"):
        if not out.is_dir():
            partial = out.with_name(f"{name}.partial")
            build(partial)
            partial.rename(out)
    return out


@pytest.fixture(scope="session")
def distilbert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Binary (negative/positive) DistilBERT, trained; ReLU pre_classifier head."""
    return _model_dir(tmp_path_factory, "distilbert", build_distilbert)


@pytest.fixture(scope="session")
def bert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Binary (negative/positive) BERT, trained; tanh pooler head."""
    return _model_dir(tmp_path_factory, "bert", build_bert)


@pytest.fixture(scope="session")
def multiclass_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three-class (negative/neutral/positive) DistilBERT, trained."""
    return _model_dir(tmp_path_factory, "multiclass", lambda out: build_distilbert(out, num_labels=3))


@pytest.fixture(scope="session")
def pair_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """BERT trained on premise/hypothesis pairs (not_entailment/entailment)."""
    return _model_dir(tmp_path_factory, "pair", lambda out: build_bert(out, pair=True))


@pytest.fixture(scope="session")
def roberta_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Binary RoBERTa, untrained (seeded init): architecture coverage only."""
    return _model_dir(tmp_path_factory, "roberta", build_roberta)


@pytest.fixture(scope="session")
def electra_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Binary ELECTRA with a GELU head, untrained (seeded init): architecture coverage only."""
    return _model_dir(tmp_path_factory, "electra", build_electra)


@pytest.fixture(scope="session")
def tiny_split(distilbert_dir: Path) -> tuple[list[dict], list[dict]]:
    """(wrong, right) binary cases of the tiny DistilBERT (24 synthetic, seed 2), measured with plain transformers."""
    from testkit.suite_builder import split_cases

    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    assert len(wrong) >= 3 and len(right) >= 8
    return wrong, right


@pytest.fixture
def tiny_suite(tmp_path: Path, distilbert_dir: Path, tiny_split: tuple[list[dict], list[dict]]) -> Path:
    """A suite folder: every wrong case of ``tiny_split`` as must_fix, every right one as must_keep."""
    from testkit.suite_builder import write_suite

    wrong, right = tiny_split
    return write_suite(tmp_path / "suite", model=distilbert_dir, fix=wrong, keep=right)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 512 KiB tmpfs (root only; elsewhere the monkeypatched full-disk tests stand in)."""
    from testkit import disks

    with disks.tmpfs(tmp_path / "disk", "512k") as folder:
        if folder is None:
            pytest.skip("cannot mount a tmpfs here (not root): the monkeypatched full-disk tests cover the paths")
        yield folder
