"""The pytest plugin end to end on a tiny DistilBERT, in-process with pytester.

Which cases the model gets right is measured independently (tests/suite_builder.py, plain
transformers), so every expected outcome below is computed, not written down.
"""

from __future__ import annotations

import html
import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from testkit.inner_runs import warm_inner_runs
from testkit.suite_builder import record_encoder_batches, split_cases, tree_digest, write_suite

from warp_check import verify
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.perturb import wordnet_available
from warp_check.reports.svg import MIN_HISTOGRAM

pytest_plugins = ["pytester"]
# Inner runs skip two plugins that cost seconds each in a process holding torch: the
# unraisable-exception plugin's gc.collect() and hypothesis' plugin (it imports hypothesis).
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")


@pytest.fixture(scope="module", autouse=True)
def _warm_imports(distilbert_dir: Path) -> None:
    warm_inner_runs(distilbert_dir)


@pytest.fixture(scope="module")
def cases(distilbert_dir: Path) -> tuple[list[dict], list[dict]]:
    """(wrong, right) cases of the tiny DistilBERT: a few must_fix, many must_keep."""
    wrong, right = split_cases(distilbert_dir, 24, seed=2)
    assert 2 <= len(wrong) <= 8 and len(right) >= 12, "the tiny model's errors moved: pick another seed"
    return wrong, right


@pytest.fixture
def suite(pytester: pytest.Pytester, distilbert_dir: Path, cases) -> Path:
    wrong, right = cases
    return write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong, keep=right)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest(*INNER, *args)


def literal(pattern: str) -> str:
    """An fnmatch pattern where only ``*`` is special (messages contain '[repair]' and '?')."""
    return pattern.replace("[", "[[]").replace("?", "[?]")


def certificate(suite: Path) -> dict:
    return json.loads((suite / ".warp" / "repaired" / CERTIFICATE_NAME).read_text())


# -- plain runs: the gate ---------------------------------------------------------------------


