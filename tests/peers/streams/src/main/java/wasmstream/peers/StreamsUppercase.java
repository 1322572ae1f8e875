package wasmstream.peers;

import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;

/**
 * The Kafka Streams peer of wasmstream's uppercase processor: consume a
 * topic, upper-case each value, produce to another topic, at-least-once.
 *
 * Usage: StreamsUppercase BOOTSTRAP INPUT OUTPUT APPLICATION_ID THREADS
 */
public final class StreamsUppercase {
    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: StreamsUppercase BOOTSTRAP INPUT OUTPUT APPLICATION_ID THREADS");
            System.exit(2);
        }
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[3]);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, Integer.parseInt(args[4]));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/wasmstream-streams-" + args[3]);
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        StreamsBuilder b = new StreamsBuilder();
        b.stream(args[1], Consumed.with(Serdes.ByteArray(), Serdes.String()))
            .mapValues(v -> v == null ? null : v.toUpperCase(Locale.ROOT))
            .to(args[2], Produced.with(Serdes.ByteArray(), Serdes.String()));
        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            done.countDown();
        }));
        streams.setStateListener((now, before) -> System.err.println("streams: " + before + " -> " + now));
        streams.start();
        done.await();
    }
}
