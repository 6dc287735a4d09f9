# shellcheck shell=bash
# Two Hive Metastores, source (hms-src) and DR (hms-dr), and on the plain
# stack a third, the second DR site's (hms-dr2, set up as hms-dr is, on
# database metastore_dr2 and HDFS cluster hdfs-dr2; SITES in lib.sh): Hive
# hive-standalone-metastore-server $HIVE_VERSION on Java 17, JDO on the
# Postgres of services/postgres.sh (databases metastore_src / metastore_dr),
# warehouses on the two HDFS clusters of services/hdfs.sh, and
# DbNotificationListener as a transactional listener so that every metadata
# change lands in NOTIFICATION_LOG.
#
# Jars (e2e/stack/hms/pom.xml, resolved into ~/.m2):
#   - the metastore's binary distribution (tar.gz), unpacked once into
#     $STACK_DIR/hms/dist; its lib/*.jar comes first on the classpath;
#   - the Hadoop client (hadoop-common + hadoop-hdfs-client 3.3.6, unshaded,
#     as Hive 4.0.1 is built against), which the distribution does not ship;
#   - hive-common (HiveConf, read by the listener's cleaner thread);
#   - hive-hcatalog-server-extensions (DbNotificationListener). The only
#     Hive 4 build on Maven Central is 4.2.0, compiled for Java 21 (class
#     file version 65), which Java 17 refuses to load although the listener
#     uses no Java 21 API; hms.sh therefore writes a copy of that jar whose
#     class files are marked version 61 (Java 17), byte code unchanged.
#     Some of its methods name 4.2-only types (AlterPartitionsEvent ...)
#     that 4.0.1 never passes, so the JVM's verifier, which would load them,
#     is off for application classes (-XX:-BytecodeVerificationRemote);
#   - hive-exec 4.0.1's core jar with hadoop-mapreduce-client-core and the
#     Hive shims, each without dependencies: the metastore validates a
#     full-ACID table by loading its ORC formats and AcidInputFormat /
#     AcidOutputFormat, which live there.
#
# The listener subclass (below) also puts the transaction's writes (write
# IDs, tables, partitions, files) into each COMMIT_TXN message, as Hive's
# REPL DUMP does when it dumps a commit, except for transactions that
# wrote a database matching HIVEDR_HMS_BARE_COMMIT_DBS (a Java regular
# expression, default stock_.*; "" for none): their COMMIT_TXN names the
# transaction only, as Hive's own listener writes it, and a reader must
# ask the metastore for the writes (get_all_write_event_info).
#
# The secured variant (HIVEDR_STACK_SECURE=1, services/kdc.sh) runs both
# with Kerberos SASL on Thrift (metastore.sasl.enabled, principal
# hive/localhost from hive.keytab, QOP auth) and makes them kerberized
# HDFS clients of their cluster (core-site.xml and hdfs-site.xml in their
# conf directory). Probe then logs in as hivedr-test and speaks SASL GSSAPI.
# The privacy variant (HIVEDR_STACK_PRIVACY=1) sets hadoop.rpc.protection
# to privacy, which the metastore's SASL server takes its QOP from: only
# auth-conf is offered, every Thrift frame after the handshake encrypted.
#
# Daemons: hms-src (thrift 127.0.0.1:$HMS_SRC_PORT), hms-dr (:$HMS_DR_PORT),
# hms-dr2 (:$HMS_DR2_PORT, plain stack only).
# State: $STACK_DIR/hms (dist, jars, tools), $STACK_DIR/hms-<side>/conf;
# the metadata itself lives in Postgres and HDFS.

HMS_DIR=$STACK_DIR/hms
HMS_DIST=$HMS_DIR/dist
HMS_CP_FILE=$HMS_DIR/classpath.txt
HMS_TOOLS=$HMS_DIR/tools
HMS_LISTENER=org.apache.hive.hcatalog.listener.DbNotificationListener
# DbNotificationListener is a transactional listener: each event is written
# in the same Postgres transaction as its change. HIVEDR_HMS_LISTENER_MODE:
#   compat (default)  hivedr.stack.DbNotificationListener401, the 4.2.0
#                     listener with its three 4.2-only calls (commit, abort,
#                     reload messages) redone with 4.0.1's MessageBuilder;
#   stock             the 4.2.0 listener as shipped: commit_txn and
#                     abort_txn(s) then fail with NoSuchMethodError, and in
#                     this mode leave a Postgres transaction holding the
#                     NOTIFICATION_SEQUENCE row lock, so every later event
#                     waits forever (restart the metastore).
HMS_LISTENER_MODE=${HIVEDR_HMS_LISTENER_MODE:-compat}
HMS_BARE_COMMIT_DBS=${HIVEDR_HMS_BARE_COMMIT_DBS-stock_.*}
HMS_HEAP=${HMS_HEAP:-768m}
HMS_KRB_OPTS=()
if secured hms; then HMS_KRB_OPTS=("-Djava.security.krb5.conf=$KRB5_CONF_FILE"); fi

