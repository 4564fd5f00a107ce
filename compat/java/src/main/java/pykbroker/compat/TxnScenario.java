package pykbroker.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transactions with the Java client: commit and abort over 3 partitions, a consume-transform-produce
 * exactly-once loop (sendOffsetsToTransaction with the consumer's group metadata, one round
 * aborted and re-processed), fencing by a second producer with the same transactional id, and
 * read_committed / read_uncommitted consumers reading everything back.
 *
 * Args: topic (prefix), count (input records), offsets_by_id (true: the EOS producer looks the
 * input topic up first, so its metadata holds the topic's id and a 4.x producer sends
 * TxnOffsetCommit v6, by topic id, to a broker that offers it; otherwise v5, by name). Events: "read" {topic, isolation, values},
 * "committed" {group, offsets}, "fenced" {error}.
 */
final class TxnScenario {
    private TxnScenario() {}

    static KafkaProducer<byte[], byte[]> producer(String bootstrap, String tid) {
        Properties p = Main.base(bootstrap, "compat-txn-" + tid);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("transactional.id", tid);
        p.put("linger.ms", "5");
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        producer.initTransactions();
        return producer;
    }

    static KafkaConsumer<byte[], byte[]> consumer(String bootstrap, String group, String isolation) {
        Properties p = Main.base(bootstrap, "compat-txn-consumer");
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("isolation.level", isolation);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        if (group != null) {
            p.put("group.id", group);
            p.put("max.poll.records", "50");   // several transactions, so one can be aborted
        }
        return new KafkaConsumer<>(p);
    }

    static void readBack(String bootstrap, String topic, int partitions, String isolation, int expect) {
        try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, null, isolation)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(topic, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            List<String> values = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 15000;
            int idle = 0;
            while (System.currentTimeMillis() < deadline && (values.size() < expect || idle < 3)) {
                ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(300));
                if (recs.isEmpty()) idle++; else idle = 0;
                for (ConsumerRecord<byte[], byte[]> r : recs) values.add(new String(r.value()));
            }
            Main.emit(Json.obj("event", "read", "topic", topic, "isolation", isolation, "values", values));
        }
    }

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String prefix = args.get("topic");
        int count = Integer.parseInt(args.getOrDefault("count", "300"));
        boolean offsetsById = Boolean.parseBoolean(args.getOrDefault("offsets_by_id", "false"));
        String basic = prefix + "-basic", in = prefix + "-in", out = prefix + "-out", fence = prefix + "-fence";
        String group = prefix + "-eos";

        try (Admin admin = Admin.create(Main.base(bootstrap, "compat-admin"))) {
            boolean ok = Main.phase("setup", () -> {
                admin.createTopics(List.of(new NewTopic(basic, 3, (short) 1), new NewTopic(in, 3, (short) 1),
                        new NewTopic(out, 3, (short) 1), new NewTopic(fence, 1, (short) 1))).all().get();
                Properties p = Main.base(bootstrap, "compat-plain");
                p.put("key.serializer", ByteArraySerializer.class.getName());
                p.put("value.serializer", ByteArraySerializer.class.getName());
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                    for (int i = 0; i < count; i++)
                        producer.send(new ProducerRecord<>(in, i % 3, null, ("rec-" + i).getBytes()));
                    producer.flush();
                }
            });
            if (!ok) return;
        }

        Main.phase("commit_abort", () -> {
            try (KafkaProducer<byte[], byte[]> p = producer(bootstrap, prefix + "-tid-basic")) {
                p.beginTransaction();
                for (int i = 0; i < 12; i++) p.send(new ProducerRecord<>(basic, i % 3, null, ("c-" + i).getBytes()));
                p.commitTransaction();
                p.beginTransaction();
                for (int i = 0; i < 9; i++) p.send(new ProducerRecord<>(basic, i % 3, null, ("a-" + i).getBytes()));
                p.flush();
                p.abortTransaction();
                p.beginTransaction();
                p.send(new ProducerRecord<>(basic, 0, null, "c-last".getBytes()));
                p.commitTransaction();
            }
        });

        Main.phase("eos", () -> {
            try (KafkaConsumer<byte[], byte[]> c = consumer(bootstrap, group, "read_committed");
                 KafkaProducer<byte[], byte[]> p = producer(bootstrap, prefix + "-tid-eos")) {
                if (offsetsById) p.partitionsFor(in);   // the input topic's id in the producer's metadata
                c.subscribe(List.of(in));
                int done = 0, round = 0;
                long deadline = System.currentTimeMillis() + 90000;
                while (done < count) {
                    Main.check(System.currentTimeMillis() < deadline, "eos loop finished in time (" + done + ")");
                    ConsumerRecords<byte[], byte[]> recs = c.poll(Duration.ofMillis(500));
                    if (recs.isEmpty()) continue;
                    p.beginTransaction();
                    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        p.send(new ProducerRecord<>(out, r.partition(), r.key(), new String(r.value()).toUpperCase().getBytes()));
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    p.sendOffsetsToTransaction(offsets, c.groupMetadata());
                    if (round == 1) {
                        p.abortTransaction();
                        // rewind to what the group committed (the aborted offsets never were)
                        Set<TopicPartition> assigned = c.assignment();
                        Map<TopicPartition, OffsetAndMetadata> committed = c.committed(assigned);
                        for (TopicPartition tp : assigned) {
                            OffsetAndMetadata om = committed.get(tp);
                            c.seek(tp, om == null ? 0 : om.offset());
                        }
                    } else {
                        p.commitTransaction();
                        done += recs.count();
                    }
                    round++;
                }
                Map<TopicPartition, OffsetAndMetadata> committed = c.committed(c.assignment());
                Map<String, Long> shown = new HashMap<>();
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : committed.entrySet())
                    shown.put(String.valueOf(e.getKey().partition()), e.getValue() == null ? -1 : e.getValue().offset());
                Main.emit(Json.obj("event", "committed", "group", group, "offsets", shown, "rounds", round));
            }
        });

        Main.phase("fence", () -> {
            String tid = prefix + "-tid-fence";
            KafkaProducer<byte[], byte[]> first = producer(bootstrap, tid);
            first.beginTransaction();
            first.send(new ProducerRecord<>(fence, 0, null, "from-first".getBytes()));
            first.flush();
            try (KafkaProducer<byte[], byte[]> second = producer(bootstrap, tid)) {
                second.beginTransaction();
                second.send(new ProducerRecord<>(fence, 0, null, "from-second".getBytes()));
                second.commitTransaction();
            }
            String err = Main.errorOf(first::commitTransaction);
            Main.emit(Json.obj("event", "fenced", "error", err));
            first.close(Duration.ZERO);
        });

        Main.phase("read", () -> {
            readBack(bootstrap, basic, 3, "read_committed", 13);
            readBack(bootstrap, basic, 3, "read_uncommitted", 22);
            readBack(bootstrap, out, 3, "read_committed", count);
            readBack(bootstrap, fence, 1, "read_committed", 1);
        });
    }
}
