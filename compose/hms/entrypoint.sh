#!/usr/bin/env bash
# Start of a metastore container of compose.yaml (Dockerfile.hms): the
# schema in Postgres initialised once with the schema tool, then the
# metastore on the Thrift port of its site file, with the JVM flags of
# e2e/stack/services/hms.sh (hms_java; TestComposeMatchesStack compares).
set -eo pipefail
. /opt/hivedr/hms.sh # HMS_JVM_OPENS (hms.sh reads unset variables: -u after it)
set -u
conf=/etc/metastore/metastore-site.xml
prop() { sed -n "s#.*<name>$1</name><value>\([^<]*\)</value>.*#\1#p" "$conf"; }
java=(java -Xmx768m -Xms128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:+UnlockDiagnosticVMOptions
  -XX:-BytecodeVerificationRemote "${HMS_JVM_OPENS[@]}" -Djava.net.preferIPv4Stack=true -Dlog4j2.formatMsgNoLookups=true
  -cp "/etc/metastore:/opt/metastore/lib/*:/opt/metastore/deps/*:/opt/hivedr-listener/*:/opt/hivedr-listener/listener")
tool=("${java[@]}" org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool -dbType postgres
  -driver "$(prop javax.jdo.option.ConnectionDriverName)" -url "$(prop javax.jdo.option.ConnectionURL)"
  -userName "$(prop javax.jdo.option.ConnectionUserName)" -passWord "$(prop javax.jdo.option.ConnectionPassword)")
if ! "${tool[@]}" -info >/dev/null 2>&1; then
  echo "initialising the metastore schema at $(prop javax.jdo.option.ConnectionURL)" >&2
  "${tool[@]}" -initSchema
fi
exec "${java[@]}" org.apache.hadoop.hive.metastore.HiveMetaStore -p "$(prop metastore.thrift.port)"
