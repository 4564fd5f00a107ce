package pykbroker.compat;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DeletedRecords;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * ListOffsets (earliest, latest, max timestamp, by timestamp) through the AdminClient and the
 * consumer, DeleteRecords, and what a consumer sees below the new log start offset.
 *
 * Args: topic, base_ts. The topic gets one partition and 10 records in two batches of 5, record i
 * having timestamp base_ts + 1000*TS[i] (out of order, so the max timestamp is not the last record).
 * topic-empty gets one partition and no records.
 */
final class OffsetsScenario {
    static final int[] TS = {5, 1, 9, 3, 7, 2, 8, 0, 6, 4};

    private OffsetsScenario() {}

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        String empty = topic + "-empty";
        long baseTs = Long.parseLong(args.getOrDefault("base_ts", "1700000000000"));
        TopicPartition tp = new TopicPartition(topic, 0);
        TopicPartition etp = new TopicPartition(empty, 0);

        try (Admin admin = Admin.create(Main.base(bootstrap, "compat-admin"))) {
            boolean ok = Main.phase("setup", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 1, Main.replicationFactor(args)), new NewTopic(empty, 1, Main.replicationFactor(args)))).all().get();
                Properties p = Main.base(bootstrap, "compat-producer");
                p.put("key.serializer", ByteArraySerializer.class.getName());
                p.put("value.serializer", ByteArraySerializer.class.getName());
                p.put("linger.ms", "50");
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                    for (int i = 0; i < TS.length; i++) {
                        producer.send(new ProducerRecord<>(topic, 0, baseTs + 1000L * TS[i], null, ("r" + i).getBytes()));
                        if (i == 4) producer.flush();
                    }
                    producer.flush();
                }
            });
            if (!ok) return;

            Main.phase("list_offsets", () -> {
                listOffsets(admin, "earliest", tp, OffsetSpec.earliest(), null);
                listOffsets(admin, "latest", tp, OffsetSpec.latest(), null);
                listOffsets(admin, "latest_read_committed", tp, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED);
                listOffsets(admin, "max_timestamp", tp, OffsetSpec.maxTimestamp(), null);
                for (long t : new long[] {0, 3000, 5000, 5001, 9000, 9001}) {
                    listOffsets(admin, "ts_" + t, tp, OffsetSpec.forTimestamp(baseTs + t), null);
                }
                listOffsets(admin, "empty_earliest", etp, OffsetSpec.earliest(), null);
                listOffsets(admin, "empty_latest", etp, OffsetSpec.latest(), null);
                listOffsets(admin, "empty_max_timestamp", etp, OffsetSpec.maxTimestamp(), null);
                listOffsets(admin, "empty_ts_0", etp, OffsetSpec.forTimestamp(baseTs), null);
                Main.emit(Json.obj("event", "list_offsets_error", "case", "unknown_topic",
                        "error", Main.errorOf(() -> admin.listOffsets(Map.of(new TopicPartition(topic + "-nope", 0), OffsetSpec.latest())).all().get())));
            });

            Main.phase("consumer_offsets", () -> consumerOffsets(bootstrap, tp, baseTs, "before_delete"));

            Main.phase("delete_records", () -> {
                DeletedRecords dr = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(tp).get();
                Main.emit(Json.obj("event", "deleted", "low_watermark", dr.lowWatermark()));
                Main.emit(Json.obj("event", "delete_records_error", "case", "beyond_high_watermark",
                        "error", Main.errorOf(() -> admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(100))).all().get())));
                // (No unknown-topic case: the 3.9 AdminClient retries UNKNOWN_TOPIC_OR_PARTITION from Metadata
                // for DeleteRecords until its timeout, whatever the broker.)
                listOffsets(admin, "after_delete_earliest", tp, OffsetSpec.earliest(), null);
                listOffsets(admin, "after_delete_latest", tp, OffsetSpec.latest(), null);
                listOffsets(admin, "after_delete_ts_0", tp, OffsetSpec.forTimestamp(baseTs), null);
                listOffsets(admin, "after_delete_ts_7500", tp, OffsetSpec.forTimestamp(baseTs + 7500), null);
            });

            Main.phase("consumer_after_delete", () -> {
                consumerOffsets(bootstrap, tp, baseTs, "after_delete");
                // auto.offset.reset=none: a position below the log start offset is an error for the application.
                Properties p = Roundtrip.consumerProps(bootstrap, "compat-oor");
                p.put("auto.offset.reset", "none");
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                    c.assign(List.of(tp));
                    c.seek(tp, 0);
                    String err = null;
                    long deadline = System.currentTimeMillis() + 10_000;
                    while (err == null && System.currentTimeMillis() < deadline) {
                        try {
                            ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(200));
                            for (ConsumerRecord<byte[], byte[]> r : rs) Main.emit(Roundtrip.recordJson("reset_none", r));
                        } catch (Exception e) {
                            err = e.getClass().getSimpleName();
                        }
                    }
                    Main.emit(Json.obj("event", "out_of_range", "reset", "none", "error", err));
                }
                // auto.offset.reset=earliest: the consumer moves to the log start offset by itself.
                p = Roundtrip.consumerProps(bootstrap, "compat-oor-earliest");
                p.put("auto.offset.reset", "earliest");
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                    c.assign(List.of(tp));
                    c.seek(tp, 0);
                    Roundtrip.pollUntil(c, TS.length - 4, 15_000, "reset_earliest");
                }
            });
        }
    }

    static void listOffsets(Admin admin, String name, TopicPartition tp, OffsetSpec spec, IsolationLevel iso) throws Exception {
        ListOffsetsOptions opts = iso == null ? new ListOffsetsOptions() : new ListOffsetsOptions(iso);
        ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, spec), opts).partitionResult(tp).get();
        Main.emit(Json.obj("event", "list_offsets", "case", name, "offset", info.offset(), "timestamp", info.timestamp(),
                "leader_epoch", info.leaderEpoch().orElse(null)));
    }

    static void consumerOffsets(String bootstrap, TopicPartition tp, long baseTs, String phase) {
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(Roundtrip.consumerProps(bootstrap, "compat-offsets"))) {
            Map<TopicPartition, Long> b = c.beginningOffsets(List.of(tp));
            Map<TopicPartition, Long> e = c.endOffsets(List.of(tp));
            Main.emit(Json.obj("event", "consumer_offsets", "phase", phase, "beginning", b.get(tp), "end", e.get(tp)));
            for (long t : new long[] {0, 5001, 9001}) {
                OffsetAndTimestamp ot = c.offsetsForTimes(Map.of(tp, baseTs + t)).get(tp);
                Main.emit(Json.obj("event", "offsets_for_times", "phase", phase, "case", "ts_" + t,
                        "offset", ot == null ? null : ot.offset(), "timestamp", ot == null ? null : ot.timestamp()));
            }
        }
    }
}
