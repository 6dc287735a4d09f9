#!/usr/bin/env bash
# run.sh is `make demo` after `make stack-up`: it runs the whole pipeline on
# the local stack and shows the DR catching up.
#
#  1. builds bin/hivedr and the demo driver (e2e/demo);
#  2. stops daemons an earlier demo left running, and deletes the Kafka state
#     an earlier run left (topics under the prefix, the copyd and applier
#     groups; `demo reset`) with the daemons' state directories, so every run
#     starts like a fresh machine: the tailer, having no checkpoint, starts
#     at the head of the source log;
#  3. starts `hivedr tail` in the background with the default configuration
#     (the local stack; every database replicates) and waits for its first
#     checkpoint (its starting position: the head of the source log), then
#     `hivedr copyd` and `hivedr apply`; logs go to .stack/demo/<role>.log;
#  4. runs the scripted workload on the source database finance (dropping an
#     earlier run's finance first: the drop replicates too);
#  5. prints `hivedr status -db finance` every 2 s until it exits 0 (lag 0,
#     nothing halted), failing after DEMO_TIMEOUT seconds with the daemons'
#     log tails;
#  6. compares the source with the DR (`demo compare`): tables, partitions,
#     files; exits 1 if they differ;
#  7. a DR drill with failback: writes the reverse pipeline's configuration
#     (`demo reverse`: the roles swapped, for the drills' scratch databases),
#     starts its three daemons (logs .stack/demo/back-<role>.log) and runs
#     `hivedr drill -reverse-config`, which must PASS;
#  8. stops the daemons with SIGTERM and waits for them. The stack stays up.
#
# Environment:
#   DEMO_DB        database (default finance)
#   DEMO_TIMEOUT   seconds to wait for the lag to reach zero (default 180)
#   HIVEDR_CONFIG  a hivedr configuration instead of the local defaults
#   GO             the go command (default go)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
GO=${GO:-go}
db=${DEMO_DB:-finance}
timeout=${DEMO_TIMEOUT:-180}
stackdir=${HIVEDR_STACK_DIR:-$root/.stack}
demodir=$stackdir/demo
hivedr=$root/bin/hivedr
driver=$demodir/demo-driver
config=()
if [ -n "${HIVEDR_CONFIG:-}" ]; then
  config=(-config "$HIVEDR_CONFIG") # hivedr reads $HIVEDR_CONFIG itself
fi
roles=(tail copyd apply back-tail back-copyd back-apply) # back-*: the reverse pipeline of the drill
t0=$SECONDS

bold='' red='' plain=''
if [ -t 1 ]; then bold=$'\033[1m' red=$'\033[1;31m' plain=$'\033[0m'; fi
phase() { printf '\n%s== [%3ds] %s%s\n' "$bold" $((SECONDS - t0)) "$*" "$plain"; }

# alive ROLE: the daemon this demo started for ROLE is running.
alive() {
  local f=$demodir/$1.pid pid
  [ -s "$f" ] || return 1
  pid=$(cat "$f")
  kill -0 "$pid" 2>/dev/null && grep -qa hivedr "/proc/$pid/cmdline" 2>/dev/null
}

logtails() {
  for r in "${roles[@]}"; do
    if [ -f "$demodir/$r.log" ]; then
      echo "---- last 25 lines of $demodir/$r.log"
      tail -n 25 "$demodir/$r.log"
    fi
  done
}

fail() {
  printf '\n%smake demo FAILED: %s%s\n' "$red" "$*" "$plain" >&2
  logtails >&2
  exit 1
}

# stop_daemons: SIGTERM each daemon, then wait up to 30 s for it to exit.
stop_daemons() {
  local r pid ok=0
  for r in "${roles[@]}"; do
    alive "$r" && kill -TERM "$(cat "$demodir/$r.pid")"
  done
  for r in "${roles[@]}"; do
    [ -s "$demodir/$r.pid" ] || continue
    pid=$(cat "$demodir/$r.pid")
    for _ in $(seq 300); do
      alive "$r" || break
      sleep 0.1
    done
    if alive "$r"; then
      echo "hivedr $r (pid $pid) did not stop in 30 s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
      ok=1
    else
      code=0
      wait "$pid" 2>/dev/null || code=$?
      case $code in
      0) echo "hivedr $r stopped (exit 0)" ;;
      127) echo "hivedr $r stopped" ;; # not started by this run: no exit code
      *)
        echo "hivedr $r exited $code on SIGTERM" >&2
        ok=1
        ;;
      esac
    fi
    rm -f "$demodir/$r.pid"
  done
  return $ok
}

mkdir -p "$demodir"
trap 'rc=$?; trap - EXIT; if [ $rc != 0 ]; then echo "stopping the demo daemons" >&2; stop_daemons >&2 || true; fi; exit $rc' EXIT
trap 'exit 130' INT TERM

phase "build bin/hivedr and the demo driver"
"$GO" build -o "$hivedr" ./cmd/hivedr
"$GO" build -o "$driver" ./e2e/demo

if alive tail || alive copyd || alive apply; then
  phase "stop the daemons an earlier demo left running"
  stop_daemons || true
