"""A tag per word (``token_tags``): token classifiers (``...ForTokenClassification``) read from case
files of words and tags, checked, repaired with Cert 1–3 per (sentence, word) and audited.

Each constrained word is one row: the tag is the argmax of the tag logits at the word's first
sub-token. Which words the tiny taggers (testkit.token_tags) get wrong, and by how much, is measured
with plain transformers (``word_logits``), never with warp_check: every expected outcome is computed."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
from safetensors.numpy import load_file
from testkit.suite_builder import write_kind_suite
from testkit.tiny_models import build_bert
from testkit.token_tags import TAGS, build_tagger, sentences, split_by_model, tag_of, word_logits

from warp_check import verify
from warp_check.cases import Kind
from warp_check.certify.certificate import CERTIFICATE_NAME
from warp_check.cli import main
from warp_check.decisions import SINGLE_LABEL, TOKEN_TAGS, AnswerError, LabelSpace, deciding_config
from warp_check.decisions.token_tags import sentence_id, words_of
from warp_check.errors import SettingsError, SuiteError
from warp_check.model.adapter import ClassifierAdapter
from warp_check.model.encode import encode_cases
from warp_check.model.specs import HeadForm
from warp_check.sources.conll import read_conll
from warp_check.suite.loader import load_suite

pytest_plugins = ["pytester"]
INNER = ("-p", "no:randomly", "-p", "no:unraisableexception", "-p", "no:hypothesispytest")
SPACE = LabelSpace(names={t: i for i, t in enumerate(TAGS)}, num_classes=len(TAGS))
FAMILIES = ("bert", "distilbert", "roberta")


# -- what a case file states -----------------------------------------------------------------------


def test_a_sentence_states_a_tag_per_word_or_null():
    sentence = TOKEN_TAGS.read_sentence(
        {"tokens": ["the", "food", "was", "good"], "tags": ["O", None, 0, "B-POS"]}, SPACE
    )
    assert [(r.word, r.tag) for r in sentence.rows] == [(0, 0), (2, 0), (3, 1)]
    assert sentence.row_text(sentence.rows[2]) == "the food was ⟦good⟧"
    assert words_of("the food was ⟦good⟧") == (("the", "food", "was", "good"), 3)
    assert sentence_id("s1#12") == "s1" and sentence_id("a#b#3") == "a#b"


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        (
            {"tokens": ["the", "food"], "tags": ["O", "B-PSO"]},
            "tags",
            "word 1 'food': unknown label 'B-PSO' (did you mean 'B-POS'?)",
        ),
        ({"tokens": ["the", "food"], "tags": ["O"]}, "tags", "has 1 tag(s) for 2 word(s)"),
        ({"tokens": ["the", "food"], "tags": [None, None]}, "tags", "constrains no word"),
        ({"tokens": ["the", "ice cream"], "tags": ["O", "O"]}, "tokens", "word 1 'ice cream' holds a space"),
        ({"tokens": [], "tags": []}, "tokens", "must be a non-empty list of words"),
        ({"tokens": ["the", 3], "tags": ["O", "O"]}, "tokens", "word 1 must be a non-empty string"),
        ({"tokens": ["the"], "tags": "O"}, "tags", "must be a list with a tag (or null) per word"),
        ({"tokens": ["the"], "tags": [7]}, "tags", "class id 7 is not a class of the model"),
        ({"tags": ["O"]}, "tokens", "missing field 'tokens'"),
    ],
)
def test_a_wrong_sentence_names_its_field(fields, field, words):
    with pytest.raises(AnswerError) as error:
        TOKEN_TAGS.read_sentence(fields, SPACE)
    assert error.value.field == field and words in str(error.value)


def test_the_kind_is_found_by_the_architecture():
    assert deciding_config(["BertForTokenClassification"], None) is TOKEN_TAGS
    assert deciding_config(["BertForSequenceClassification"], None) is SINGLE_LABEL
    assert deciding_config(None, None) is SINGLE_LABEL


def test_a_single_label_model_refuses_a_sentence_of_tags():
    with pytest.raises(AnswerError) as error:
        SINGLE_LABEL.read_answer({"tokens": ["a"], "tags": ["O"]}, SPACE)
    assert error.value.field == "tokens" and 'this model decides single_label: give "label"' in str(error.value)


# -- tiny taggers through suites ---------------------------------------------------------------------


@pytest.fixture(scope="module", params=FAMILIES)
def tagger(request, tmp_path_factory) -> tuple[str, Path]:
    return request.param, build_tagger(tmp_path_factory.mktemp(request.param) / "model", family=request.param)


@pytest.fixture(scope="module")
def bert_tagger(tmp_path_factory) -> Path:
    return build_tagger(tmp_path_factory.mktemp("bert_tagger") / "model", family="bert")


def write(folder: Path, model: Path, wrong: list[dict], right: list[dict], *, extra: str = "") -> Path:
    return write_kind_suite(folder, model, wrong, right, model_table=extra)


def rows_of(records: list[dict]) -> list[tuple[str, int, list[str], int]]:
    """(row id, word, words, tag id) of every constrained word, in the order of the files."""
    return [
        (f"{r['id']}#{w}", w, r["tokens"], TAGS.index(t))
        for r in records
        for w, t in enumerate(r["tags"])
        if t is not None
    ]


def test_a_suite_reads_a_row_per_constrained_word_and_v_is_the_word_s_first_sub_token(tmp_path, tagger):
    family, model_dir = tagger
    wrong, right = split_by_model(model_dir)
    suite = load_suite(write(tmp_path / "suite", model_dir, wrong, right))
    rows = rows_of(wrong + right)
    assert suite.decision is TOKEN_TAGS
    assert [c.id for c in suite.cases] == [r[0] for r in rows]
    assert [c.label for c in suite.cases] == [r[3] for r in rows]
    assert suite.cases[0].kind is Kind.MUST_FIX and suite.locations[suite.cases[0].id].line == 1
    adapter = ClassifierAdapter.from_pretrained(model_dir)
    assert adapter.spec.form is HeadForm.FINAL_LINEAR and adapter.spec.repair_layer == "classifier"
    # A byte-level BPE tokenizer saved without add_prefix_space takes a word as it starts a text ('the',
    # not 'Ġthe'): pre-split words are read with the prefix space, as Hugging Face's NER guide does.
    assert getattr(adapter.tokenizer, "add_prefix_space", True) is True
    encoded = encode_cases(adapter, suite.cases, progress=False)
    # The head's logits of each row's v are the model's own tag logits at its word (plain transformers).
    records = wrong + right
    plain = dict(zip([r["id"] for r in records], word_logits(model_dir, [r["tokens"] for r in records]), strict=True))
    expected = np.stack([plain[sentence_id(row_id)][word] for row_id, word, _, _ in rows])
    np.testing.assert_allclose(adapter.head().logits(encoded.V.astype(np.float64)), expected, atol=1e-4)
    assert (TOKEN_TAGS.predict(expected) == TOKEN_TAGS.predict(adapter.head().logits(encoded.V))).all()
    # Some words split in sub-tokens: the full stop is its own (the model's tag is the first's).
    assert any(w.endswith(".") for r in records for w in r["tokens"])


@pytest.mark.parametrize(
    ("line", "field", "words"),
    [
        ({"id": "x", "tokens": ["the", "food"], "tags": ["O", "B-PSO"]}, "tags", "unknown label 'B-PSO'"),
        ({"id": "x", "tokens": ["the", "food"], "tags": ["O"]}, "tags", "has 1 tag(s) for 2 word(s)"),
        ({"id": "x", "text": "the food", "label": "O"}, "label", 'give "tags", one per token'),
        ({"id": "x", "text": "the food", "text_pair": "a", "entities": []}, "text_pair", "case is one sentence"),
        ({"id": "x", "tokens": ["a"], "tags": ["O"], "label": "O"}, "label", 'give "tags", one per token'),
        ({"id": "s_dup", "tokens": ["a"], "tags": ["O"]}, "id", "duplicate id 's_dup'"),
        ({"id": "other", "tokens": ["the", "food"], "tags": ["O", "B-POS"]}, "tags", "no model can satisfy both"),
    ],
)
def test_a_wrong_case_file_names_file_line_and_field(tmp_path, bert_tagger, line, field, words):
    first = [
        {"id": "s_dup", "tokens": ["b"], "tags": ["O"]},
        {"id": "s_same", "tokens": ["the", "food"], "tags": ["O", "B-TOPIC"]},
    ]
    folder = write(tmp_path / "suite", bert_tagger, first, [line])
    with pytest.raises(SuiteError) as error:
        load_suite(folder)
    assert (Path(error.value.path).name, error.value.line, error.value.field) == ("must_keep.jsonl", 1, field)
    assert words in str(error.value)


def test_a_sentence_longer_than_the_window_is_refused_naming_it(tmp_path, bert_tagger):
    """Truncation would drop words silently: the sentence's file, line and field, before any work."""
    long = {"id": "long", "tokens": ["good"] * 80, "tags": ["B-POS"] * 80}
    folder = write(tmp_path / "suite", bert_tagger, [long], [{"id": "ok", "tokens": ["good"], "tags": ["B-POS"]}])
    suite = load_suite(folder)
    adapter = ClassifierAdapter.from_pretrained(bert_tagger)
    with pytest.raises(SuiteError) as error:
        encode_cases(adapter, suite.cases, progress=False)
    assert (Path(error.value.path).name, error.value.line, error.value.field) == ("must_fix.jsonl", 1, "tokens")
    window = f"82 sub-tokens, longer than the model's window of {adapter.max_length}"
    assert f"{window}: truncation would drop words silently" in str(error.value)


