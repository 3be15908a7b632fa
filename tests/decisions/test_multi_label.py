"""Several labels per text (``multi_label``): each label its own decision, a logit against its
threshold. The kind's arithmetic as properties, its case files' errors, and a tiny four-label BERT
through check, repair, the certificate recomputed in float64, the audit and Cert 4.

Which labels the tiny model gets right, and by how much, is measured with plain transformers
(testkit.multi_label.logits_of), never with warp_check: every expected outcome is computed."""

from __future__ import annotations

import json
import math
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testkit.multi_label import NAMES, build_multi_label, logits_of, texts, truth

from warp_check import verify
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main
from warp_check.decisions import MULTI_LABEL, SINGLE_LABEL, AnswerError, LabelSpace, deciding, logit_of
from warp_check.errors import SuiteError
from warp_check.model.activations import ACTIVATIONS
from warp_check.model.head import DenseHead
from warp_check.repair.loop import repair_head
from warp_check.repair.records import CaseSet, RepairStatus
from warp_check.repair.settings import RepairSettings
from warp_check.suite.loader import load_suite

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")
SPACE = LabelSpace(names={n: i for i, n in enumerate(NAMES)}, num_classes=len(NAMES))


# -- what a case file states ---------------------------------------------------------------------


def test_labels_state_every_label_and_on_off_state_some():
    assert MULTI_LABEL.read_answer({"labels": ["intense", "praise"]}, SPACE) == ((0, 3), (1, 2))
    assert MULTI_LABEL.read_answer({"labels": []}, SPACE) == ((), (0, 1, 2, 3))
    assert MULTI_LABEL.read_answer({"on": ["complaint"]}, SPACE) == ((1,), ())
    assert MULTI_LABEL.read_answer({"on": [0], "off": "negated, intense"}, SPACE) == ((0,), (2, 3))
    assert deciding("multi_label_classification") is MULTI_LABEL


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"labels": ["prase"]}, "labels", "unknown label 'prase' (did you mean 'praise'?)"),
        ({"on": ["praise"], "off": ["praise"]}, "off", "label 'praise' is both on and off"),
        ({"label": "praise"}, "label", "states one class, but this model decides several labels per text"),
        ({"labels": ["praise"], "on": ["intense"]}, "on", 'give "labels" or "on"/"off", not both'),
        ({"on": [], "off": []}, "on", "constrains no label"),
        ({"labels": "praise", "off": [9]}, "off", 'give "labels" or "on"/"off", not both'),
        ({"on": [7]}, "on", "class id 7 is not a class of the model"),
    ],
)
def test_a_wrong_answer_names_its_field(fields, field, words):
    with pytest.raises(AnswerError) as error:
        MULTI_LABEL.read_answer(fields, SPACE)
    assert error.value.field == field and words in str(error.value)


def test_a_single_label_model_refuses_several_labels():
    with pytest.raises(AnswerError) as error:
        SINGLE_LABEL.read_answer({"labels": ["praise"]}, SPACE)
    assert error.value.field == "labels" and 'this model decides single_label: give "label"' in str(error.value)


# -- the kind's arithmetic -----------------------------------------------------------------------

finite = st.floats(-8, 8, allow_nan=False, width=64)


@st.composite
def decided(draw):
    classes = draw(st.integers(1, 6))
    n = draw(st.integers(1, 8))
    logits = np.array(draw(st.lists(st.lists(finite, min_size=classes, max_size=classes), min_size=n, max_size=n)))
    signs = np.array(
        draw(
            st.lists(st.lists(st.sampled_from([-1, 0, 1]), min_size=classes, max_size=classes), min_size=n, max_size=n)
        )
    )
    for row in signs:  # every case constrains a label
        if not row.any():
            row[draw(st.integers(0, classes - 1))] = draw(st.sampled_from([-1, 1]))
    thresholds = draw(st.dictionaries(st.integers(0, classes - 1), st.floats(0.05, 0.95), max_size=classes))
    kind = MULTI_LABEL.bound({j: logit_of(p) for j, p in thresholds.items()})
    return kind, logits, signs.astype(np.int8)


