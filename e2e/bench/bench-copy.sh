#!/usr/bin/env bash
# bench-copy.sh — `make bench-copy`: copy throughput of hivedr against Hadoop
# DistCp on the local HDFS miniclusters (issue 4, "Tests and figures").
#
# Data sets, generated once on the source cluster and reused by later runs
# (e2e/bench/gen writes only what is missing or wrong):
#   large  4 files x 256 MiB of random bytes      /bench/large/part-NNNNN
#   small  10,000 files x 4 KiB in 100 directories /bench/small/dNNN/fNNNNN
#
# For each data set it copies source -> DR into a fresh target directory
# with DistCp (hadoop-distcp 3.4.2, e2e/bench/distcp/pom.xml, MapReduce local
# job runner in one JVM, `-update` with its default CRC check), and then,
# when HIVEDR_COPY_CMD is set, with
#     $HIVEDR_COPY_CMD <src-uri> <dst-uri>
# where <dst-uri> does not exist yet (its parent does) and must afterwards
# hold the same relative file tree as <src-uri>. Each copy is timed (wall
# clock of the whole command) and then verified: the same file names and
# lengths on both sides and equal COMPOSITE-CRC32Cs for every file.
#
# DistCp's CRC check across block sizes: with the client's default
# dfs.checksum.combine.mode=MD5MD5CRC, DistCp's post-copy check fails every
# file from the 1 MiB-block source to a target with another block size
# ("Checksum mismatch ... Source and target differ in block-size"), which
# would leave only -pb (keep 1 MiB blocks on DR) or -skipcrccheck. With
# -Ddfs.checksum.combine.mode=COMPOSITE_CRC both sides report a
# block-size-independent COMPOSITE-CRC32C, DistCp's default check compares
# those, and the copy is verified with 4 MiB blocks on DR. That is what runs.
# DistCp's client also sets the target's block size (its own dfs.blocksize,
# default 128 MiB, not the DR NameNode's), so it is given DR's 4 MiB.
#
# Maps: Hadoop's local job runner forces mapreduce.job.maps=1, and DistCp
# sizes its splits by that, so stock DistCp under the local runner ignores
# -m and copies with one map. With DISTCP_MAPS > 1, a 30-line provider
# (e2e/bench/distcp/shim, compiled here with javac) hands out the same
# LocalJobRunner without that override, and mapreduce.local.map.tasks.maximum
# runs the -m maps at once, as a cluster would. DISTCP_MAPS=1 is stock
# DistCp. The default, 4 maps on this 2-core machine, is DistCp's best here:
# on "large" 2 and 4 maps are equal (1 map is ~35% slower), and on "small"
# each map spends most of its time asleep (below), so 4 beat 2.
#
# Small files: DistCp's writer closes each file with completeFile, and when
# the DataNode's report of the block has not reached the NameNode yet, the
# HDFS client sleeps dfs.client.block.write.locateFollowingBlock.initial.delay.ms
# (400 ms by default) before asking again. On these miniclusters that happens
# to most 4 KiB files, so that sleep, not copying, sets DistCp's files/s.
# The figures use Hadoop's defaults; DISTCP_OPTS can pass such settings
# (e.g. DISTCP_OPTS=-Ddfs.client.block.write.locateFollowingBlock.initial.delay.ms=10).
#
# Environment:
#   HIVEDR_COPY_CMD  hivedr's copy command (unset: DistCp's figures only)
#   HIVEDR_COPYD_CMD hivedr's copy daemon command (unset: no copyd row)
#   DISTCP_MAPS      -m and concurrent local maps (default 4)
#   DISTCP_HEAP      -Xmx of the DistCp JVM (default 1g)
#   DISTCP_OPTS      extra generic options (-Dkey=value ...) for DistCp
#   BENCH_SETS       data sets to run (default "large small"; "large" alone
#                    skips the ~10 minutes of DistCp on 10,000 small files)
#   HIVEDR_COPY_CONFIGS  space-separated hivedr YAML files: hivedr runs once
#                    per file (`$HIVEDR_COPY_CMD -config FILE ...`), each a row
#                    named after the file, e.g. to compare copyd.split_size
#                    settings with DistCp in one run
#   BENCH_NO_CRC=1   verify names and lengths only, not checksums
#
# Exits non-zero, naming what failed, when the stack is down, a data set
# cannot be generated, a copy command fails, or a copy is incomplete.

