package hivedr.bench;

import java.io.IOException;
import java.net.InetSocketAddress;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.mapred.LocalJobRunner;
import org.apache.hadoop.mapreduce.MRConfig;
import org.apache.hadoop.mapreduce.protocol.ClientProtocol;
import org.apache.hadoop.mapreduce.protocol.ClientProtocolProvider;

/**
 * The MapReduce local job runner, minus one line. Hadoop's own
 * LocalClientProtocolProvider sets mapreduce.job.maps to 1 on every job it
 * runs, and DistCp sizes its input splits by mapreduce.job.maps, so under the
 * stock local runner DistCp's -m is ignored and the whole copy is one map
 * task. This provider hands out the same LocalJobRunner without that
 * override, so DistCp makes -m splits and the local runner runs up to
 * mapreduce.local.map.tasks.maximum of them at once, as a cluster would run
 * -m maps. bench-copy.sh puts it ahead of Hadoop's provider on the classpath
 * (ServiceLoader order) when DISTCP_MAPS is above 1.
 */
public class ParallelLocalProvider extends ClientProtocolProvider {
  @Override
  public ClientProtocol create(Configuration conf) throws IOException {
    if (!MRConfig.LOCAL_FRAMEWORK_NAME.equals(conf.get(MRConfig.FRAMEWORK_NAME, MRConfig.LOCAL_FRAMEWORK_NAME))) {
      return null;
    }
    return new LocalJobRunner(conf);
  }

  @Override
  public ClientProtocol create(InetSocketAddress addr, Configuration conf) {
    return null;
  }

  @Override
  public void close(ClientProtocol p) {
  }
}
