package wasmstream.peers;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import io.confluent.parallelconsumer.ParallelConsumerOptions;
import io.confluent.parallelconsumer.ParallelStreamProcessor;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Confluent Parallel Consumer peer of wasmstream's lookup processor: for
 * each record, a blocking HTTP GET of LOOKUP_URL + key on one of CONCURRENCY
 * threads, the answer produced to OUTPUT; key ordering.
 *
 * Usage: ParallelLookup BOOTSTRAP INPUT OUTPUT GROUP CONCURRENCY LOOKUP_URL
 */
public final class ParallelLookup {
    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: ParallelLookup BOOTSTRAP INPUT OUTPUT GROUP CONCURRENCY LOOKUP_URL");
            System.exit(2);
        }
        String output = args[2], url = args[5];
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        c.put(ConsumerConfig.GROUP_ID_CONFIG, args[3]);
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class);
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class);
        ParallelConsumerOptions<String, String> opts = ParallelConsumerOptions.<String, String>builder()
            .ordering(ParallelConsumerOptions.ProcessingOrder.KEY)
            .maxConcurrency(Integer.parseInt(args[4]))
            .consumer(new KafkaConsumer<>(c))
            .producer(new KafkaProducer<>(p))
            .build();
        ParallelStreamProcessor<String, String> pc = ParallelStreamProcessor.createEosStreamProcessor(opts);
        pc.subscribe(List.of(args[1]));
        HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        pc.pollAndProduce(ctx -> {
            var rec = ctx.getSingleConsumerRecord();
            try {
                var resp = http.send(HttpRequest.newBuilder(URI.create(url + rec.key())).build(), HttpResponse.BodyHandlers.ofString());
                return new ProducerRecord<>(output, rec.key(), resp.body());
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            pc.close();
            done.countDown();
        }));
        done.await();
    }
}