set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../stack/lib.sh
source "$BENCH_DIR/../stack/lib.sh"
log() { printf '%s bench-copy: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

ENV_FILE=$STACK_DIR/env
[ -s "$ENV_FILE" ] || die "no $ENV_FILE: the local stack is not up (make stack-up)"
# shellcheck disable=SC1090
source "$ENV_FILE"
SRC_NN=$HIVEDR_HDFS_SRC_NAMENODE SRC_HTTP=$HIVEDR_HDFS_SRC_HTTP
DR_NN=$HIVEDR_HDFS_DR_NAMENODE DR_HTTP=$HIVEDR_HDFS_DR_HTTP
DR_BLOCKSIZE=${HIVEDR_HDFS_DR_BLOCKSIZE:-4194304}
for hp in "$SRC_NN" "$DR_NN"; do
  port_open "${hp##*:}" || die "HDFS NameNode $hp does not answer: the local stack is not up (make stack-up)"
done

MAPS=${DISTCP_MAPS:-4}
[[ $MAPS =~ ^[1-9][0-9]*$ ]] || die "DISTCP_MAPS must be a positive number, not '$MAPS'"
read -r -a EXTRA <<<"${DISTCP_OPTS:-}"
HEAP=${DISTCP_HEAP:-1g}
SETS=${BENCH_SETS:-large small}
WORK=$STACK_DIR/bench
mkdir -p "$WORK/tmp"
command -v /usr/bin/time >/dev/null 2>&1 || apt_install time
JAVA=$(java17)/bin/java
JAVAC=$(java17)/bin/javac
GO=${GO:-go}

# --- tools -----------------------------------------------------------------
log "building e2e/bench/gen"
(cd "$REPO_DIR" && "$GO" build -o "$WORK/gen" ./e2e/bench/gen) || die "go build ./e2e/bench/gen failed"
GEN=$WORK/gen

mvn_classpath "$BENCH_DIR/distcp" "$WORK/distcp-classpath.txt"
CP=$(cat "$WORK/distcp-classpath.txt")
if [ "$MAPS" -gt 1 ]; then
  shim_src=$BENCH_DIR/distcp/shim
  shim_cls=$WORK/shim/hivedr/bench/ParallelLocalProvider.class
  if [ ! -s "$shim_cls" ] || [ "$shim_src/hivedr/bench/ParallelLocalProvider.java" -nt "$shim_cls" ]; then
    log "compiling the parallel local-runner provider (e2e/bench/distcp/shim)"
    rm -rf "$WORK/shim" && mkdir -p "$WORK/shim/META-INF/services"
    "$JAVAC" -nowarn -d "$WORK/shim" -cp "$CP" "$shim_src/hivedr/bench/ParallelLocalProvider.java" ||
      die "javac of e2e/bench/distcp/shim failed"
    cp "$shim_src/META-INF/services/"* "$WORK/shim/META-INF/services/"
  fi
  CP=$WORK/shim:$CP
fi
cat >"$WORK/log4j.properties" <<'EOF'
# generated by e2e/bench/bench-copy.sh: DistCp's INFO log (job counters) goes to its log file
log4j.rootLogger=INFO, console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %-5p %c{1}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
EOF

# --- data sets -------------------------------------------------------------
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }'; }   # T0 -> seconds since
log "checking the data sets on hdfs://$SRC_NN/bench (generating what is missing)"
t0=$(date +%s.%N)
"$GEN" gen -nn "$SRC_NN" -root /bench >"$WORK/gen.log" 2>&1 ||
  { tail -n 20 "$WORK/gen.log" >&2; die "generating the data sets on hdfs://$SRC_NN/bench failed (log: $WORK/gen.log)"; }
gen_s=$(elapsed "$t0")
if grep -q 'writing 0 files' "$WORK/gen.log"; then
  log "data sets present (checked in ${gen_s}s)"
else
  log "$(grep '^gen: wrote' "$WORK/gen.log")"
fi

# summary PATH prints "FILES BYTES" of a source directory (WebHDFS content summary).
summary() {
  local js f b
  js=$(curl -sf "http://$SRC_HTTP/webhdfs/v1$1?op=GETCONTENTSUMMARY&user.name=hivedr") ||
    die "content summary of hdfs://$SRC_NN$1 failed"
  f=$(grep -o '"fileCount":[0-9]*' <<<"$js" | cut -d: -f2)
  b=$(grep -o '"length":[0-9]*' <<<"$js" | cut -d: -f2)
  echo "$f $b"
}