def test_check_fails_each_wrong_word_naming_it_and_repair_certifies_every_word(pytester, tagger):
    family, model_dir = tagger
    wrong, right = split_by_model(model_dir)
    write(pytester.path / "suite", model_dir, wrong, right)
    records = wrong + right
    rows = rows_of(records)
    plain = dict(zip([r["id"] for r in records], word_logits(model_dir, [r["tokens"] for r in records]), strict=True))
    before = np.stack([plain[sentence_id(row_id)][word] for row_id, word, _, _ in rows])
    tags = np.array([r[3] for r in rows])
    right_now = before.argmax(axis=1) == tags
    # One item per sentence: it fails where any of its constrained words is wrong.
    ids = [r["id"] for r in records]
    wrong_sentences = {sentence_id(rows[i][0]) for i in np.flatnonzero(~right_now)}
    checked = pytester.runpytest(*INNER, "--junitxml=check.xml")
    checked.assert_outcomes(passed=len(ids) - len(wrong_sentences), failed=len(wrong_sentences))
    # JUnit: a testcase per sentence, a property per constrained word naming it.
    junit = ElementTree.parse(pytester.path / "check.xml")
    words_of_case = {
        case.get("name"): {p.get("name") for p in case.iter("property") if p.get("name").startswith("word:")}
        for case in junit.iter("testcase")
    }
    assert words_of_case == {
        r["id"]: {f"word:{row_id}" for row_id, *_ in rows if sentence_id(row_id) == r["id"]} for r in records
    }
    # The failure names each wrong word, what it should be, what it is, by how much; and the sentence.
    i = int(np.flatnonzero(~right_now)[0])
    row_id, word, words, tag = rows[i]
    gap = before[i, tag] - np.max(np.delete(before[i], tag))
    in_sentence = [k for k, r in enumerate(rows) if sentence_id(r[0]) == sentence_id(row_id)]
    checked.stdout.fnmatch_lines(
        [
            f"*{int((~right_now[in_sentence]).sum())} of {len(in_sentence)} constrained word(s) wrong:*",
            f"*must_fix case not fixed yet: word {word} {words[word]!r} predicted '{TAGS[int(before[i].argmax())]}', "
            f"labelled '{TAGS[tag]}' "
            f"(gap {gap:.3f}*",
            f"*must_fix sentence '{sentence_id(row_id)}' at *must_fix.jsonl:*",
            f"*words: '{' '.join(words)}'",
        ]
    )

    out = pytester.path / "repaired"
    repaired = pytester.runpytest(*INNER, "--warp-repair", "--warp-out", str(out))
    repaired.assert_outcomes(passed=len(records))
    certificate = json.loads((out / CERTIFICATE_NAME).read_text())
    assert certificate["model"]["decision"] == "token_tags"
    # The repaired model with plain transformers: every must_fix word tagged right by γ_s (1 by default)
    # less float32 rounding, every must_keep word still right.
    after_plain = dict(zip([r["id"] for r in records], word_logits(out, [r["tokens"] for r in records]), strict=True))
    after = np.stack([after_plain[sentence_id(row_id)][word] for row_id, word, _, _ in rows])
    margins = np.array([after[k, t] - np.max(np.delete(after[k], t)) for k, t in enumerate(tags)])
    fixed = np.array([sentence_id(r[0]) in {w["id"] for w in wrong} for r in rows])
    assert margins[fixed].min() >= 1.0 - 1e-3
    assert (margins[~fixed] > 0).all()
    # Only the classifier changed.
    old, new = load_file(model_dir / "model.safetensors"), load_file(out / "model.safetensors")
    assert old.keys() == new.keys()
    changed = {k for k in old if not np.array_equal(old[k], new[k])}
    assert changed and all(k.startswith("classifier.") for k in changed), changed
    # Cert 1–3 per (sentence, word), recomputed in float64 from the saved weights; the audit too.
    assert verify(out).ok
    audited = pytester.runpytest(*INNER, "--warp-certificate", str(out / CERTIFICATE_NAME))
    audited.assert_outcomes(passed=len(records))