# JVM flags: Hive 4.0 reflects into JDK internals (DataNucleus, Hadoop's
# shutdown hooks, Thrift); open them instead of letting it fail at run time.
HMS_JVM_OPENS=(
  --add-opens=java.base/java.lang=ALL-UNNAMED
  --add-opens=java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens=java.base/java.lang.invoke=ALL-UNNAMED
  --add-opens=java.base/java.util=ALL-UNNAMED
  --add-opens=java.base/java.util.concurrent=ALL-UNNAMED
  --add-opens=java.base/java.util.regex=ALL-UNNAMED
  --add-opens=java.base/java.io=ALL-UNNAMED
  --add-opens=java.base/java.net=ALL-UNNAMED
  --add-opens=java.base/java.nio=ALL-UNNAMED
  --add-opens=java.base/sun.nio.ch=ALL-UNNAMED
  --add-opens=java.base/sun.nio.cs=ALL-UNNAMED
  --add-opens=java.base/sun.security.action=ALL-UNNAMED
  --add-opens=java.base/sun.util.calendar=ALL-UNNAMED
  --add-opens=java.sql/java.sql=ALL-UNNAMED
)

# Per-instance values; SIDE is src, dr or dr2.
hms_port() {
  case $1 in
    src) echo "$HMS_SRC_PORT" ;;
    dr) echo "$HMS_DR_PORT" ;;
    dr2) echo "$HMS_DR2_PORT" ;;
    *) die "hms: unknown side $1" ;;
  esac
}
hms_nn() {
  case $1 in
    src) echo "hdfs://$HOST:$HDFS_SRC_NN_PORT" ;;
    dr) echo "hdfs://$HOST:$HDFS_DR_NN_PORT" ;;
    dr2) echo "hdfs://$HOST:$HDFS_DR2_NN_PORT" ;;
    *) die "hms: unknown side $1" ;;
  esac
}
hms_db() { echo "metastore_$1"; }
hms_jdbc() { echo "jdbc:postgresql://$HOST:$POSTGRES_PORT/$(hms_db "$1")"; }

# hms_psql SIDE SQL runs SQL as hive on that side's database; prints rows.
hms_psql() {
  PGPASSWORD=hive PGCONNECT_TIMEOUT=5 PGOPTIONS="-c client_min_messages=warning" \
    psql -X -q -A -t -v ON_ERROR_STOP=1 \
    -h "$HOST" -p "$POSTGRES_PORT" -U hive -d "$(hms_db "$1")" -c "$2"
}

