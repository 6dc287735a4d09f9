# shellcheck shell=bash
# Common helpers for the local real stack. Sourced by stack.sh and by every
# services/*.sh file; defines no behaviour of its own when sourced.
#
# Layout (everything lives under one ignored directory, $STACK_DIR):
#   $STACK_DIR/env            generated addresses of every service (KEY=VALUE)
#   $STACK_DIR/logs/<svc>.log stdout+stderr of each daemon
#   $STACK_DIR/run/<svc>.pid  pid of each daemon (its own process group)
#   $STACK_DIR/<svc>/         data and generated config of each service

STACK_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$STACK_LIB_DIR/../.." && pwd)

# The variant, decided here and nowhere else. HIVEDR_STACK_SECURE=1 is the
# secured stack: its own state directory (.stack-secure) and ports (+3000)
# by default, so it runs beside the plain one, and the services named in
# SECURED_SERVICES take their secured settings (each asks `secured NAME`):
#   tls       a CA the scripts create, with server and client certificates
#   kdc       an MIT Kerberos KDC with principals and keytabs for every
#             service and hivedr role
#   kafka     a SASL_SSL listener (SCRAM-SHA-512), StandardAuthorizer ACLs,
#             one SCRAM user per hivedr role
#   registry  HTTPS with client certificates required, and basic auth
#   hdfs      Kerberos, block access tokens, SASL data transfer, HTTPS-only
#             WebHDFS with SPNEGO
#   hms       SASL GSSAPI on Thrift
# Everything else (Postgres, S3) runs as in the plain stack.
#
# HIVEDR_STACK_PRIVACY=1 (with HIVEDR_STACK_SECURE=1) is the secured stack
# with wire privacy everywhere it can be asked for: RPC privacy on both
# HDFS clusters (hadoop.rpc.protection=privacy), encrypted data transfer
# with AES (dfs.encrypt.data.transfer, AES/CTR/NoPadding), and SASL QOP
# auth-conf on both metastores. Its own state directory (.stack-privacy)
# and ports (+4000) by default, beside the other two.
STACK_SECURE=${HIVEDR_STACK_SECURE:-0}
case $STACK_SECURE in
  0 | 1) ;;
  *) echo "stack: HIVEDR_STACK_SECURE=$STACK_SECURE: want 0 or 1" >&2; exit 2 ;;
esac
STACK_PRIVACY=${HIVEDR_STACK_PRIVACY:-0}
case $STACK_PRIVACY in
  0) ;;
  1) [ "$STACK_SECURE" = 1 ] || { echo "stack: HIVEDR_STACK_PRIVACY=1 needs HIVEDR_STACK_SECURE=1" >&2; exit 2; } ;;
  *) echo "stack: HIVEDR_STACK_PRIVACY=$STACK_PRIVACY: want 0 or 1" >&2; exit 2 ;;
esac
SECURED_SERVICES="tls kdc kafka registry hdfs hms"
if [ "$STACK_PRIVACY" = 1 ]; then
  STACK_VARIANT=privacy DEFAULT_STACK_DIR=$REPO_DIR/.stack-privacy DEFAULT_PORT_OFFSET=4000
elif [ "$STACK_SECURE" = 1 ]; then
  STACK_VARIANT=secure DEFAULT_STACK_DIR=$REPO_DIR/.stack-secure DEFAULT_PORT_OFFSET=3000
else
  STACK_VARIANT=plain DEFAULT_STACK_DIR=$REPO_DIR/.stack DEFAULT_PORT_OFFSET=0
fi
# secured SVC succeeds when SVC runs with its secured settings.
secured() { [ "$STACK_SECURE" = 1 ] && [[ " $SECURED_SERVICES " == *" $1 "* ]]; }
# private succeeds on the privacy variant of the secured stack.
private() { [ "$STACK_PRIVACY" = 1 ]; }
# SITES are the stack's sites, each an HDFS cluster hdfs-SITE and a
# metastore hms-SITE: src and dr everywhere, and on the plain stack a second
# DR site, dr2 (its own database metastore_dr2), for tests of more than one
# replica. The secured variants have no dr2.
SITES="src dr"
if [ "$STACK_SECURE" = 0 ]; then SITES="src dr dr2"; fi
# has_site SITE succeeds when SITE is one of SITES.
has_site() { [[ " $SITES " == *" $1 "* ]]; }