@pytest.mark.slow
def test_ray_encodes_a_word_s_rows_as_the_local_pass_does_bit_for_bit(bert_tagger):
    """The Ray encoder's workers load the tagger as the driver does (the kind from its architecture)
    and take each row's v at its word."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'warp-check[ray]')")
    from warp_check.model.engines.settings import Engine, EngineSettings, RaySettings

    wrong, right = split_by_model(bert_tagger, fix=2, keep=10)
    cases = load_suite(write(Path(bert_tagger).parent / "ray_suite", bert_tagger, wrong, right)).cases
    local = encode_cases(ClassifierAdapter.from_pretrained(bert_tagger), cases, batch_size=8, progress=False)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        engine = EngineSettings(kind=Engine.RAY, ray=RaySettings(num_workers=2))
        on_ray = ClassifierAdapter.from_pretrained(bert_tagger, engine=engine)
        got = encode_cases(on_ray, cases, batch_size=8, progress=False)
    finally:
        ray.shutdown()
    assert np.array_equal(got.V, local.V) and got.input_keys == local.input_keys


# -- what a token suite does not do yet: refused, named ------------------------------------------------


@pytest.fixture(scope="module")
def token_suite(tmp_path_factory, bert_tagger) -> Path:
    wrong, right = split_by_model(bert_tagger, fix=2, keep=6)
    return write(tmp_path_factory.mktemp("refusals") / "suite", bert_tagger, wrong, right)


@pytest.mark.parametrize("command", ["attack", "defer"])
def test_a_command_not_built_for_tokens_is_refused_by_name(token_suite, command):
    with pytest.raises(SettingsError) as error:
        load_suite(token_suite).refuse_per_word(command)
    assert error.value.field == "command"
    assert f"warp-check {command} is not built for a token classifier yet" in str(error.value)


def test_a_neighbourhood_is_refused_by_name(token_suite, tmp_path):
    suite = load_suite(token_suite)
    with pytest.raises(SettingsError) as error:
        suite.settings(neighbours="on")
    assert error.value.field == "neighbours"
    folder = tmp_path / "hood"
    folder.mkdir()
    for name in ("warp.toml", "must_fix.jsonl", "must_keep.jsonl"):
        (folder / name).write_bytes((token_suite / name).read_bytes())
    (folder / "warp.toml").write_text((folder / "warp.toml").read_text() + "[repair.neighbours]\nper_case = 4\n")
    with pytest.raises(SuiteError) as error:
        load_suite(folder)
    assert error.value.field == "repair.neighbours" and "not built for a token classifier yet" in str(error.value)


def test_a_sequence_classifier_s_suite_is_untouched_by_the_token_kind(tmp_path):
    """A sequence classifier's suite still reads one case a line, single label."""
    model_dir = build_bert(tmp_path / "bert")
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "warp.toml").write_text(
        f'[model]\npath = {json.dumps(str(model_dir))}\n[[cases]]\npath = "k.jsonl"\nkind = "must_keep"\n'
    )
    (folder / "k.jsonl").write_text(json.dumps({"id": "a", "text": "the food was good", "label": 1}) + "\n")
    suite = load_suite(folder)
    assert suite.decision is SINGLE_LABEL and [c.id for c in suite.cases] == ["a"]
    # Naming the other kind in [model] decision: refused, naming the field.
    toml = (folder / "warp.toml").read_text()
    (folder / "warp.toml").write_text(toml.replace("[[cases]]", 'decision = "token_tags"\n[[cases]]'))
    with pytest.raises(SuiteError) as error:
        load_suite(folder)
    assert error.value.field == "model.decision" and "it is a classifier of whole texts" in str(error.value)