def test_plain_run_fails_must_fix_and_passes_must_keep(pytester, suite, cases):
    wrong, right = cases
    result = run(pytester)
    result.assert_outcomes(passed=len(right), failed=len(wrong))
    worst = min(wrong, key=lambda c: c["margin"])
    result.stdout.fnmatch_lines(
        [
            f"*must_fix case not fixed yet: predicted *, labelled '{worst['label']}' (gap {worst['margin']:.4g}*"
            "repair the model (pytest --warp-repair, or warp-check repair)*",
            "*= warp-check =*",
            "suite 'suite' (suite/warp.toml): check mode",
            "  model: * (pre_classifier → relu → classifier)",
            f"  must_fix   0 passed, {len(wrong)} failed",
            f"  must_keep  {len(right)} passed, 0 failed",
            f"  encoder: {len(wrong) + len(right)} case(s) encoded, 0 from the cache*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
    # A second run reads every representation from the core's cache in <suite>/.warp/cache.
    again = run(pytester)
    again.stdout.fnmatch_lines([f"  encoder: 0 case(s) encoded, {len(wrong) + len(right)} from the cache*"])
    assert (suite / ".warp" / "cache").is_dir() and (suite / ".warp" / ".gitignore").read_text().endswith("*\n")
    assert not (suite / ".warp" / "repaired").exists()  # a plain run writes no model


def test_items_are_named_by_id_and_report_their_jsonl_line(pytester, suite, cases):
    wrong, right = cases
    items, _ = pytester.inline_genitems(*INNER, str(suite))
    assert [item.name for item in items] == [c["id"] for c in wrong + right]
    path, line, domain = items[1].reportinfo()
    assert (Path(path), line, domain) == (suite / "fix.jsonl", 1, f"must_fix {wrong[1]['id']}")
    failing = run(pytester, "-k", wrong[1]["id"])
    failing.stdout.fnmatch_lines(
        [f"*_ must_fix {wrong[1]['id']} _*", f"  must_fix case '{wrong[1]['id']}' at suite/fix.jsonl:2"]
    )


def test_k_selection_runs_and_encodes_only_the_selected_cases(pytester, suite, cases):
    wrong, right = cases
    chosen = [wrong[0]["id"], right[0]["id"], right[1]["id"]]
    result = run(pytester, "--warp-cache", "none", "-k", " or ".join(chosen))
    result.assert_outcomes(passed=2, failed=1, deselected=len(wrong) + len(right) - 3)
    result.stdout.fnmatch_lines(
        [
            f"  must_fix   0 passed, 1 failed (of {len(wrong)} in the suite)",
            f"  must_keep  2 passed, 0 failed (of {len(right)} in the suite)",
            "  encoder: 3 case(s) encoded, 0 from the cache*",
        ]
    )


def test_last_failed_reruns_only_the_failures(pytester, suite, cases):
    wrong, right = cases
    run(pytester, "--warp-cache", "none").assert_outcomes(passed=len(right), failed=len(wrong))
    rerun = run(pytester, "--warp-cache", "none", "--lf")
    rerun.assert_outcomes(failed=len(wrong))
    rerun.stdout.fnmatch_lines(
        [
            f"collected {len(wrong)} items",
            f"run-last-failure: rerun previous {len(wrong)} failures",
            f"  encoder: {len(wrong)} case(s) encoded*",
        ]
    )


def test_exitfirst_stops_at_the_first_failing_case(pytester, suite):
    result = run(pytester, "-x")
    result.assert_outcomes(failed=1)


def test_markers_select_by_kind_and_aux_cases_are_not_items(pytester, distilbert_dir, cases):
    wrong, right = cases
    write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong, keep=right[:-3], aux=right[-3:])
    result = run(pytester, "-m", "must_keep")
    result.assert_outcomes(passed=len(right) - 3, deselected=len(wrong))
    result.stdout.fnmatch_lines(["  aux        3 case(s): GSN-FT data, not tests"])
    collected = run(pytester, "--collect-only", "-q")
    assert not any(c["id"] in collected.stdout.str() for c in right[-3:])


def test_model_override_and_factory_replace_the_suite_model(pytester, distilbert_dir, cases):
    wrong, right = cases
    folder = write_suite(pytester.path / "suite", model="no-such-model", fix=wrong[:1], keep=right[:2])
    run(pytester, "--warp-model", str(distilbert_dir)).assert_outcomes(passed=2, failed=1)
    (folder / "models.py").write_text(f"def build():\n    return {str(distilbert_dir)!r}\n")
    toml = (folder / "warp.toml").read_text().replace('path = "no-such-model"', 'factory = "models.py:build"')
    (folder / "warp.toml").write_text(toml)
    run(pytester).assert_outcomes(passed=2, failed=1)


# -- --warp-repair ----------------------------------------------------------------------------


def test_repair_passes_every_certificate_and_writes_a_verified_artefact(pytester, suite, cases, distilbert_dir):
    wrong, right = cases
    before = tree_digest(distilbert_dir)
    xml = pytester.path / "junit.xml"
    result = run(
        pytester, "--warp-repair", "--warp-neighbours", "on", f"--junitxml={xml}", "--warp-report", "rep", "-v"
    )
    result.assert_outcomes(passed=len(wrong) + len(right))
    assert "warnings summary" not in result.stdout.str()
    n_fix, n_keep = len(wrong), len(right)
    # Perturbed copies of the suite's cases that the model got wrong are repaired and certified too.
    n_hood = sum(c["source"] == "neighbour" for c in certificate(suite)["cases"])
    n_cert = n_fix + n_hood
    assert n_hood > 0
    report = json.loads((pytester.path / "rep" / "report.json").read_text())["runs"][0]
    hood = report["details"]["neighbourhood"]
    assert hood["wrong"] == n_hood + hood["dropped"]  # copies the repair could not meet are dropped, not certified
    result.stdout.fnmatch_lines(
        [
            "*= warp-check =*",
            "suite 'suite' (suite/warp.toml): repair mode",
            f"  must_fix   {n_fix} passed, 0 failed",
            f"  must_keep  {n_keep} passed, 0 failed",
            "  repair: converged in * iteration(s), * s",
            "  mean GSN κ: * before, * after; GSN-FT not applied (no aux cases)",
            f"  neighbourhood: {hood['wrong']} of * perturbation(s) of {n_fix + n_keep} case(s) were wrong: "
            f"{n_hood} repaired and certified as must_fix cases too* (* s*)",
            f"  certificates: Cert 1 {n_cert}/{n_cert}, Cert 2 {n_keep}/{n_keep}, Cert 3 {n_cert}/{n_cert} "
            "(γ_s = 1, γ_h = 0.3)",
            f"  repaired model: {suite / '.warp' / 'repaired'} (with warp_certificate.json)",
            f"report: {pytester.path / 'rep' / 'report.md'}",
            f"report page: {pytester.path / 'rep' / 'index.html'}",
        ]
    )
    page = (pytester.path / "rep" / "index.html").read_text(encoding="utf-8")
    assert '<p id="verdict" class="verdict pass" data-passed="true">PASSED</p>' in page
    assert all(html.escape(case["text"], quote=False) in page for case in wrong + right)  # what each case tested
    assert f"- neighbourhood: {hood['wrong']} of " in (pytester.path / "rep" / "report.md").read_text()
    # synonyms = "auto": where WordNet is not installed, the summary says so and what would add it.
    assert ("no WordNet synonyms" in result.stdout.str()) is (hood["synonyms"] == "not installed")
    assert hood["synonyms"] == ("used" if wordnet_available() else "not installed")
    assert {c["id"]: c["outcome"] for c in report["cases"]} == {c["id"]: "passed" for c in wrong + right}
    assert all((pytester.path / "rep" / f"suite-{plot}.png").is_file() for plot in ("gaps", "convergence"))
    # the radii's histogram only from MIN_HISTOGRAM of them: fewer bars say less than the table's column
    radii = sum(1 for c in report["cases"] if c["kind"] == "must_fix" and c["properties"].get("radius") is not None)
    assert (pytester.path / "rep" / "suite-radius.png").is_file() is (radii >= MIN_HISTOGRAM)
    assert tree_digest(distilbert_dir) == before  # the input model is never written to
    artefact = suite / ".warp" / "repaired"
    assert verify(artefact).ok
    cert = certificate(suite)
    # JUnit XML carries each case's numbers: the same as the certificate's.
    claims = {c["id"]: c for c in cert["cases"]}
    for testcase in ET.parse(xml).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in testcase.iter("property")}
        claim = claims[testcase.get("name")]
        assert float(props["gap_after"]) == pytest.approx(claim["gap_after"], rel=1e-12)
        assert float(props["gap_before"]) == pytest.approx(claim["gap_before"], rel=1e-12)
        if claim["kind"] == "must_fix":
            assert float(props["gap"]) >= 1.0
            assert float(props["radius"]) == pytest.approx(max(claim["eps_star"], claim["eps_local"]), rel=1e-12)
        else:
            assert "radius" not in props


