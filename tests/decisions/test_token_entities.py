"""A token classifier's case as a ``text`` with character ``entities``: its words, each tagged IOB2
from the model's labels (``O`` outside every entity), or refused naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit.suite_builder import write_kind_suite

from warp_check.decisions import TOKEN_TAGS, AnswerError, LabelSpace
from warp_check.decisions.token_tags import row_text, split_words
from warp_check.errors import SuiteError
from warp_check.suite.loader import load_suite

NER = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC")
SPACE = LabelSpace(names={t: i for i, t in enumerate(NER)}, num_classes=len(NER))
TEXT = "Barack Obama visited New York City, then Paris."
OBAMA, VISITED = {"start": 0, "end": 12, "label": "PER"}, {"start": 7, "end": 20, "label": "LOC"}


def tags_of(fields: dict, space: LabelSpace = SPACE) -> list[str]:
    sentence = TOKEN_TAGS.read_sentence(fields, space)
    names = {i: n for n, i in space.names.items()}
    assert [r.word for r in sentence.rows] == list(range(len(sentence.words)))  # every word is constrained
    return [names[r.tag] for r in sentence.rows]


def test_a_text_s_entities_become_iob2_tags_of_its_words():
    entities = [
        {"start": 0, "end": 12, "label": "PER"},
        {"start": 21, "end": 34, "label": "LOC"},
        {"start": 41, "end": 46, "label": "LOC"},
    ]
    sentence = TOKEN_TAGS.read_sentence({"text": TEXT, "entities": entities}, SPACE)
    # Punctuation is a word of its own: "City," and "Paris." end where their entities do.
    assert sentence.words == ("Barack", "Obama", "visited", "New", "York", "City", ",", "then", "Paris", ".")
    assert tags_of({"text": TEXT, "entities": entities}) == [
        "B-PER", "I-PER", "O", "B-LOC", "I-LOC", "I-LOC", "O", "O", "B-LOC", "O",
    ]  # fmt: skip
    assert [TEXT[s:e] for _, s, e in split_words(TEXT)] == list(sentence.words)
    assert tags_of({"text": "nobody here", "entities": []}) == ["O", "O"]


def test_a_model_tagging_without_prefixes_takes_the_label_itself():
    plain = LabelSpace(names={"O": 0, "PER": 1}, num_classes=2)
    assert tags_of({"text": "Ada Lovelace wrote", "entities": [{"start": 0, "end": 12, "label": "PER"}]}, plain) == [
        "PER", "PER", "O",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"text": TEXT, "entities": [{"start": 0, "end": 10, "label": "PER"}]}, "entities", "cuts the word 'Obama'"),
        ({"text": TEXT, "entities": [{"start": 1, "end": 6, "label": "PER"}]}, "entities", "cuts the word 'Barack'"),
        ({"text": TEXT, "entities": [{"start": 6, "end": 12, "label": "PER"}]}, "entities", "on a space"),
        (
            {"text": TEXT, "entities": [OBAMA, VISITED]},
            "entities",
            "entity 1 (7..20 'Obama visited') overlaps entity 0 (0..12)",
        ),
        ({"text": TEXT, "entities": [{"start": 0, "end": 6, "label": "ORG"}]}, "entities", "no label 'ORG'"),
        ({"text": TEXT, "entities": [{"start": 0, "end": 99, "label": "PER"}]}, "entities", "no span of the text's"),
        ({"text": TEXT, "entities": [[0, 6, "PER"]]}, "entities", 'must be {"start", "end", "label"}'),
        ({"text": TEXT, "entities": [{"start": "0", "end": 6, "label": "PER"}]}, "entities", "start must be"),
        ({"text": TEXT}, "entities", "missing field 'entities'"),
        ({"entities": []}, "text", "missing field 'text'"),
        ({"text": "  ", "entities": []}, "text", "holds no word"),
        ({"text": TEXT, "entities": [], "tags": ["O"]}, "tags", "not both"),
    ],
)
def test_a_wrong_entity_names_its_field_and_why(fields, field, words):
    with pytest.raises(AnswerError) as error:
        TOKEN_TAGS.read_sentence(fields, SPACE)
    assert error.value.field == field and words in str(error.value)


def test_a_model_with_b_but_no_i_tag_refuses_a_multi_word_entity():
    only_b = LabelSpace(names={"O": 0, "B-LOC": 1}, num_classes=2)
    assert tags_of({"text": "to Paris", "entities": [{"start": 3, "end": 8, "label": "LOC"}]}, only_b) == ["O", "B-LOC"]
    with pytest.raises(AnswerError, match="has 'B-LOC' but no 'I-LOC'"):
        TOKEN_TAGS.read_sentence({"text": "to New York", "entities": [{"start": 3, "end": 11, "label": "LOC"}]}, only_b)
    with pytest.raises(AnswerError, match="no tag 'O'"):
        TOKEN_TAGS.read_sentence({"text": "x", "entities": []}, LabelSpace(names={"B-LOC": 0}, num_classes=1))


def test_a_suite_reads_entities_as_rows_of_every_word(tmp_path, shared_tagger):
    text = "the food was good."
    keep = [{"id": "e", "text": text, "entities": [{"start": 4, "end": 8, "label": "TOPIC"}]}]
    suite = load_suite(write_kind_suite(tmp_path / "s", shared_tagger, [], keep))
    words = ["the", "food", "was", "good", "."]
    assert [c.id for c in suite.cases] == [f"e#{i}" for i in range(5)]
    assert [c.text for c in suite.cases] == [row_text(words, i) for i in range(5)]
    assert [suite.label_name(c.label) for c in suite.cases] == ["O", "B-TOPIC", "O", "O", "O"]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ({"id": "x", "text": "the food", "entities": [{"start": 4, "end": 6, "label": "TOPIC"}]}, "cuts the word"),
        ({"id": "x", "text": "the food", "entities": [{"start": 4, "end": 8, "label": "PLACE"}]}, "no label 'PLACE'"),
        (
            {"id": "x", "text": "the food", "entities": [{"start": 0, "end": 8, "label": "TOPIC"}]},
            "no 'I-TOPIC'",
        ),
    ],
)
def test_a_wrong_entity_in_a_suite_names_file_line_and_field(tmp_path, shared_tagger, line, words):
    good = {"id": "ok", "tokens": ["good"], "tags": ["B-POS"]}
    with pytest.raises(SuiteError) as error:
        load_suite(write_kind_suite(tmp_path / "s", shared_tagger, [good], [good | {"id": "ok2"}, line]))
    assert (Path(error.value.path).name, error.value.line, error.value.field) == ("must_keep.jsonl", 2, "entities")
    assert words in str(error.value)
