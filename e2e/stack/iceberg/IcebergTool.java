// IcebergTool: the tests' Iceberg writer and reader, the
// reference Java implementation with its Hive catalog against the stack's
// Hive Metastore. Run as a single-file source program with the classpath of
// pom.xml beside it:
//
//   java -cp "$(cat classpath.txt)" IcebergTool.java CMD METASTORE WAREHOUSE DB TABLE [ARGS]
//   java -cp "$(cat classpath.txt)" IcebergTool.java serve
//
// serve reads one command a line from stdin, a JSON array of the same
// arguments, and runs them all in one JVM; after each command's lines it
// prints {"end":true} (with "error" if the command failed).
//
// METASTORE is host:port of the metastore's Thrift endpoint, WAREHOUSE the
// catalog's warehouse URI (hdfs://host:port/path; a new table's location is
// WAREHOUSE/DB.db/TABLE). Every command prints JSON lines on stdout (one
// object a line); logs go to stderr. Commands:
//
//   create                       db (if missing) + format-v2 table
//                                (id bigint, name string, day date) partitioned by day
//   append N SEED                append N generated rows
//   overwrite N SEED             replace the partitions the N new rows fall in
//   delete ID                    row-level delete of id = ID, as position deletes
//   evolve-schema COLUMN         add an optional string column
//   evolve-spec BUCKETS          add the partition field bucket(BUCKETS, id)
//   expire KEEP                  expire all but the last KEEP snapshots, deleting files
//   snapshots                    every snapshot, then the current metadata location
//   count [SNAPSHOT]             row count and an order-independent hash of the rows
//   count-all                    count of every snapshot the metadata lists
//   files                        manifest list, manifests and the files they name, current snapshot
//   posdeletes                   the rows of the current snapshot's position delete files
//   avro PATH                    the records of one Avro file (manifest list or manifest), as JSON
//   drop [purge]                 drop the table
//
// With METASTORE given as static:METADATA_LOCATION the table is read from
// that metadata file alone, through Hadoop's file systems and no catalog
// (snapshots, count, files, posdeletes only): a copy that no metastore
// names, such as a table rewritten for other roots.
//
// Writing commands print {"op":...,"snapshot_id":...,"metadata_location":...}.
// Generated rows: id = SEED*1000000 + i, name = "r<SEED>-<i>",
// day = 2024-01-01 + i%3 days (three partitions).

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.apache.avro.file.DataFileStream;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.hadoop.conf.Configuration;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileScanTask;
import org.apache.iceberg.HasTableOperations;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.MetadataColumns;
import org.apache.iceberg.PartitionKey;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.ReplacePartitions;
import org.apache.iceberg.AppendFiles;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Schema;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.data.GenericAppenderFactory;
import org.apache.iceberg.data.GenericRecord;
import org.apache.iceberg.data.IcebergGenerics;
import org.apache.iceberg.data.InternalRecordWrapper;
import org.apache.iceberg.data.Record;
import org.apache.iceberg.data.parquet.GenericParquetReaders;
import org.apache.iceberg.deletes.PositionDelete;
import org.apache.iceberg.deletes.PositionDeleteWriter;
import org.apache.iceberg.encryption.EncryptedFiles;
import org.apache.iceberg.encryption.EncryptedOutputFile;
import org.apache.iceberg.expressions.Expressions;
import org.apache.iceberg.hive.HiveCatalog;
import org.apache.iceberg.io.CloseableIterable;
import org.apache.iceberg.io.DataWriter;
import org.apache.iceberg.io.InputFile;
import org.apache.iceberg.parquet.Parquet;
import org.apache.iceberg.types.Types;

public class IcebergTool {
  static final ObjectMapper M = new ObjectMapper();

  static final Schema SCHEMA =
      new Schema(
          Types.NestedField.required(1, "id", Types.LongType.get()),
          Types.NestedField.optional(2, "name", Types.StringType.get()),
          Types.NestedField.optional(3, "day", Types.DateType.get()));

  static void out(ObjectNode n) throws Exception {
    System.out.println(M.writeValueAsString(n));
    System.out.flush();
  }

  static ObjectNode obj() {
    return M.createObjectNode();
  }

