#!/usr/bin/env bash
# The embedded example end to end, for both head types: the plain run (the release gate) must
# fail on must_fix (exit 1), --warp-repair must pass with certificates (exit 0), and the audit
# of the written model against its certificate must pass (exit 0). Exits 1 on any surprise.
#
# Usage: bash example_suites/run.sh [SUITE ...]   (default: both suites; pytest options via PYTEST_ARGS)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
suites=("$@")
if [ ${#suites[@]} -eq 0 ]; then
    suites=("$here/reviews-distilbert" "$here/reviews-bert")
fi
read -r -a extra <<< "${PYTEST_ARGS:-}"
failed=0

expect() {  # expect CODE TITLE -- pytest args...
    local want="$1" title="$2"
    shift 3
    local start=$SECONDS
    echo
    echo "=== $title (expect exit $want): pytest $*"
    python -m pytest -q "${extra[@]}" "$@"
    local got=$?
    echo "=== $title: exit $got in $((SECONDS - start)) s"
    if [ "$got" -ne "$want" ]; then
        echo "=== UNEXPECTED: $title exited $got, expected $want"
        failed=1
    fi
}

total=$SECONDS
for suite in "${suites[@]}"; do
    out="$suite/.warp/repaired"
    name="$(basename "$suite")"
    expect 1 "$name plain run" -- "$suite" --no-header -rN --tb=no
    expect 0 "$name --warp-repair" -- "$suite" --warp-repair --no-header
    expect 0 "$name audit" -- "$suite" --warp-model "$out" --warp-certificate "$out/warp_certificate.json" --no-header
done
echo
if [ "$failed" -ne 0 ]; then
    echo "example: FAILED ($((SECONDS - total)) s)"
    exit 1
fi
echo "example: plain runs failed on must_fix, repairs passed with certificates, audits passed ($((SECONDS - total)) s)"
