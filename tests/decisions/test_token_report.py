"""A token suite's report shows each sentence whole: every constrained word with its tag (before and
after a repair, now in a check), the wrong words and the fixed ones marked, the free words plain; in
report.md and in index.html as headless Chromium renders it.

What each word should show is computed here with plain transformers on the input and the repaired
folders (testkit.token_tags.word_logits), never from warp_check's verdicts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest
from testkit.suite_builder import write_kind_suite
from testkit.token_tags import TAGS, split_by_model, word_logits

from warp_check.cli import main
from warp_check.decisions.token_tags import row_id
from warp_check.reports.folder import REPORT_HTML, REPORT_JSON, REPORT_MD, read_report
from warp_check.reports.tokens import WordMark, tagged_sentences

HOSTILE = "<b>"  # a word that is HTML: the page shows it as text (the tiny model's window is 32 sub-tokens)


@pytest.fixture(scope="module")
def reports(tmp_path_factory, shared_tagger) -> dict:
    """A check and a repair of 4 must_fix and 10 must_keep sentences (one must_fix sentence ends with a
    free word that is HTML), each with its report, and the tags each word should show."""
    tmp = tmp_path_factory.mktemp("token_report")
    wrong, right = split_by_model(shared_tagger, fix=4, keep=10)
    short = min(range(len(wrong)), key=lambda i: len(wrong[i]["tokens"]))
    wrong[short] = {**wrong[short], "tokens": [*wrong[short]["tokens"], HOSTILE], "tags": [*wrong[short]["tags"], None]}
    suite = write_kind_suite(tmp / "suite", shared_tagger, wrong, right)
    out = tmp / "repaired"
    assert main(["check", str(suite), "--report", str(tmp / "check"), "-q"]) == 1
    assert main(["repair", str(suite), "--out", str(out), "--report", str(tmp / "repair"), "-q"]) == 0
    cases = [("must_fix", r) for r in wrong] + [("must_keep", r) for r in right]
    batch = [r["tokens"] for _, r in cases]
    before, after = word_logits(shared_tagger, batch), word_logits(out, batch)
    expected = {}  # sentence → per word (tag asked, predicted before, predicted after)
    for (kind, record), was, now in zip(cases, before, after, strict=True):
        expected[record["id"]] = (kind, record["tokens"], [
            (tag, TAGS[int(np.argmax(b))], TAGS[int(np.argmax(a))])
            for tag, b, a in zip(record["tags"], was, now, strict=True)
        ])  # fmt: skip
    return {"check": tmp / "check", "repair": tmp / "repair", "expected": expected}


def _marks(words: list, *, repaired: bool) -> list[WordMark]:
    marks = []
    for tag, was, now in words:
        if tag is None:
            marks.append(WordMark.FREE)
        elif not repaired:
            marks.append(WordMark.RIGHT if was == tag else WordMark.WRONG)
        elif now != tag:
            marks.append(WordMark.WRONG)
        else:
            marks.append(WordMark.FIXED if was != tag else WordMark.RIGHT)
    return marks


@pytest.mark.parametrize("mode", ["check", "repair"])
def test_every_sentence_shows_its_words_with_the_tags_the_model_gives_them(reports, mode):
    (run,) = read_report(reports[mode] / REPORT_JSON)
    shown = {s.sentence: s for s in tagged_sentences(run)}
    assert set(shown) == set(reports["expected"])
    for sentence, (kind, tokens, words) in reports["expected"].items():
        view = shown[sentence]
        assert view.kind.value == kind and [w.word for w in view.words] == tokens
        assert [w.mark for w in view.words] == _marks(words, repaired=mode == "repair"), sentence
        for w, (tag, was, now) in zip(view.words, words, strict=True):
            if tag is not None and mode == "check":  # a check records the tag predicted
                assert w.predicted_after == was
            elif tag is not None:  # a repair records the tags before and after
                assert (w.predicted_before, w.predicted_after) == (was, now)
                if w.mark is WordMark.FIXED:
                    assert w.tags == f"{was} → {tag} ✓" and was != tag
    marks = [w.mark for s in shown.values() for w in s.words]
    if mode == "check":
        assert marks.count(WordMark.WRONG) >= 4 and WordMark.FIXED not in marks
        assert [s.outcome.value for s in tagged_sentences(run)[:4]] == ["failed"] * 4  # failures first
    else:
        assert WordMark.WRONG not in marks and marks.count(WordMark.FIXED) >= 4


def test_report_md_lists_each_sentence_with_its_wrong_words_in_bold(reports):
    text = (reports["check"] / REPORT_MD).read_text(encoding="utf-8")
    lines = {line.split("`")[1]: line for line in text.splitlines() if line.startswith("- `s")}
    for sentence, (_, tokens, words) in reports["expected"].items():
        line = lines[sentence]
        for word, (tag, was, _) in zip(tokens, words, strict=True):
            if tag is not None and was != tag:
                assert f"**{word} \\[{was} ✗ asks {tag}\\]**" in line
            elif tag is not None:
                assert f"{word} \\[{tag}\\]" in line
    assert "<b>" not in text and "\\<b\\>" in text  # a word is text, not markup


class Sentences(HTMLParser):
    """The page's sentences as the browser leaves them: per sentence, each word's class and text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.body: dict = {}
        self.sentences: dict[str, list[list[str]]] = {}
        self._sentence: str | None = None
        self._depth = 0  # spans open inside a word
        self._part = 0  # 1: the word itself, 2: its tags

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if tag == "body":
            self.body = found
        elif tag == "div" and "data-sentence" in found:
            self._sentence = found["data-sentence"]
            self.sentences[self._sentence] = []
        elif tag == "span" and self._sentence is not None and "tw" in (found.get("class") or "").split():
            self.sentences[self._sentence].append([found["class"], "", ""])
            self._depth, self._part = 1, 1
        elif tag == "span" and self._depth:
            self._depth += 1
            self._part = 2

    def handle_endtag(self, tag):
        if tag == "span" and self._depth:
            self._depth -= 1
        elif tag == "div":
            self._sentence = None

    def handle_data(self, data):
        if self._depth and self._sentence is not None:
            self.sentences[self._sentence][-1][self._part] += data


