# shellcheck shell=bash
# TLS and secrets of the secured stack (HIVEDR_STACK_SECURE=1; see lib.sh).
# No daemon: "up" creates, once, with openssl,
#
#   $STACK_DIR/tls/ca.pem, ca.key            the stack's own CA
#   $STACK_DIR/tls/server.pem, server.key    127.0.0.1 and localhost, for
#                                            Kafka, the registry and HDFS
#   $STACK_DIR/tls/server.p12                the same, as Kafka's and the
#                                            HDFS daemons' keystore
#   $STACK_DIR/tls/client.pem, client.key    CN=hivedr, for mutual TLS
#   $STACK_DIR/secrets/<name>                one random password per file
#                                            (mode 600): Kafka's users, the
#                                            registry's, the keystore's
#
# and keeps them: the services' data (Kafka's SCRAM credentials) is made
# with them. Sourced after lib.sh.

TLS_DIR=$STACK_DIR/tls
SECRETS_DIR=$STACK_DIR/secrets

# stack_secret NAME prints the password kept in secrets/NAME, making a
# random one the first time.
stack_secret() {
  local f=$SECRETS_DIR/$1
  if [ ! -s "$f" ]; then
    mkdir -p "$SECRETS_DIR" && chmod 700 "$SECRETS_DIR"
    (umask 077 && openssl rand -hex 16 >"$f.tmp" && mv "$f.tmp" "$f") || die "tls: cannot write $f"
  fi
  cat "$f"
}

# tls_leaf NAME CN EXT signs NAME.pem (key NAME.key) with the CA, for the
# X.509 extensions EXT (one per line).
tls_leaf() {
  local name=$1 cn=$2 ext=$3
  [ -s "$TLS_DIR/$name.pem" ] && return 0
  log "tls: creating the $name certificate (CN=$cn)"
  (
    cd "$TLS_DIR" &&
      openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "/CN=$cn" &&
      printf '%s\n' "$ext" >"$name.ext" &&
      openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 825 -sha256 \
        -extfile "$name.ext" -out "$name.pem.tmp" &&
      chmod 600 "$name.key" && mv "$name.pem.tmp" "$name.pem" && rm -f "$name.csr" "$name.ext"
  ) >>"$(logfile tls)" 2>&1 || { tail -n 20 "$(logfile tls)" >&2; die "tls: creating the $name certificate failed"; }
}

svc_tls_up() {
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  mkdir -p "$TLS_DIR"
  if [ ! -s "$TLS_DIR/ca.pem" ]; then
    log "tls: creating the stack's CA in $TLS_DIR"
    (
      cd "$TLS_DIR" &&
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem.tmp -days 3650 -sha256 \
          -subj "/CN=hivedr local stack CA" &&
        chmod 600 ca.key && mv ca.pem.tmp ca.pem
    ) >>"$(logfile tls)" 2>&1 || { tail -n 20 "$(logfile tls)" >&2; die "tls: creating the CA failed"; }
  fi
  tls_leaf server localhost "subjectAltName=IP:$HOST,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth"
  tls_leaf client hivedr "extendedKeyUsage=clientAuth"
  if [ ! -s "$TLS_DIR/server.p12" ]; then
    openssl pkcs12 -export -in "$TLS_DIR/server.pem" -inkey "$TLS_DIR/server.key" -certfile "$TLS_DIR/ca.pem" \
      -name server -out "$TLS_DIR/server.p12.tmp" -passout "pass:$(stack_secret keystore)" >>"$(logfile tls)" 2>&1 ||
      die "tls: writing Kafka's keystore failed"
    chmod 600 "$TLS_DIR/server.p12.tmp" && mv "$TLS_DIR/server.p12.tmp" "$TLS_DIR/server.p12"
  fi
}

svc_tls_down() { :; }

svc_tls_status() {
  if [ -s "$TLS_DIR/ca.pem" ] && [ -s "$TLS_DIR/server.p12" ] && [ -s "$TLS_DIR/client.pem" ]; then
    echo "tls: CA and certificates in $TLS_DIR (server expires $(openssl x509 -enddate -noout -in "$TLS_DIR/server.pem" | cut -d= -f2))"
  else
    echo "tls: no certificates yet"
    return 1
  fi
}

svc_tls_env() {
  echo "HIVEDR_TLS_CA=$TLS_DIR/ca.pem"
  echo "HIVEDR_TLS_CLIENT_CERT=$TLS_DIR/client.pem"
  echo "HIVEDR_TLS_CLIENT_KEY=$TLS_DIR/client.key"
}
