package dev.streamsight.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * A member of a share group (KIP-932) with Apache Kafka's own KafkaShareConsumer, acknowledging
 * explicitly and out of order.
 *
 * <p>usage: ShareMember BOOTSTRAP TOPIC GROUP CLIENT_ID COUNT RELEASE REJECT HOLD
 *
 * <p>Acquires records until it holds COUNT, then acknowledges them from the highest offset down:
 * offsets in RELEASE (comma-separated, "-" for none) released back to the group, those in REJECT
 * rejected (archived, never delivered again), those in HOLD left acquired and unacknowledged,
 * every other one accepted; commits, prints "acked ACCEPTED RELEASED REJECTED HELD" and stays a
 * member without polling (held records stay acquired until their lock times out) until a line
 * "close" (or the end of input) arrives on stdin; then it closes and prints "closed".
 */
public final class ShareMember {
  private static Set<Long> offsets(String list) {
    if (list.equals("-")) {
      return Set.of();
    }
    return Arrays.stream(list.split(",")).map(Long::parseLong).collect(Collectors.toSet());
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], topic = args[1], group = args[2], clientId = args[3];
    int count = Integer.parseInt(args[4]);
    Set<Long> release = offsets(args[5]), reject = offsets(args[6]), hold = offsets(args[7]);
    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
    p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, "explicit");
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p)) {
      consumer.subscribe(List.of(topic));
      List<ConsumerRecord<byte[], byte[]>> held = new ArrayList<>();
      while (held.size() < count) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
          held.add(r);
        }
        if (held.size() < count) {
          // Explicit mode: everything delivered is acknowledged before the
          // next poll. Too few so far: give them back and ask again.
          for (ConsumerRecord<byte[], byte[]> r : held) {
            consumer.acknowledge(r, AcknowledgeType.RELEASE);
          }
          if (!held.isEmpty()) {
            consumer.commitSync();
          }
          held.clear();
        }
      }
      held.sort(Comparator.comparingLong(ConsumerRecord<byte[], byte[]>::offset).reversed());
      int accepted = 0, released = 0, rejected = 0, kept = 0;
      for (ConsumerRecord<byte[], byte[]> r : held) {
        if (hold.contains(r.offset())) {
          kept++;
        } else if (release.contains(r.offset())) {
          consumer.acknowledge(r, AcknowledgeType.RELEASE);
          released++;
        } else if (reject.contains(r.offset())) {
          consumer.acknowledge(r, AcknowledgeType.REJECT);
          rejected++;
        } else {
          consumer.acknowledge(r, AcknowledgeType.ACCEPT);
          accepted++;
        }
      }
      consumer.commitSync();
      System.out.println("acked " + accepted + " " + released + " " + rejected + " " + kept);
      System.out.flush();
      try (BufferedReader in =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("close")) {
          // Waiting: a member that does not poll acquires nothing more.
        }
      }
    }
    System.out.println("closed");
    System.out.flush();
  }
}
