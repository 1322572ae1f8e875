package wasmstream.peers;

import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.TopicPartition;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The Kafka Streams peer of wasmstream's count example: a running count per
 * key (groupByKey().count(), a RocksDB store with its changelog), each new
 * count produced as a decimal string, as the example emits it.
 *
 * Usage: StreamsCount BOOTSTRAP INPUT OUTPUT APPLICATION_ID THREADS GUARANTEE CACHE_BYTES
 *   GUARANTEE: at_least_once or exactly_once_v2
 *   CACHE_BYTES: the record cache (statestore.cache.max.bytes); 0 emits every
 *   update, as wasmstream does; Streams' default (10 MiB) folds the updates
 *   of a key between commits into one.
 *
 * The state directory is java.io.tmpdir's wasmstream-streams-APPLICATION_ID.
 * Each store restore ended is logged on standard error as
 * "streams: restored partition=P records=N took_us=T at_us=E" (E: the end,
 * microseconds since the epoch), as wasmstream logs "state restored".
 */
public final class StreamsCount {
    public static void main(String[] args) throws Exception {
        if (args.length != 7) {
            System.err.println("usage: StreamsCount BOOTSTRAP INPUT OUTPUT APPLICATION_ID THREADS GUARANTEE CACHE_BYTES");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(args[4]));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args[5]);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(args[6]));
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        p.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/wasmstream-streams-" + args[3]);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        StreamsBuilder b = new StreamsBuilder();
        b.stream(args[1], Consumed.with(Serdes.ByteArray(), Serdes.ByteArray()))
            .groupByKey(Grouped.with(Serdes.ByteArray(), Serdes.ByteArray()))
            .count(Materialized.<byte[], Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withKeySerde(Serdes.ByteArray()).withValueSerde(Serdes.Long()))
            .toStream()
            .mapValues(c -> Long.toString(c))
            .to(args[2], Produced.with(Serdes.ByteArray(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            done.countDown();
        }));
        Map<TopicPartition, Long> starts = new ConcurrentHashMap<>();
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            @Override
            public void onRestoreStart(TopicPartition tp, String store, long from, long to) {
                starts.put(tp, System.nanoTime());
            }

            @Override
            public void onBatchRestored(TopicPartition tp, String store, long end, long n) {}

            @Override
            public void onRestoreEnd(TopicPartition tp, String store, long total) {
                Long t0 = starts.remove(tp);
                long took = t0 == null ? 0 : (System.nanoTime() - t0) / 1000;
                System.err.println("streams: restored partition=" + tp.partition() + " records=" + total
                    + " took_us=" + took + " at_us=" + ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now()));
            }
        });
        streams.setStateListener((now, before) -> System.err.println("streams: " + before + " -> " + now));
        streams.start();
        done.await();
    }
}
