package dev.streamsight.harness;

import java.nio.file.Files;
import java.util.Properties;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams application in a streams group (KIP-1071, {@code group.protocol=streams}).
 *
 * <p>usage: StreamsApp BOOTSTRAP APPLICATION_ID INPUT OUTPUT
 *
 * <p>Counts INPUT's records by value: re-keyed by value (a repartition topic), counted in a state
 * store (a changelog topic), the counts written to OUTPUT. Prints "running" once the application
 * runs, and closes on a line "close" (or the end of input) on stdin, printing "closed".
 */
public final class StreamsApp {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], app = args[1], input = args[2], output = args[3];
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
    p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("streams-app").toString());
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
    p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
    p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class.getName());
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    StreamsBuilder builder = new StreamsBuilder();
    builder.<String, String>stream(input)
        .groupBy((key, value) -> value, Grouped.with("by-value", Serdes.String(), Serdes.String()))
        .count()
        .toStream()
        .to(output, Produced.with(Serdes.String(), Serdes.Long()));
    StreamsRun.untilClosed(builder.build(), p);
  }
}
