#!/usr/bin/env bash
# `make e2e`: the end-to-end tests, in two `go test` processes at once.
# The tests of the secured stacks (TestSecure*, TestPrivacy*,
# TestKeytab*) talk to Kafka, HDFS and metastores of their own, so they
# run beside the others instead of after them: the e2e phase takes about
# as long as the plain tests alone. Their output is kept in a file and
# printed whole once both processes are done (interleaved, neither
# would be readable); a test still running when the other process ends is
# waited for. Exits non-zero if either process failed.
#
# Usage: e2e.sh
#   GO        the go command (default go)
#   SHUFFLE   go test's -shuffle (default on)
#   E2E_SPLIT 0 runs all the tests in one process, one after the other
set -uo pipefail
cd "$(dirname "$0")/../.."
go=${GO:-go}
shuffle=${SHUFFLE:-on}
secured='^(TestSecure|TestPrivacy|TestKeytab)'
flags=(-shuffle="$shuffle" -count=1 -timeout 50m -v)

if [ "${E2E_SPLIT:-1}" = 0 ]; then
  exec "$go" test "${flags[@]}" ./e2e/
fi

log=$(mktemp "${TMPDIR:-/tmp}/hivedr-e2e-secured.XXXXXX")
pid=
cleanup() {
  [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
  rm -f "$log"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "e2e: the secured stacks' tests ($secured) run beside the others; their output follows theirs"
"$go" test "${flags[@]}" -run "$secured" ./e2e/ >"$log" 2>&1 &
pid=$!
"$go" test "${flags[@]}" -skip "$secured" ./e2e/
plain=$?
wait "$pid"
secure=$?
pid=
echo "==== e2e: the secured stacks' tests (exit $secure)"
cat "$log"
[ "$plain" = 0 ] || exit "$plain"
exit "$secure"
