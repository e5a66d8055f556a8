package dev.streamsight.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.Topology;

/** How the harness's Kafka Streams applications run: the lines the tests read. */
final class StreamsRun {
  private StreamsRun() {}

  /**
   * Starts {@code topology}, prints "running" once it runs, and closes it on a line "close" (or
   * the end of input) on stdin, printing "closed".
   */
  static void untilClosed(Topology topology, Properties config) throws Exception {
    CountDownLatch running = new CountDownLatch(1);
    try (KafkaStreams streams = new KafkaStreams(topology, config)) {
      streams.setStateListener(
          (now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
              running.countDown();
            }
          });
      streams.start();
      running.await();
      System.out.println("running");
      System.out.flush();
      try (BufferedReader in =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("close")) {
          // Running until told to close.
        }
      }
      streams.close(Duration.ofSeconds(20));
    }
    System.out.println("closed");
    System.out.flush();
  }
}
