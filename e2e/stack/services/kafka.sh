# shellcheck shell=bash
# Kafka for the local stack: Apache Kafka $KAFKA_VERSION from its Maven Central
# jars (e2e/stack/kafka/pom.xml) on Java 17, in KRaft mode as one combined
# broker+controller node (node.id 1, a standalone dynamic quorum).
#
#   PLAINTEXT  $HOST:$KAFKA_PORT             clients (the only advertised one)
#   CONTROLLER $HOST:$KAFKA_CONTROLLER_PORT  the KRaft quorum
#
# In the secured variant (lib.sh) the client listener is SASL_SSL with
# SCRAM-SHA-512 users, GSSAPI (Kerberos, the KDC's kafka/$HOST) and
# OAUTHBEARER (JWTs signed by the stack's own key, kafka_oauth), the
# controller's SASL_SSL with PLAIN, and the StandardAuthorizer enforces
# the ACLs `hivedr acls -apply` grants.
#
# $STACK_DIR/kafka holds the resolved classpath, the generated
# server.properties and log4j2.properties, and data/ (log and metadata dir).
# data/ is formatted once, on the first start; restarts keep every topic.
# Sourced after lib.sh.

KAFKA_DIR=$STACK_DIR/kafka
KAFKA_DATA=$KAFKA_DIR/data
KAFKA_CP=$KAFKA_DIR/classpath
# Fixed so that a wiped data dir comes back as the same cluster: the
# URL-safe base64 of the 16 bytes "hivedr-e2e-kafka".
KAFKA_CLUSTER_ID=aGl2ZWRyLWUyZS1rYWZrYQ
KAFKA_HEAP=(-Xms256m -Xmx1g)

kafka_java() { echo "$(java17)/bin/java"; }

# kafka_tool CLASS ARGS... runs a Kafka command-line class from the jars with
# a small heap, logging warnings only (to stderr).
kafka_tool() {
  local cls=$1; shift
  "$(kafka_java)" -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2-tools.properties" \
    -cp "$(cat "$KAFKA_CP")" "$cls" "$@"
}

# The secured variant's SCRAM users: one per hivedr role, each given only
# its ACLs (hivedr acls -apply, run by kafka_acls), and admin, the super
# user the scripts and tests manage users and ACLs with. broker is the
# node's own principal on the controller listener (PLAIN: KRaft cannot use
# SCRAM there).
KAFKA_USERS=(admin tailer copyd applier operator)

# kafka_secured_settings prints what the secured variant adds to
# server.properties, after (so instead of) the plain listeners: SASL_SSL
# (SCRAM-SHA-512 and GSSAPI, certificates from tls.sh, client certificates
# verified when given) and the StandardAuthorizer, under which nothing is
# allowed without an ACL but to the super users. A Kerberos principal
# hivedr-<role>@realm is Kafka user <role>, the role's SCRAM user, so one
# set of ACLs holds for both mechanisms; any other principal is its short
# name (Kafka's DEFAULT rule). (Its heredoc is SECURED: compose/
# mirrors the plain stack only; deploy/compose_test.go skips it.)
kafka_secured_settings() {
  local ks broker admin
  ks=$(stack_secret keystore) broker=$(stack_secret kafka-broker) admin=$(stack_secret kafka-admin)
  cat <<SECURED

# The secured variant (HIVEDR_STACK_SECURE=1): these override the listeners above.
listeners=SASL_SSL://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=SASL_SSL://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL
inter.broker.listener.name=SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512,GSSAPI,OAUTHBEARER
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin";
sasl.kerberos.service.name=kafka
listener.name.sasl_ssl.gssapi.sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true keyTab="$KRB_KEYTABS/kafka.keytab" principal="kafka/$HOST@$KRB_REALM";
sasl.kerberos.principal.to.local.rules=RULE:[1:\$1@\$0](hivedr-.*@$KRB_REALM)s/hivedr-(.*)@.*/\$1/,DEFAULT
listener.name.sasl_ssl.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;
listener.name.sasl_ssl.oauthbearer.sasl.server.callback.handler.class=org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler
sasl.oauthbearer.jwt.validator.class=org.apache.kafka.common.security.oauthbearer.BrokerJwtValidator
sasl.oauthbearer.jwks.endpoint.url=file://$KAFKA_DIR/jwks.json
sasl.oauthbearer.expected.issuer=$KAFKA_OAUTH_ISSUER
sasl.oauthbearer.expected.audience=$KAFKA_OAUTH_AUDIENCE
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="$broker" user_broker="$broker";
ssl.keystore.type=PKCS12
ssl.keystore.location=$TLS_DIR/server.p12
ssl.keystore.password=$ks
ssl.key.password=$ks
ssl.truststore.type=PEM
ssl.truststore.location=$TLS_DIR/ca.pem
listener.name.sasl_ssl.ssl.client.auth=requested
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:broker
allow.everyone.if.no.acl.found=false
SECURED
}

