package fraudwatch.bench.streams;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.PropertyNamingStrategies;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import java.util.function.ToLongFunction;
import java.util.stream.Stream;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.WindowStore;

/**
 * Contender (e) of fraudwatch's bench: the four velocity rules as a Kafka
 * Streams application, which is what a Kafka shop would write instead of
 * fraudwatch. It reads the bench's orders and refunds topics from the start,
 * counts each rule in tumbling 10-minute windows (RocksDB window stores with
 * changelogs, exactly_once_v2, two stream threads), writes each window's
 * first crossing of a threshold to APP_ID-crossings, and stops once N input
 * records have gone through all four rules.
 *
 * <pre>java -Xmx512m -jar target/fraudwatch-bench-streams.jar --brokers H:P --app-id ID --events N TOPIC...</pre>
 *
 * stdout gets exactly two lines, "events_per_sec X" and "rss_bytes Y"; the
 * rest goes to stderr.
 */
public final class Main {
  private static final Duration WINDOW = Duration.ofMinutes(10);
  // Records are timestamped by the broker (LogAppendTime) and arrive nearly
  // in order, but the partitions of a repartition topic interleave: a little
  // grace keeps a record that straddles a window's end from being dropped
  // as late, which fraudwatch never does.
  private static final Duration GRACE = Duration.ofMinutes(1);

  private static final ObjectMapper JSON =
      new ObjectMapper()
          .setPropertyNamingStrategy(PropertyNamingStrategies.SNAKE_CASE)
          .configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

  /** The bench's event (bench/workload.go, benchEvent). */
  public record Event(
      String eventId,
      String type,
      String orderId,
      String customerId,
      String cardFingerprint,
      String ip,
      long amount,
      String currency) {
    boolean isOrder() {
      return "order".equals(type);
    }
  }

  /**
   * A window's aggregate: its value, and whether it has crossed the
   * threshold. crossedBy is set only on the update that crossed, to the
   * event that did it, so that exactly one update per window is a crossing.
   */
  record Agg(long value, boolean crossed, String crossedBy) {
    static final Agg ZERO = new Agg(0, false, null);

    Agg add(long delta, long threshold, String eventId) {
      long v = Math.max(0, value + delta); // a refund never takes a window below 0, as in fraudwatch
      boolean now = !crossed && v >= threshold;
      return new Agg(v, crossed || now, now ? eventId : null);
    }
  }

  // Counted in the topology itself, so that the measure does not depend on
  // commits. An input record is done when it has gone through all four rules:
  // the two per-customer rules run in the source's sub-topology, right after
  // the source counts it; the per-card and per-IP rules run after their
  // repartition topics, whose records a read_committed consumer sees only
  // once the producing task commits, so they are counted there too.
  private static final AtomicLong read = new AtomicLong(); // input records seen by the source
  private static final AtomicLong readDone = new AtomicLong(); // of the first N, fully counted below
  private static final AtomicLong ordersInFirstN = new AtomicLong();
  private static final AtomicLong byCard = new AtomicLong(); // orders through the card repartition
  private static final AtomicLong byIp = new AtomicLong();
  private static final Map<String, AtomicLong> crossings = new ConcurrentHashMap<>();
  private static volatile long firstNs, sourceNs;
  private static final AtomicLong doneNs = new AtomicLong();
  private static final CountDownLatch done = new CountDownLatch(1);
  private static long n;