# hms_write_tools DIR writes the Java sources hms.sh compiles into DIR:
#   Retarget JAR_IN JAR_OUT  copies a jar, marking class files newer than
#                            Java 17 (major > 61) as version 61;
#   Probe HOST PORT          one Thrift call (get_current_notificationEventId)
#                            against a metastore; exit 0 and the id when served;
#   hivedr.stack.DbNotificationListener401 (see below).
hms_write_tools() {
  local HMS_TOOLS=$1
  mkdir -p "$HMS_TOOLS/src"
  cat >"$HMS_TOOLS/src/Retarget.java" <<'EOF'
import java.io.*;
import java.util.zip.*;

public class Retarget {
  public static void main(String[] args) throws IOException {
    int changed = 0;
    try (ZipInputStream in = new ZipInputStream(new FileInputStream(args[0]));
         ZipOutputStream out = new ZipOutputStream(new FileOutputStream(args[1]))) {
      for (ZipEntry e; (e = in.getNextEntry()) != null; ) {
        byte[] b = in.readAllBytes();
        if (e.getName().endsWith(".class") && b.length > 8
            && (b[0] & 0xff) == 0xca && (b[1] & 0xff) == 0xfe
            && (((b[6] & 0xff) << 8) | (b[7] & 0xff)) > 61) {
          b[6] = 0;
          b[7] = 61;
          changed++;
        }
        ZipEntry o = new ZipEntry(e.getName());
        o.setTime(e.getTime());
        out.putNextEntry(o);
        out.write(b);
        out.closeEntry();
      }
    }
    System.out.println(changed + " class files marked as Java 17 (version 61)");
  }
}
EOF
  # The 4.2.0 DbNotificationListener calls three methods that Hive 4.0.1
  # lacks (CommitTxnEvent.getDatabases/getWriteId, AbortTxnEvent.getWriteId
  # and a newer buildReloadMessage). This subclass keeps everything else of
  # the real listener and builds those three messages with 4.0.1's own
  # MessageBuilder, storing them through the listener's own (private) writer.
  # A COMMIT_TXN message gets the transaction's writes (write ID, database,
  # table, partition, files of every ACID_WRITE it made), read from the
  # listener's TXN_WRITE_NOTIFICATION_LOG in the committing transaction:
  # the stock message names only the transaction, and a reader of the log
  # would have to ask the metastore for them (REPL DUMP does). A
  # transaction that wrote a database matching the metastore setting
  # hivedr.stack.listener.bare.commit.databases gets the stock message, so
  # that tests can show both on one stack.
  mkdir -p "$HMS_TOOLS/src/hivedr/stack"
  cat >"$HMS_TOOLS/src/hivedr/stack/DbNotificationListener401.java" <<'EOF'
package hivedr.stack;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.api.MetaException;
import org.apache.hadoop.hive.metastore.api.NotificationEvent;
import org.apache.hadoop.hive.metastore.api.TxnType;
import org.apache.hadoop.hive.metastore.api.WriteEventInfo;
import org.apache.hadoop.hive.metastore.events.AbortTxnEvent;
import org.apache.hadoop.hive.metastore.events.CommitTxnEvent;
import org.apache.hadoop.hive.metastore.events.ListenerEvent;
import org.apache.hadoop.hive.metastore.events.ReloadEvent;
import org.apache.hadoop.hive.metastore.messaging.CommitTxnMessage;
import org.apache.hadoop.hive.metastore.messaging.EventMessage;
import org.apache.hadoop.hive.metastore.messaging.MessageBuilder;
import org.apache.hadoop.hive.metastore.messaging.MessageEncoder;
import org.apache.hadoop.hive.metastore.messaging.MessageFactory;
import org.apache.hadoop.hive.metastore.tools.SQLGenerator;
import org.apache.hive.hcatalog.listener.DbNotificationListener;

/** DbNotificationListener 4.2.0 on a Hive 4.0.1 metastore (local stack only). */
public class DbNotificationListener401 extends DbNotificationListener {
  // Method handles, not reflection: Class.getDeclaredMethod would resolve
  // every method signature of the listener, some of which name 4.2-only types.
  private static final MethodHandle ADD_LOG;
  private static final MethodHandle PROCESS;
  static {
    try {
      MethodHandles.Lookup l = MethodHandles.privateLookupIn(DbNotificationListener.class, MethodHandles.lookup());
      ADD_LOG = l.findVirtual(DbNotificationListener.class, "addNotificationLog", MethodType.methodType(void.class,
          NotificationEvent.class, ListenerEvent.class, Connection.class, SQLGenerator.class));
      PROCESS = l.findVirtual(DbNotificationListener.class, "process",
          MethodType.methodType(void.class, NotificationEvent.class, ListenerEvent.class));
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  private final MessageEncoder encoder;
  // Databases whose transactions' COMMIT_TXN names no writes (null: none).
  private final Pattern bareCommits;

  public DbNotificationListener401(Configuration conf) throws MetaException {
    super(conf);
    encoder = MessageFactory.getDefaultInstance(conf);
    String bare = conf.get("hivedr.stack.listener.bare.commit.databases", "");
    bareCommits = bare.isEmpty() ? null : Pattern.compile(bare);
  }

  private boolean bare(List<WriteEventInfo> writes) {
    if (bareCommits == null) return false;
    for (WriteEventInfo w : writes) {
      if (bareCommits.matcher(w.getDatabase()).matches()) return true;
    }
    return false;
  }

  private NotificationEvent event(EventMessage.EventType type, EventMessage msg) {
    int now = (int) (System.currentTimeMillis() / 1000);
    return new NotificationEvent(0, now, type.toString(), encoder.getSerializer().serialize(msg));
  }

  private static MetaException failed(Throwable t) {
    if (t instanceof MetaException) return (MetaException) t;
    MetaException me = new MetaException("cannot log notification event: " + t);
    me.initCause(t);
    return me;
  }

  // The writes a committing transaction made, as the ACID_WRITE events
  // recorded them (the listener's own TXN_WRITE_NOTIFICATION_LOG rows), read
  // in the metastore's transaction that commits it.
  private static List<WriteEventInfo> writes(long txnId, Connection conn) throws SQLException {
    List<WriteEventInfo> out = new ArrayList<>();
    try (PreparedStatement st = conn.prepareStatement("SELECT \"WNL_WRITEID\", \"WNL_DATABASE\", \"WNL_TABLE\", "
        + "\"WNL_PARTITION\", \"WNL_TABLE_OBJ\", \"WNL_PARTITION_OBJ\", \"WNL_FILES\" "
        + "FROM \"TXN_WRITE_NOTIFICATION_LOG\" WHERE \"WNL_TXNID\" = ? ORDER BY \"WNL_ID\"")) {
      st.setLong(1, txnId);
      try (ResultSet rs = st.executeQuery()) {
        while (rs.next()) {
          String files = rs.getString(7);
          WriteEventInfo w = new WriteEventInfo(rs.getLong(1), rs.getString(2), rs.getString(3), files == null ? "" : files);
          String part = rs.getString(4);
          if (part != null && !part.isEmpty()) w.setPartition(part);
          w.setTableObj(rs.getString(5));
          String partObj = rs.getString(6);
          if (partObj != null && !partObj.isEmpty()) w.setPartitionObj(partObj);
          out.add(w);
        }
      }
    }
    return out;
  }

  @Override
  public void onCommitTxn(CommitTxnEvent e, Connection conn, SQLGenerator gen) throws MetaException {
    if (e.getTxnType() == TxnType.READ_ONLY) return;
    CommitTxnMessage msg = MessageBuilder.getInstance().buildCommitTxnMessage(e.getTxnId());
    try {
      List<WriteEventInfo> w = writes(e.getTxnId(), conn);
      if (!w.isEmpty() && !bare(w)) msg.addWriteEventInfo(w);
    } catch (SQLException x) {
      throw failed(x);
    }
    NotificationEvent ev = event(EventMessage.EventType.COMMIT_TXN, msg);
    try {
      ADD_LOG.invoke((DbNotificationListener) this, ev, (ListenerEvent) e, conn, gen);
    } catch (Throwable t) {
      throw failed(t);
    }
  }

  @Override
  public void onAbortTxn(AbortTxnEvent e, Connection conn, SQLGenerator gen) throws MetaException {
    if (e.getTxnType() == TxnType.READ_ONLY) return;
    NotificationEvent ev = event(EventMessage.EventType.ABORT_TXN,
        MessageBuilder.getInstance().buildAbortTxnMessage(e.getTxnId(), e.getDbsUpdated()));
    try {
      ADD_LOG.invoke((DbNotificationListener) this, ev, (ListenerEvent) e, conn, gen);
    } catch (Throwable t) {
      throw failed(t);
    }
  }

  @Override
  public void onReload(ReloadEvent e) throws MetaException {
    NotificationEvent ev = event(EventMessage.EventType.RELOAD,
        MessageBuilder.getInstance().buildReloadMessage(e.getTableObj(), e.getPartitionObj(), e.isRefreshEvent()));
    ev.setCatName(e.getTableObj().isSetCatName() ? e.getTableObj().getCatName() : "hive");
    ev.setDbName(e.getTableObj().getDbName());
    ev.setTableName(e.getTableObj().getTableName());
    try {
      PROCESS.invoke((DbNotificationListener) this, ev, (ListenerEvent) e);
    } catch (Throwable t) {
      throw failed(t);
    }
  }
}
EOF
  cat >"$HMS_TOOLS/src/Probe.java" <<'EOF'
import java.security.PrivilegedExceptionAction;
import java.util.Map;
import javax.security.sasl.Sasl;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hive.metastore.api.ThriftHiveMetastore;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.transport.TSaslClientTransport;
import org.apache.thrift.transport.TSocket;
import org.apache.thrift.transport.TTransport;

/** Probe HOST PORT [CLIENT_PRINCIPAL KEYTAB SERVER_PRINCIPAL]: one call; SASL GSSAPI when a principal is given. */
public class Probe {
  static long call(String host, int port, String[] server) throws Exception {
    TTransport t = new TSocket(host, port, 5000);
    if (server != null) {
      t = new TSaslClientTransport("GSSAPI", null, server[0], server[1], Map.of(Sasl.QOP, "auth-conf,auth-int,auth"), null, t);
    }
    t.open();
    try {
      return new ThriftHiveMetastore.Client(new TBinaryProtocol(t)).get_current_notificationEventId().getEventId();
    } finally {
      t.close();
    }
  }

  public static void main(String[] args) throws Exception {
    String host = args[0];
    int port = Integer.parseInt(args[1]);
    if (args.length < 5) {
      System.out.println(call(host, port, null));
      return;
    }
    Configuration conf = new Configuration();
    conf.set("hadoop.security.authentication", "kerberos");
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation ugi = UserGroupInformation.loginUserFromKeytabAndReturnUGI(args[2], args[3]);
    String[] server = args[4].split("[/@]");
    System.out.println(ugi.doAs((PrivilegedExceptionAction<Long>) () -> call(host, port, server)));
  }
}
EOF
}

# hms_install resolves the jars, unpacks the distribution, makes the Java 17
# copy of the listener jar and compiles the tools; each step is cached.
hms_install() {
  local jh cp dist_tgz hcat_jar stamp
  jh=$(java17)
  [ -x "$jh/bin/javac" ] || { log "installing openjdk-17-jdk-headless (javac)"; apt_install openjdk-17-jdk-headless; }
  command -v psql >/dev/null 2>&1 || apt_install postgresql-client
  mvn_classpath "$STACK_LIB_DIR/hms" "$HMS_CP_FILE"
  cp=$(cat "$HMS_CP_FILE")
  # grep reads a process substitution, not a pipe: under pipefail, grep -m1
  # exiting early made tr die of SIGPIPE and the lookup fail (seen on a
  # loaded machine).
  dist_tgz=$(grep -m1 'hive-standalone-metastore-server-.*-bin\.tar\.gz$' < <(tr ':' '\n' <<<"$cp")) ||
    die "hms: the metastore distribution is missing from $HMS_CP_FILE"
  hcat_jar=$(grep -m1 '/hive-hcatalog-server-extensions-[^/]*\.jar$' < <(tr ':' '\n' <<<"$cp")) ||
    die "hms: hive-hcatalog-server-extensions is missing from $HMS_CP_FILE"

  stamp="$HMS_DIST/.unpacked-$(basename "$dist_tgz")"
  if [ ! -f "$stamp" ]; then
    log "hms: unpacking $(basename "$dist_tgz") into $HMS_DIST"
    rm -rf "$HMS_DIST" "$HMS_DIST.tmp"
    mkdir -p "$HMS_DIST.tmp"
    tar -xzf "$dist_tgz" -C "$HMS_DIST.tmp" --strip-components=1 || die "hms: cannot unpack $dist_tgz"
    [ -f "$HMS_DIST.tmp/lib/hive-standalone-metastore-server-$HIVE_VERSION.jar" ] ||
      die "hms: $dist_tgz has no lib/hive-standalone-metastore-server-$HIVE_VERSION.jar"
    mv "$HMS_DIST.tmp" "$HMS_DIST"
    touch "$stamp"
  fi

  # Tools, the Java 17 copy of the listener jar and the listener subclass;
  # rebuilt when this file or the listener jar changes.
  HMS_LISTENER_JAR=$HMS_TOOLS/$(basename "$hcat_jar" .jar)-java17.jar
  local deps
  deps=$(tr ':' '\n' <<<"$cp" | grep -v -e '\.tar\.gz$' -e '/hive-hcatalog-server-extensions-' | paste -sd:)
  if [ ! -f "$HMS_TOOLS/.stamp" ] || [ "${BASH_SOURCE[0]}" -nt "$HMS_TOOLS/.stamp" ] ||
    [ "$hcat_jar" -nt "$HMS_TOOLS/.stamp" ]; then
    # Built aside and swapped in: a running metastore keeps its open files.
    local new=$HMS_TOOLS.new
    log "hms: compiling helper tools and the listener subclass"
    rm -rf "$new"
    hms_write_tools "$new"
    mkdir -p "$new/classes" "$new/listener"
    "$jh/bin/javac" -nowarn -d "$new/classes" -cp "$HMS_DIST/lib/*:$deps" \
      "$new/src/Retarget.java" "$new/src/Probe.java" ||
      die "hms: cannot compile $new/src"
    log "hms: $(basename "$hcat_jar") targets Java 21; writing a Java 17 copy"
    "$jh/bin/java" -cp "$new/classes" Retarget "$hcat_jar" "$new/$(basename "$HMS_LISTENER_JAR")" >&2 ||
      die "hms: cannot rewrite $hcat_jar"
    "$jh/bin/javac" -nowarn -d "$new/listener" \
      -cp "$HMS_DIST/lib/*:$deps:$new/$(basename "$HMS_LISTENER_JAR")" \
      "$new/src/hivedr/stack/DbNotificationListener401.java" ||
      die "hms: cannot compile the listener subclass"
    touch "$new/.stamp"
    rm -rf "$HMS_TOOLS.old"
    if [ -d "$HMS_TOOLS" ]; then mv "$HMS_TOOLS" "$HMS_TOOLS.old"; fi
    mv "$new" "$HMS_TOOLS"
    rm -rf "$HMS_TOOLS.old"
  fi

  # Classpath: the distribution's lib/, the jars from Maven (Hadoop client,
  # hive-common), the Java 17 copy of the listener jar and its subclass.
  HMS_CLASSPATH="$HMS_DIST/lib/*:$deps:$HMS_LISTENER_JAR:$HMS_TOOLS/listener"
}

# hms_write_conf SIDE writes $STACK_DIR/hms-SIDE/conf (metastore-site.xml,
# metastore-log4j2.properties), regenerated on every up.
hms_write_conf() {
  local side=$1 conf=$STACK_DIR/hms-$1/conf nn cm="" listener
  nn=$(hms_nn "$side")
  case "$HMS_LISTENER_MODE" in
    compat) listener=hivedr.stack.DbNotificationListener401 ;;
    stock) listener=$HMS_LISTENER ;;
    *) die "HIVEDR_HMS_LISTENER_MODE must be compat or stock, not '$HMS_LISTENER_MODE'" ;;
  esac
  mkdir -p "$conf"
  if [ "$side" = src ]; then
    cm="
  <property><name>metastore.repl.cm.enabled</name><value>true</value></property>
  <property><name>metastore.repl.cmrootdir</name><value>$nn/cmroot</value></property>"
  fi
  cat >"$conf/metastore-site.xml.tmp" <<EOF