STACK_DIR=${HIVEDR_STACK_DIR:-$DEFAULT_STACK_DIR}
mkdir -p "$STACK_DIR/logs" "$STACK_DIR/run"
STACK_DIR=$(cd "$STACK_DIR" && pwd)
# A state directory serves one variant: its services' data and settings
# (Kafka's listeners and users, the registry's TLS) would not match the
# other's.
if [ -s "$STACK_DIR/variant" ] && [ "$(cat "$STACK_DIR/variant")" != "$STACK_VARIANT" ]; then
  echo "stack: $STACK_DIR holds a $(cat "$STACK_DIR/variant") stack, not a $STACK_VARIANT one" \
    "(HIVEDR_STACK_SECURE=$STACK_SECURE); use another HIVEDR_STACK_DIR, or remove it" >&2
  exit 2
fi
echo "$STACK_VARIANT" >"$STACK_DIR/variant"

# Loopback ports: fixed, plus HIVEDR_STACK_PORT_OFFSET (default 0; 3000
# for the secured variant, 4000 for its privacy variant) so that a second
# stack (its own HIVEDR_STACK_DIR) can run beside the first one, as `make
# soak` does.
# Every service listens on 127.0.0.1 only, below Linux's default
# ephemeral range (32768-60999) at offsets 0 and 1000, so no client
# socket holds a daemon's port while it is down. The second DR site's
# ports (26020, 26070, 26083) are apart from every other port at each
# offset the stacks use.
HOST=127.0.0.1
PORT_OFFSET=${HIVEDR_STACK_PORT_OFFSET:-$DEFAULT_PORT_OFFSET}
case $PORT_OFFSET in
  '' | *[!0-9]*) echo "stack: HIVEDR_STACK_PORT_OFFSET=$PORT_OFFSET: want a non-negative integer" >&2; exit 2 ;;
esac
[ "$PORT_OFFSET" -le 30000 ] || { echo "stack: HIVEDR_STACK_PORT_OFFSET=$PORT_OFFSET: at most 30000 (ports end below 65536)" >&2; exit 2; }
POSTGRES_PORT=$((15432 + PORT_OFFSET))
KAFKA_PORT=$((19092 + PORT_OFFSET))
KAFKA_CONTROLLER_PORT=$((19093 + PORT_OFFSET))
HDFS_SRC_NN_PORT=$((18020 + PORT_OFFSET))
HDFS_SRC_HTTP_PORT=$((18070 + PORT_OFFSET))
HDFS_DR_NN_PORT=$((28020 + PORT_OFFSET))
HDFS_DR_HTTP_PORT=$((28070 + PORT_OFFSET))
HDFS_DR2_NN_PORT=$((26020 + PORT_OFFSET))
HDFS_DR2_HTTP_PORT=$((26070 + PORT_OFFSET))
HMS_SRC_PORT=$((19083 + PORT_OFFSET))
HMS_DR_PORT=$((29083 + PORT_OFFSET))
HMS_DR2_PORT=$((26083 + PORT_OFFSET))
S3_PORT=$((19000 + PORT_OFFSET))
REGISTRY_PORT=$((18081 + PORT_OFFSET))
KDC_PORT=$((18088 + PORT_OFFSET))

# Pinned versions (docs/development.md "The local stack" quotes these).
KAFKA_VERSION=4.1.1
HADOOP_VERSION=3.4.2
HIVE_VERSION=4.0.1
VERSITYGW_VERSION=v1.8.0
# Postgres: Debian 12's major (package postgresql-15); compose.yaml's image matches.
POSTGRES_VERSION=15

