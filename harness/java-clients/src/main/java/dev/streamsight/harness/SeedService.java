package dev.streamsight.harness;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * The seed's incident as a Java service, to be run under the real dd-java-agent with Data Streams
 * Monitoring on (the test sets {@code -javaagent} and {@code DD_*}).
 *
 * <p>usage: SeedService BOOTSTRAP ORDERS GONE NOWHERE GROUP
 *
 * <p>Produces 1000 records to ORDERS (partition 0) and one to GONE, prints "produced 1000"; a
 * consumer, a live member of GROUP, reads ORDERS up to offset 500, commits 500 and stays stuck
 * there (paused, polling), committing 500 again every second (the consumer that keeps committing
 * during the incident). Then, on stdin:
 *
 * <ul>
 *   <li>"fail": every 200 ms, three sends that fail with the broker up: a record larger than
 *       ORDERS' {@code max.message.bytes} (the broker refuses it), and, from a second producer on
 *       a thread of its own, a record to GONE (the test deleted it: unknown topic until {@code
 *       max.block.ms}) and one to NOWHERE (never made: a metadata timeout). Prints "failing" at
 *       the first failed callback on ORDERS.
 *   <li>"recover": every 200 ms, small records to ORDERS, GONE and NOWHERE (the test made the
 *       last two); prints "recovered" at the first success on ORDERS.
 *   <li>"close" (or the end of input): closes both clients, prints "closed".
 * </ul>
 */
public final class SeedService {
  private static final int MAX_BLOCK_MS = 1_000;

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], orders = args[1], gone = args[2], nowhere = args[3], group = args[4];
    Properties p = new Properties();
    p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ProducerConfig.CLIENT_ID_CONFIG, "seed-producer");
    p.put(ProducerConfig.ACKS_CONFIG, "all");
    p.put(ProducerConfig.LINGER_MS_CONFIG, "0");
    p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "3000");
    p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, "2000");
    p.put(ProducerConfig.RETRIES_CONFIG, "0");
    p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    Properties c = new Properties();
    c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    c.put(ConsumerConfig.CLIENT_ID_CONFIG, "seed-consumer");
    c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    c.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, "100");
    c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    AtomicReference<String> mode = new AtomicReference<>("steady");
    AtomicBoolean closing = new AtomicBoolean(false);
    // Sends to missing topics from a producer of their own, waiting at most
    // MAX_BLOCK_MS for metadata, on a thread of their own.
    Properties lostConfig = (Properties) p.clone();
    lostConfig.put(ProducerConfig.CLIENT_ID_CONFIG, "seed-producer-lost");
    lostConfig.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, Integer.toString(MAX_BLOCK_MS));
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        KafkaProducer<byte[], byte[]> lost = new KafkaProducer<>(lostConfig);
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(c)) {
      List<java.util.concurrent.Future<org.apache.kafka.clients.producer.RecordMetadata>> sent =
          new java.util.ArrayList<>();
      for (int i = 0; i < 1000; i++) {
        sent.add(producer.send(new ProducerRecord<>(orders, 0, null, ("order " + i).getBytes())));
      }
      for (java.util.concurrent.Future<?> f : sent) {
        f.get(); // every one of the 1000 acknowledged, or the service fails here
      }
      lost.send(new ProducerRecord<>(gone, 0, null, "first".getBytes())).get();
      producer.flush();
      System.out.println("produced 1000");
      System.out.flush();

      // A live member of GROUP: it reads to offset 500 and stops there.
      TopicPartition tp = new TopicPartition(orders, 0);
      consumer.subscribe(List.of(orders));
      long position = 0;
      while (position < 500) {
        for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
          if (r.offset() < 500) {
            position = r.offset() + 1;
          }
        }
      }
      consumer.pause(consumer.assignment());
      consumer.commitSync(Map.of(tp, new OffsetAndMetadata(500)));
      System.out.println("stuck 500");
      System.out.flush();

      Thread stdin =
          new Thread(
              () -> {
                try (BufferedReader in =
                    new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                  String line;
                  while ((line = in.readLine()) != null) {
                    line = line.trim();
                    if (line.equals("close")) {
                      break;
                    }
                    mode.set(line);
                  }
                } catch (Exception e) {
                  // End of input is a close too.
                }
                closing.set(true);
              });
      stdin.setDaemon(true);
      stdin.start();

      AtomicBoolean saidFailing = new AtomicBoolean(false), saidRecovered = new AtomicBoolean(false);
      Thread lostSends =
          new Thread(
              () -> {
                while (!closing.get()) {
                  boolean failing = mode.get().equals("fail");
                  if (failing || mode.get().equals("recover")) {
                    for (String t : List.of(gone, nowhere)) {
                      try {
                        lost.send(new ProducerRecord<>(t, null, (failing ? "lost" : "again").getBytes()));
                      } catch (Exception e) {
                        // A metadata timeout may be thrown rather than called back.
                      }
                    }
                  }
                  try {
                    Thread.sleep(200);
                  } catch (InterruptedException e) {
                    return;
                  }
                }
              });
      lostSends.setDaemon(true);
      lostSends.start();
      AtomicLong lastCommit = new AtomicLong(System.currentTimeMillis());
      byte[] tooLarge = new byte[256 * 1024]; // over the test's 64 KiB max.message.bytes
      while (!closing.get()) {
        long now = System.currentTimeMillis();
        if (now - lastCommit.get() >= 1_000) {
          consumer.commitSync(Map.of(tp, new OffsetAndMetadata(500)));
          lastCommit.set(now);
        }
        consumer.pause(consumer.assignment());
        consumer.poll(Duration.ofMillis(0));
        switch (mode.get()) {
          case "fail" ->
              producer.send(
                  new ProducerRecord<>(orders, 0, null, tooLarge),
                  (metadata, error) -> {
                    if (error != null && !saidFailing.getAndSet(true)) {
                      System.out.println("failing " + error.getClass().getSimpleName());
                      System.out.flush();
                    }
                  });
          case "recover" ->
              producer.send(
                  new ProducerRecord<>(orders, 0, null, "again".getBytes()),
                  (metadata, error) -> {
                    if (error == null && !saidRecovered.getAndSet(true)) {
                      System.out.println("recovered " + metadata.offset());
                      System.out.flush();
                    }
                  });
          default -> {}
        }
        Thread.sleep(200);
      }
    }
    System.out.println("closed");
    System.out.flush();
  }
}
