# shellcheck shell=bash
# Schema registry of the local stack: AxonOps Schema Registry (Apache-2.0,
# Go), which speaks Confluent's Schema Registry REST API. hivedr's Kafka
# records use Confluent's wire format with schema IDs issued here.
#
# Schemas live in Postgres (database schema_registry, owned by role hive, on
# the postgres service), so schema IDs survive restarts; the registry creates
# its tables itself on start. One daemon, named "registry", listening on
# 127.0.0.1:$REGISTRY_PORT without authentication (with mutual TLS and basic
# auth in the secured variant). Its generated config is
# $STACK_DIR/registry/config.yaml.

REGISTRY_MODULE=github.com/axonops/axonops-schema-registry
REGISTRY_PKG=$REGISTRY_MODULE/cmd/schema-registry
# v0.2.1 is its newest release tag; the Go module proxy serves it (the later
# v0.3.0-*/v0.4.0-* milestone tags are not served).
REGISTRY_VERSION=v0.2.1
REGISTRY_DB=schema_registry
REGISTRY_DIR=$STACK_DIR/registry
REGISTRY_URL=http://$HOST:$REGISTRY_PORT
# The secured variant (lib.sh): HTTPS with the certificates of tls.sh,
# client certificates from the stack's CA required (mutual TLS), and basic
# auth for one user, hivedr, whose password is in secrets/registry-hivedr.
REGISTRY_USER=hivedr
if secured registry; then REGISTRY_URL=https://$HOST:$REGISTRY_PORT; fi

reg_gobin() {
  local gopath
  gopath=$(go env GOPATH) || return 1
  echo "${gopath%%:*}/bin"
}

# reg_installed_version prints the module version the binary was built from.
reg_installed_version() {
  [ -x "$1" ] || return 0
  go version -m "$1" 2>/dev/null | awk -v m="$REGISTRY_MODULE" '$1 == "mod" && $2 == m { print $3 }'
}

# reg_install prints the path of the registry binary at $REGISTRY_VERSION,
# building it when it is missing or another version.
#
# A plain `go install $REGISTRY_PKG@$REGISTRY_VERSION` fails here: it asks the
# proxy for the module's version list (to look for a deprecation notice), and
# the proxy refuses that list while serving the tagged version itself. So the
# build runs inside a throwaway module that requires the pinned version; the
# binary still records the registry's module and version (go version -m).
reg_install() {
  command -v go >/dev/null 2>&1 || die "registry: go is required to build the schema registry (install Go 1.26+)"
  local bindir bin have
  bindir=$(reg_gobin) || die "registry: go env GOPATH failed"
  bin=$bindir/schema-registry
  have=$(reg_installed_version "$bin")
  if [ "$have" != "$REGISTRY_VERSION" ]; then
    local t=$SECONDS lf tmp rc=0
    lf=$(logfile registry-build)
    log "building AxonOps Schema Registry $REGISTRY_VERSION into $bindir${have:+ (found $have)}; takes a minute or two, log: $lf"
    tmp=$(mktemp -d) || die "registry: mktemp failed"
    (
      cd "$tmp" &&
        export GOWORK=off GOFLAGS=-mod=mod GOBIN="$bindir" &&
        go mod init hivedr.local/stack-registry-build &&
        go get "$REGISTRY_PKG@$REGISTRY_VERSION" &&
        go install -ldflags "-X main.version=$REGISTRY_VERSION" "$REGISTRY_PKG"
    ) >"$lf" 2>&1 || rc=$?
    rm -rf "$tmp"
    [ "$rc" = 0 ] || { tail -n 40 "$lf" >&2; die "registry: building $REGISTRY_PKG@$REGISTRY_VERSION failed; log: $lf"; }
    have=$(reg_installed_version "$bin")
    [ "$have" = "$REGISTRY_VERSION" ] || die "registry: built $bin but it reports version '${have}'"
    log "built AxonOps Schema Registry $REGISTRY_VERSION in $((SECONDS - t))s"
  fi
  echo "$bin"
}

# reg_psql runs psql as the Postgres superuser over the postgres service's
# private unix socket (trust auth), preferring that service's own helper.
reg_psql() {
  if declare -F pg_psql >/dev/null; then
    pg_psql "$@"
    return
  fi
  local psql
  psql=$(ls -d /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1)
  [ -n "$psql" ] || psql=$(command -v psql) || die "registry: psql not found (is the postgres service installed?)"
  "$psql" -X -q -v ON_ERROR_STOP=1 -h "$STACK_DIR/postgres/sock" -p "$POSTGRES_PORT" -U postgres -d postgres "$@"
}

# reg_setup_db creates the registry's database, owned by role hive (which the
# postgres service creates), unless it exists.
reg_setup_db() {
  local i
  for i in $(seq 1 30); do port_open "$POSTGRES_PORT" && break; sleep 1; done
  port_open "$POSTGRES_PORT" ||
    die "registry: postgres is not listening on $HOST:$POSTGRES_PORT; the registry stores its schemas there (stack.sh up starts postgres first)"
  reg_psql <<EOF >/dev/null || die "registry: could not create database $REGISTRY_DB in postgres (does role hive exist?)"
SELECT 'CREATE DATABASE $REGISTRY_DB OWNER hive'
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$REGISTRY_DB') \gexec
EOF
}