# timed NAME LOG CMD... runs CMD with its output in LOG; sets SECS and RSS_MB.
timed() {
  local name=$1 lg=$2; shift 2
  local t0 rc=0
  t0=$(date +%s.%N)
  /usr/bin/time -o "$lg.time" -f '%M' "$@" >"$lg" 2>&1 || rc=$?
  SECS=$(elapsed "$t0")
  if [ "$rc" != 0 ]; then
    tail -n 30 "$lg" >&2
    die "$name failed (exit $rc); log: $lg"
  fi
  RSS_MB=$(( $(tail -n 1 "$lg.time") / 1024 ))
}

verify() { # NAME SRC DST
  local crc=true
  [ "${BENCH_NO_CRC:-}" = 1 ] && crc=false
  "$GEN" verify -crc=$crc -src-nn "$SRC_NN" -src-http "$SRC_HTTP" -src "$2" \
    -dst-nn "$DR_NN" -dst-http "$DR_HTTP" -dst "$3" >"$WORK/verify.log" 2>&1 ||
    { cat "$WORK/verify.log" >&2; die "$1: the copy on hdfs://$DR_NN$3 is incomplete or differs from hdfs://$SRC_NN$2"; }
  sed 's/^/    /' "$WORK/verify.log" >&2
}

rate() { awk -v n="$1" -v s="$2" -v u="${3:-1}" 'BEGIN { printf "%.1f", n / u / s }'; }   # N SECS [UNIT] -> N/UNIT/s
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

declare -A R

# copyd_run SET SRC FILES: the copy daemon's path through Kafka; sets R[SET.c.*].
copyd_run() {
  local set=$1 src=$2 files=$3 dst=/bench-copy/copyd/$1 prefix conf state lg pid t0 n out rss work
  prefix=benchcopy$(date +%s)$set
  conf=$WORK/copyd-$set.yaml state=$WORK/copyd-state-$set lg=$STACK_DIR/logs/bench-copyd-$set.log
  "$GEN" rm -nn "$DR_NN" "$dst" || die "removing hdfs://$DR_NN$dst failed"
  rm -rf "$state"
  cat >"$conf" <<EOF2
# generated by e2e/bench/bench-copy.sh: copyd over the bench's own topics
kafka:
  brokers: [$HIVEDR_KAFKA_BROKERS]
  topic_prefix: $prefix
  replication_factor: 1
  manifest_partitions: 12
schema_registry: $HIVEDR_SCHEMA_REGISTRY
copyd:
  group: $prefix-copyd
  instance: $prefix
  workers: 16
  metrics_addr: ""
filesystems:
  hdfs:
    - {namenodes: [$SRC_NN], webhdfs: $SRC_HTTP, user: hivedr}
    - {namenodes: [$DR_NN], webhdfs: $DR_HTTP, user: hivedr}
replication:
  source_roots: ["hdfs://$SRC_NN/bench"]
  path_mappings:
    - {source: "hdfs://$SRC_NN/bench/", target: "hdfs://$DR_NN/bench-copy/copyd/"}
EOF2
  n=$("$GEN" tasks -brokers "$HIVEDR_KAFKA_BROKERS" -registry "$HIVEDR_SCHEMA_REGISTRY" -prefix "$prefix" -partitions 12 \
    -src-nn "$SRC_NN" -src "$src" -dst-nn "$DR_NN" -dst "$dst") || die "publishing the copy tasks of $set failed"
  [ "$n" = "$files" ] || die "$set: published $n copy tasks for $files files"
  log "$set: $n copy tasks in $prefix.manifests; $HIVEDR_COPYD_CMD (log: $lg)"
  t0=$(date +%s.%N)
  # Word-split on purpose: HIVEDR_COPYD_CMD may carry arguments.
  # shellcheck disable=SC2086
  $HIVEDR_COPYD_CMD -config "$conf" -state-dir "$state" >"$lg" 2>&1 &
  pid=$!
  out=$("$GEN" completions -brokers "$HIVEDR_KAFKA_BROKERS" -registry "$HIVEDR_SCHEMA_REGISTRY" -prefix "$prefix" -n "$n" 2>>"$lg") ||
    { kill "$pid" 2>/dev/null; tail -n 30 "$lg" >&2; die "copyd of $set failed: $out"; }
  SECS=$(elapsed "$t0")
  rss=$(awk '/^VmHWM:/ { print int($2 / 1024) }' "/proc/$pid/status" 2>/dev/null || echo "?")
  kill -TERM "$pid" && wait "$pid" || die "copyd of $set did not stop cleanly on SIGTERM (log: $lg)"
  work=$(grep -o 'work_seconds [0-9.]*' <<<"$out" | cut -d' ' -f2)
  log "$set: copyd took ${SECS}s from its start to the last completion (${work}s from the first copy started), peak RSS ${rss} MiB; $out"
  verify "copyd of $set" "$src" "$dst"
  R[$set.c.s]=$SECS R[$set.c.mbs]=$(rate "$bytes" "$SECS" 1000000) R[$set.c.fps]=$(rate "$files" "$SECS") R[$set.c.rss]=$rss
  R[$set.c.work]=$work
}
# hivedr's runs: one per HIVEDR_COPY_CONFIGS file, else one with no -config.
VARIANTS=()
if [ -n "${HIVEDR_COPY_CMD:-}" ]; then
  read -r -a VARIANTS <<<"${HIVEDR_COPY_CONFIGS:-}"
  [ "${#VARIANTS[@]}" -gt 0 ] || VARIANTS=("")
  for v in "${VARIANTS[@]}"; do
    [ -z "$v" ] || [ -s "$v" ] || die "HIVEDR_COPY_CONFIGS: no file $v"
  done
