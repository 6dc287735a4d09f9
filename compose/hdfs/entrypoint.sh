#!/usr/bin/env bash
# Start of an HDFS container of compose.yaml (Dockerfile.hdfs): the
# NameNode or the DataNode of one cluster, each in a container (a JVM) of
# its own as e2e/stack/services/hdfs.sh runs them (nn-src, dn-src, nn-dr,
# dn-dr), with hdfs.sh's JVM flags (_hdfs_java; TestComposeMatchesStack
# compares). The cluster's core-site.xml and hdfs-site.xml are mounted at
# /etc/hadoop; its data lives in /hdfs/data, its scratch in /hdfs/tmp.
#
#   entrypoint.sh namenode   formats the namespace once (cluster ID
#                            testClusterID, as the stack), then runs it
#   entrypoint.sh datanode   runs the DataNode
set -euo pipefail
HDFS_NN_HEAP=${HDFS_NN_HEAP:-512m}
HDFS_DN_HEAP=${HDFS_DN_HEAP:-384m}
HDFS_CLUSTER_ID=testClusterID
dir=/hdfs
mkdir -p "$dir/data" "$dir/tmp"
# hdfs_java HEAP CLASS ARGS... sets cmd to a daemon's java command line,
# with the stack's flags.
hdfs_java() {
  local heap=$1 cls=$2; shift 2
  cmd=(java "-Xmx$heap" -XX:+UseSerialGC -XX:TieredStopAtLevel=1
    -Djava.net.preferIPv4Stack=true
    -Dlog4j.configuration=file:/opt/hdfs/log4j.properties
    -Djava.util.logging.config.file=/opt/hdfs/jul.properties
    "-Dhadoop.log.dir=$dir/tmp" "-Djava.io.tmpdir=$dir/tmp"
    -cp "/etc/hadoop:/opt/hdfs/lib/*" "$cls" "$@")
}
case ${1:-} in
  namenode)
    if [ ! -e "$dir/data/.formatted" ]; then
      echo "formatting a new namespace in $dir/data" >&2
      hdfs_java "$HDFS_NN_HEAP" org.apache.hadoop.hdfs.server.namenode.NameNode \
        -format -clusterid "$HDFS_CLUSTER_ID" -force -nonInteractive
      "${cmd[@]}"
      touch "$dir/data/.formatted"
    fi
    hdfs_java "$HDFS_NN_HEAP" org.apache.hadoop.hdfs.server.namenode.NameNode
    exec "${cmd[@]}" ;;
  datanode)
    hdfs_java "$HDFS_DN_HEAP" org.apache.hadoop.hdfs.server.datanode.DataNode
    exec "${cmd[@]}" ;;
  *)
    echo "usage: entrypoint.sh namenode|datanode" >&2
    exit 2 ;;
esac
