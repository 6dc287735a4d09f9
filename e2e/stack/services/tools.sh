# shellcheck shell=bash
# Command-line tools the e2e tests run against the stack (no daemon):
# kcat, from Debian's packages, reads topics the way streaming teams do;
# on the plain stack, the jars of the Flink SQL job TestStreamFlinkSQL
# runs (flink/pom.xml, resolved into ~/.m2 once; its classpath in
# $STACK_DIR/flink/classpath.txt) and of the Iceberg reference
# implementation the Iceberg tests write and read with
# (iceberg/IcebergTool.java, iceberg/pom.xml; $STACK_DIR/iceberg/classpath.txt).

FLINK_CP=$STACK_DIR/flink/classpath.txt
ICEBERG_CP=$STACK_DIR/iceberg/classpath.txt

svc_tools_up() {
  command -v kcat >/dev/null 2>&1 || { log "installing kcat"; apt_install kcat; }
  if [ "$STACK_SECURE" != 1 ]; then
    mvn_classpath "$STACK_LIB_DIR/flink" "$FLINK_CP"
    mvn_classpath "$STACK_LIB_DIR/iceberg" "$ICEBERG_CP"
  fi
}

svc_tools_down() { :; }

svc_tools_status() {
  if command -v kcat >/dev/null 2>&1; then
    echo "tools: kcat $(kcat -V 2>/dev/null | sed -n 's/^Version \([^ ]*\).*/\1/p')"
  else
    echo "tools: kcat missing"
    return 1
  fi
}

svc_tools_env() {
  echo "HIVEDR_KCAT=$(command -v kcat)"
  if [ "$STACK_SECURE" != 1 ]; then
    echo "HIVEDR_FLINK_CLASSPATH=$FLINK_CP"
    echo "HIVEDR_ICEBERG_CLASSPATH=$ICEBERG_CP"
    echo "HIVEDR_JAVA17=$(java17)/bin/java"
  fi
}