elif [ -n "${HIVEDR_COPY_CONFIGS:-}" ]; then
  die "HIVEDR_COPY_CONFIGS needs HIVEDR_COPY_CMD"
fi
"$GEN" mkdir -nn "$DR_NN" /bench-copy/distcp /bench-copy/hivedr /bench-copy/copyd || die "mkdir /bench-copy on hdfs://$DR_NN failed"
for set in $SETS; do
  src=/bench/$set
  sum=$(summary "$src") || exit 1
  read -r files bytes <<<"$sum"
  [ -n "$files" ] && [ -n "$bytes" ] || die "no file count or length in the content summary of hdfs://$SRC_NN$src"
  log "$set: $files files, $bytes bytes"

  dst=/bench-copy/distcp/$set
  "$GEN" rm -nn "$DR_NN" "$dst" || die "removing hdfs://$DR_NN$dst failed"
  lg=$STACK_DIR/logs/bench-distcp-$set.log
  log "$set: DistCp -m $MAPS (log: $lg)"
  HADOOP_USER_NAME=hivedr timed "DistCp of $set" "$lg" \
    "$JAVA" "-Xmx$HEAP" -Djava.net.preferIPv4Stack=true \
    "-Dlog4j.configuration=file:$WORK/log4j.properties" -cp "$CP" \
    org.apache.hadoop.tools.DistCp \
    -Dmapreduce.framework.name=local \
    "-Dmapreduce.local.map.tasks.maximum=$MAPS" \
    "-Dhadoop.tmp.dir=$WORK/tmp" \
    -Ddfs.checksum.combine.mode=COMPOSITE_CRC \
    "-Ddfs.blocksize=$DR_BLOCKSIZE" \
    ${EXTRA[@]+"${EXTRA[@]}"} \
    -update -m "$MAPS" "hdfs://$SRC_NN$src" "hdfs://$DR_NN$dst"
  grep -q 'completed successfully' "$lg" || die "DistCp of $set: no 'completed successfully' in $lg"
  maps_run=$(grep -c 'LocalJobRunner: Starting task: .*_m_' "$lg" || true)
  log "$set: DistCp took ${SECS}s with $maps_run map task(s), peak RSS ${RSS_MB} MiB; verifying"
  verify "DistCp of $set" "$src" "$dst"
  R[$set.files]=$files R[$set.bytes]=$bytes
  R[$set.d.s]=$SECS R[$set.d.mbs]=$(rate "$bytes" "$SECS" 1000000) R[$set.d.fps]=$(rate "$files" "$SECS")
  R[$set.d.rss]=$RSS_MB R[$set.d.maps]=$maps_run

  for v in "${VARIANTS[@]}"; do
    dst=/bench-copy/hivedr/$set
    "$GEN" rm -nn "$DR_NN" "$dst" || die "removing hdfs://$DR_NN$dst failed"
    lg=$STACK_DIR/logs/bench-hivedr-$set${v:+-$(basename "$v" .yaml)}.log
    cmd=$HIVEDR_COPY_CMD${v:+ -config $v}
    log "$set: $cmd hdfs://$SRC_NN$src hdfs://$DR_NN$dst (log: $lg)"
    # Word-split on purpose: HIVEDR_COPY_CMD may carry arguments.
    # shellcheck disable=SC2086
    timed "hivedr copy of $set ($cmd)" "$lg" $cmd "hdfs://$SRC_NN$src" "hdfs://$DR_NN$dst"
    log "$set: hivedr took ${SECS}s, peak RSS ${RSS_MB} MiB; verifying"
    verify "hivedr copy of $set" "$src" "$dst"
    R[$set.h$v.s]=$SECS R[$set.h$v.mbs]=$(rate "$bytes" "$SECS" 1000000) R[$set.h$v.fps]=$(rate "$files" "$SECS")
    R[$set.h$v.rss]=$RSS_MB
  done

  if [ -n "${HIVEDR_COPYD_CMD:-}" ]; then
    copyd_run "$set" "$src" "$files"
  fi