<?xml version="1.0"?>
<!-- generated by e2e/stack/services/hms.sh; rewritten on every stack up -->
<configuration>
  <property><name>javax.jdo.option.ConnectionURL</name><value>$(hms_jdbc "$side")</value></property>
  <property><name>javax.jdo.option.ConnectionDriverName</name><value>org.postgresql.Driver</value></property>
  <property><name>javax.jdo.option.ConnectionUserName</name><value>hive</value></property>
  <property><name>javax.jdo.option.ConnectionPassword</name><value>hive</value></property>
  <property><name>metastore.schema.verification</name><value>true</value></property>
  <property><name>datanucleus.schema.autoCreateAll</name><value>false</value></property>
  <property><name>datanucleus.connectionPool.maxPoolSize</name><value>10</value></property>

  <property><name>metastore.thrift.port</name><value>$(hms_port "$side")</value></property>
  <property><name>metastore.thrift.bind.host</name><value>$HOST</value></property>
  <property><name>metastore.server.min.threads</name><value>8</value></property>

  <property><name>fs.defaultFS</name><value>$nn</value></property>
  <property><name>metastore.warehouse.dir</name><value>$nn/warehouse</value></property>
  <!-- External tables live beside the managed warehouse, not in it: the
       metastore refuses external locations inside metastore.warehouse.dir. -->
  <property><name>metastore.warehouse.external.dir</name><value>$nn/external</value></property>

  <property><name>metastore.transactional.event.listeners</name><value>$listener</value></property>
  <!-- The listener subclass leaves the writes out of the COMMIT_TXN of a
       transaction that wrote a database matching this, as Hive's own
       listener does for every commit (HIVEDR_HMS_BARE_COMMIT_DBS). -->
  <property><name>hivedr.stack.listener.bare.commit.databases</name><value>$HMS_BARE_COMMIT_DBS</value></property>
  <!-- Lets any user read the notification log (4.0's key has "metastore."
       twice; the hive.* name is its alias). -->
  <property><name>metastore.metastore.event.db.notification.api.auth</name><value>false</value></property>
  <property><name>hive.metastore.event.db.notification.api.auth</name><value>false</value></property>
  <property><name>metastore.dml.events</name><value>true</value></property>$cm
  <!-- No metadata transformer: by default 4.0 rewrites tables created by
       clients that declare no "processor capabilities" (any plain Thrift
       client) into external tables and refuses ACID ones. A replica must
       store tables exactly as it is told. -->
  <property><name>metastore.metadata.transformer.class</name><value> </value></property>

  <!-- open_txns deletes the transactions it just opened, and retries,
       when its database transaction took longer than this (default 1 s,
       so that no reader sees a later transaction ID before an earlier
       one). On a loaded two-core machine it took 1.2 s, and a replicated
       open (REPL LOAD's, hivedr's) then left its source-to-replica mapping
       pointing at the deleted transaction: write-ID allocation failed with
       "not all input txns in open state". -->
  <property><name>metastore.txn.opentxn.timeout</name><value>30000</value></property>

  <!-- Background work that needs Hive's query engine (absent here). -->
  <property><name>metastore.compactor.initiator.on</name><value>false</value></property>
  <property><name>metastore.compactor.cleaner.on</name><value>false</value></property>
  <property><name>metastore.compactor.worker.threads</name><value>0</value></property>
  <property><name>hive.metastore.runworker.in</name><value>hs2</value></property>
  <property><name>metastore.stats.auto.analyze</name><value>none</value></property>
  <property><name>metastore.metrics.enabled</name><value>false</value></property>$(hms_secure_props)
  <!-- Defaults minus HiveProtoEventsCleanerTask (lives in hive-exec: its
       absence stops every housekeeping task), the metrics tasks (metrics are
       off) and PartitionManagementTask (partition discovery would add
       partitions on its own, a surprise on a replica). -->
  <property><name>metastore.task.threads.always</name><value>org.apache.hadoop.hive.metastore.events.EventCleanerTask,org.apache.hadoop.hive.metastore.RuntimeStatsCleanerTask,org.apache.hadoop.hive.metastore.ScheduledQueryExecutionsMaintTask,org.apache.hadoop.hive.metastore.ReplicationMetricsMaintTask</value></property>
  <property><name>metastore.task.threads.remote</name><value>org.apache.hadoop.hive.metastore.txn.service.AcidHouseKeeperService,org.apache.hadoop.hive.metastore.txn.service.CompactionHouseKeeperService,org.apache.hadoop.hive.metastore.txn.service.AcidTxnCleanerService,org.apache.hadoop.hive.metastore.txn.service.AcidOpenTxnsCounterService,org.apache.hadoop.hive.metastore.MaterializationsRebuildLockCleanerTask</value></property>
