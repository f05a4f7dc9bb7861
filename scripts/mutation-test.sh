#!/usr/bin/env bash
# Mutation testing of the judging code (pyproject.toml [tool.mutmut]: the verdict, the XID table,
# the health, events and DCGM rules). Every mutant is a rule changed by one token; a test must
# fail for each. Prints the score and each survivor; exits 1 below the floor (default 90%).
# Usage: scripts/mutation-test.sh [FLOOR_PERCENT]   (about a minute on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
floor=${1:-90}
python=${PYTHON:-python}
rm -rf mutants
"$python" -m mutmut run >/dev/null 2>&1 || true # its live counter is for a terminal
results=$("$python" -m mutmut results --all true 2>/dev/null || true)
killed=$(grep -c ': killed$' <<<"$results" || true)
# a mutant no selected test runs is not killed: it counts as a survivor
survived=$(grep -c -E ': (survived|no tests)$' <<<"$results" || true)
total=$((killed + survived))
if ((total == 0)); then
  echo "mutation-test: mutmut produced no result (see: $python -m mutmut run)" >&2
  exit 2
fi
score=$((100 * killed / total))
echo "mutation-test: $killed of $total mutants killed ($score%), $survived survived"
grep -E ': (survived|no tests)$' <<<"$results" | sed -E 's/: (survived|no tests)$//' | while read -r name; do
  echo "  survived: $name"
  # a mutant whose diff has no +/- line must not end the list (grep exits 1 under pipefail)
  "$python" -m mutmut show "$name" 2>/dev/null | grep -E '^[-+] ' | sed 's/^/      /' || true
done
((score >= floor)) || { echo "mutation-test: below the $floor% floor" >&2; exit 1; }