log() { printf '%s stack: %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# java17 prints the path of a Java 17 home, installing one if needed.
# Hadoop before 3.4.3 fails on Java 23+, and Hive 4.0 supports 17 at most.
java17() {
  local h
  for h in "${JAVA17_HOME:-}" /usr/lib/jvm/java-17-openjdk-amd64 /usr/lib/jvm/java-17-openjdk-*; do
    [ -n "$h" ] && [ -x "$h/bin/java" ] && { echo "$h"; return 0; }
  done
  log "installing openjdk-17-jdk-headless"
  apt_install openjdk-17-jdk-headless >&2
  for h in /usr/lib/jvm/java-17-openjdk-*; do
    [ -x "$h/bin/java" ] && { echo "$h"; return 0; }
  done
  die "no Java 17 found under /usr/lib/jvm after installing openjdk-17-jdk-headless"
}

APT_UPDATED=0
# apt_install installs Debian packages, running apt-get update once per run.
apt_install() {
  if [ "$APT_UPDATED" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >&2 ||
    die "apt-get install $* failed"
}

# ensure_mvn installs Maven if it is missing.
ensure_mvn() { command -v mvn >/dev/null 2>&1 || apt_install maven; }

# mvn_classpath POMDIR OUT resolves POMDIR/pom.xml's dependencies into the
# default ~/.m2 and writes the classpath to OUT. Skipped when OUT is newer
# than the pom, so repeated stack-ups do not start Maven at all.
mvn_classpath() {
  local pomdir=$1 out=$2
  if [ -s "$out" ] && [ "$out" -nt "$pomdir/pom.xml" ]; then return 0; fi
  ensure_mvn
  mkdir -p "$(dirname "$out")"
  local mlog; mlog="$STACK_DIR/logs/maven-$(basename "$pomdir").log"
  log "resolving Maven dependencies of $pomdir/pom.xml (first run downloads them into ~/.m2)"
  JAVA_HOME=$(java17) mvn -q -B -f "$pomdir/pom.xml" dependency:build-classpath \
    -Dmdep.outputFile="$out.tmp" >"$mlog" 2>&1 ||
    { tail -n 40 "$mlog" >&2; die "maven could not resolve $pomdir/pom.xml"; }
  mv "$out.tmp" "$out"
}

pidfile() { echo "$STACK_DIR/run/$1.pid"; }
logfile() { echo "$STACK_DIR/logs/$1.log"; }

# is_running SVC succeeds when SVC's recorded pid is alive. A zombie (killed
# but not yet reaped, as after kill -9 under some inits) counts as dead.
is_running() {
  local pf pid st; pf=$(pidfile "$1")
  [ -s "$pf" ] || return 1
  pid=$(cat "$pf")
  kill -0 "$pid" 2>/dev/null || return 1
  st=$(ps -o stat= -p "$pid" 2>/dev/null) || return 1
  [ "${st:0:1}" != Z ]
}

# start_daemon SVC CMD... starts CMD in its own session (so stop_daemon can
# signal the whole process group), logging to logs/SVC.log.
start_daemon() {
  local svc=$1; shift
  local lf; lf=$(logfile "$svc")
  printf '\n==== %s starting: %s\n' "$(date -Is)" "$*" >>"$lf"
  setsid "$@" >>"$lf" 2>&1 </dev/null &
  echo $! >"$(pidfile "$svc")"
}

# stop_daemon SVC sends TERM to SVC's process group, waits up to 30s, then KILL.
stop_daemon() {
  local svc=$1 pf pid i
  pf=$(pidfile "$svc")
  [ -s "$pf" ] || return 0
  pid=$(cat "$pf")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $svc (pid $pid)"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    for i in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$svc did not stop in 30s; killing it"
      kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    fi
  fi
  rm -f "$pf"
}

# port_open PORT succeeds when something accepts TCP connections on it.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# ports_free PORT... succeeds once none of the ports accepts connections,
# waiting up to 20s: a daemon killed a moment ago (stack.sh restart -kill)
# may hold its ports while the kernel tears it down.
ports_free() {
  local i p busy
  for i in $(seq 1 40); do
    busy=""
    for p in "$@"; do port_open "$p" && busy=$p; done
    [ -z "$busy" ] && return 0
    sleep 0.5
  done
  return 1
}

# wait_ready SVC TIMEOUT_S CMD... polls CMD until it succeeds. On timeout, or
# if SVC's process dies first, it fails naming SVC and printing its log tail.
wait_ready() {
  local svc=$1 timeout=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! is_running "$svc"; then
      tail -n 60 "$(logfile "$svc")" >&2
      die "$svc exited before it was ready; log: $(logfile "$svc")"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      tail -n 60 "$(logfile "$svc")" >&2
      die "$svc not ready after ${timeout}s; log: $(logfile "$svc")"
    fi
    sleep 1
  done
}