</configuration>
EOF
  mv "$conf/metastore-site.xml.tmp" "$conf/metastore-site.xml"
  if secured hms; then hms_secure_hadoop_conf "$side" "$conf"; fi
  cat >"$conf/metastore-log4j2.properties" <<'EOF'
# generated by e2e/stack/services/hms.sh: everything to stdout (the daemon log)
status = WARN
name = HmsStack
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_OUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{ISO8601} %5p [%t] %c{2}: %m%n
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = console
# One line per Thrift call otherwise (pollers call every second).
logger.audit.name = org.apache.hadoop.hive.metastore.HiveMetaStore.audit
logger.audit.level = WARN
logger.handler.name = org.apache.hadoop.hive.metastore.HMSHandler
logger.handler.level = WARN
logger.objectstore.name = org.apache.hadoop.hive.metastore.ObjectStore
logger.objectstore.level = WARN
logger.dn.name = DataNucleus
logger.dn.level = WARN
logger.datanucleus.name = org.datanucleus
logger.datanucleus.level = WARN
EOF
}

# hms_secure_props prints the secured variant's metastore-site.xml
# properties (nothing on the plain stack). Its heredocs and
# hms_secure_hadoop_conf's end SECURED: compose/ mirrors the plain stack.
hms_secure_props() {
  secured hms || return 0
  cat <<SECURED

  <!-- secured variant: Kerberos SASL (GSSAPI) on Thrift -->
  <property><name>metastore.sasl.enabled</name><value>true</value></property>
  <property><name>metastore.kerberos.principal</name><value>hive/localhost@$KRB_REALM</value></property>
  <property><name>metastore.kerberos.keytab.file</name><value>$KRB_KEYTABS/hive.keytab</value></property>
  <property><name>hadoop.security.authentication</name><value>kerberos</value></property>
  <property><name>hadoop.rpc.protection</name><value>$(_hdfs_rpc_protection)</value></property>
SECURED
}

