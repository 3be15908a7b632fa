"""Two cases of one input conflict as their kind of decision judges them: single label, when they ask
for two classes; several labels, only when a label is on in one and off in the other. Partial answers
about different labels of one text are one answer, accepted and repaired; a clash is refused naming
the file, the line and the field, by the suite's reader (the same text) and before a repair (texts
the tokenizer makes one input)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from testkit.multi_label import NAMES, build_multi_label, logits_of, texts, truth
from testkit.suite_builder import write_kind_suite as write_suite

from warp_check.cli import main
from warp_check.decisions import MULTI_LABEL, SINGLE_LABEL
from warp_check.errors import SuiteError
from warp_check.suite.loader import load_suite


def name(label: int) -> str:
    return repr(NAMES[label])


def test_partial_answers_conflict_only_on_a_label_on_in_one_and_off_in_the_other():
    on_praise, off_complaint, off_praise = ((0,), ()), ((), (1,)), ((), (0,))
    assert MULTI_LABEL.conflict(on_praise, off_complaint, name, 4) is None
    assert MULTI_LABEL.conflict(on_praise, ((0, 3), (1,)), name, 4) is None  # more of the same answer
    clash = MULTI_LABEL.conflict(on_praise, off_praise, name, 4)
    assert clash is not None and clash.field == "off" and "'praise' is on in one and off in the other" in clash.reason
    assert MULTI_LABEL.conflict(off_praise, on_praise, name, 4).field == "on"
    exact = MULTI_LABEL.conflict(on_praise, ((1,), (0, 2, 3)), name, 4)  # "labels": every label stated
    assert exact.field == "labels" and "'praise'" in exact.reason and "'complaint'" not in exact.reason


def test_single_label_answers_conflict_when_they_name_two_classes():
    assert SINGLE_LABEL.conflict(1, 1, name, 4) is None
    assert SINGLE_LABEL.conflict(0, 1, name, 4).field == "label"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_multi_label(tmp_path_factory.mktemp("conflicts") / "model")


@pytest.fixture(scope="module")
def wrong_text(model_dir) -> tuple[str, int, int]:
    """A text the model gets wrong on a label ``j`` and right on a label ``k`` with room (by plain
    transformers): (text, j, k)."""
    batch = texts(200, seed=3)
    for text, z in zip(batch, logits_of(model_dir, batch), strict=True):
        sign = np.where(np.isin(np.arange(len(NAMES)), truth(text)), 1.0, -1.0)
        gaps = sign * z
        if gaps.min() < 0 and gaps.max() > 1.0:
            return text, int(np.argmin(gaps)), int(np.argmax(gaps))
    raise AssertionError("the tiny model's margins moved: pick another seed")


def partial(j: int, text: str) -> dict[str, list[str]]:
    """Label j as the text's truth states it: on, or off."""
    return {"on": [NAMES[j]]} if j in truth(text) else {"off": [NAMES[j]]}


def opposite(j: int, text: str) -> dict[str, list[str]]:
    return {"off": [NAMES[j]]} if j in truth(text) else {"on": [NAMES[j]]}


@pytest.mark.parametrize("spaces", ["", "  "], ids=["same-text", "same-tokens"])
def test_two_partial_answers_of_one_input_about_different_labels_are_repaired_together(
    tmp_path, model_dir, wrong_text, spaces
):
    text, j, k = wrong_text
    fix = [{"id": "fix", "text": spaces + text} | partial(j, text)]
    keep = [{"id": "keep", "text": text} | partial(k, text)]
    folder = write_suite(tmp_path / "suite", model_dir, fix, keep)
    assert [c.label for c in load_suite(folder).cases] == [
        ((j,), ()) if j in truth(text) else ((), (j,)),
        ((k,), ()) if k in truth(text) else ((), (k,)),
    ]
    out = tmp_path / "repaired"
    assert main(["repair", str(folder), "--out", str(out)]) == 0
    z = logits_of(out, [text])[0]  # plain transformers on the saved weights: both answers hold
    assert (z[j] > 0) == (j in truth(text)) and (z[k] > 0) == (k in truth(text))


def test_one_text_with_a_label_on_and_off_is_refused_naming_file_line_and_field(tmp_path, model_dir, wrong_text):
    text, j, _ = wrong_text
    keep = [{"id": "other", "text": "the film was bad", "labels": ["complaint"]}, {"id": "keep", "text": text}]
    keep[1] |= opposite(j, text)
    folder = write_suite(tmp_path / "suite", model_dir, [{"id": "fix", "text": text} | partial(j, text)], keep)
    with pytest.raises(SuiteError) as error:
        load_suite(folder)
    field = "on" if j not in truth(text) else "off"
    assert (Path(error.value.path).name, error.value.line, error.value.field) == ("must_keep.jsonl", 2, field)
    assert f"'{NAMES[j]}' is on in one and off in the other" in str(error.value)


def test_two_texts_of_one_input_with_a_label_on_and_off_are_refused_before_the_repair(
    tmp_path, model_dir, wrong_text, capsys
):
    text, j, _ = wrong_text
    fix = [{"id": "fix", "text": "  " + text} | partial(j, text)]
    keep = [{"id": "keep", "text": text} | opposite(j, text)]
    folder = write_suite(tmp_path / "suite", model_dir, fix, keep)
    load_suite(folder)  # two texts: the reader cannot tell; the tokenizer makes them one input
    out = tmp_path / "repaired"
    assert main(["repair", str(folder), "--out", str(out)]) != 0
    said = capsys.readouterr().err
    field = "on" if j not in truth(text) else "off"
    assert f"must_keep.jsonl:1: field '{field}'" in said and "are the same input to the model" in said, said
    assert f"'{NAMES[j]}' is on in one and off in the other" in said, said
    assert not out.exists()
