package pykbroker.streams;

import java.util.Arrays;
import java.util.Locale;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Word count with exactly_once_v2: {@code WordCount <bootstrap> <app id> <input> <output> <state dir>}.
 * Lines of the input topic are split into words; the running count per word goes to the output
 * topic (key word, value count as a decimal string).  The store is in memory, so a restarted
 * instance rebuilds it from its changelog topic.  Prints "RUNNING" once the application runs.
 */
public final class WordCount {
    public static void main(String[] argv) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, argv[0]);
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, argv[1]);
        p.put(StreamsConfig.STATE_DIR_CONFIG, argv[4]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "200");
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
        p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), "10000");
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        p.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), "10000");

        StreamsBuilder b = new StreamsBuilder();
        b.stream(argv[2], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((k, w) -> !w.isEmpty())
            .groupBy((k, w) -> w, Grouped.with(Serdes.String(), Serdes.String()))
            .count(Materialized.as(org.apache.kafka.streams.state.Stores.inMemoryKeyValueStore("counts")))
            .toStream()
            .mapValues(String::valueOf)
            .to(argv[3], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(b.build(), p);
        CountDownLatch done = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) done.countDown();
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            done.countDown();
        }));
        streams.start();
        done.await();
        Runtime.getRuntime().halt(streams.state() == KafkaStreams.State.ERROR ? 1 : 0);
    }
}
