#!/usr/bin/env bash
# `make test`'s phases, one after the other as make would run them (the
# first that fails ends the run): vet, tools, unit, stacks (the plain
# stack, the secured one and its privacy variant up), e2e. Each phase's
# output goes to the console and to a log; at the end (on every exit path)
# one line per phase that ran gives its wall time and, for the phases that
# run tests, how many tests ran, passed, failed and were skipped, counted
# from `go test -v`'s top-level "--- PASS/FAIL/SKIP" lines (a test binary
# that timed out or a package that did not build counts as one failure). The last line is the
# totals alone: "N passed, N failed". Exits with the first failing phase's
# status.
#
# Usage: phases.sh [MAKE]   (make's own command; `make test` passes $(MAKE))
#   HIVEDR_TEST_LOGS   where the phases' logs and summary.txt (the lines above) go
#                      (default: a new directory under $TMPDIR)
#   HIVEDR_PHASE_FILE  when set, the name of the phase running is written there
#                      (.ci/run's background load reads it)
set -uo pipefail
cd "$(dirname "$0")/../.."
make=${1:-make}
logs=${HIVEDR_TEST_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/hivedr-test.XXXXXX")}
mkdir -p "$logs"

phases=(vet tools unit stacks e2e)
declare -A targets=(
  [vet]="vet"
  [tools]="tools"
  [unit]="unit UNITFLAGS=-v"
  [stacks]="stack-up stack-secure-up stack-privacy-up"
  [e2e]="e2e"
)
declare -A secs=() status=()
ran=()

# counts LOG prints "RUN PASS FAIL SKIP" of the top-level tests in LOG.
counts() {
  local log=$1 pass fail skip broken
  pass=$(grep -c '^--- PASS: ' "$log")
  fail=$(grep -c '^--- FAIL: ' "$log")
  skip=$(grep -c '^--- SKIP: ' "$log")
  # Failures no "--- FAIL" line tells of.
  broken=$(grep -c -E '^panic: test timed out after |^FAIL[[:space:]].*\[(build|setup) failed\]$' "$log")
  fail=$((fail + broken))
  echo "$((pass + fail + skip)) $pass $fail $skip"
}

summary() {
  local p line total_pass=0 total_fail=0 run pass fail skip
  echo
  echo "==== make test: phases (logs in $logs)"
  for p in "${ran[@]}"; do
    line=$(printf 'phase %-7s %6ss  %s' "$p" "${secs[$p]:-?}" "$([ "${status[$p]:-1}" = 0 ] && echo ok || echo "FAILED (exit ${status[$p]:-?})")")
    if [ "$p" = unit ] || [ "$p" = e2e ]; then
      read -r run pass fail skip < <(counts "$logs/$p.log")
      line+=$(printf '  tests: %d run, %d passed, %d failed, %d skipped' "$run" "$pass" "$fail" "$skip")
      total_pass=$((total_pass + pass))
      total_fail=$((total_fail + fail))
    fi
    echo "$line"
  done
  echo "$total_pass passed, $total_fail failed"
}

on_exit() {
  local rc=$?
  # A phase cut short (an interrupt) has its time so far.
  if [ -n "${current:-}" ] && [ -z "${secs[$current]:-}" ]; then
    secs[$current]=$((SECONDS - started))
    status[$current]=$rc
  fi
  [ -n "${HIVEDR_PHASE_FILE:-}" ] && echo done >"$HIVEDR_PHASE_FILE"
  summary | tee "$logs/summary.txt"
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT TERM

rc=0
for p in "${phases[@]}"; do
  current=$p
  ran+=("$p")
  [ -n "${HIVEDR_PHASE_FILE:-}" ] && echo "$p" >"$HIVEDR_PHASE_FILE"
  echo "==== phase $p: $make ${targets[$p]}"
  started=$SECONDS
  # shellcheck disable=SC2086 # targets[$p] is make's words
  if [ "$p" = unit ]; then
    # -v for the counts; the console leaves out the per-test lines of
    # passing tests (the log has everything).
    $make --no-print-directory ${targets[$p]} 2>&1 | tee "$logs/$p.log" |
      grep --line-buffered -v -E '^ *(=== (RUN|PAUSE|CONT|NAME)|--- (PASS|SKIP): )'
  else
    $make --no-print-directory ${targets[$p]} 2>&1 | tee "$logs/$p.log"
  fi
  rc=${PIPESTATUS[0]}
  secs[$p]=$((SECONDS - started))
  status[$p]=$rc
  [ "$rc" = 0 ] || break
done
current=
exit "$rc"