def test_a_token_classifier_cannot_be_named_a_kind_of_whole_texts(token_suite, tmp_path):
    folder = tmp_path / "suite"
    folder.mkdir()
    for name in ("must_fix.jsonl", "must_keep.jsonl"):
        (folder / name).write_bytes((token_suite / name).read_bytes())
    toml = (token_suite / "warp.toml").read_text()
    (folder / "warp.toml").write_text(toml.replace("[[cases]]", 'decision = "single_label"\n[[cases]]', 1))
    with pytest.raises(SuiteError) as error:
        load_suite(folder)
    assert error.value.field == "model.decision" and "it is a token classifier (a tag per word)" in str(error.value)


# -- CoNLL files into a token suite ---------------------------------------------------------------------


def conll(batch: list[list[str]], *, docstart: bool = True) -> str:
    """``token<TAB>tag`` a line, a blank line between sentences, as CoNLL-2003 and WikiANN ship them."""
    head = "-DOCSTART-\tO\n\n" if docstart else ""
    return head + "\n".join("".join(f"{w}\t{tag_of(w)}\n" for w in words) for words in batch)


def empty_suite(folder: Path, model_dir: Path) -> Path:
    write(folder, model_dir, [], [])
    return folder


def test_conll_sentences_are_imported_and_split_by_the_model(tmp_path, bert_tagger, capsys):
    batch = sentences(40, seed=5)
    (tmp_path / "dev.conll").write_text(conll(batch), encoding="utf-8")
    folder = empty_suite(tmp_path / "suite", bert_tagger)
    args = ["import", str(folder), str(tmp_path / "dev.conll"), "--format", "conll", "--split-by-model"]
    assert main(args) == 0
    logits = word_logits(bert_tagger, batch)
    right = [
        all(TAGS[int(z.argmax())] == tag_of(w) for w, z in zip(words, rows, strict=True))
        for words, rows in zip(batch, logits, strict=True)
    ]
    assert 0 < sum(right) < len(batch), "the tiny tagger's errors moved: pick another seed"
    kept = [json.loads(line) for line in (folder / "must_keep.jsonl").read_text().splitlines()]
    fixed = [json.loads(line) for line in (folder / "must_fix.jsonl").read_text().splitlines()]
    assert [r["tokens"] for r in kept] == [words for words, ok in zip(batch, right, strict=True) if ok]
    assert [r["tokens"] for r in fixed] == [words for words, ok in zip(batch, right, strict=True) if not ok]
    assert all(r["tags"] == [tag_of(w) for w in r["tokens"]] for r in kept + fixed)
    # A sentence's id is the file's name and its first line (after -DOCSTART- and a blank line).
    starts = np.cumsum([3] + [len(words) + 1 for words in batch[:-1]])
    assert sorted(r["id"] for r in kept + fixed) == sorted(f"dev-{n}" for n in starts)
    # Importing again adds nothing.
    capsys.readouterr()
    assert main(args) == 0
    assert (
        f"0 sentence(s) appended to {folder / 'must_keep.jsonl'}, {sum(right)} already there" in capsys.readouterr().out
    )
    # The suite loads them: a row per word, must_fix rows failing exactly where the model is wrong.
    suite = load_suite(folder)
    assert len(suite.cases) == sum(len(words) for words in batch)