# reg_secured_security prints the secured variant's security section,
# which replaces the plain one. The registry expands $NAME in its config
# file (os.ExpandEnv, no escape), which would eat the $ signs of the
# bcrypt hash: each is written ${DOLLAR}, and the registry runs with
# DOLLAR=$. (Its heredoc is SECURED: compose/ mirrors the plain stack.)
reg_secured_security() {
  command -v htpasswd >/dev/null 2>&1 || { log "installing apache2-utils (htpasswd, for the registry's bcrypt hashes)"; apt_install apache2-utils; }
  local hash
  hash=$(htpasswd -nbBC 10 "$REGISTRY_USER" "$(stack_secret "registry-$REGISTRY_USER")" | cut -d: -f2-) ||
    die "registry: htpasswd could not hash the password"
  hash=${hash//\$/\$\{DOLLAR\}}
  cat <<SECURED
security:
  tls:
    enabled: true
    cert_file: "$TLS_DIR/server.pem"
    key_file: "$TLS_DIR/server.key"
    ca_file: "$TLS_DIR/ca.pem"
    client_auth: verify
    min_version: TLS1.2
  auth:
    enabled: true
    methods: [basic]
    basic:
      realm: hivedr
      users:
        $REGISTRY_USER: '$hash'
SECURED
}

reg_write_config() {
  mkdir -p "$REGISTRY_DIR"
  (umask 077 && cat >"$REGISTRY_DIR/config.yaml.tmp") <<EOF
# generated by e2e/stack/services/registry.sh; rewritten on every up
server:
  host: "$HOST"
  port: $REGISTRY_PORT
storage:
  type: postgresql
  postgresql:
    host: "$HOST"
    port: $POSTGRES_PORT
    database: $REGISTRY_DB
    user: hive
    password: hive
    ssl_mode: disable
    max_open_conns: 10
    max_idle_conns: 2
compatibility:
  default_level: BACKWARD
logging:
  level: info
  format: json
security:
  auth:
    enabled: false
EOF
  if secured registry; then
    sed -i '/^security:/,$d' "$REGISTRY_DIR/config.yaml.tmp"
    reg_secured_security >>"$REGISTRY_DIR/config.yaml.tmp"
  fi
  mv "$REGISTRY_DIR/config.yaml.tmp" "$REGISTRY_DIR/config.yaml"
}

# reg_ready succeeds when GET /subjects answers 200 (over mutual TLS with
# basic auth in the secured variant).
reg_ready() {
  if secured registry; then
    curl -fsS -o /dev/null --max-time 3 --cacert "$TLS_DIR/ca.pem" \
      --cert "$TLS_DIR/client.pem" --key "$TLS_DIR/client.key" \
      -u "$REGISTRY_USER:$(cat "$SECRETS_DIR/registry-$REGISTRY_USER")" "$REGISTRY_URL/subjects"
    return
  fi
  local status
  status=$(
    exec 3<>"/dev/tcp/$HOST/$REGISTRY_PORT" || exit 1
    printf 'GET /subjects HTTP/1.1\r\nHost: %s:%s\r\nAccept: application/json\r\nConnection: close\r\n\r\n' \
      "$HOST" "$REGISTRY_PORT" >&3
    timeout 3 head -n 1 <&3
  ) 2>/dev/null || return 1
  case $status in
    HTTP/1.?\ 200*) return 0 ;;
    *) return 1 ;;
  esac
}

# reg_alive succeeds when the recorded registry process is alive and not a
# zombie: right after a kill -9 the dead daemon can linger unreaped for a
# moment, and kill -0 still succeeds on it.
reg_alive() {
  is_running registry || return 1
  ! grep -q '^State:[[:space:]]*Z' "/proc/$(cat "$(pidfile registry)")/status" 2>/dev/null
}

svc_registry_up() {
  local bin
  bin=$(reg_install) || exit 1
  if reg_alive; then
    wait_ready registry 30 reg_ready
    return 0
  fi
  ports_free "$REGISTRY_PORT" ||
    die "registry: port $REGISTRY_PORT is in use by another process (not our registry: no live pid in $(pidfile registry))"
  reg_setup_db
  reg_write_config
  log "starting AxonOps Schema Registry $REGISTRY_VERSION on $HOST:$REGISTRY_PORT (storage: postgres database $REGISTRY_DB)"
  # A clean environment: the registry lets SCHEMA_REGISTRY_* variables
  # override its config file and registers KMS providers when VAULT_ADDR or
  # BAO_ADDR is set, so keep the caller's environment out.
  start_daemon registry env -i PATH=/usr/bin:/bin HOME="$REGISTRY_DIR" DOLLAR='$' \
    "$bin" --config "$REGISTRY_DIR/config.yaml"
  wait_ready registry 60 reg_ready
}

svc_registry_down() { stop_daemon registry; }

svc_registry_status() {
  if reg_alive && reg_ready; then
    echo "registry: up ($REGISTRY_URL, AxonOps Schema Registry $REGISTRY_VERSION, postgres database $REGISTRY_DB)"
  else
    echo "registry: down"
    return 1
  fi
}

svc_registry_env() {
  echo "HIVEDR_SCHEMA_REGISTRY=$REGISTRY_URL"
  secured registry || return 0
  echo "HIVEDR_SCHEMA_REGISTRY_USER=$REGISTRY_USER"
  echo "HIVEDR_SCHEMA_REGISTRY_PASSWORD_FILE=$SECRETS_DIR/registry-$REGISTRY_USER"
}