def test_must_keep_case_the_model_already_gets_wrong_fails_and_is_left_out(pytester, distilbert_dir, cases):
    wrong, right = cases
    write_suite(pytester.path / "suite", model=distilbert_dir, fix=wrong[1:], keep=right + wrong[:1])
    result = run(pytester, "--warp-repair")
    result.assert_outcomes(passed=len(wrong) - 1 + len(right), failed=1)
    result.stdout.fnmatch_lines(
        [
            f"the original model already got this must_keep case wrong (gap {wrong[0]['margin']:.4g} before "
            f"repair, labelled '{wrong[0]['label']}'), and no baseline says whether it is a regression, so it was "
            "left out of the repair's constraints; after repair its gap is *. To have it repaired back where the "
            "last release got it right, name that release as the baseline (pytest --warp-baseline DIR*",
            "  1 must_keep case(s) left out: the original model already got them wrong; no baseline says which*",
        ]
    )
    assert certificate(pytester.path / "suite")["repair"]["excluded_must_keep"] == [wrong[0]["id"]]


def test_repair_that_cannot_converge_writes_nothing_and_says_what_missed(pytester, distilbert_dir, cases):
    wrong, right = cases
    folder = write_suite(
        pytester.path / "suite",
        model=distilbert_dir,
        fix=wrong,
        keep=right,
        model_lines='layer = ["pre_classifier", "relu", "classifier"]\n',  # "auto" would fall back to the final layer
        extra="[repair]\nmax_iter = 1\n",
    )
    result = run(pytester, "--warp-repair")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            literal(
                "repair failed (not_converged), nothing was written: this must_fix case's gap * misses its margin "
                "γ_s = 1 by *; what may help: raise max_rank (now 64; [repair] max_rank in warp.toml), "
                "raise lam (now 50; [repair] lam in warp.toml), raise max_iter (now 1; [repair] max_iter in "
                "warp.toml), or lower gamma_s (now 1; --warp-gamma-s or [repair] gamma_s)"
            ),
            "  repair: FAILED (not_converged) after 1 iteration(s)*nothing was written",
            "  repaired model: none written",
        ]
    )
    assert not (folder / ".warp" / "repaired").exists()
    assert not any(p.name.startswith(".repaired") for p in (folder / ".warp").iterdir())


