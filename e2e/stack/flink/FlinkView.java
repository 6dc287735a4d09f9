// FlinkView is the Flink SQL job TestStreamFlinkSQL runs: it reads
// hivedr's change view topics with Flink's debezium-avro-confluent format
// and keeps a Postgres table of the objects they hold up to date through
// Flink's JDBC connector (an upsert by the object's key, a delete on a d
// record). It runs in a local mini-cluster until killed. Run as a
// single-file source program: java <Flink's --add-opens flags> -cp
// <classpath of pom.xml> FlinkView.java BROKERS REGISTRY TOPIC_PATTERN
// JDBC_URL TABLE USER PASSWORD GROUP
import java.util.Map;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

public class FlinkView {
    // The image's columns, as io.hivedr.cdc.Value names them.
    static final String COLUMNS = String.join(", ",
            "`kind` STRING", "`database` STRING", "`table` STRING", "`partition` STRING",
            "`location` STRING", "`owner` STRING", "`table_type` STRING", "`columns` STRING",
            "`partition_keys` STRING", "`input_format` STRING", "`serde_lib` STRING",
            "`parameters` STRING", "`create_time` BIGINT", "`write_id` BIGINT");

    public static void main(String[] args) throws Exception {
        if (args.length != 8) {
            System.err.println("usage: FlinkView BROKERS REGISTRY TOPIC_PATTERN JDBC_URL TABLE USER PASSWORD GROUP");
            System.exit(2);
        }
        String brokers = args[0], registry = args[1], pattern = args[2], url = args[3];
        String table = args[4], user = args[5], password = args[6], group = args[7];
        // A transient failure (a broker, the registry or Postgres slow to
        // answer on a loaded machine) restarts the job, as a production
        // job's restart strategy would; it reads from the earliest offsets
        // again and its upserts are idempotent.
        Configuration conf = Configuration.fromMap(Map.of(
                "parallelism.default", "1",
                "restart-strategy.type", "fixed-delay",
                "restart-strategy.fixed-delay.attempts", "10",
                "restart-strategy.fixed-delay.delay", "2s"));
        TableEnvironment env = TableEnvironment.create(
                EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
        env.executeSql("CREATE TABLE view_src (" + COLUMNS + ") WITH ("
                + "'connector' = 'kafka', "
                + "'topic-pattern' = '" + pattern + "', "
                + "'properties.bootstrap.servers' = '" + brokers + "', "
                + "'properties.group.id' = '" + group + "', "
                + "'properties.isolation.level' = 'read_committed', "
                + "'scan.startup.mode' = 'earliest-offset', "
                + "'scan.topic-partition-discovery.interval' = '1s', "
                + "'format' = 'debezium-avro-confluent', "
                + "'debezium-avro-confluent.url' = '" + registry + "')");
        // The sink's key columns are db, tbl and part: Flink's JDBC
        // connector does not quote column names, and Postgres reserves
        // "table".
        env.executeSql("CREATE TABLE view_sink (" + COLUMNS.replace("`database`", "`db`")
                .replace("`table`", "`tbl`").replace("`partition`", "`part`")
                + ", PRIMARY KEY (`db`, `tbl`, `part`) NOT ENFORCED) WITH ("
                + "'connector' = 'jdbc', "
                + "'url' = '" + url + "', "
                + "'table-name' = '" + table + "', "
                + "'username' = '" + user + "', "
                + "'password' = '" + password + "', "
                + "'sink.buffer-flush.interval' = '200ms', "
                + "'sink.buffer-flush.max-rows' = '100')");
        System.out.println("FlinkView: job submitted");
        try {
            env.executeSql("INSERT INTO view_sink SELECT * FROM view_src").await();
        } catch (Exception e) {
            // The mini-cluster's threads would keep the JVM up after the
            // job failed: exit, so the test sees it and prints why.
            System.err.println("FlinkView: the job failed:");
            e.printStackTrace();
            System.exit(1);
        }
    }
}