@pytest.mark.parametrize(
    ("lines", "where", "words"),
    [
        ("the\tO\nfood\tB-PSO\n", "dev.conll:2: field 'tag'", "unknown label 'B-PSO' (did you mean 'B-POS'?)"),
        ("the\tO\n\nfood B-POS\n", "dev.conll:3:", "expected token<TAB>tag"),
        ("the\tO\nice cream\tO\n", "dev.conll:2: field 'token'", "holds a space"),
        ("the\tO\n\n" + "good\tB-POS\n" * 40, "dev.conll:3: field 'tokens'", "longer than the model's window"),
    ],
)
def test_a_bad_conll_file_names_file_line_and_field_and_writes_nothing(
    tmp_path, bert_tagger, capsys, lines, where, words
):
    (tmp_path / "dev.conll").write_text(lines, encoding="utf-8")
    folder = empty_suite(tmp_path / "suite", bert_tagger)
    assert main(["import", str(folder), str(tmp_path / "dev.conll"), "--format", "conll"]) != 0
    err = capsys.readouterr().err
    assert where in err and words in err, err
    assert (folder / "must_keep.jsonl").read_text() == "" and (folder / "must_fix.jsonl").read_text() == ""


def test_a_line_of_nothing_visible_ends_a_sentence(tmp_path):
    """WNUT-17's dev file has lines holding only a byte order mark where a blank line belongs."""
    path = tmp_path / "dev.conll"
    path.write_text("the\tO\nfood\tB-TOPIC\n\ufeff\ngood\tB-POS\n\u200b\n\nbad\tB-NEG\r\n", encoding="utf-8")
    read = read_conll(path, SPACE)
    assert [(s.words, s.tags, s.line) for s in read] == [
        (("the", "food"), ("O", "B-TOPIC"), 1),
        (("good",), ("B-POS",), 4),
        (("bad",), ("B-NEG",), 7),
    ]