def test_nothing_to_repair_writes_nothing_and_the_summary_says_so(pytester, distilbert_dir, cases):
    _, right = cases
    safe = [c for c in right if c["margin"] > 0.5]  # every margin already above γ_h = 0.3
    folder = write_suite(pytester.path / "suite", model=distilbert_dir, keep=safe)
    result = run(pytester, "--warp-repair")
    result.assert_outcomes(passed=len(safe))
    result.stdout.fnmatch_lines(
        [
            "  repair: nothing to repair: every case already meets its margin; nothing was written",
            "  repaired model: none written",
        ]
    )
    assert not (folder / ".warp" / "repaired").exists()


def test_ini_options_set_the_mode_and_overrides(pytester, suite, cases):
    wrong, right = cases
    pytester.makeini("[pytest]\nwarp_repair = true\nwarp_rank = 3\nwarp_gamma_h = 0.25\n")
    run(pytester).assert_outcomes(passed=len(wrong) + len(right))
    settings = certificate(suite)["settings"]
    assert (settings["rank"], settings["gamma_h"], settings["gamma_s"]) == (3, 0.25, 1.0)
    # The command line wins over the ini file.
    run(pytester, "--warp-rank", "4").assert_outcomes(passed=len(wrong) + len(right))
    assert certificate(suite)["settings"]["rank"] == 4


def test_the_neighbourhood_is_off_unless_the_option_turns_it_on_or_sizes_it(pytester, suite, cases):
    wrong, right = cases
    for off in ((), ("--warp-neighbours", "off")):
        result = run(pytester, "--warp-repair", *off)
        result.assert_outcomes(passed=len(wrong) + len(right))
        assert "neighbourhood:" not in result.stdout.str()
        cert = certificate(suite)
        assert cert["settings"]["neighbours"]["per_case"] == 0 and {c["source"] for c in cert["cases"]} == {None}
    pytester.makeini("[pytest]\nwarp_neighbours = 3\n")
    result = run(pytester, "--warp-repair")
    result.assert_outcomes(passed=len(wrong) + len(right))
    result.stdout.fnmatch_lines([f"  neighbourhood: * of * perturbation(s) of {len(wrong) + 3} case(s) were wrong*"])
    assert certificate(suite)["settings"]["neighbours"]["keep_cases"] == 3


def test_device_threads_and_batch_size_options_reach_the_encoder(pytester, suite, cases, monkeypatch):
    seen = record_encoder_batches(monkeypatch)
    wrong, right = cases
    pytester.makeini("[pytest]\nwarp_threads = 1\n")
    result = run(pytester, "--warp-device", "cpu", "--warp-batch-size", "3", "--warp-cache", "none")
    result.assert_outcomes(passed=len(right), failed=len(wrong))
    encoded = [s for s in seen if s[0] > 1]
    assert encoded and max(n for n, _, _ in encoded) == 3 and {(t, d) for _, t, d in encoded} == {(1, "cpu")}


def test_an_output_folder_that_is_not_ours_is_one_usage_error_and_stays_untouched(pytester, suite, cases):
    wrong, right = cases
    theirs = pytester.path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    result = run(pytester, "--warp-repair", "--warp-out", str(theirs))
    result.assert_outcomes(errors=1, skipped=len(wrong) + len(right) - 1)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stdout.fnmatch_lines(
        [f"*ArtefactError: output folder '{theirs}' is not empty and holds no warp_certificate.json: refusing*"]
    )
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"]


def test_a_rank_the_layer_cannot_take_names_the_flag_that_gave_it(pytester, suite, cases):
    wrong, right = cases
    result = run(pytester, "--warp-repair", "--warp-rank", "40")
    result.assert_outcomes(errors=1, skipped=len(wrong) + len(right) - 1)
    result.stdout.fnmatch_lines(
        ["*SettingsError: --warp-rank=40: exceeds the repair layer 'pre_classifier' (32×32): the rank can be at most*"]
    )


