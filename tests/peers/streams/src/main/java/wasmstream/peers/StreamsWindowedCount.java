package wasmstream.peers;

import java.time.Duration;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windowed;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The Kafka Streams peer of wasmstream's windowed count (the Go SDK's
 * windows, abi/guest/window): groupByKey().windowedBy(...)
 * .emitStrategy(EmitStrategy.onWindowClose()).count(), one final result per
 * window, produced with the record key as its key and the value
 * {"start":S,"end":E,"count":N} (end exclusive for time windows, inclusive
 * for sessions, as Streams' Window.end() is). The differential test
 * (tests/windiff) compares these with internal/windowmodel's.
 *
 * Usage: StreamsWindowedCount BOOTSTRAP INPUT OUTPUT APPLICATION_ID KIND SIZE ADVANCE GRACE GUARANTEE RETENTION [THREADS]
 *   KIND: tumbling, hopping or session
 *   SIZE: the window size, or a session's inactivity gap (ms)
 *   ADVANCE: a hopping window's advance (ms; ignored otherwise)
 *   GRACE: the grace period (ms)
 *   GUARANTEE: at_least_once or exactly_once_v2
 *   RETENTION: the store's retention (ms); 0 keeps Streams' default, size
 *   (or gap) + grace. Streams' stores drop what is older than their
 *   retention behind the store's own stream time, whatever the
 *   processor's close rule says: a longer one keeps a window that a jump of
 *   stream time closes (the default loses its final result); for sessions
 *   gap + grace + 1 makes the store's lookup bound the processor's close
 *   time (windowmodel's package comment has both).
 *   THREADS: stream threads (default 1)
 *
 * Final results are emitted on every record (the internal
 * __emit.interval.ms.kstreams.windowed.aggregation__ set to 0: by default
 * they are throttled to one emission a second of wall-clock time, so the
 * windows the last records close may never be emitted), the record cache is
 * off, offsets are committed every 100 ms.
 *
 * On SIGINT or SIGTERM, before closing, it prints each task's
 * dropped-records-total (records, or record-window pairs for time windows,
 * refused as late) on standard error as
 * "streams: dropped task=0_P total=N", P the input partition.
 */
public final class StreamsWindowedCount {
    public static void main(String[] args) throws Exception {
        if (args.length != 10 && args.length != 11) {
            System.err.println("usage: StreamsWindowedCount BOOTSTRAP INPUT OUTPUT APPLICATION_ID KIND SIZE ADVANCE GRACE GUARANTEE RETENTION [THREADS]");
            System.exit(2);
        }
        String kind = args[4];
        long size = Long.parseLong(args[5]);
        long advance = Long.parseLong(args[6]);
        long grace = Long.parseLong(args[7]);
        long retention = Long.parseLong(args[9]);
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, args.length == 11 ? Integer.parseInt(args[10]) : 1);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[8]);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/wasmstream-streams-" + args[3]);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        // StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION.
        p.put("__emit.interval.ms.kstreams.windowed.aggregation__", 0L);

        StreamsBuilder b = new StreamsBuilder();
        KGroupedStream<String, byte[]> grouped = b.stream(args[1], Consumed.with(Serdes.String(), Serdes.ByteArray()))
            .groupByKey(Grouped.with(Serdes.String(), Serdes.ByteArray()));
        KTable<Windowed<String>, Long> counts;
        switch (kind) {
            case "tumbling":
            case "hopping": {
                TimeWindows w = TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace));
                if (kind.equals("hopping")) {
                    w = w.advanceBy(Duration.ofMillis(advance));
                }
                Materialized<String, Long, WindowStore<Bytes, byte[]>> m =
                    Materialized.<String, Long, WindowStore<Bytes, byte[]>>as("counts")
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()).withCachingDisabled();
                if (retention > 0) {
                    m = m.withRetention(Duration.ofMillis(retention));
                }
                counts = grouped.windowedBy(w).emitStrategy(EmitStrategy.onWindowClose()).count(m);
                break;
            }
            case "session": {
                SessionWindows w = SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace));
                Materialized<String, Long, SessionStore<Bytes, byte[]>> m =
                    Materialized.<String, Long, SessionStore<Bytes, byte[]>>as("counts")
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()).withCachingDisabled();
                if (retention > 0) {
                    m = m.withRetention(Duration.ofMillis(retention));
                }
                counts = grouped.windowedBy(w).emitStrategy(EmitStrategy.onWindowClose()).count(m);
                break;
            }
            default:
                System.err.println("StreamsWindowedCount: KIND must be tumbling, hopping or session, not " + kind);
                System.exit(2);
                return;
        }
        counts.toStream()
            .map((wk, c) -> KeyValue.pair(wk.key(),
                "{\"start\":" + wk.window().start() + ",\"end\":" + wk.window().end() + ",\"count\":" + c + "}"))
            .to(args[2], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            printDropped(streams);
            streams.close();
            done.countDown();
        }));
        streams.setStateListener((now, before) -> System.err.println("streams: " + before + " -> " + now));
        streams.start();
        done.await();
    }

    // printDropped prints each task's dropped-records-total (a task-level
    // metric: task 0_P is input partition P), in task order.
    private static void printDropped(KafkaStreams streams) {
        Map<String, Double> byTask = new TreeMap<>();
        for (Map.Entry<MetricName, ? extends Metric> e : streams.metrics().entrySet()) {
            MetricName n = e.getKey();
            if (n.name().equals("dropped-records-total") && n.group().equals("stream-task-metrics")) {
                byTask.merge(n.tags().get("task-id"), ((Number) e.getValue().metricValue()).doubleValue(), Double::sum);
            }
        }
        for (Map.Entry<String, Double> e : byTask.entrySet()) {
            System.err.println("streams: dropped task=" + e.getKey() + " total=" + e.getValue().longValue());
        }
        System.err.flush();
    }
}
