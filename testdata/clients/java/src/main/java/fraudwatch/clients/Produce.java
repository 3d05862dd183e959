package fraudwatch.clients;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produces events as a JVM service writes them, for fraudwatch's tests
 * (cmd/fraudwatch/app/clients_test.go), with the arguments and input of
 * testdata/clients/produce.py:
 *
 * <pre>java -jar fraudwatch-test-produce.jar BROKERS TOPIC CODEC MODE PARTITION &lt; events</pre>
 *
 * CODEC is compression.type (none, gzip, snappy, lz4, zstd). MODE is
 * idempotent (the client's default since Kafka 3.0), acks-all (idempotence
 * off: no producer id, as an older client writes), or transactions
 * (transactional.id): then a line COMMIT commits the events before it and
 * a line ABORT aborts them, after they were written to the log. Every other
 * non-empty line is an event, sent as it is to PARTITION, keyed by its
 * customer. Exits non-zero when a send or a transaction fails.
 */
public final class Produce {
  private static final Pattern CUSTOMER = Pattern.compile("\"customer_id\"\\s*:\\s*\"([^\"]*)\"");

  public static void main(String[] args) throws Exception {
    if (args.length != 5) {
      System.err.println("usage: Produce BROKERS TOPIC CODEC MODE PARTITION < events");
      System.exit(2);
    }
    String topic = args[1], mode = args[3];
    int partition = Integer.parseInt(args[4]);
    Properties conf = new Properties();
    conf.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
    conf.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args[2]);
    conf.put(ProducerConfig.LINGER_MS_CONFIG, 5);
    conf.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    conf.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
    switch (mode) {
      case "idempotent" -> conf.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, true);
      case "acks-all" -> {
        conf.put(ProducerConfig.ACKS_CONFIG, "all");
        conf.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, false);
      }
      case "transactions" -> conf.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, "fraudwatch-test-java-" + topic);
      default -> {
        System.err.println("mode: idempotent, acks-all or transactions");
        System.exit(2);
      }
    }
    boolean txn = mode.equals("transactions");
    List<Future<RecordMetadata>> sent = new ArrayList<>();
    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(conf)) {
      if (txn) {
        producer.initTransactions();
        producer.beginTransaction();
      }
      BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      for (String line; (line = in.readLine()) != null; ) {
        line = line.strip();
        if (txn && (line.equals("COMMIT") || line.equals("ABORT"))) {
          producer.flush(); // the events are in the log before the marker
          delivered(sent);
          if (line.equals("COMMIT")) {
            producer.commitTransaction();
          } else {
            producer.abortTransaction();
          }
          producer.beginTransaction();
        } else if (!line.isEmpty()) {
          sent.add(producer.send(new ProducerRecord<>(topic, partition, key(line), line.getBytes(StandardCharsets.UTF_8))));
        }
      }
      if (txn) {
        producer.abortTransaction(); // the last one, begun and empty
      }
      producer.flush();
      delivered(sent);
    }
  }

  private static byte[] key(String event) {
    Matcher m = CUSTOMER.matcher(event);
    return (m.find() ? m.group(1) : "").getBytes(StandardCharsets.UTF_8);
  }

  /** Fails the run on the first send the broker did not take. */
  private static void delivered(List<Future<RecordMetadata>> sent) throws InterruptedException {
    for (Future<RecordMetadata> f : sent) {
      try {
        f.get();
      } catch (ExecutionException e) {
        System.err.println("delivery failed: " + e.getCause());
        System.exit(1);
      }
    }
    sent.clear();
  }
}
