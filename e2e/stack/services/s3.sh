# shellcheck shell=bash
# S3 server of the local stack: versitygw (Apache-2.0) with its posix backend.
# Buckets are directories under $STACK_DIR/s3/data, object metadata and
# checksums are extended attributes, and old object versions live under
# $STACK_DIR/s3/versions. One daemon, named "s3", listening on
# 127.0.0.1:$S3_PORT with path-style addressing and a fixed root key.

S3_ACCESS_KEY=hivedr
S3_SECRET_KEY=hivedr-secret-key
S3_REGION=us-east-1
S3_MODULE=github.com/versity/versitygw

s3_gobin() {
  local gopath
  gopath=$(go env GOPATH) || return 1
  echo "${gopath%%:*}/bin"
}

# s3_installed_version prints the module version the binary was built from.
s3_installed_version() {
  [ -x "$1" ] || return 0
  { go version -m "$1" 2>/dev/null || true; } | awk -v m="$S3_MODULE" '$1 == "mod" && $2 == m { print $3 }'
}

# s3_install prints the path of versitygw $VERSITYGW_VERSION, building it
# with `go install` when it is missing or another version.
s3_install() {
  command -v go >/dev/null 2>&1 || die "s3: go is required to build versitygw (Go 1.25+; versitygw v1.8.0 needs it)"
  local bindir bin have
  bindir=$(s3_gobin) || die "s3: go env GOPATH failed"
  bin=$bindir/versitygw
  have=$(s3_installed_version "$bin")
  if [ "$have" != "$VERSITYGW_VERSION" ]; then
    local t=$SECONDS lf; lf=$(logfile s3-build)
    log "building versitygw $VERSITYGW_VERSION into $bindir${have:+ (found $have)}; takes a few minutes, log: $lf"
    GOBIN=$bindir go install "$S3_MODULE/cmd/versitygw@$VERSITYGW_VERSION" >"$lf" 2>&1 ||
      { tail -n 40 "$lf" >&2; die "s3: go install versitygw@$VERSITYGW_VERSION failed; log: $lf"; }
    have=$(s3_installed_version "$bin")
    [ "$have" = "$VERSITYGW_VERSION" ] || die "s3: built $bin but it reports version '${have}'"
    log "built versitygw $VERSITYGW_VERSION in $((SECONDS - t))s"
  fi
  echo "$bin"
}

# s3_ready succeeds when an unsigned GET / gets an S3 answer: versitygw
# refuses anonymous ListBuckets with an XML <Error> and an x-amz-request-id.
s3_ready() {
  local resp
  resp=$(
    exec 2>/dev/null
    exec 3<>"/dev/tcp/$HOST/$S3_PORT" || exit 1
    printf 'GET / HTTP/1.1\r\nHost: %s:%s\r\nConnection: close\r\n\r\n' "$HOST" "$S3_PORT" >&3
    timeout 3 cat <&3
  ) || return 1
  case $resp in
    HTTP/1.1\ *'<Error>'*) return 0 ;;
    *) return 1 ;;
  esac
}

# s3_alive succeeds when the recorded pid is a live (not zombie) versitygw,
# so a stale pid file after kill -9, or a reused pid, reads as "not running".
s3_alive() {
  is_running s3 || return 1
  local pid; pid=$(cat "$(pidfile s3)")
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
  grep -qa versitygw "/proc/$pid/cmdline" 2>/dev/null
}

svc_s3_up() {
  local bin i
  bin=$(s3_install) || exit 1
  if s3_alive; then
    # Already started: wait until it answers, unless it dies meanwhile
    # (e.g. it was killed just before this call), then start a new one.
    for i in $(seq 1 60); do
      s3_ready && return 0
      s3_alive || break
      sleep 0.5
    done
    s3_alive && { tail -n 60 "$(logfile s3)" >&2; die "s3 is running but not ready after 30s; log: $(logfile s3)"; }
    log "s3: recorded process is gone; starting a new one"
  fi
  rm -f "$(pidfile s3)"
  # A process that just died may still hold the port for a moment.
  for i in $(seq 1 10); do port_open "$S3_PORT" || break; sleep 0.5; done
  port_open "$S3_PORT" && die "s3: port $S3_PORT is in use by another process (not the versitygw recorded in $(pidfile s3))"
  mkdir -p "$STACK_DIR/s3/data" "$STACK_DIR/s3/versions"
  log "starting versitygw $VERSITYGW_VERSION on $HOST:$S3_PORT"
  start_daemon s3 "$bin" \
    --port "$HOST:$S3_PORT" \
    --access "$S3_ACCESS_KEY" --secret "$S3_SECRET_KEY" --region "$S3_REGION" \
    --quiet \
    posix --versioning-dir "$STACK_DIR/s3/versions" "$STACK_DIR/s3/data"
  wait_ready s3 60 s3_ready
}

# Only signal the recorded pid when it is still our versitygw.
svc_s3_down() {
  if s3_alive; then stop_daemon s3; else rm -f "$(pidfile s3)"; fi
}

svc_s3_status() {
  if s3_alive && s3_ready; then
    echo "s3: up (http://$HOST:$S3_PORT, versitygw posix $STACK_DIR/s3/data)"
  else
    echo "s3: down"
    return 1
  fi
}

svc_s3_env() {
  echo "HIVEDR_S3_ENDPOINT=http://$HOST:$S3_PORT"
  echo "HIVEDR_S3_ACCESS_KEY=$S3_ACCESS_KEY"
  echo "HIVEDR_S3_SECRET_KEY=$S3_SECRET_KEY"
  echo "HIVEDR_S3_REGION=$S3_REGION"
}