# The secured variant's OAUTHBEARER: the broker validates JWTs (RS256)
# against the public key in kafka/jwks.json, the stack's stand-in for an
# identity provider's JWKS endpoint. sasl.oauthbearer.jwt.validator.class
# must name BrokerJwtValidator: with Kafka 4.1.1's default
# (DefaultJwtValidator, built without a key resolver by the callback
# handler) the broker checks a token's claims but not its signature, and
# took a token signed by any key (seen here, TestSecureKafkaOAuthBearer). the token's sub is the Kafka user, so
# the roles' ACLs hold for tokens too. The private key,
# secrets/kafka-oauth-key.pem, is made once; the tests mint tokens with it
# as an identity provider would (iss and aud below, a short exp).
KAFKA_OAUTH_ISSUER=https://idp.hivedr.test
KAFKA_OAUTH_AUDIENCE=hivedr-kafka
KAFKA_OAUTH_KID=hivedr-stack

# kafka_oauth makes the signing key once and writes the JWKS of its public
# half (n and e base64url, as RFC 7517 spells them).
kafka_oauth() {
  local key=$SECRETS_DIR/kafka-oauth-key.pem hex n
  if [ ! -s "$key" ]; then
    (umask 077 && openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$key.tmp" 2>>"$(logfile kafka)") ||
      die "kafka: making the OAUTHBEARER signing key failed"
    mv "$key.tmp" "$key"
  fi
  hex=$(openssl rsa -in "$key" -noout -modulus 2>/dev/null | cut -d= -f2)
  [ -n "$hex" ] || die "kafka: the OAUTHBEARER signing key $key has no modulus"
  # hex to bytes with bash's printf (\xHH each), then base64url.
  n=$(printf '%b' "$(printf '%s' "$hex" | sed 's/../\\x&/g')" | base64 -w0 | tr '+/' '-_' | tr -d '=')
  printf '{"keys": [{"kty": "RSA", "use": "sig", "alg": "RS256", "kid": "%s", "n": "%s", "e": "AQAB"}]}\n' \
    "$KAFKA_OAUTH_KID" "$n" >"$KAFKA_DIR/jwks.json.tmp"
  mv "$KAFKA_DIR/jwks.json.tmp" "$KAFKA_DIR/jwks.json"
}

kafka_write_config() {
  mkdir -p "$KAFKA_DATA"
  if secured kafka; then kafka_oauth; fi
  (umask 077 && cat >"$KAFKA_DIR/server.properties.tmp") <<EOF
# generated by e2e/stack/services/kafka.sh; rewritten on every start
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=$HOST:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$KAFKA_DATA
metadata.log.dir=$KAFKA_DATA

# One node: everything has one replica, and topics are created explicitly.
auto.create.topics.enable=false
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=10
offsets.topic.segment.bytes=16777216
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=10
transaction.state.log.segment.bytes=16777216
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0

# Small segments and indexes suit tests; a week of retention.
log.segment.bytes=16777216
log.index.size.max.bytes=1048576
log.retention.hours=168
# Retention is checked every second (default 5 minutes), so a test that
# gives one topic a tiny retention.ms sees its old segments deleted at
# once (TestApplierChainBrokenRetention); the check costs little here.
log.retention.check.interval.ms=1000
# The log cleaner looks for topics to compact every second (default 15
# seconds), so a test of a compacted topic sees it compacted soon
# (TestStreamCompaction).
log.cleaner.backoff.ms=1000

# Two cores on the test machine.
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=2
EOF
  if secured kafka; then kafka_secured_settings >>"$KAFKA_DIR/server.properties.tmp"; fi
  mv "$KAFKA_DIR/server.properties.tmp" "$KAFKA_DIR/server.properties"

  # The daemon logs to stdout, which start_daemon appends to logs/kafka.log.
  # INFO shows startup, topic and group changes; the full config dumps of
  # every internal client and the per-request loggers stay quiet.
  cat >"$KAFKA_DIR/log4j2.properties" <<'EOF'
# generated by e2e/stack/services/kafka.sh
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = warn
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.authorizer.name = kafka.authorizer.logger
logger.authorizer.level = warn
logger.clients.name = org.apache.kafka.clients
logger.clients.level = warn
EOF
  cat >"$KAFKA_DIR/log4j2-tools.properties" <<'EOF'
# generated by e2e/stack/services/kafka.sh: command-line tools log warnings to stderr
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = err
EOF
}

# kafka_format formats data/ once: as the standalone controller of a
# one-voter dynamic quorum, with the fixed cluster id.
kafka_format() {
  [ -s "$KAFKA_DATA/meta.properties" ] && return 0
  log "formatting Kafka storage in $KAFKA_DATA (cluster id $KAFKA_CLUSTER_ID)"
  # The secured variant's SCRAM users go into the metadata log from the
  # start: the admin among them is the one that can add more later.
  local scram=() u
  if secured kafka; then
    for u in "${KAFKA_USERS[@]}"; do
      scram+=(--add-scram "SCRAM-SHA-512=[name=$u,password=$(stack_secret "kafka-$u")]")
    done
  fi
  kafka_tool kafka.tools.StorageTool format --standalone --ignore-formatted \
    -t "$KAFKA_CLUSTER_ID" -c "$KAFKA_DIR/server.properties" "${scram[@]}" \
    >>"$(logfile kafka)" 2>&1 ||
    { tail -n 30 "$(logfile kafka)" >&2; die "kafka storage format failed"; }
}

# kafka_started succeeds when the broker's current run (the log after the
# last start marker of start_daemon) has logged that it finished starting.
# KRaft logs it only once the broker caught up with the metadata log, was
# unfenced and opened its client listener.
kafka_started() {
  # The broker has started since the latest start marker. (Reads the whole
  # log: a `tac | awk` that stops early dies of SIGPIPE under pipefail.)
  awk '/^==== .* starting: / { ok = 0 } /Kafka Server started/ { ok = 1 } END { exit !ok }' \
    "$(logfile kafka)" 2>/dev/null
}

kafka_ready() { is_running kafka && port_open "$KAFKA_PORT" && kafka_started; }

svc_kafka_up() {
  if kafka_ready; then
    if secured kafka; then kafka_acls; fi
    return 0
  fi
  mkdir -p "$KAFKA_DIR"
  grep -q "<kafka.version>$KAFKA_VERSION</kafka.version>" "$STACK_LIB_DIR/kafka/pom.xml" ||
    die "e2e/stack/kafka/pom.xml does not pin kafka.version $KAFKA_VERSION (KAFKA_VERSION in lib.sh)"
  mvn_classpath "$STACK_LIB_DIR/kafka" "$KAFKA_CP"
  # A pid file left by a kill or a reboot may name an unrelated process now.
  if is_running kafka && ! grep -qa kafka.Kafka "/proc/$(cat "$(pidfile kafka)")/cmdline" 2>/dev/null; then
    rm -f "$(pidfile kafka)"
  fi
  if ! is_running kafka; then
    ports_free "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" ||
      die "port $KAFKA_PORT or $KAFKA_CONTROLLER_PORT is taken by a process that is not the stack's kafka (no live pid in $(pidfile kafka))"
    kafka_write_config
    kafka_format
    log "starting kafka $KAFKA_VERSION on $HOST:$KAFKA_PORT"
    local secure=()
    if secured kafka; then
      # Kerberos for GSSAPI; the one JWKS URL the OAUTHBEARER validator may read.
      secure=(-Djava.security.krb5.conf="$KRB5_CONF_FILE"
        -Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="file://$KAFKA_DIR/jwks.json")
    fi
    start_daemon kafka "$(kafka_java)" "${KAFKA_HEAP[@]}" "${secure[@]}" \
      -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
      -Djava.awt.headless=true \
      -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
      -cp "$(cat "$KAFKA_CP")" kafka.Kafka "$KAFKA_DIR/server.properties"
  fi
  wait_ready kafka 120 kafka_ready
  if secured kafka; then kafka_acls; fi
}

# kafka_admin_config writes kafka/admin.yaml, a hivedr configuration that
# reaches the secured broker as its admin user (the password stays in its
# secrets file).
kafka_admin_config() {
  cat >"$KAFKA_DIR/admin.yaml.tmp" <<EOF
# generated by e2e/stack/services/kafka.sh: the secured stack's Kafka as its admin
kafka:
  brokers: ["$HOST:$KAFKA_PORT"]
  replication_factor: 1
  sasl: {mechanism: SCRAM-SHA-512, user: admin, password_file: "$SECRETS_DIR/kafka-admin"}
  tls: {ca_file: "$TLS_DIR/ca.pem"}
EOF
  mv "$KAFKA_DIR/admin.yaml.tmp" "$KAFKA_DIR/admin.yaml"
}

# kafka_acls gives each role's user the ACLs its role needs under the
# default names (topic prefix hivedr, groups hivedr-copyd and
# hivedr-applier, transactional IDs hivedr-tailer-primary and
# hivedr-copyd-*), as `hivedr acls` lists them; tests grant the same for
# their own names. Creating an ACL that exists changes nothing.
kafka_acls() {
  local bin=$STACK_DIR/bin/hivedr lf; lf=$(logfile kafka-acls)
  command -v go >/dev/null 2>&1 || die "kafka: go is required to build hivedr, which grants the roles' ACLs"
  mkdir -p "$STACK_DIR/bin"
  (cd "$REPO_DIR" && go build -o "$bin" ./cmd/hivedr) >"$lf" 2>&1 ||
    { tail -n 30 "$lf" >&2; die "kafka: building hivedr (to grant the roles' ACLs) failed; log: $lf"; }
  kafka_admin_config
  "$bin" acls -config "$KAFKA_DIR/admin.yaml" -apply >>"$lf" 2>&1 ||
    { tail -n 30 "$lf" >&2; die "kafka: hivedr acls -apply failed; log: $lf"; }
  log "kafka: $(grep -o 'ACL entries in place.*' "$lf" | tail -n 1) (tailer, copyd, applier, operator; table in $lf)"
}

svc_kafka_down() { stop_daemon kafka; }

svc_kafka_status() {
  if kafka_ready; then
    echo "kafka: up ($HOST:$KAFKA_PORT$(secured kafka && echo " SASL_SSL, SCRAM-SHA-512, GSSAPI and OAUTHBEARER, ACLs"), controller $HOST:$KAFKA_CONTROLLER_PORT)"
  else
    echo "kafka: down"
    return 1
  fi
}

svc_kafka_env() {
  echo "HIVEDR_KAFKA_BROKERS=$HOST:$KAFKA_PORT"
  secured kafka || return 0
  local u U
  echo "HIVEDR_KAFKA_SASL_MECHANISM=SCRAM-SHA-512"
  echo "HIVEDR_KAFKA_ADMIN_CONFIG=$KAFKA_DIR/admin.yaml"
  echo "HIVEDR_KAFKA_OAUTH_KEY=$SECRETS_DIR/kafka-oauth-key.pem"
  echo "HIVEDR_KAFKA_OAUTH_KID=$KAFKA_OAUTH_KID"
  echo "HIVEDR_KAFKA_OAUTH_ISSUER=$KAFKA_OAUTH_ISSUER"
  echo "HIVEDR_KAFKA_OAUTH_AUDIENCE=$KAFKA_OAUTH_AUDIENCE"
  for u in "${KAFKA_USERS[@]}"; do
    U=$(echo "$u" | tr a-z A-Z)
    echo "HIVEDR_KAFKA_PASSWORD_FILE_$U=$SECRETS_DIR/kafka-$u"
  done
}