fi
rm -f "$demodir"/*.pid

phase "reset the pipeline's Kafka state from any earlier run (fresh start)"
"$driver" reset "${config[@]}" || fail "could not reset the pipeline's topics and groups"
rm -rf "$demodir/state"

# start NAME ROLE [ARGS...]: runs `hivedr ROLE ARGS...` in the background,
# logging to NAME.log.
start() {
  local name=$1 role=$2
  shift 2
  local args=("$@")
  [ "$role" != tail ] && args+=(-state-dir "$demodir/state/$name")
  "$hivedr" "$role" "${args[@]}" >"$demodir/$name.log" 2>&1 &
  echo $! >"$demodir/$name.pid"
  echo "hivedr $role${1:+ $*}: pid $! (log ${demodir#"$root"/}/$name.log)"
}

# wait_for WHAT SECONDS COMMAND...: polls COMMAND until it succeeds, failing
# when a daemon exits or after SECONDS.
wait_for() {
  local what=$1 secs=$2 until=$((SECONDS + $2)) r
  shift 2
  until "$@"; do
    for r in "${roles[@]}"; do
      if [ -s "$demodir/$r.pid" ] && ! alive "$r"; then fail "hivedr $r exited"; fi
    done
    [ $SECONDS -lt $until ] || fail "$what: not within $secs s"
    sleep 0.5
  done
}

checkpointed() {
  local out
  out=$("$hivedr" status -json -tailer-wait 0 2>/dev/null) || true # exits 1 until all is caught up
  grep -q '"checkpoint_event_id": [1-9]' <<<"$out"
}

phase "start hivedr tail, and wait for its first checkpoint"
# The tailer creates the shared topics and, having no checkpoint, starts
# at the source log's head (tailer.start_event_id "latest"): only events
# after that point replicate. So the workload waits until that position
# is committed as the tailer's first checkpoint.
start tail tail
wait_for "the tailer's first checkpoint" 60 checkpointed
grep -hE "no checkpoint|resuming" "$demodir/tail.log" | head -1 | sed 's/^.*msg=/tail: /'

phase "start hivedr copyd and hivedr apply"
start copyd copyd
start apply apply
started() { grep -q "applier started" "$demodir/apply.log" && grep -q "consuming copy tasks" "$demodir/copyd.log"; }
wait_for "copyd and the applier starting" 60 started

phase "workload on the source metastore: database $db"
"$driver" workload -db "$db" -reset "${config[@]}" || fail "the workload failed"

phase "replication: \`hivedr status -db $db\` every 2 s until the DR has applied everything"
deadline=$((SECONDS + timeout))
first_status=
while :; do
  for r in "${roles[@]}"; do
    if [ -s "$demodir/$r.pid" ] && ! alive "$r"; then fail "hivedr $r exited"; fi
  done
  rc=0
  out=$("$hivedr" status -db "$db" 2>&1) || rc=$?
  # Each run says it uses the local stack's defaults; once is enough here.
  [ "$first_status" = "" ] || out=$(grep -v '^hivedr status: no config file' <<<"$out")
  first_status=done
  printf -- '-- [%3ds] hivedr status -db %s (exit %d)\n%s\n' $((SECONDS - t0)) "$db" "$rc" "$out"
  [ $rc = 0 ] && break
  [ $rc = 2 ] && fail "hivedr status refused its flags or configuration"
  [ $SECONDS -lt $deadline ] || fail "the DR did not catch up within ${timeout}s (DEMO_TIMEOUT)"
  sleep 2
done

phase "the DR side: $db on the source and on the DR"
"$driver" compare -db "$db" -wait 60s "${config[@]}" || fail "the DR differs from the source"

phase "a DR drill with failback: the reverse pipeline's daemons, then \`hivedr drill -reverse-config\`"
# The drill makes its own database, hivedr_drill_<time>_<hex>, and leaves
# the demo's database alone; the pipeline above replicates it, the drill
# fails it over, writes on DR, fails it back through the reverse pipeline
# (DR -> source, for drills' scratch databases only) and drops it.
rev=$demodir/reverse.yaml
"$driver" reverse -out "$rev" "${config[@]}" || fail "could not write the reverse pipeline's configuration"
"$driver" reset -config "$rev" || fail "could not reset the reverse pipeline's topics and groups"
rm -rf "$demodir"/state/back-*
start back-tail tail -config "$rev"
start back-copyd copyd -config "$rev"
start back-apply apply -config "$rev"
"$hivedr" drill "${config[@]}" -reverse-config "$rev" -timeout 2m || fail "the drill did not pass"

phase "stop the daemons (SIGTERM)"
stop_daemons || fail "a daemon did not stop cleanly"

phase "demo done in $((SECONDS - t0))s"
cat <<EOF
The stack is still up, with the replicated database $db on the DR metastore.
  bin/hivedr status            where every replicated database stands (-json for scripts)
  bin/hivedr cat hivedr.events.$db   the events of $db, decoded
  ${demodir#"$root"/}/*.log     the daemons' logs
Run the daemons yourself with bin/hivedr tail, bin/hivedr copyd and bin/hivedr apply
(no config file: the local stack). Stop the stack with: make stack-down
(make stack-clean also deletes its data).
EOF