# hms_secure_hadoop_conf SIDE CONFDIR writes the core-site.xml and
# hdfs-site.xml that make the metastore a kerberized client of its HDFS
# (SASL data transfer with either protection the clusters use).
hms_secure_hadoop_conf() {
  cat >"$2/core-site.xml" <<SECURED
<?xml version="1.0"?>
<!-- generated by e2e/stack/services/hms.sh (secured variant) -->
<configuration>
  <property><name>hadoop.security.authentication</name><value>kerberos</value></property>
  <property><name>hadoop.rpc.protection</name><value>$(_hdfs_rpc_protection)</value></property>
  <!-- change management wants the metastore user's primary group; user
       hive exists only as a principal, not on this machine -->
  <property><name>hadoop.user.group.static.mapping.overrides</name><value>dr.who=;hive=hive</value></property>
</configuration>
SECURED
  cat >"$2/hdfs-site.xml" <<SECURED
<?xml version="1.0"?>
<!-- generated by e2e/stack/services/hms.sh (secured variant) -->
<configuration>
  <property><name>dfs.namenode.kerberos.principal</name><value>nn/localhost@$KRB_REALM</value></property>
  <property><name>dfs.data.transfer.protection</name><value>$(if private; then echo privacy; else echo authentication,integrity; fi)</value></property>
  <property><name>dfs.block.access.token.enable</name><value>true</value></property>
</configuration>
SECURED
}

