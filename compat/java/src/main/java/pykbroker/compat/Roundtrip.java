package pykbroker.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Produce with the default producer (idempotent, acks=all), then read everything back with
 * assign + seek, and with subscribe for each group protocol in {@code protocols=} (classic,consumer).
 *
 * Args: topic, partitions (3), count (30), base_ts, protocols (classic).
 * Record i (see {@link #value}, {@link #headers}): key "key-(i%10)" except the last record (null key);
 * record count-2 has a null value; record count-3 goes to the explicit partition partitions-1;
 * timestamp base_ts + 1000*i.
 */
final class Roundtrip {
    private Roundtrip() {}

    static byte[] value(int i) {
        byte[] prefix = ("value-" + i + "-").getBytes(StandardCharsets.UTF_8);
        int n = (i * 37) % 500;
        byte[] v = new byte[prefix.length + n];
        System.arraycopy(prefix, 0, v, 0, prefix.length);
        for (int j = 0; j < n; j++) v[prefix.length + j] = (byte) ((i + j) % 256);
        return v;
    }

    static RecordHeaders headers(int i) {
        RecordHeaders h = new RecordHeaders();
        h.add("idx", Integer.toString(i).getBytes(StandardCharsets.UTF_8));
        h.add("bin", new byte[] {0, (byte) 0xff, (byte) (i % 256)});
        h.add("dup", "a".getBytes(StandardCharsets.UTF_8));
        h.add("dup", "b".getBytes(StandardCharsets.UTF_8));
        h.add("empty", new byte[0]);
        h.add("null", null);
        return h;
    }

    static Map<String, Object> recordJson(String phase, ConsumerRecord<byte[], byte[]> r) {
        List<Object> hs = new ArrayList<>();
        for (Header h : r.headers()) hs.add(List.of(h.key(), h.value() == null ? "<null>" : Json.hex(h.value())));
        return Json.obj("event", "record", "phase", phase, "topic", r.topic(), "partition", r.partition(),
                "offset", r.offset(), "timestamp", r.timestamp(), "timestamp_type", r.timestampType().name,
                "key", Json.hex(r.key()), "value", Json.hex(r.value()), "headers", hs,
                "leader_epoch", r.leaderEpoch().orElse(null));
    }

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        int partitions = Integer.parseInt(args.getOrDefault("partitions", "3"));
        int count = Integer.parseInt(args.getOrDefault("count", "30"));
        long baseTs = Long.parseLong(args.getOrDefault("base_ts", "1700000000000"));
        String[] protocols = args.getOrDefault("protocols", "classic").split(",");

        Main.phase("create_topic", () -> {
            try (Admin admin = Admin.create(Main.base(bootstrap, "compat-admin"))) {
                admin.createTopics(List.of(new NewTopic(topic, partitions, Main.replicationFactor(args)))).all().get();
            }
        });

        boolean produced = Main.phase("produce", () -> {
            Properties p = Main.base(bootstrap, "compat-producer");
            p.put("key.serializer", ByteArraySerializer.class.getName());
            p.put("value.serializer", ByteArraySerializer.class.getName());
            p.put("linger.ms", "5");
            // Nothing else: the defaults are what is under test (enable.idempotence=true, acks=all).
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                List<Future<RecordMetadata>> futures = new ArrayList<>();
                for (int i = 0; i < count; i++) {
                    byte[] key = i == count - 1 ? null : ("key-" + (i % 10)).getBytes(StandardCharsets.UTF_8);
                    byte[] val = i == count - 2 ? null : value(i);
                    Integer part = i == count - 3 ? partitions - 1 : null;
                    futures.add(producer.send(new ProducerRecord<>(topic, part, baseTs + 1000L * i, key, val, headers(i))));
                }
                producer.flush();
                for (int i = 0; i < count; i++) {
                    RecordMetadata md = futures.get(i).get();
                    Main.emit(Json.obj("event", "sent", "i", i, "partition", md.partition(), "offset", md.offset(),
                            "timestamp", md.timestamp(), "key_size", md.serializedKeySize(),
                            "value_size", md.serializedValueSize()));
                }
            }
        });
        if (!produced) return;

        Main.phase("assign_read", () -> {
            Properties p = consumerProps(bootstrap, "compat-assign");
            p.put("auto.offset.reset", "none");
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                List<TopicPartition> tps = new ArrayList<>();
                for (PartitionInfo pi : c.partitionsFor(topic)) tps.add(new TopicPartition(topic, pi.partition()));
                tps.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
                Main.emit(Json.obj("event", "partitions_for", "partitions", tps.size()));
                Map<TopicPartition, Long> begin = c.beginningOffsets(tps);
                Map<TopicPartition, Long> end = c.endOffsets(tps);
                Map<TopicPartition, Long> query = new HashMap<>();
                for (TopicPartition tp : tps) query.put(tp, baseTs + 5500);
                Map<TopicPartition, OffsetAndTimestamp> byTime = c.offsetsForTimes(query);
                for (TopicPartition tp : tps) {
                    OffsetAndTimestamp ot = byTime.get(tp);
                    Main.emit(Json.obj("event", "consumer_offsets", "partition", tp.partition(),
                            "beginning", begin.get(tp), "end", end.get(tp),
                            "for_time_offset", ot == null ? null : ot.offset(),
                            "for_time_timestamp", ot == null ? null : ot.timestamp()));
                }
                c.assign(tps);
                c.seekToBeginning(tps);
                int got = pollUntil(c, count, 30_000, "assign");
                Main.check(got == count, "assign read " + got + " of " + count + " records");
                for (TopicPartition tp : tps) {
                    Main.emit(Json.obj("event", "position", "phase", "assign", "partition", tp.partition(), "position", c.position(tp)));
                }
                // Seek into the middle of partition 0 and read from there.
                TopicPartition tp0 = tps.get(0);
                if (end.get(tp0) > 2) {
                    c.assign(List.of(tp0));
                    c.seek(tp0, 2);
                    pollUntil(c, (int) (end.get(tp0) - 2), 20_000, "seek");
                }
            }
        });

        for (String protocol : protocols) {
            String group = topic + "-group-" + protocol;
            Main.phase("subscribe_" + protocol, () -> {
                try (KafkaConsumer<byte[], byte[]> c = groupConsumer(bootstrap, "compat-sub-" + protocol, group, protocol)) {
                    c.subscribe(List.of(topic));
                    int got = pollUntil(c, count, 45_000, "subscribe_" + protocol);
                    Main.check(got == count, "subscribe read " + got + " of " + count + " records");
                    List<Object> assigned = new ArrayList<>();
                    for (TopicPartition tp : c.assignment()) assigned.add(tp.partition());
                    Collections.sort((List) assigned);
                    Main.emit(Json.obj("event", "assignment", "phase", "subscribe_" + protocol, "partitions", assigned));
                    c.commitSync();
                    Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet()) {
                        Main.emit(Json.obj("event", "committed", "phase", "subscribe_" + protocol,
                                "partition", e.getKey().partition(),
                                "offset", e.getValue() == null ? null : e.getValue().offset()));
                    }
                }
            });
            Main.phase("resume_" + protocol, () -> {
                try (KafkaConsumer<byte[], byte[]> c = groupConsumer(bootstrap, "compat-resume-" + protocol, group, protocol)) {
                    c.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 30_000;
                    while (c.assignment().isEmpty() && System.currentTimeMillis() < deadline) {
                        ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<byte[], byte[]> r : rs) Main.emit(recordJson("resume_" + protocol, r));
                    }
                    Main.check(!c.assignment().isEmpty(), "resumed consumer got an assignment");
                    // A further second of polling must return nothing: everything was committed.
                    long until = System.currentTimeMillis() + 1000;
                    while (System.currentTimeMillis() < until) {
                        for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) Main.emit(recordJson("resume_" + protocol, r));
                    }
                    for (TopicPartition tp : c.assignment()) {
                        Main.emit(Json.obj("event", "position", "phase", "resume_" + protocol, "partition", tp.partition(), "position", c.position(tp)));
                    }
                }
            });
        }
    }

    static Properties consumerProps(String bootstrap, String clientId) {
        Properties p = Main.base(bootstrap, clientId);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        return p;
    }

    /** A consumer in {@code group} (classic or consumer protocol) from the earliest offset, committing only by hand. */
    static KafkaConsumer<byte[], byte[]> groupConsumer(String bootstrap, String clientId, String group, String protocol) {
        Properties p = consumerProps(bootstrap, clientId);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        return new KafkaConsumer<>(p);
    }

    /** Poll until {@code want} records arrived or the time is up; emits each record; returns how many. */
    static int pollUntil(KafkaConsumer<byte[], byte[]> c, int want, long timeoutMs, String phase) {
        int got = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (got < want && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                Main.emit(recordJson(phase, r));
                got++;
            }
        }
        return got;
    }
}
