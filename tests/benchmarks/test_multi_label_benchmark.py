"""benchmarks.multi_label (issue 57): GoEmotions' files read as label sets, F1 as the benchmark counts it,
the suite it writes loaded as a multi-label suite, and "decided as asked" from logits. Seconds: a
four-label tiny BERT, no MiniLM."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
from testkit.multi_label import NAMES, build_multi_label, logits_of, texts, truth

from benchmarks import multi_label
from warp_check.cases import Kind
from warp_check.decisions import MULTI_LABEL
from warp_check.suite.loader import load_suite


def test_goemotions_rows_are_texts_with_label_id_sets(tmp_path, monkeypatch):
    folder = tmp_path / "goemotions"
    folder.mkdir()
    (folder / "labels.txt").write_text("admiration\namusement\nanger\n")
    (folder / "train.tsv").write_text("So good\t0,1\tabc\nWhat?? \t2\tdef\n")
    monkeypatch.setattr(multi_label, "DATA", tmp_path)
    assert multi_label.label_names() == ["admiration", "amusement", "anger"]
    assert multi_label.read_goemotions("train") == [
        {"id": "train-abc", "text": "So good", "labels": [0, 1]},
        {"id": "train-def", "text": "What??", "labels": [2]},
    ]


def test_micro_and_macro_f1_count_each_label_decision():
    truth = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0]], dtype=bool)
    predicted = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 0]], dtype=bool)
    micro, macro = multi_label.f1_scores(predicted, truth)
    # tp 2, fp 1, fn 1: 4 / 6; per label 2/3, 2/3 and 0 (never on, never predicted).
    assert micro == pytest.approx(2 / 3)
    assert macro == pytest.approx((2 / 3 + 2 / 3 + 0) / 3)
    assert multi_label.f1_scores(truth, truth) == (1.0, pytest.approx(2 / 3))


def test_decided_as_asked_needs_every_label_on_the_right_side_of_its_threshold():
    rows = [{"labels": [0]}, {"labels": [0, 2]}]
    logits = np.array([[0.5, -1.0, -0.2], [2.0, -3.0, -0.1]])
    assert multi_label.decided_as_asked(logits, np.zeros(3), rows) == (1, pytest.approx(-0.1))
    # Label 2 on above logit -0.15: the second row is right too, the first's label 2 off by 0.05.
    assert multi_label.decided_as_asked(logits, np.array([0.0, 0.0, -0.15]), rows) == (2, pytest.approx(0.05))
    # A partial answer (--keep-partial) constrains only the labels it names.
    partial = [{"on": [0], "off": [1]}, {"on": [], "off": [2]}]
    assert multi_label.decided_as_asked(logits, np.zeros(3), partial) == (2, pytest.approx(0.1))


def test_thresholds_are_tuned_per_label_for_f1_and_stay_at_half_where_nothing_is_found():
    truth = np.array([[1, 0], [1, 0], [0, 0], [0, 0]], dtype=bool)
    # Label 0 is on in the truth where its logit is above logit(0.2) (-1.39), not 0; label 1 never is.
    logits = np.array([[-1.0, 3.0], [-1.2, 3.0], [-3.0, 3.0], [-2.5, 3.0]])
    chosen = multi_label.tune_thresholds(logits, truth)
    assert multi_label.f1_scores(logits[:, [0]] > multi_label.logit(chosen[0]), truth[:, [0]])[0] == 1.0
    assert chosen[1] == 0.5 and multi_label.logit(0.5) == 0.0


def test_the_written_suite_is_a_multi_label_suite_of_label_sets(tmp_path):
    model = build_multi_label(tmp_path / "model")
    fix = [{"id": "f1", "text": "the food was good", "labels": [0, 3]}]
    keep = [{"id": "k1", "text": "the film was bad", "labels": [1]}, {"id": "k2", "text": "it was", "labels": []}]
    keep.append({"id": "k3", "text": "so very good", "on": [3], "off": [1]})
    files = {"must_fix": fix, "must_keep": keep}
    folder = multi_label.write_suite(tmp_path / "suite", model, list(NAMES), files, {"praise": 0.3})
    suite = load_suite(folder)
    assert suite.decision.name == "multi_label"
    assert suite.decision.thresholds == {0: pytest.approx(multi_label.logit(0.3))}
    assert [(c.id, c.kind, c.label) for c in suite.cases] == [
        ("f1", Kind.MUST_FIX, ((0, 3), (1, 2))),
        ("k1", Kind.MUST_KEEP, ((1,), (0, 2, 3))),
        ("k2", Kind.MUST_KEEP, ((), (0, 1, 2, 3))),
        ("k3", Kind.MUST_KEEP, ((3,), (1,))),
    ]
    assert [c.label for c in multi_label.as_cases(fix + keep, Kind.MUST_KEEP, len(NAMES))] == [
        c.label for c in suite.cases
    ]


def test_the_kind_s_f1_is_the_benchmark_s_and_counts_only_the_labels_a_partial_answer_states():
    truth = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0]], dtype=bool)
    predicted = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 0]], dtype=bool)
    answers = np.where(truth, 1, -1).astype(np.int8)
    f1 = MULTI_LABEL.label_f1(predicted, answers)
    assert (f1.micro, f1.macro) == pytest.approx(multi_label.f1_scores(predicted, truth))
    answers[0, 1] = 0  # the first text's label 1 unstated: its false positive no longer counts
    assert MULTI_LABEL.label_f1(predicted, answers).micro == pytest.approx(2 * 2 / (2 * 2 + 1))


def test_compare_scores_every_method_by_f1_on_the_test_texts(tmp_path):
    """The --compare path on a tiny four-label model: each method's must_fix fixed, must_keep kept and
    the general set's F1; the original's F1 is the benchmark's own, from plain transformers' logits."""
    model = build_multi_label(tmp_path / "model")
    batch = texts(120, seed=5)
    logits = logits_of(model, batch)
    rows = [{"id": f"t{i}", "text": t, "labels": list(truth(t))} for i, t in enumerate(batch)]
    right = [(logits[i] > 0) == multi_label.truth_of([r], len(NAMES))[0] for i, r in enumerate(rows)]
    wrong = [r for r, ok in zip(rows, right, strict=True) if not ok.all()][:3]
    keep = [r for r, ok in zip(rows, right, strict=True) if ok.all()][:20]
    general = rows[60:]
    folder = multi_label.write_suite(tmp_path / "suite", model, list(NAMES), {"must_fix": wrong, "must_keep": keep}, {})
    general_file = tmp_path / "general.jsonl"
    general_file.write_text(
        "".join(
            json.dumps({"id": r["id"], "text": r["text"], "labels": [NAMES[j] for j in r["labels"]]}) + "\n"
            for r in general
        )
    )
    args = argparse.Namespace(compare_keep=None, compare_epochs=2, threads=1)
    compared = multi_label.run_compare(folder, general_file, tmp_path / "cache", args, lambda _message: None)
    assert not compared.get("failed"), compared
    summary = {row["method"].split(" ")[0]: row for row in compared["summary"]}
    assert set(summary) == {"Original", "Same-layer", "All-layers", "WARP"}
    assert summary["Original"]["fixed_pct"] == 0 and summary["Original"]["kept_pct"] == 100
    assert summary["WARP"]["fixed_pct"] == 100 and summary["WARP"]["kept_pct"] == 100
    micro, macro = multi_label.f1_scores(logits[60:] > 0, multi_label.truth_of(general, len(NAMES)))
    assert (summary["Original"]["micro_f1"], summary["Original"]["macro_f1"]) == pytest.approx((micro, macro))
    assert all(
        0 <= row["micro_f1"] <= 1 and row["seconds"] is not None
        for row in summary.values()
        if row["method"] != "Original"
    )