done

# --- table -----------------------------------------------------------------
echo
echo "bench-copy: hdfs://$SRC_NN (1 MiB blocks) -> hdfs://$DR_NN ($DR_BLOCKSIZE-byte blocks), every copy verified by COMPOSITE-CRC32C"
echo "DistCp 3.4.2: local job runner, -m $MAPS, -Xmx$HEAP, -update, CRC check via dfs.checksum.combine.mode=COMPOSITE_CRC${DISTCP_OPTS:+, $DISTCP_OPTS}"
printf '%-6s %-16s %7s %14s %9s %9s %10s %9s\n' set tool files bytes seconds MB/s files/s "RSS MiB"
for set in $SETS; do
  printf '%-6s %-16s %7s %14s %9s %9s %10s %9s\n' "$set" DistCp "${R[$set.files]}" "${R[$set.bytes]}" \
    "${R[$set.d.s]}" "${R[$set.d.mbs]}" "${R[$set.d.fps]}" "${R[$set.d.rss]}"
  for v in "${VARIANTS[@]}"; do
    printf '%-6s %-16s %7s %14s %9s %9s %10s %9s\n' "$set" "hivedr${v:+ $(basename "$v" .yaml)}" "${R[$set.files]}" "${R[$set.bytes]}" \
      "${R[$set.h$v.s]}" "${R[$set.h$v.mbs]}" "${R[$set.h$v.fps]}" "${R[$set.h$v.rss]}"
  done
  if [ -n "${HIVEDR_COPYD_CMD:-}" ]; then
    printf '%-6s %-16s %7s %14s %9s %9s %10s %9s   (%ss from the first copy started)\n' "$set" "hivedr copyd" "${R[$set.files]}" "${R[$set.bytes]}" \
      "${R[$set.c.s]}" "${R[$set.c.mbs]}" "${R[$set.c.fps]}" "${R[$set.c.rss]}" "${R[$set.c.work]}"
  fi
done
echo
if [ -z "${HIVEDR_COPY_CMD:-}" ] && [ -z "${HIVEDR_COPYD_CMD:-}" ]; then
  echo "hivedr: not wired yet (set HIVEDR_COPY_CMD to a command taking <src-uri> <dst-uri>); DistCp's figures only."
  exit 0
fi
for set in $SETS; do
  for v in "${VARIANTS[@]}"; do
    name=${v:+ ($(basename "$v" .yaml))}
    case $set in
      large) echo "large: hivedr$name/DistCp MB/s    = $(ratio "${R[large.h$v.mbs]}" "${R[large.d.mbs]}")x (target >= 1.5x)" ;;
      small) echo "small: hivedr$name/DistCp files/s = $(ratio "${R[small.h$v.fps]}" "${R[small.d.fps]}")x (target >= 5x)" ;;
    esac
  done
  if [ -n "${HIVEDR_COPYD_CMD:-}" ]; then
    case $set in
      large) echo "large: copyd/DistCp MB/s    = $(ratio "${R[large.c.mbs]}" "${R[large.d.mbs]}")x (target >= 1.5x)" ;;
      small) echo "small: copyd/DistCp files/s = $(ratio "${R[small.c.fps]}" "${R[small.d.fps]}")x (target >= 5x)" ;;
    esac
  fi
done