# hms_java prints the java command line prefix shared by server and tools.
hms_java() {
  local side=$1
  printf '%s\0' "$(java17)/bin/java" "-Xmx$HMS_HEAP" -Xms128m -XX:+UseSerialGC \
    -XX:TieredStopAtLevel=1 -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote "${HMS_JVM_OPENS[@]}" \
    -Djava.net.preferIPv4Stack=true -Dlog4j2.formatMsgNoLookups=true "${HMS_KRB_OPTS[@]}" \
    -Dlog4j.configurationFile="$STACK_DIR/hms-$side/conf/metastore-log4j2.properties" \
    -cp "$STACK_DIR/hms-$side/conf:$HMS_CLASSPATH"
}

# hms_schema SIDE initialises the metastore schema once (schema tool),
# detecting an existing one by its VERSION row.
hms_schema() {
  local side=$1 v tables
  v=$(hms_psql "$side" 'SELECT "SCHEMA_VERSION" FROM "VERSION"' 2>/dev/null | head -n 1) || v=""
  if [ -n "$v" ]; then return 0; fi
  tables=$(hms_psql "$side" "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'") ||
    die "hms-$side: cannot query $(hms_db "$side") as hive"
  if [ "$tables" != 0 ]; then
    # A schema tool run that died half-way: start over (nothing can have
    # used a metastore whose schema has no VERSION row).
    log "hms-$side: $(hms_db "$side") has $tables tables but no schema version; recreating its schema"
    hms_psql "$side" "DROP SCHEMA public CASCADE; CREATE SCHEMA public AUTHORIZATION hive" >/dev/null
  fi
  log "hms-$side: initialising the metastore schema in $(hms_db "$side")"
  local -a java
  mapfile -d '' java < <(hms_java "$side")
  METASTORE_HOME=$HMS_DIST "${java[@]}" org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool \
    -dbType postgres -initSchema -driver org.postgresql.Driver \
    -url "$(hms_jdbc "$side")" -userName hive -passWord hive \
    >>"$(logfile "hms-$side")" 2>&1 ||
    { tail -n 40 "$(logfile "hms-$side")" >&2; die "hms-$side: schema tool failed; log: $(logfile "hms-$side")"; }
  v=$(hms_psql "$side" 'SELECT "SCHEMA_VERSION" FROM "VERSION"' | head -n 1)
  log "hms-$side: schema version $v"
}

