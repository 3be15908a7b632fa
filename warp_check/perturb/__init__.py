"""Text perturbations of one sentence, as hypothesis strategies that shrink toward it: what the
invariance checks draw from and what a repair's neighbourhood perturbs its cases with.

Every strategy draws independent edits, each addressed by a position in the original text (or a
site found in it), and applies them right to left; an edit that would overlap one already applied
is dropped. Deleting any edit therefore leaves the others meaning what they meant, so hypothesis
shrinks a failing example to the fewest edits (usually one: with an edit count and positions in
the edited text, 5 runs in 300 stopped at two), then to simpler ones (the first edit kind, the
first replacement, the earliest position where positions are drawn) — and a passing search to
the unchanged text.

Strategies and what each guarantees:

- :func:`typos`: keyboard-neighbour substitution, swap, insert, delete inside words; whitespace
  and punctuation untouched; at most ``max_edits`` Damerau–Levenshtein edits.
- :func:`case_and_punctuation`: a word re-cased, the final punctuation added/removed/repeated.
- :func:`contractions`: "do not" ↔ "don't", "it is" ↔ "it's" ... (spelling only).
- :func:`negation_preserving`: meaning-preserving rewrites that keep every negation (see there).
- :func:`word_edits`: a token classifier's tagged sentence, one word per word, every stated tag kept
  (typos in stated words; re-casing and synonyms only of words outside every entity).
- :func:`wordnet_synonyms`: a word replaced by a synonym from WordNet, when nltk and the WordNet
  data are installed (:func:`wordnet_available`); conservative, but not guaranteed to keep the
  meaning (see there).
"""

from warp_check.perturb.casing import case_and_punctuation
from warp_check.perturb.draws import (
    DRAWS_PER_TEXT,
    distinct_draws,
    draw_key,
    drawing_code,
    perturbations,
    perturbed_sentences,
    perturbed_texts,
)
from warp_check.perturb.rewrites import (
    CONTRACTIONS,
    INTENSIFIERS,
    NEGATED_FORMS,
    NEGATORS,
    NEUTRAL_PREFIXES,
    contractions,
    negation_markers,
    negation_preserving,
)
from warp_check.perturb.typos import KEYBOARD_NEIGHBOURS, typos
from warp_check.perturb.wordnet import WordNetUnavailable, wordnet_available, wordnet_synonyms
from warp_check.perturb.words import word_edits

__all__ = [
    "CONTRACTIONS",
    "DRAWS_PER_TEXT",
    "INTENSIFIERS",
    "KEYBOARD_NEIGHBOURS",
    "NEGATED_FORMS",
    "NEGATORS",
    "NEUTRAL_PREFIXES",
    "WordNetUnavailable",
    "case_and_punctuation",
    "contractions",
    "distinct_draws",
    "draw_key",
    "drawing_code",
    "negation_markers",
    "negation_preserving",
    "perturbations",
    "perturbed_sentences",
    "perturbed_texts",
    "typos",
    "wordnet_available",
    "wordnet_synonyms",
    "word_edits",
]
