#!/usr/bin/env bash
# Runs test suites N times under CPU hogs (one busy loop per core, plus one) and stops at
# the first failure, printing it: the check that a process test cannot flake under load.
#
#   bash scripts/hog-tests.sh 100 "-p comm"                       # every comm test, 100 rounds
#   bash scripts/hog-tests.sh 5 "-p train --test processes" "-p bench --test processes"
set -euo pipefail
N="${1:-100}"; shift
SUITES=("$@"); [ ${#SUITES[@]} -gt 0 ] || SUITES=("-p comm")
for s in "${SUITES[@]}"; do cargo test --no-run $s >/dev/null 2>&1; done
hogs=()
for _ in $(seq 0 "$(nproc)"); do (while :; do :; done) & hogs+=($!); done
trap 'kill "${hogs[@]}" 2>/dev/null' EXIT
log="$(mktemp)"
t0=$SECONDS
for i in $(seq 1 "$N"); do
  for s in "${SUITES[@]}"; do
    if ! cargo test -q $s >"$log" 2>&1; then
      echo "round $i: cargo test $s FAILED under load:"; grep -E "panicked|FAILED|error" "$log" | head -20
      exit 1
    fi
  done
  echo "round $i/$N ok ($((SECONDS - t0)) s)"
done
echo "all $N rounds passed under $(( $(nproc) + 1 )) CPU hogs: ${SUITES[*]}"