SHARED_NER = Path(__file__).resolve().parents[3] / "shared" / "data" / "ner"


@pytest.mark.skipif(not SHARED_NER.is_dir(), reason="the issue's NER data is not beside this checkout")
@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("wikiann-en", {"train": 20000, "dev": 10000, "test": 10000}),
        ("wnut17", {"train": 3394, "dev": 1009, "test": 1287}),
    ],
)
def test_the_issue_s_ner_files_are_read_whole(name, counts):
    """WikiANN (PER/ORG/LOC) and WNUT-17 as shipped: every sentence, at the published counts."""
    for part, count in counts.items():
        path = SHARED_NER / name / f"{part}.conll"
        lines = path.read_text(encoding="utf-8").split("\n")
        tags = sorted({line.split("\t")[1].strip() for line in lines if "\t" in line})
        read = read_conll(path, LabelSpace(names={t: i for i, t in enumerate(tags)}, num_classes=len(tags)))
        assert len(read) == count
        assert sum(len(s.words) for s in read) == sum(1 for line in lines if "\t" in line)


def test_import_into_a_token_suite_takes_conll_only(token_suite, tmp_path, capsys):
    (tmp_path / "rows.jsonl").write_text('{"text": "the food was good", "label": "O"}\n')
    assert main(["import", str(token_suite), str(tmp_path / "rows.jsonl")]) != 0
    assert (
        "--format jsonl: a token classifier's suite imports sentences of tagged words (--format conll), or untagged "
        "texts the model tags (--predicted)" in capsys.readouterr().err
    )