@settings(max_examples=200, deadline=None)
@given(decided())
def test_a_case_margin_is_its_worst_label_against_its_threshold(problem):
    kind, logits, answers = problem
    n, classes = logits.shape
    t = np.array([kind.threshold(j) for j in range(classes)])
    margins = kind.margins(logits, answers)
    constraints = kind.constraints(logits, answers)
    expected = np.array(
        [min((logits[i, j] - t[j]) * answers[i, j] for j in range(classes) if answers[i, j]) for i in range(n)]
    )
    np.testing.assert_array_equal(margins.gap, expected)
    np.testing.assert_array_equal(constraints.margins().gap, margins.gap)
    # The binding constraint's direction is ±e_j (the class index `classes` names none).
    for i in range(n):
        held, rival = int(margins.held[i]), int(margins.rival[i])
        assert classes in (held, rival) and held != rival
    predictions = kind.predict(logits)
    np.testing.assert_array_equal(predictions, logits > t)
    clear = np.abs(margins.gap) > 1e-12
    np.testing.assert_array_equal(kind.right(predictions, answers)[clear], (margins.gap > 0)[clear])
    for i in range(n):  # the warm path's plain Python is bit-identical to numpy's
        answer = kind.answer(answers, i)
        predicted, gap = kind.answer_of(logits[i].tolist(), answer)
        assert gap == margins.gap[i]
        assert predicted == tuple(int(j) for j in np.flatnonzero(predictions[i]))
        assert kind.decode([kind.code(predictions[i])], classes)[0].tolist() == predictions[i].tolist()
    assert not kind.changed(predictions, predictions).any()


def test_a_probability_threshold_is_its_logit():
    assert logit_of(0.5) == 0.0
    assert math.isclose(1 / (1 + math.exp(-logit_of(0.8))), 0.8)


def test_the_repair_loop_lifts_every_constrained_label_to_its_margin():
    rng = np.random.default_rng(0)
    d, classes = 40, 5
    W, b, Wc = rng.normal(size=(d, d)) / np.sqrt(d), rng.normal(size=d) * 0.1, rng.normal(size=(classes, d))
    head = DenseHead(
        W, b, Wc * (3 / np.sqrt(d)), np.zeros(classes), ACTIVATIONS["relu"], storage_dtype="float32",
        decision=MULTI_LABEL.bound({2: 0.7}),
    )  # fmt: skip
    head = head.with_weight(head.round_to_storage(head.W))
    V = rng.normal(size=(500, d))
    predictions = head.decision.predict(head.logits(V))
    answers = head.decision.answers_of(predictions, classes)
    flip = np.arange(6)
    fix_answers = answers[flip].copy()
    fix_answers[:, 0] *= -1  # label 0 must change its decision on these
    keep = np.setdiff1d(np.flatnonzero(head.gaps(V, answers)[0] > 0.4), flip)[:150]
    fix = CaseSet(tuple(f"fix{i}" for i in range(len(flip))), V[flip], fix_answers)
    kept = CaseSet(tuple(f"keep{i}" for i in range(len(keep))), V[keep], answers[keep])
    settings_ = RepairSettings(gamma_s=0.5, gamma_h=0.2)
    result = repair_head(head, fix, kept, settings=settings_)
    assert result.status is RepairStatus.CONVERGED
    after = head.with_weight(head.round_to_storage(result.head_after.W))
    gaps_fix = after.gaps(fix.V, fix.labels)[0]
    assert gaps_fix.min() >= settings_.gamma_s - 1e-6
    assert after.gaps(kept.V, kept.labels)[0].min() >= settings_.gamma_h - 1e-6
    assert (after.decision.predict(after.logits(fix.V))[:, 0] == (fix_answers[:, 0] > 0)).all()


# -- a four-label BERT through a suite -------------------------------------------------------------


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_multi_label(tmp_path_factory.mktemp("multi_label") / "model")


@pytest.fixture(scope="module")
def cases(model_dir) -> tuple[list[dict], list[dict]]:
    """(wrong, right): texts the model gets wrong on some label, and texts it gets all right with room."""
    batch = texts(200, seed=3)
    logits = logits_of(model_dir, batch)
    wrong, right = [], []
    for i, (text, z) in enumerate(zip(batch, logits, strict=True)):
        want = np.zeros(len(NAMES), dtype=bool)
        want[list(truth(text))] = True
        gap = float(np.min(np.where(want, z, -z)))
        record = {"id": f"c{i}", "text": text, "labels": [NAMES[j] for j in truth(text)], "gap": gap}
        if gap < 0 and len(wrong) < 5:
            wrong.append(record)
        elif gap > 0.5 and len(right) < 40:
            right.append(record)
    assert len(wrong) >= 3 and len(right) >= 30, "the tiny model's margins moved: pick another seed"
    return wrong, right


