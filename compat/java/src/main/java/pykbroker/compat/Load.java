package pykbroker.compat;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Long-running load for fault runs (tests/java failover test, compat/chaos/chaos.py --java).
 *
 * {@code produce_load}: one idempotent acks=all producer writing the values {@code "<producer>-<seq>"}
 * to partition {@code seq % partitions} at about {@code rate} records/s, until {@code seconds} have
 * passed or {@code stop_file} exists; then it flushes (every send ends acknowledged or failed) and
 * exits.  Every acknowledgement is one line {"event":"acked","partition","offset","value","latency_ms"},
 * every failed send {"event":"failed","value","error"}.  Args: topic, producer (name, default j0),
 * partitions (3), rate (100), seconds (0 = until stop_file), stop_file.
 *
 * {@code consume_group}: one consumer group member (subscribe, auto commit off, commitSync after
 * each poll) printing what it reads as {"event":"records","records":[[partition,offset,value],...]};
 * once {@code stop_file} exists it goes on until its position has reached the end offsets of its
 * partitions, then exits.  Args: topic, group, protocol (classic), stop_file.
 */
final class Load {
    private Load() {}

    static void produce(String bootstrap, Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        String name = args.getOrDefault("producer", "j0");
        int partitions = Integer.parseInt(args.getOrDefault("partitions", "3"));
        double rate = Double.parseDouble(args.getOrDefault("rate", "100"));
        double seconds = Double.parseDouble(args.getOrDefault("seconds", "0"));
        File stopFile = args.containsKey("stop_file") ? new File(args.get("stop_file")) : null;

        Properties p = Main.base(bootstrap, "load-" + name);
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("linger.ms", "5");
        // Brokers going away are the point of the run: retry for as long as the Python producers do.
        p.put("delivery.timeout.ms", "300000");
        p.put("retry.backoff.ms", "100");
        p.put("metadata.max.age.ms", "5000");
        p.put("max.block.ms", "300000");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        long sent = 0;
        long t0 = System.nanoTime();
        long intervalNs = (long) (1e9 / Math.max(1.0, rate));
        long next = t0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            Main.emit(Json.obj("event", "producing", "producer", name));
            while (true) {
                long now = System.nanoTime();
                if (seconds > 0 && now - t0 >= (long) (seconds * 1e9)) break;
                if (stopFile != null && stopFile.exists()) break;
                String value = name + "-" + sent;
                long sentAt = System.nanoTime();
                producer.send(new ProducerRecord<>(topic, (int) (sent % partitions), null,
                        value.getBytes(StandardCharsets.UTF_8)), (md, e) -> {
                    if (e != null) {
                        failed.incrementAndGet();
                        Main.emit(Json.obj("event", "failed", "value", value, "error", e.getClass().getSimpleName()));
                    } else {
                        acked.incrementAndGet();
                        Main.emit(Json.obj("event", "acked", "partition", md.partition(), "offset", md.offset(),
                                "value", value, "latency_ms", (System.nanoTime() - sentAt) / 1e6));
                    }
                });
                sent++;
                next += intervalNs;
                long delay = next - System.nanoTime();
                if (delay > 0) Thread.sleep(delay / 1_000_000, (int) (delay % 1_000_000));
                else next = System.nanoTime();
            }
            producer.flush();
        }
        Main.emit(Json.obj("event", "produced", "sent", sent, "acked", acked.get(), "failed", failed.get()));
    }

    static void consumeGroup(String bootstrap, Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        File stopFile = new File(args.get("stop_file"));
        Properties p = Main.base(bootstrap, "load-consumer");
        p.put("group.id", args.get("group"));
        p.put("group.protocol", args.getOrDefault("protocol", "classic"));
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("metadata.max.age.ms", "5000");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        Set<TopicPartition> assigned = new HashSet<>();
        long commitErrors = 0;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                @Override
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    assigned.removeAll(parts);
                    Main.emit(Json.obj("event", "rebalance", "kind", "revoked", "partitions", parts.size()));
                }

                @Override
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    assigned.addAll(parts);
                    Main.emit(Json.obj("event", "rebalance", "kind", "assigned", "partitions", parts.size()));
                }
            });
            while (true) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(500));
                if (!recs.isEmpty()) {
                    List<Object> out = new ArrayList<>();
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        out.add(List.of(r.partition(), r.offset(), new String(r.value(), StandardCharsets.UTF_8)));
                    }
                    Main.emit(Json.obj("event", "records", "records", out));
                    try {
                        c.commitSync();
                    } catch (Exception e) {   // a coordinator going away: the next commit covers these
                        commitErrors++;
                        Main.emit(Json.obj("event", "commit_error", "error", e.getClass().getSimpleName()));
                    }
                } else if (stopFile.exists() && !assigned.isEmpty()) {
                    Map<TopicPartition, Long> ends = c.endOffsets(assigned);
                    boolean caughtUp = true;
                    for (TopicPartition tp : assigned) caughtUp &= c.position(tp) >= ends.get(tp);
                    if (caughtUp) break;
                }
            }
        }
        Main.emit(Json.obj("event", "consumed", "commit_errors", commitErrors));
    }
}
