package dev.streamsight.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A member of a consumer group with Apache Kafka's own Java client.
 *
 * <p>usage: GroupMember BOOTSTRAP TOPIC GROUP CLIENT_ID COUNT [PROTOCOL]
 *
 * <p>Joins GROUP with PROTOCOL ({@code classic}, the default, or {@code consumer}: KIP-848),
 * reads COUNT records committing each, printing "first P O" for the first record it reads of
 * each partition and then "read N". Then it stays a member, polling with its partitions paused,
 * until a line "close" (or the end of input) arrives on stdin: then it leaves the group, prints
 * "closed" and exits. The same protocol as tests/python/group_member.py.
 */
public final class GroupMember {
  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], topic = args[1], group = args[2], clientId = args[3];
    int count = Integer.parseInt(args[4]);
    String protocol = args.length > 5 ? args[5] : "classic";
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    if (protocol.equals("classic")) {
      p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
      p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
    }
    AtomicBoolean closing = new AtomicBoolean(false);
    Thread stdin =
        new Thread(
            () -> {
              try (BufferedReader in =
                  new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                  if (line.trim().equals("close")) {
                    break;
                  }
                }
              } catch (Exception e) {
                // End of input is a close too.
              }
              closing.set(true);
            });
    stdin.setDaemon(true);
    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
      consumer.subscribe(List.of(topic));
      int seen = 0;
      Set<Integer> first = new HashSet<>();
      while (seen < count) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
          if (seen >= count) {
            break;
          }
          seen++;
          if (first.add(r.partition())) {
            System.out.println("first " + r.partition() + " " + r.offset());
            System.out.flush();
          }
          consumer.commitSync(
              Map.of(
                  new TopicPartition(r.topic(), r.partition()),
                  new OffsetAndMetadata(r.offset() + 1)));
        }
      }
      System.out.println("read " + seen);
      System.out.flush();
      stdin.start();
      while (!closing.get()) {
        consumer.pause(consumer.assignment());
        consumer.poll(Duration.ofMillis(200));
      }
    }
    System.out.println("closed");
    System.out.flush();
  }
}