def write(folder: Path, model: Path, wrong: list[dict], right: list[dict], *, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    toml = f"[model]\npath = {json.dumps(str(model))}\n{extra}"
    for name, records in (("must_fix", wrong), ("must_keep", right)):
        lines = [json.dumps({k: v for k, v in r.items() if k != "gap"}) for r in records]
        (folder / f"{name}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        toml += f'[[cases]]\npath = "{name}.jsonl"\nkind = "{name}"\n'
    (folder / "warp.toml").write_text(toml, encoding="utf-8")
    return folder


def test_the_model_s_problem_type_makes_the_suite_multi_label(tmp_path, model_dir, cases):
    suite = load_suite(write(tmp_path / "suite", model_dir, *cases))
    assert suite.decision == MULTI_LABEL
    first = cases[0][0]
    on = tuple(sorted(NAMES.index(n) for n in first["labels"]))
    assert suite.case(first["id"]).label == (on, tuple(j for j in range(len(NAMES)) if j not in on))


def test_a_wrong_case_file_names_file_line_and_field(tmp_path, model_dir, cases):
    wrong, right = cases
    folder = write(tmp_path / "suite", model_dir, wrong, right)
    lines = (folder / "must_keep.jsonl").read_text().splitlines()
    lines[2] = json.dumps({"id": "bad", "text": "the food was good", "label": "praise"})
    (folder / "must_keep.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(SuiteError) as error:
        load_suite(folder)
    assert (error.value.line, error.value.field) == (3, "label")
    assert "decides several labels per text" in str(error.value)


@pytest.mark.parametrize(
    ("table", "field", "words"),
    [
        ("thresholds = { praise = 1.5 }", "model.thresholds.praise", "strictly between 0 and 1"),
        ("thresholds = { prase = 0.7 }", "model.thresholds.prase", "unknown label 'prase'"),
        ("thresholds = 0.7", "model.thresholds", "must be a table"),
    ],
)
def test_thresholds_are_checked(tmp_path, model_dir, cases, table, field, words):
    with pytest.raises(SuiteError) as error:
        load_suite(write(tmp_path / "suite", model_dir, *cases, extra=table + "\n"))
    assert error.value.field == field and words in str(error.value)


def test_check_repair_audit_and_traffic_on_a_multi_label_model(pytester, model_dir, cases):
    wrong, right = cases
    # A threshold moves a label's decision: 'intense' on only above probability 0.6.
    write(pytester.path / "suite", model_dir, wrong, right, extra="thresholds = { intense = 0.6 }\n")
    t = np.zeros(len(NAMES))
    t[NAMES.index("intense")] = logit_of(0.6)
    records = wrong + right
    logits = logits_of(model_dir, [r["text"] for r in records])
    want = np.zeros((len(records), len(NAMES)), dtype=bool)
    for i, r in enumerate(records):
        want[i, [NAMES.index(n) for n in r["labels"]]] = True
    right_now = ((logits > t) == want).all(axis=1)
    checked = pytester.runpytest(*INNER, "--junitxml=check.xml")
    checked.assert_outcomes(passed=int(right_now.sum()), failed=int((~right_now).sum()))
    first = next(i for i in range(len(records)) if not right_now[i])
    missed = [NAMES[j] for j in range(len(NAMES)) if want[first, j] and logits[first, j] <= t[j]]
    extra = [NAMES[j] for j in range(len(NAMES)) if not want[first, j] and logits[first, j] > t[j]]
    words = "; ".join(
        ([f"{', '.join(repr(n) for n in missed)} should be on"] if missed else [])
        + ([f"{', '.join(repr(n) for n in extra)} should be off"] if extra else [])
    )
    checked.stdout.fnmatch_lines([f"*must_fix case not fixed yet: *({words})*"])
    # JUnit says which labels are wrong, per case.
    junit = ElementTree.parse(pytester.path / "check.xml")
    wrong_of = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}.get("wrong")
        for case in junit.iter("testcase")
    }
    assert wrong_of[records[first]["id"]] == words.replace("'", "")
    assert all(wrong_of[r["id"]] is None for r, ok in zip(records, right_now, strict=True) if ok)

    texts_traffic = texts(120, seed=99)
    (pytester.path / "traffic.jsonl").write_text("".join(json.dumps({"text": x}) + "\n" for x in texts_traffic))
    out = pytester.path / "repaired"
    repaired = pytester.runpytest(
        *INNER, "--warp-repair", "--warp-out", str(out), "--warp-traffic", "traffic.jsonl", "--warp-report", "rep"
    )
    repaired.assert_outcomes(passed=len(records) + 1)  # the cases and the traffic item
    certificate = json.loads((out / CERTIFICATE_NAME).read_text())
    assert certificate["model"]["decision"] == "multi_label"
    assert certificate["model"]["thresholds"] == {str(NAMES.index("intense")): pytest.approx(logit_of(0.6))}
    # The repaired model with plain transformers: every constrained label of every case decided as
    # asked, the must_fix ones by γ_s (1 by default) less float32 rounding.
    after = logits_of(out, [r["text"] for r in records])
    margin = np.min(np.where(want, after - t, t - after), axis=1)
    assert (margin > 0).all()
    fixed = [i for i, r in enumerate(records) if r in wrong]
    assert margin[fixed].min() >= 1.0 - 1e-3
    # Cert 4 counts per label turned on or off; its tally names labels, not pairs of label sets.
    tally = certificate["traffic"]["by_pair"]
    assert all(key[0] in "+−" and key[1:] in NAMES for key in tally)
    before_t, after_t = logits_of(model_dir, texts_traffic) > t, logits_of(out, texts_traffic) > t
    assert certificate["traffic"]["changed"] <= int((before_t != after_t).any(axis=1).sum())
    # The report words each changed text's labels before and after (records keep them as bit sets).
    lines = (pytester.path / "rep" / "report.md").read_text().splitlines()
    rows = [line for line in lines if " → " in line and line.startswith("| ") and not line.startswith("| #")]
    assert len(rows) == certificate["traffic"]["changed"]
    for row in rows:
        for side in row.rsplit("|", 2)[1].split(" → "):
            assert side.strip() == "no label" or set(side.strip().split(", ")) <= set(NAMES), row
    # Recomputed from the saved weights in float64, thresholds as the certificate recorded them.
    assert verify(out).ok
    audited = pytester.runpytest(*INNER, "--warp-certificate", str(out / CERTIFICATE_NAME))
    audited.assert_outcomes(passed=len(records))


def test_goemotions_rows_are_imported_and_split_by_the_model(tmp_path, model_dir, capsys):
    """GoEmotions' own layout (TSV, no header: text, comma-separated label ids, id) into a suite,
    each row a must_keep case where the model gets every label right, else a must_fix case."""
    batch = texts(40, seed=11)
    rows = [f"{text}\t{','.join(map(str, truth(text)))}\tg{i}" for i, text in enumerate(batch)]
    (tmp_path / "dev.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    folder = write(tmp_path / "suite", model_dir, [], [])
    for name in ("must_fix", "must_keep"):
        (folder / f"{name}.jsonl").write_text("", encoding="utf-8")
    assert main(["import", str(folder), str(tmp_path / "dev.tsv"), "--format", "goemotions", "--split-by-model"]) == 0
    logits = logits_of(model_dir, batch)
    want = np.zeros((len(batch), len(NAMES)), dtype=bool)
    for i, text in enumerate(batch):
        want[i, list(truth(text))] = True
    right = ((logits > 0) == want).all(axis=1)
    suite = load_suite(folder)
    by_id = {case.id: case for case in suite.cases}
    assert len(by_id) == len(batch)
    for i, text in enumerate(batch):
        case = by_id[f"g{i}"]
        assert case.kind.value == ("must_keep" if right[i] else "must_fix")
        assert case.label[0] == truth(text)  # the labels on; every other one off
    written = json.loads((folder / "must_keep.jsonl").read_text().splitlines()[0])
    assert set(written) >= {"id", "text", "labels"} and "label" not in written
    # A label id the model does not have: the file, its line and the column, nothing written.
    (tmp_path / "bad.tsv").write_text(f"{batch[0]}\t0,9\tbad1\n", encoding="utf-8")
    before = (folder / "must_keep.jsonl").read_bytes()
    assert main(["import", str(folder), str(tmp_path / "bad.tsv"), "--format", "goemotions"]) != 0
    assert "bad.tsv:1: field 'label': class id 9 is not a class of the model" in capsys.readouterr().err
    assert (folder / "must_keep.jsonl").read_bytes() == before


def test_a_repaired_multi_label_release_is_gated_and_its_fixes_promoted(tmp_path, model_dir, cases, capsys):
    wrong, right = cases
    folder = write(tmp_path / "suite", model_dir, wrong, right)
    out = tmp_path / "repaired"
    assert main(["repair", str(folder), "--out", str(out)]) == 0
    # The release against its baseline: no label the baseline had right is wrong now.
    assert main(["diff", str(model_dir), str(out), str(folder)]) == 0
    assert "0 regression(s)" in capsys.readouterr().out
    # Its fixes promoted: every must_fix case now a must_keep one, stating the same labels.
    assert main(["promote", str(folder), "--from", str(out)]) == 0
    promoted = [json.loads(line) for line in (folder / "must_keep.jsonl").read_text().splitlines()[len(right) :]]
    assert {r["id"]: r["labels"] for r in promoted} == {r["id"]: r["labels"] for r in wrong}
    assert all(r["kind"] == "must_keep" and r["fixed_by"] for r in promoted)
    suite = load_suite(folder)
    assert all(c.kind.value == "must_keep" for c in suite.cases)


def test_a_label_the_baseline_had_right_is_a_regression_though_the_case_failed_before(tmp_path, model_dir, capsys):
    """The release under test is the model with the classifier's bias of 'negated' raised by 6: on a
    case the baseline got wrong on another label, 'negated' now wrong too is a regression."""
    import shutil

    from safetensors.numpy import load_file, save_file

    release = tmp_path / "release"
    shutil.copytree(model_dir, release)
    weights = load_file(release / "model.safetensors")
    bias = next(k for k in weights if k.endswith("classifier.bias"))
    moved = NAMES.index("negated")
    weights[bias] = weights[bias].copy()
    weights[bias][moved] += 6.0
    save_file(weights, release / "model.safetensors", metadata={"format": "pt"})
    batch = texts(300, seed=21)
    before = logits_of(model_dir, batch)
    after = before.copy()
    after[:, moved] += 6.0
    want = np.zeros((len(batch), len(NAMES)), dtype=bool)
    for i, text in enumerate(batch):
        want[i, list(truth(text))] = True
    wrong_before, wrong_after = (before > 0) != want, (after > 0) != want
    both = [
        i for i in range(len(batch))
        if wrong_before[i].any() and wrong_after[i, moved] and not wrong_before[i, moved]
    ]  # fmt: skip
    still = [i for i in range(len(batch)) if wrong_before[i].any() and (wrong_after[i] == wrong_before[i]).all()]
    assert both and still, "the tiny model's errors moved: pick another seed"
    records = [{"id": f"t{i}", "text": batch[i], "labels": [NAMES[j] for j in truth(batch[i])]} for i in both + still]
    folder = write(tmp_path / "suite", model_dir, records, [])
    assert main(["diff", str(model_dir), str(release), str(folder)]) == 1
    out = capsys.readouterr().out
    assert f"{len(both)} regression(s), {len(still)} failing on both (expected)" in out


def test_lora_and_fine_tuning_are_compared_on_a_multi_label_suite(tmp_path, model_dir, cases, capsys):
    """The paper's baselines train on the kind's loss (binary cross-entropy per label) and are scored
    as the kind judges a case: every constrained label right."""
    wrong, right = cases
    folder = write(tmp_path / "suite", model_dir, wrong, right)
    code = main(["compare", str(folder), "--methods", "original,lora,warp", "--epochs", "3", "--json"])
    assert code == 0
    rows = {r["method"]: r for r in json.loads(capsys.readouterr().out)["methods"]}
    counts = {method: row["counts"] for method, row in rows.items()}
    assert counts["original"]["repair"]["correct"] == 0  # every must_fix case wrong on some label
    assert counts["original"]["remain"]["correct"] == len(right)
    assert counts["warp"]["repair"]["correct"] == len(wrong) and counts["warp"]["remain"]["correct"] == len(right)
    assert counts["lora"]["repair"]["total"] == len(wrong) and 0 <= counts["lora"]["repair"]["correct"] <= len(wrong)