# -- audit -------------------------------------------------------------------------------------


def test_audit_passes_on_the_certified_model_and_fails_on_a_tampered_one(pytester, suite, cases):
    wrong, right = cases
    n = len(wrong) + len(right)
    run(pytester, "--warp-repair").assert_outcomes(passed=n)
    artefact = suite / ".warp" / "repaired"
    audit = run(pytester, "--warp-certificate", str(artefact / CERTIFICATE_NAME))
    audit.assert_outcomes(passed=n)
    audit.stdout.fnmatch_lines(["suite 'suite' (suite/warp.toml): audit mode", "  audit: certificate checked on *"])

    from safetensors.torch import load_file, save_file

    tampered = pytester.path / "tampered"
    shutil.copytree(artefact, tampered)
    weights = load_file(str(tampered / "model.safetensors"))
    weights["pre_classifier.weight"][0, 0] += 0.5  # the repaired layer itself
    save_file(weights, str(tampered / "model.safetensors"), metadata={"format": "pt"})
    bad = run(pytester, "--warp-model", str(tampered), "--warp-certificate", str(artefact / CERTIFICATE_NAME))
    bad.assert_outcomes(failed=n)
    bad.stdout.fnmatch_lines(
        ["certificate does not hold: repair layer 'pre_classifier' differs from the certified weights (hash *"]
    )


# -- usage mistakes ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--warp-repair", "--warp-certificate", "x.json"), "ERROR: --warp-repair and --warp-certificate exclude *"),
        (("--warp-rank", "0"), "ERROR: --warp-rank: rank=0: must be an integer >= 1"),
        (("--warp-gamma-s", "soon"), "ERROR: --warp-gamma-s='soon': must be a number"),
        (("--warp-gamma-s", "0.5", "--warp-gamma-h", "0.8"), "ERROR: --warp-gamma-h 0.8 > --warp-gamma-s 0.5: *"),
        (("--warp-certificate", "missing.json"), "ERROR: --warp-certificate: no certificate file at */missing.json"),
        (("--warp-device", "gpu"), "ERROR: --warp-device='gpu': must be a device: auto, cpu, cuda or cuda:N"),
        (("--warp-threads", "0"), "ERROR: --warp-threads='0': must be an integer >= 1"),
        (("--warp-engine", "spark"), "ERROR: --warp-engine='spark': must be an engine: local or ray"),
        (("--warp-batch-size", "many"), "ERROR: --warp-batch-size='many': must be an integer"),
        (
            ("--warp-neighbours", "some"),
            "ERROR: --warp-neighbours: neighbours='some': must be off, on, all, or how many must_keep cases to perturb",
        ),
    ],
)
def test_usage_mistakes_are_one_line_errors(pytester, args, message):
    result = run(pytester, *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_one_warp_out_for_two_suites_is_refused(pytester, distilbert_dir, cases):
    wrong, right = cases
    write_suite(pytester.path / "a", model=distilbert_dir, fix=wrong[:1], keep=right[:2])
    write_suite(pytester.path / "b", model=distilbert_dir, fix=wrong[1:2], keep=right[2:4])
    result = run(pytester, "--warp-repair", "--warp-out", "out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --warp-out names one folder but 2 suites would be repaired into it*"])
    assert not (pytester.path / "out").exists()


def test_an_internal_error_fails_every_case_once_not_once_per_case(
    pytester: pytest.Pytester, suite: Path, cases, monkeypatch: pytest.MonkeyPatch
):
    # A crash that is not a user mistake (here: the core raising RuntimeError) must not be
    # recomputed by every item: the run is attempted once and each case reports its message.
    from warp_check.modes import check as check_mode

    calls = []

    def broken(*args, **kwargs):
        calls.append(1)
        raise RuntimeError("boom")

    # internal: an internal error is a bug, and no input raises one on purpose
    monkeypatch.setattr(check_mode, "check", broken)  # what check mode runs
    wrong, right = cases
    result = run(pytester, str(suite))
    result.assert_outcomes(failed=len(wrong) + len(right))
    result.stdout.fnmatch_lines(["*internal error while running the suite: RuntimeError: boom*"])
    assert len(calls) == 1
