package dev.streamsight.harness;

import java.nio.file.Files;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.ErrorHandlerContext;
import org.apache.kafka.streams.errors.ProductionExceptionHandler;

/**
 * A Kafka Streams application whose sends can fail, for the seed's incident under dd-java-agent
 * (the seed names Kafka Streams producers among those affected).
 *
 * <p>usage: StreamsRelay BOOTSTRAP APPLICATION_ID INPUT OUTPUT
 *
 * <p>Relays INPUT to OUTPUT, a record "big" becoming 256 KiB (over the test's 64 KiB {@code
 * max.message.bytes} on OUTPUT: the broker refuses it). A refused send is logged and skipped
 * ({@link Resume}), so the application keeps running; it prints "failing" at the first. Prints
 * "running" once running, and closes on "close" (or the end of input) on stdin, printing "closed".
 */
public final class StreamsRelay {
  private static final AtomicBoolean SAID_FAILING = new AtomicBoolean(false);

  /** Skips a record the broker refused, as an application that must keep going would. */
  public static final class Resume implements ProductionExceptionHandler {
    @Override
    public Response handleError(
        ErrorHandlerContext context, ProducerRecord<byte[], byte[]> record, Exception exception) {
      if (!SAID_FAILING.getAndSet(true)) {
        System.out.println("failing " + exception.getClass().getSimpleName());
        System.out.flush();
      }
      return Response.resume();
    }

    @Override
    public void configure(Map<String, ?> configs) {}
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], app = args[1], input = args[2], output = args[3];
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("streams-relay").toString());
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
    p.put(StreamsConfig.PRODUCTION_EXCEPTION_HANDLER_CLASS_CONFIG, Resume.class.getName());
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    p.put(StreamsConfig.producerPrefix("linger.ms"), "0");
    String big = "x".repeat(256 * 1024);
    StreamsBuilder builder = new StreamsBuilder();
    builder.<String, String>stream(input).mapValues(v -> "big".equals(v) ? big : v).to(output);
    StreamsRun.untilClosed(builder.build(), p);
  }
}