def test_the_page_shows_the_sentences_marked_in_a_browser(reports, tmp_path):
    browser = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if browser is None:
        if os.environ.get("WARP_REQUIRE_BROWSER") == "1":
            pytest.fail("WARP_REQUIRE_BROWSER=1 but no headless browser (chromium) is installed")
        pytest.skip("no headless browser (chromium) installed: the page's browser test cannot run")
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=30000", "--dump-dom",
        (reports["repair"] / REPORT_HTML).as_uri(),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    page = Sentences()
    page.feed(done.stdout)
    assert page.body.get("data-ready") == "true"
    assert set(page.sentences) == set(reports["expected"])
    for sentence, (_, tokens, words) in reports["expected"].items():
        shown = page.sentences[sentence]
        assert [text for _, text, _ in shown] == tokens
        for (classes, _, tags), mark, (tag, was, _) in zip(shown, _marks(words, repaired=True), words, strict=True):
            assert classes.split() == (["tw"] if mark is WordMark.FREE else ["tw", mark.value])
            if mark is WordMark.FIXED:
                assert tags == f"{was} → {tag} ✓"
            elif mark is WordMark.RIGHT:
                assert tags == tag
            else:
                assert tags == ""


def test_a_repairs_report_records_each_words_tag_before_and_after(reports):
    """report.json holds the tags (what the view reads, and what other tools may), report.md shows the
    tag each fixed word had before the repair, not a placeholder."""
    cases = {c["id"]: c for c in json.loads((reports["repair"] / REPORT_JSON).read_text("utf-8"))["runs"][0]["cases"]}
    text = (reports["repair"] / REPORT_MD).read_text(encoding="utf-8")
    fixed = 0
    for sentence, (_, tokens, words) in reports["expected"].items():
        for i, (word, (tag, was, now)) in enumerate(zip(tokens, words, strict=True)):
            if tag is None:
                continue
            assert cases[row_id(sentence, i)]["answered"] == {"before": was, "after": now}
            if was != tag:
                fixed += 1
                assert f"{word} \\[{was} → {tag} ✓\\]" in text
    assert fixed >= 4