  public static void main(String[] args) throws Exception {
    String brokers = null, appId = null;
    List<String> inputs = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--brokers" -> brokers = args[++i];
        case "--app-id" -> appId = args[++i];
        case "--events" -> n = Long.parseLong(args[++i]);
        default -> inputs.add(args[i]);
      }
    }
    if (brokers == null || appId == null || n < 1 || inputs.isEmpty()) {
      System.err.println("usage: --brokers H:P,... --app-id ID --events N TOPIC...");
      System.exit(2);
    }
    String output = appId + "-crossings";
    createLike(brokers, inputs.get(0), output);

    Path stateDir = Files.createTempDirectory("fraudwatch-bench-streams-");
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, brokers);
    p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    // Everything else is Streams' default: commit.interval.ms 100 under
    // exactly-once, internal topics with the broker's replication factor,
    // RocksDB stores.

    Topology topology = topology(inputs, output);
    System.err.println("streams: " + topology.describe().subtopologies().size()
        + " sub-topologies, exactly_once_v2, 2 stream threads, application.id " + appId);
    KafkaStreams streams = new KafkaStreams(topology, p);
    CountDownLatch failed = new CountDownLatch(1);
    streams.setUncaughtExceptionHandler(e -> {
      System.err.println("streams: stream thread failed: " + e);
      failed.countDown();
      return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
    });
    streams.setStateListener((now, before) -> {
      if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.PENDING_ERROR) {
        failed.countDown();
      }
    });
    // SIGTERM from the bench: leave the group cleanly, and the disk.
    Thread hook = new Thread(() -> closeAndClean(streams, stateDir, Duration.ofSeconds(30)));
    Runtime.getRuntime().addShutdownHook(hook);
    streams.start();
    while (!done.await(100, TimeUnit.MILLISECONDS)) {
      if (failed.getCount() == 0) {
        Runtime.getRuntime().removeShutdownHook(hook);
        closeAndClean(streams, stateDir, Duration.ofSeconds(30));
        System.err.println("streams: failed after " + read.get() + " of " + n + " input records");
        System.exit(1);
      }
    }
    double secs = (doneNs.get() - firstNs) / 1e9;
    System.err.printf("streams: the source read %d records at %.0f/s; all four rules done at %.0f/s; crossings %s%n",
        n, (n - 1) / ((sourceNs - firstNs) / 1e9), n / secs, new TreeMap<>(crossings));

    Runtime.getRuntime().removeShutdownHook(hook);
    long began = System.nanoTime();
    boolean closed = closeAndClean(streams, stateDir, Duration.ofSeconds(60));
    // More than the topics hold would mean records processed twice (a task
    // aborted and retried), which would flatter the rate.
    System.err.printf("streams: close %s in %.1fs; the source saw %d records in all%n",
        closed ? "done" : "TIMED OUT", (System.nanoTime() - began) / 1e9, read.get());
    System.out.printf("events_per_sec %.1f%n", n / secs);
    System.out.printf("rss_bytes %d%n", peakRss());
    System.out.flush();
    System.exit(0); // a timed-out close leaves threads behind; the measure is taken
  }

  static Topology topology(List<String> inputs, String output) {
    Serde<String> str = Serdes.String();
    Serde<Event> ev = eventSerde();
    Serde<Agg> agg = aggSerde();
    TimeWindows windows = TimeWindows.ofSizeAndGrace(WINDOW, GRACE);
    StreamsBuilder b = new StreamsBuilder();

    // Both topics are keyed by customer and have as many partitions, so one
    // stream of both is co-partitioned: the per-customer rules need no
    // repartition.
    KStream<String, Event> events = b.stream(inputs, Consumed.with(str, ev)).peek((k, e) -> {
      long i = read.incrementAndGet();
      if (i == 1) {
        firstNs = System.nanoTime();
      }
      if (i <= n) {
        if (e.isOrder()) {
          ordersInFirstN.incrementAndGet();
        }
        if (i == n) {
          sourceNs = System.nanoTime();
        }
        readDone.incrementAndGet();
        checkDone();
      }
    });
    KStream<String, Event> orders = events.filter((k, e) -> e.isOrder());

    rule(orders.groupByKey(Grouped.with(str, ev)), "orders-per-customer", 20,
        e -> 1, Event::eventId, windows, str, agg, output);
    rule(events.groupByKey(Grouped.with(str, ev)), "amount-per-customer", 2_000_000,
        e -> e.isOrder() ? e.amount() : -e.amount(), Event::eventId, windows, str, agg, output);

    // Per card and per IP: re-keyed, so through a repartition topic each,
    // carrying only the event id (what a crossing names) rather than the
    // whole event.
    KGroupedStream<String, String> card = orders
        .map((k, e) -> KeyValue.pair(e.cardFingerprint(), e.eventId()))
        .repartition(Repartitioned.with(str, str).withName("by-card"))
        .peek((k, id) -> {
          byCard.incrementAndGet();
          checkDone();
        })
        .groupByKey(Grouped.with(str, str));
    rule(card, "orders-per-card", 35, id -> 1, id -> id, windows, str, agg, output);
    KGroupedStream<String, String> ip = orders
        .map((k, e) -> KeyValue.pair(e.ip(), e.eventId()))
        .repartition(Repartitioned.with(str, str).withName("by-ip"))
        .peek((k, id) -> {
          byIp.incrementAndGet();
          checkDone();
        })
        .groupByKey(Grouped.with(str, str));
    rule(ip, "orders-per-ip", 12, id -> 1, id -> id, windows, str, agg, output);
    return b.build();
  }

  /**
   * One rule: a windowed aggregate of delta per group, and its first
   * crossings to the output topic. The store's cache is off: with it, the
   * updates of a key between two commits are merged, and the one update that
   * crossed could be overwritten by a later one before it is forwarded. (Off,
   * every update goes to the changelog at once; the bench's keys rarely repeat
   * within a 100 ms commit interval, so the cache would save little.)
   */
  static <V> void rule(KGroupedStream<String, V> grouped, String name, long threshold,
      ToLongFunction<V> delta, Function<V, String> eventId,
      TimeWindows windows, Serde<String> str, Serde<Agg> agg, String output) {
    AtomicLong crossed = crossings.computeIfAbsent(name, k -> new AtomicLong());
    grouped
        .windowedBy(windows)
        .aggregate(() -> Agg.ZERO,
            (k, v, a) -> a.add(delta.applyAsLong(v), threshold, eventId.apply(v)),
            Materialized.<String, Agg, WindowStore<Bytes, byte[]>>as(name)
                .withKeySerde(str).withValueSerde(agg).withCachingDisabled())
        .toStream()
        .filter((k, a) -> a != null && a.crossedBy() != null)
        .map((Windowed<String> k, Agg a) -> {
          crossed.incrementAndGet();
          Map<String, Object> alert = new LinkedHashMap<>();
          alert.put("rule", name);
          alert.put("group", k.key());
          alert.put("window_start", k.window().startTime().toString());
          alert.put("current", a.value());
          alert.put("threshold", threshold);
          alert.put("event_id", a.crossedBy());
          try {
            return KeyValue.pair(name + "/" + k.key(), JSON.writeValueAsString(alert));
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        })
        .to(output, Produced.with(str, str));
  }

  /** Done when the first N input records have gone through all four rules. */
  private static void checkDone() {
    if (readDone.get() >= n) {
      long orders = ordersInFirstN.get();
      if (byCard.get() >= orders && byIp.get() >= orders && doneNs.compareAndSet(0, System.nanoTime())) {
        done.countDown();
      }
    }
  }

  static Serde<Event> eventSerde() {
    Serializer<Event> ser = (topic, e) -> {
      try {
        return e == null ? null : JSON.writeValueAsBytes(e);
      } catch (IOException x) {
        throw new UncheckedIOException(x);
      }
    };
    Deserializer<Event> de = (topic, data) -> {
      try {
        return data == null ? null : JSON.readValue(data, Event.class);
      } catch (IOException x) {
        throw new UncheckedIOException(x);
      }
    };
    return Serdes.serdeFrom(ser, de);
  }

  /** value (8 bytes), crossed (1), then the crossing event's id, if this update crossed. */
  static Serde<Agg> aggSerde() {
    Serializer<Agg> ser = (topic, a) -> {
      if (a == null) {
        return null;
      }
      byte[] id = a.crossedBy() == null ? new byte[0] : a.crossedBy().getBytes(StandardCharsets.UTF_8);
      return ByteBuffer.allocate(9 + id.length).putLong(a.value()).put((byte) (a.crossed() ? 1 : 0)).put(id).array();
    };
    Deserializer<Agg> de = (topic, data) -> {
      if (data == null) {
        return null;
      }
      ByteBuffer buf = ByteBuffer.wrap(data);
      long v = buf.getLong();
      boolean crossed = buf.get() != 0;
      String by = buf.hasRemaining() ? StandardCharsets.UTF_8.decode(buf).toString() : null;
      return new Agg(v, crossed, by);
    };
    return Serdes.serdeFrom(ser, de);
  }

  /** Streams does not create its sink topic: the output gets the input's partitions. */
  static void createLike(String brokers, String like, String name) throws Exception {
    try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, brokers))) {
      int partitions = admin.describeTopics(List.of(like)).allTopicNames().get().get(like).partitions().size();
      try {
        admin.createTopics(List.of(new NewTopic(name, Optional.of(partitions), Optional.empty()))).all().get();
      } catch (ExecutionException e) {
        if (!(e.getCause() instanceof TopicExistsException)) {
          throw e;
        }
      }
    }
  }

  /** Closes streams within timeout and then removes its state directory. */
  static boolean closeAndClean(KafkaStreams streams, Path stateDir, Duration timeout) {
    boolean closed = streams.close(timeout);
    if (closed) { // else its threads may still be writing there
      try {
        deleteTree(stateDir);
      } catch (IOException | UncheckedIOException e) {
        System.err.println("streams: could not remove " + stateDir + ": " + e);
      }
    }
    return closed;
  }

  /** The process's peak resident set, VmHWM, in bytes. */
  static long peakRss() throws IOException {
    for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (line.startsWith("VmHWM:")) {
        return Long.parseLong(line.substring(6).trim().split("\\s+")[0]) * 1024;
      }
    }
    return -1;
  }

  static void deleteTree(Path dir) throws IOException {
    if (!Files.exists(dir)) {
      return;
    }
    try (Stream<Path> paths = Files.walk(dir)) {
      for (Path q : paths.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(q);
      }
    }
  }
}