hms_probe() {
  local -a krb=()
  if secured hms; then
    krb=("hivedr-test@$KRB_REALM" "$KRB_KEYTABS/hivedr-test.keytab" "hive/localhost@$KRB_REALM")
  fi
  "$(java17)/bin/java" -Xmx64m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC "${HMS_KRB_OPTS[@]}" \
    -cp "$HMS_TOOLS/classes:$HMS_CLASSPATH" Probe "$HOST" "$1" "${krb[@]}"
}

hms_start() {
  local side=$1 svc=hms-$1 port
  port=$(hms_port "$side")
  hms_write_conf "$side"
  hms_schema "$side"
  if ! is_running "$svc"; then
    ports_free "$port" || die "$svc: port $port is already in use by another process (not started by this stack)"
    log "$svc: starting Hive Metastore $HIVE_VERSION on $HOST:$port"
    local -a java
    mapfile -d '' java < <(hms_java "$side")
    METASTORE_HOME=$HMS_DIST start_daemon "$svc" "${java[@]}" \
      org.apache.hadoop.hive.metastore.HiveMetaStore -p "$port"
  fi
}

svc_hms_up() {
  local side nn missing=""
  for side in $SITES; do
    nn=$(hms_nn "$side")
    port_open "${nn##*:}" || missing+=" ${nn#hdfs://}"
  done
  if [ -n "$missing" ]; then
    if declare -F svc_hdfs_up >/dev/null; then svc_hdfs_up; else
      die "hms: HDFS is not up on$missing (start it first: stack.sh up)"
    fi
  fi
  if ! port_open "$POSTGRES_PORT"; then
    if declare -F svc_postgres_up >/dev/null; then svc_postgres_up; else
      die "hms: Postgres is not up on $HOST:$POSTGRES_PORT (start it first: stack.sh up)"
    fi
  fi
  hms_install
  # The JVMs start together; the schema tool runs before each one starts.
  for side in $SITES; do hms_start "$side"; done
  for side in $SITES; do wait_ready "hms-$side" 180 hms_probe "$(hms_port "$side")"; done
}

# svc_hms_down stops hms-dr2 on every variant (nothing to do where none runs).
svc_hms_down() {
  stop_daemon hms-dr2
  stop_daemon hms-dr
  stop_daemon hms-src
}

svc_hms_status() {
  local rc=0 side line=""
  for side in $SITES; do
    if is_running "hms-$side" && port_open "$(hms_port "$side")"; then
      line+="${line:+, }hms-$side $HOST:$(hms_port "$side")"
    else
      rc=1
    fi
  done
  if [ "$rc" = 0 ]; then echo "hms: up ($line)"; else echo "hms: down${line:+ (only $line)}"; fi
  return "$rc"
}

svc_hms_env() {
  echo "HIVEDR_HMS_SRC=$HOST:$HMS_SRC_PORT"
  echo "HIVEDR_HMS_DR=$HOST:$HMS_DR_PORT"
  echo "HIVEDR_HMS_SRC_WAREHOUSE=$(hms_nn src)/warehouse"
  echo "HIVEDR_HMS_DR_WAREHOUSE=$(hms_nn dr)/warehouse"
  echo "HIVEDR_HMS_SRC_EXTERNAL=$(hms_nn src)/external"
  echo "HIVEDR_HMS_DR_EXTERNAL=$(hms_nn dr)/external"
  echo "HIVEDR_HMS_SRC_CMROOT=$(hms_nn src)/cmroot"
  if has_site dr2; then
    echo "HIVEDR_HMS_DR2=$HOST:$HMS_DR2_PORT"
    echo "HIVEDR_HMS_DR2_WAREHOUSE=$(hms_nn dr2)/warehouse"
    echo "HIVEDR_HMS_DR2_EXTERNAL=$(hms_nn dr2)/external"
  fi
  if secured hms; then echo "HIVEDR_HMS_SASL=1"; fi
  if private; then echo "HIVEDR_HMS_QOP=auth-conf"; fi
}
