#!/usr/bin/env bash
# demo.sh runs the scripted workload of e2e/demo on the local stack's
# source metastore, then waits until the DR replica equals the source and
# prints the side-by-side comparison. It expects the stack (`make
# stack-up`) and the hivedr daemons (tail, copyd, apply) to be running;
# `make demo` starts them. Exits 0 when the DR equals the source, 1 when it
# still differs after the wait, 2 on an error.
#
# Environment:
#   DEMO_DB      database to work in (default finance)
#   DEMO_WAIT    how long to wait for the DR to catch up (default 2m)
#   DEMO_RESET   1 (default) drops DEMO_DB on the source first if it exists
#   DEMO_ROWS    rows per data file (default 5)
#   HIVEDR_CONFIG  hivedr configuration for the path mappings (default: the
#                  local stack's built-in defaults)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
db=${DEMO_DB:-finance}
wait=${DEMO_WAIT:-2m}
rows=${DEMO_ROWS:-5}

bindir=$(mktemp -d)
trap 'rm -rf "$bindir"' EXIT
(cd "$root" && go build -o "$bindir/demo" ./e2e/demo)

config=()
if [ -n "${HIVEDR_CONFIG:-}" ]; then
  config=(-config "$HIVEDR_CONFIG")
fi
reset=()
if [ "${DEMO_RESET:-1}" = 1 ]; then
  reset=(-reset)
fi

cd "$root"
echo "== workload on the source"
"$bindir/demo" workload -db "$db" -rows "$rows" "${reset[@]}" "${config[@]}"
echo
echo "== source vs DR (waiting up to $wait)"
"$bindir/demo" compare -db "$db" -wait "$wait" "${config[@]}"