  /** A command the tool cannot run as given (its usage is wrong). */
  static class UsageException extends Exception {
    UsageException(String msg) {
      super(msg);
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 1 && args[0].equals("serve")) {
      serve();
      return;
    }
    try {
      run(args);
    } catch (UsageException e) {
      System.err.println(e.getMessage());
      System.exit(2);
    }
  }

  // serve runs one command a line of stdin, each a JSON array of the
  // arguments main takes, in this one JVM (its start and class loading are
  // most of a command's time), and after each prints {"end":true} or, if
  // the command threw, {"end":true,"error":"..."}; it returns at the end of
  // stdin.
  static void serve() throws Exception {
    java.io.BufferedReader in =
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line; (line = in.readLine()) != null; ) {
      if (line.isBlank()) {
        continue;
      }
      ObjectNode end = obj().put("end", true);
      try {
        String[] cmd = M.readValue(line, String[].class);
        run(cmd);
      } catch (Exception e) {
        java.io.StringWriter w = new java.io.StringWriter();
        e.printStackTrace(new java.io.PrintWriter(w));
        System.err.print(w);
        end.put("error", e.toString());
      }
      out(end);
    }
  }

  static void run(String[] args) throws Exception {
    if (args.length < 5) {
      throw new UsageException("usage: IcebergTool CMD METASTORE WAREHOUSE DB TABLE [ARGS] | IcebergTool serve");
    }
    long t0 = System.nanoTime();
    String cmd = args[0], hms = args[1], warehouse = args[2], db = args[3], tbl = args[4];
    String[] rest = java.util.Arrays.copyOfRange(args, 5, args.length);

    Configuration conf = new Configuration();
    if (hms.startsWith("static:")) {
      // Read-only: the table as one metadata file describes it, through
      // Hadoop's file systems, no catalog (a DR copy before its pointer
      // is registered, or a rewritten copy anywhere).
      String loc = hms.substring("static:".length());
      Table t = new org.apache.iceberg.BaseTable(
          new org.apache.iceberg.StaticTableOperations(loc, new org.apache.iceberg.hadoop.HadoopFileIO(conf)), db + "." + tbl);
      switch (cmd) {
        case "snapshots":
          snapshots(t);
          break;
        case "count":
          count(t, rest.length > 0 ? Long.parseLong(rest[0]) : null);
          break;
        case "count-all":
          countAll(t);
          break;
        case "files":
          files(t);
          break;
        case "posdeletes":
          posdeletes(t);
          break;
        default:
          throw new UsageException("command " + cmd + " needs a catalog, not static:");
      }
      return;
    }
    HiveCatalog catalog = new HiveCatalog();
    catalog.setConf(conf);
    Map<String, String> props = new HashMap<>();
    props.put("uri", "thrift://" + hms);
    props.put("warehouse", warehouse);
    props.put("clients", "1");
    catalog.initialize("hive", props);
    TableIdentifier id = TableIdentifier.of(db, tbl);

    try {
      switch (cmd) {
        case "create":
          create(catalog, db, id);
          break;
        case "append":
          write(catalog.loadTable(id), false, Integer.parseInt(rest[0]), Long.parseLong(rest[1]));
          break;
        case "overwrite":
          write(catalog.loadTable(id), true, Integer.parseInt(rest[0]), Long.parseLong(rest[1]));
          break;
        case "delete":
          delete(catalog.loadTable(id), Long.parseLong(rest[0]));
          break;
        case "evolve-schema":
          {
            Table t = catalog.loadTable(id);
            t.updateSchema().addColumn(rest.length > 0 ? rest[0] : "extra", Types.StringType.get()).commit();
            committed("evolve-schema", t);
          }
          break;
        case "evolve-spec":
          {
            Table t = catalog.loadTable(id);
            int buckets = rest.length > 0 ? Integer.parseInt(rest[0]) : 4;
            t.updateSpec().addField(Expressions.bucket("id", buckets)).commit();
            committed("evolve-spec", t);
          }
          break;
        case "expire":
          expire(catalog.loadTable(id), Integer.parseInt(rest[0]));
          break;
        case "snapshots":
          snapshots(catalog.loadTable(id));
          break;
        case "count":
          count(catalog.loadTable(id), rest.length > 0 ? Long.parseLong(rest[0]) : null);
          break;
        case "count-all":
          countAll(catalog.loadTable(id));
          break;
        case "files":
          files(catalog.loadTable(id));
          break;
        case "posdeletes":
          posdeletes(catalog.loadTable(id));
          break;
        case "avro":
          avro(catalog.loadTable(id), rest[0]);
          break;
        case "drop":
          out(obj().put("op", "drop").put("dropped", catalog.dropTable(id, rest.length > 0 && rest[0].equals("purge"))));
          break;
        default:
          throw new UsageException("unknown command " + cmd);
      }
    } finally {
      catalog.close();
    }
    System.err.printf("IcebergTool %s: %.0f ms in main%n", cmd, (System.nanoTime() - t0) / 1e6);
  }

  static String metadataLocation(Table t) {
    return ((HasTableOperations) t).operations().current().metadataFileLocation();
  }

  static void committed(String op, Table t) throws Exception {
    t.refresh();
    Snapshot s = t.currentSnapshot();
    ObjectNode n = obj().put("op", op);
    if (s != null) {
      n.put("snapshot_id", s.snapshotId());
    } else {
      n.putNull("snapshot_id");
    }
    n.put("metadata_location", metadataLocation(t));
    out(n);
  }

  static void create(HiveCatalog catalog, String db, TableIdentifier id) throws Exception {
    Namespace ns = Namespace.of(db);
    if (!catalog.namespaceExists(ns)) {
      catalog.createNamespace(ns);
    }
    PartitionSpec spec = PartitionSpec.builderFor(SCHEMA).identity("day").build();
    Map<String, String> p = new HashMap<>();
    p.put(TableProperties.FORMAT_VERSION, "2");
    p.put(TableProperties.DELETE_MODE, "merge-on-read");
    p.put(TableProperties.UPDATE_MODE, "merge-on-read");
    p.put(TableProperties.MERGE_MODE, "merge-on-read");
    Table t = catalog.createTable(id, SCHEMA, spec, p);
    committed("create", t);
  }

  static List<Record> rows(Schema schema, int n, long seed) {
    List<Record> out = new ArrayList<>();
    LocalDate base = LocalDate.of(2024, 1, 1);
    for (int i = 0; i < n; i++) {
      GenericRecord r = GenericRecord.create(schema);
      r.setField("id", seed * 1_000_000L + i);
      r.setField("name", "r" + seed + "-" + i);
      r.setField("day", base.plusDays(i % 3));
      out.add(r);
    }
    return out;
  }

  static EncryptedOutputFile newFile(Table t, PartitionSpec spec, StructLike partition, String prefix) {
    String name = FileFormat.PARQUET.addExtension(prefix + "-" + UUID.randomUUID());
    String path = t.locationProvider().newDataLocation(spec, partition, name);
    return EncryptedFiles.plainAsEncryptedOutput(t.io().newOutputFile(path));
  }

  // write appends n rows (or replaces the partitions they fall in), one
  // Parquet data file per partition.
  static void write(Table t, boolean overwrite, int n, long seed) throws Exception {
    Schema schema = t.schema();
    PartitionSpec spec = t.spec();
    InternalRecordWrapper wrapper = new InternalRecordWrapper(schema.asStruct());
    Map<PartitionKey, List<Record>> groups = new LinkedHashMap<>();
    for (Record r : rows(schema, n, seed)) {
      PartitionKey key = new PartitionKey(spec, schema);
      key.partition(wrapper.wrap(r));
      groups.computeIfAbsent(key, k -> new ArrayList<>()).add(r);
    }
    GenericAppenderFactory factory = new GenericAppenderFactory(schema, spec);
    List<DataFile> files = new ArrayList<>();
    for (Map.Entry<PartitionKey, List<Record>> e : groups.entrySet()) {
      DataWriter<Record> w =
          factory.newDataWriter(newFile(t, spec, e.getKey(), "data"), FileFormat.PARQUET, e.getKey());
      try (w) {
        for (Record r : e.getValue()) {
          w.write(r);
        }
      }
      files.add(w.toDataFile());
    }
    if (overwrite) {
      ReplacePartitions rp = t.newReplacePartitions();
      files.forEach(rp::addFile);
      rp.commit();
    } else {
      AppendFiles a = t.newAppend();
      files.forEach(a::appendFile);
      a.commit();
    }
    committed(overwrite ? "overwrite" : "append", t);
  }

  // delete writes position deletes for every live row with id = value: one
  // position delete file per data file that holds such a row, in that data
  // file's spec and partition.
  static void delete(Table t, long value) throws Exception {
    Snapshot base = t.currentSnapshot();
    Schema schema = t.schema();
    RowDelta delta = t.newRowDelta();
    int deleted = 0;
    List<String> referenced = new ArrayList<>();
    try (CloseableIterable<FileScanTask> tasks = t.newScan().filter(Expressions.equal("id", value)).planFiles()) {
      for (FileScanTask task : tasks) {
        DataFile df = task.file();
        String path = df.location();
        List<Long> positions = new ArrayList<>();
        InputFile in = t.io().newInputFile(path);
        try (CloseableIterable<Record> rows =
            Parquet.read(in)
                .project(schema)
                .createReaderFunc(fs -> GenericParquetReaders.buildReader(schema, fs))
                .build()) {
          long pos = 0;
          for (Record r : rows) {
            if (Long.valueOf(value).equals(r.getField("id"))) {
              positions.add(pos);
            }
            pos++;
          }
        }
        if (positions.isEmpty()) {
          continue;
        }
        PartitionSpec spec = t.specs().get(df.specId());
        GenericAppenderFactory factory = new GenericAppenderFactory(schema, spec);
        PositionDeleteWriter<Record> w =
            factory.newPosDeleteWriter(newFile(t, spec, df.partition(), "delete"), FileFormat.PARQUET, df.partition());
        PositionDelete<Record> pd = PositionDelete.create();
        try (w) {
          for (long pos : positions) {
            w.write(pd.set(path, pos, null));
          }
        }
        DeleteFile del = w.toDeleteFile();
        delta.addDeletes(del);
        referenced.add(path);
        deleted += positions.size();
      }
    }
    if (deleted == 0) {
      out(obj().put("op", "delete").put("deleted", 0));
      return;
    }
    if (base != null) {
      delta.validateFromSnapshot(base.snapshotId());
    }
    delta.validateDataFilesExist(referenced).commit();
    t.refresh();
    ObjectNode n = obj().put("op", "delete").put("deleted", deleted);
    n.put("snapshot_id", t.currentSnapshot().snapshotId()).put("metadata_location", metadataLocation(t));
    out(n);
  }

  static void expire(Table t, int keep) throws Exception {
    List<String> deleted = new ArrayList<>();
    t.expireSnapshots()
        .expireOlderThan(System.currentTimeMillis() + 1)
        .retainLast(keep)
        .deleteWith(path -> {
          synchronized (deleted) {
            deleted.add(path);
          }
          t.io().deleteFile(path);
        })
        .commit();
    t.refresh();
    ObjectNode n = obj().put("op", "expire");
    n.put("snapshot_id", t.currentSnapshot().snapshotId()).put("metadata_location", metadataLocation(t));
    ArrayNode a = n.putArray("deleted_files");
    deleted.stream().sorted().forEach(a::add);
    out(n);
  }

  static void snapshots(Table t) throws Exception {
    for (Snapshot s : t.snapshots()) {
      ObjectNode n = obj().put("snapshot_id", s.snapshotId());
      if (s.parentId() != null) {
        n.put("parent_id", s.parentId());
      } else {
        n.putNull("parent_id");
      }
      n.put("sequence_number", s.sequenceNumber());
      n.put("timestamp_ms", s.timestampMillis());
      n.put("operation", s.operation());
      n.put("total_records", s.summary().get("total-records"));
      n.put("total_data_files", s.summary().get("total-data-files"));
      n.put("total_delete_files", s.summary().get("total-delete-files"));
      n.put("total_position_deletes", s.summary().get("total-position-deletes"));
      n.put("manifest_list", s.manifestListLocation());
      n.put("schema_id", s.schemaId());
      out(n);
    }
    Snapshot cur = t.currentSnapshot();
    ObjectNode n = obj().put("metadata_location", metadataLocation(t));
    if (cur != null) {
      n.put("current_snapshot_id", cur.snapshotId());
    } else {
      n.putNull("current_snapshot_id");
    }
    n.put("format_version", ((HasTableOperations) t).operations().current().formatVersion());
    n.put("spec_id", t.spec().specId()).put("spec", t.spec().toString().replace("\n", " "));
    n.put("schema", t.schema().asStruct().toString());
    out(n);
  }

  // count reads the table (or one snapshot) with IcebergGenerics, deletes
  // applied, and prints the row count and a hash of the rows' id|name|day,
  // independent of their order (sum of the first 8 bytes of each row's
  // SHA-256).
  static void count(Table t, Long snapshot) throws Exception {
    IcebergGenerics.ScanBuilder b = IcebergGenerics.read(t).select("id", "name", "day");
    if (snapshot != null) {
      b = b.useSnapshot(snapshot);
    }
    long count = 0, hash = 0;
    MessageDigest md = MessageDigest.getInstance("SHA-256");
    try (CloseableIterable<Record> rows = b.build()) {
      for (Record r : rows) {
        count++;
        byte[] d = md.digest((r.getField("id") + "|" + r.getField("name") + "|" + r.getField("day")).getBytes(StandardCharsets.UTF_8));
        long h = 0;
        for (int i = 0; i < 8; i++) {
          h = (h << 8) | (d[i] & 0xff);
        }
        hash += h;
      }
    }
    ObjectNode n = obj().put("op", "count");
    n.put("snapshot_id", snapshot != null ? snapshot : (t.currentSnapshot() == null ? -1 : t.currentSnapshot().snapshotId()));
    n.put("count", count).put("hash", String.format("%016x", hash));
    out(n);
  }

  static void countAll(Table t) throws Exception {
    for (Snapshot s : t.snapshots()) {
      count(t, s.snapshotId());
    }
  }

  static void files(Table t) throws Exception {
    Snapshot s = t.currentSnapshot();
    out(obj().put("metadata_location", metadataLocation(t)).put("manifest_list", s.manifestListLocation()));
    for (ManifestFile m : s.allManifests(t.io())) {
      out(obj().put("manifest", m.path()).put("content", m.content().toString()).put("spec_id", m.partitionSpecId())
          .put("added_snapshot_id", m.snapshotId()));
      if (m.content() == org.apache.iceberg.ManifestContent.DATA) {
        try (CloseableIterable<DataFile> fs = ManifestFiles.read(m, t.io(), t.specs())) {
          for (DataFile f : fs) {
            out(obj().put("data_file", f.location()).put("records", f.recordCount()).put("partition", f.partition().toString()));
          }
        }
      } else {
        try (CloseableIterable<DeleteFile> fs = ManifestFiles.readDeleteManifest(m, t.io(), t.specs())) {
          for (DeleteFile f : fs) {
            out(obj().put("delete_file", f.location()).put("content", f.content().toString()).put("records", f.recordCount()));
          }
        }
      }
    }
  }

  static void posdeletes(Table t) throws Exception {
    Schema pos = new Schema(MetadataColumns.DELETE_FILE_PATH, MetadataColumns.DELETE_FILE_POS);
    try (CloseableIterable<FileScanTask> tasks = t.newScan().planFiles()) {
      java.util.Set<String> seen = new java.util.HashSet<>();
      for (FileScanTask task : tasks) {
        for (DeleteFile del : task.deletes()) {
          if (!seen.add(del.location())) {
            continue;
          }
          try (CloseableIterable<Record> rows =
              Parquet.read(t.io().newInputFile(del.location()))
                  .project(pos)
                  .createReaderFunc(fs -> GenericParquetReaders.buildReader(pos, fs))
                  .build()) {
            for (Record r : rows) {
              out(obj().put("delete_file", del.location()).put("file_path", (String) r.getField("file_path"))
                  .put("pos", (Long) r.getField("pos")));
            }
          }
        }
      }
    }
  }

  static void avro(Table t, String path) throws Exception {
    try (java.io.InputStream in = t.io().newInputFile(path).newStream();
        DataFileStream<org.apache.avro.generic.GenericRecord> s = new DataFileStream<>(in, new GenericDatumReader<>())) {
      ObjectNode meta = obj().put("avro_file", path);
      ObjectNode kv = meta.putObject("metadata");
      for (String k : s.getMetaKeys()) {
        kv.put(k, s.getMetaString(k));
      }
      out(meta);
      for (org.apache.avro.generic.GenericRecord r : s) {
        System.out.println(r.toString());
      }
    }
  }
}
