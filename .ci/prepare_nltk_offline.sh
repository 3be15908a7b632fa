#!/usr/bin/env bash
# Prepare the NLTK data that `warp-check attack` (TextAttack 0.3.11) needs, with no network but
# Debian's package archive:
#   NLTK_DATA_DIR/corpora/stopwords/english   NLTK's English stop-word list (179 words, inline below)
#   NLTK_DATA_DIR/corpora/wordnet/            WordNet 3.0 from Debian's wordnet-base + wordnet-sense-index,
#                                             plus the `lexnames` file NLTK's reader opens first (built
#                                             from the lexnames(5WN) man page that wordnet-base ships)
# and, given a second argument, TextAttack's post-install marker in that folder, so that
# `import textattack` does not call nltk.download() for six packages (textattack/shared/utils/install.py
# checks "$TA_CACHE_DIR/post_install_check_3"; TA_CACHE_DIR defaults to ~/.cache/textattack).
#
# Usage:  bash .ci/prepare_nltk_offline.sh NLTK_DATA_DIR [TEXTATTACK_CACHE_DIR]
# Then:   export NLTK_DATA=NLTK_DATA_DIR
#         (leave TA_CACHE_DIR unset and pass ~/.cache/textattack as the second argument: with
#         TA_CACHE_DIR set, textattack repoints XDG_CACHE_HOME, HF_HOME... at its own cache)
# Needs:  dpkg-deb and apt-get (`apt-get update` is run once if the package lists are missing, which
#         needs root), unless wordnet-base and wordnet-sense-index are installed (/usr/share/wordnet).
# Safe to re-run: a folder already prepared is checked and kept; files are written to temporary
# names and renamed into place, so an interrupted run leaves no half-written corpus.
set -euo pipefail

usage="usage: $0 NLTK_DATA_DIR [TEXTATTACK_CACHE_DIR]"
case "${1:-}" in
    -h | --help) echo "$usage"; exit 0 ;;
    "") echo "$usage" >&2; exit 2 ;;
esac
dest="$1"
ta_cache="${2:-}"
mkdir -p "$dest/corpora"

work="$(mktemp -d)"
stage=""
cleanup() { rm -rf "$work"; if [ -n "$stage" ]; then rm -rf "$stage"; fi; }
trap cleanup EXIT

# ---- stop words: nltk_data corpora/stopwords/english (the 179-word list of NLTK <= 3.8 data)
mkdir -p "$dest/corpora/stopwords"
tmp_sw="$(mktemp "$dest/corpora/stopwords/.english.XXXXXX")"
tr ' ' '\n' > "$tmp_sw" <<'WORDS'
i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself yourselves he him his himself she she's her hers herself it it's its itself they them their theirs themselves what which who whom this that that'll these those am is are was were be been being have has had having do does did doing a an the and but if or because as until while of at by for with about against between into through during before after above below to from up down in out on off over under again further then once here there when where why how all any both each few more most other some such no nor not only own same so than too very s t can will just don don't should should've now d ll m o re ve y ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
WORDS
n_words=$(wc -l < "$tmp_sw")
if [ "$n_words" -ne 179 ]; then rm -f "$tmp_sw"; echo "stop-word list has $n_words words, expected 179" >&2; exit 1; fi
chmod 644 "$tmp_sw"
mv -f "$tmp_sw" "$dest/corpora/stopwords/english"

# ---- WordNet 3.0 from Debian
wn_files="adj.exc adv.exc noun.exc verb.exc index.adj index.adv index.noun index.verb
          data.adj data.adv data.noun data.verb cntlist.rev index.sense"
wordnet_ready() {
    local dir="$dest/corpora/wordnet" f
    for f in $wn_files lexnames; do [ -s "$dir/$f" ] || return 1; done
    [ "$(wc -l < "$dir/lexnames")" -eq 45 ]
}
if wordnet_ready; then
    echo "WordNet already in $dest/corpora/wordnet: kept"
else
    src=/usr/share/wordnet
    man_page=/usr/share/man/man5/lexnames.5WN.gz
    if [ ! -f "$src/index.sense" ] || [ ! -f "$src/data.noun" ] || [ ! -f "$man_page" ]; then
        # apt-get download writes into the current folder; _apt must be able to write there, else it
        # warns and downloads unsandboxed as root (harmless).
        chmod 777 "$work"
        # On a fresh machine apt has no package lists yet: update once (root), then retry.
        if ! (cd "$work" && apt-get download -q wordnet-base wordnet-sense-index >/dev/null 2>&1); then
            apt-get update -qq >/dev/null || {
                echo "cannot download wordnet-base and wordnet-sense-index: run 'apt-get update' as root," \
                    "or install both packages, then re-run" >&2
                exit 1
            }
            (cd "$work" && apt-get download -q wordnet-base wordnet-sense-index >/dev/null)
        fi
        for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
        src="$work/root/usr/share/wordnet"
        man_page="$work/root/usr/share/man/man5/lexnames.5WN.gz"
    fi
    stage="$(mktemp -d "$dest/corpora/.wordnet.XXXXXX")"
    for f in $wn_files; do cp "$src/$f" "$stage/$f"; done
    # lexnames: "NN<TAB>name<TAB>category" for the 45 lexicographer files listed in lexnames(5WN);
    # category 1 noun, 2 verb, 3 adjective, 4 adverb.
    zcat "$man_page" | awk -F'\t' '
        /^_$/ {in_table = 1; next}
        /^\.TE/ {in_table = 0}
        in_table && $1 ~ /^[0-9][0-9]$/ {
            name = $2; gsub(/ +$/, "", name)
            split(name, part, "."); cat = (part[1] == "noun") ? 1 : (part[1] == "verb") ? 2 : (part[1] == "adj") ? 3 : 4
            printf "%s\t%s\t%d\n", $1, name, cat
        }' > "$stage/lexnames"
    n_lex=$(wc -l < "$stage/lexnames")
    [ "$n_lex" -eq 45 ] || { echo "lexnames has $n_lex lines, expected 45" >&2; exit 1; }
    chmod 755 "$stage"
    chmod 644 "$stage"/*
    rm -rf "$dest/corpora/wordnet"
    mv "$stage" "$dest/corpora/wordnet"
    stage=""
fi

# ---- TextAttack's post-install marker (an empty file)
if [ -n "$ta_cache" ]; then
    mkdir -p "$ta_cache"
    : > "$ta_cache/post_install_check_3"
    echo "TextAttack marker: $ta_cache/post_install_check_3"
fi
echo "NLTK data ready in $dest (stopwords: $n_words words; wordnet: $(ls "$dest/corpora/wordnet" | wc -l) files)"
echo "now: export NLTK_DATA=$dest"
