package pykbroker.compat;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Java clients recovering from faults injected through pykbroker's HTTP control endpoint
 * (what a Java test does: plain JSON over java.net.http, no pykbroker code on the JVM side).
 *
 * Args: topic, count (300, split over 2 partitions by i%2), control (the endpoint's base URL),
 * group. Phases:
 * - produce_through_faults: the default producer (idempotent, acks=all) sends while the broker
 *   answers NOT_LEADER_OR_FOLLOWER, loses responses after appending, and drops connections;
 * - read_through_crash: an assigned consumer reads while the broker crashes (no clean shutdown)
 *   and restarts from its data dir on the same port;
 * - group_through_coordinator_errors: a subscribed consumer joins and commits while the
 *   coordinator answers COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR.
 * Events "consumed" list the values each consumer saw per partition, in order.
 */
final class FaultsScenario {
    private FaultsScenario() {}

    static final HttpClient HTTP = HttpClient.newBuilder().proxy(HttpClient.Builder.NO_PROXY)
            .connectTimeout(Duration.ofSeconds(10)).build();

    /** Called after each poll with the number of records read so far. */
    interface AfterPoll {
        void polled(int total) throws Exception;
    }

    /** Polls c until count records are read or 60 s pass: the values read, by partition. */
    static Map<Integer, List<String>> pollValues(KafkaConsumer<byte[], byte[]> c, int count, AfterPoll after)
            throws Exception {
        Map<Integer, List<String>> seen = new HashMap<>();
        int total = 0;
        long deadline = System.currentTimeMillis() + 60_000;
        while (total < count && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) {
                seen.computeIfAbsent(r.partition(), k -> new ArrayList<>())
                        .add(new String(r.value(), StandardCharsets.UTF_8));
                total++;
            }
            after.polled(total);
        }
        return seen;
    }

    static String control(String base, String method, String path, String json) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(base + path)).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json");
        b = method.equals("POST") ? b.POST(HttpRequest.BodyPublishers.ofString(json == null ? "{}" : json))
                : b.method(method, HttpRequest.BodyPublishers.noBody());
        HttpResponse<String> r = HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
        Main.emit(Json.obj("event", "control", "method", method, "path", path, "status", r.statusCode()));
        Main.check(r.statusCode() / 100 == 2, method + " " + path + " answered " + r.statusCode() + ": " + r.body());
        return r.body();
    }

    static byte[] value(int i) {
        return ("v-" + i).getBytes(StandardCharsets.UTF_8);
    }

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        int count = Integer.parseInt(args.getOrDefault("count", "300"));
        String ctl = args.get("control");
        String group = args.getOrDefault("group", topic + "-group");
        String t = "\"topic\":\"" + topic + "\"";

        Main.phase("create_topic", () -> {
            try (Admin admin = Admin.create(Main.base(bootstrap, "faults-admin"))) {
                admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
            }
        });

        boolean produced = Main.phase("produce_through_faults", () -> {
            Properties p = Main.base(bootstrap, "faults-producer");
            p.put("key.serializer", ByteArraySerializer.class.getName());
            p.put("value.serializer", ByteArraySerializer.class.getName());
            p.put("retry.backoff.ms", "20");
            p.put("reconnect.backoff.ms", "20");
            p.put("linger.ms", "2");
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                int q = count / 4;
                for (int i = 0; i < count; i++) {
                    if (i == q) {
                        producer.flush();
                        control(ctl, "POST", "/faults", "{\"action\":\"fail\",\"api\":\"Produce\",\"error\":\"NOT_LEADER_OR_FOLLOWER\","
                                + t + ",\"partition\":0,\"count\":3}");
                    } else if (i == 2 * q) {
                        producer.flush();
                        control(ctl, "POST", "/faults", "{\"action\":\"drop_response\",\"api\":\"Produce\"," + t + ",\"count\":2}");
                    } else if (i == 3 * q) {
                        producer.flush();
                        control(ctl, "POST", "/faults", "{\"action\":\"drop_connection\",\"api\":\"Produce\",\"count\":2}");
                    }
                    futures.add(producer.send(new ProducerRecord<>(topic, i % 2, null, value(i))));
                }
                producer.flush();
                Map<Integer, List<Long>> offsets = new HashMap<>();
                for (Future<RecordMetadata> f : futures) {
                    RecordMetadata md = f.get();
                    offsets.computeIfAbsent(md.partition(), k -> new ArrayList<>()).add(md.offset());
                }
                Main.emit(Json.obj("event", "sent", "count", futures.size(),
                        "p0_offsets", offsets.get(0), "p1_offsets", offsets.get(1)));
            }
            String rules = control(ctl, "GET", "/faults", null);
            Main.emit(Json.obj("event", "rules_after_produce", "body", rules));
        });
        if (!produced) return;

        Main.phase("read_through_crash", () -> {
            Properties p = Roundtrip.consumerProps(bootstrap, "faults-reader");
            p.put("reconnect.backoff.ms", "20");
            p.put("retry.backoff.ms", "20");
            p.put("fetch.max.wait.ms", "100");
            p.put("max.poll.records", "20");
            List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.assign(tps);
                c.seekToBeginning(tps);
                boolean[] crashed = {false};
                Map<Integer, List<String>> seen = pollValues(c, count, total -> {
                    if (!crashed[0] && total >= count / 3) {
                        crashed[0] = true;
                        control(ctl, "POST", "/broker/restart", "{\"clean\":false}");
                    }
                });
                Main.check(crashed[0], "the broker was crashed mid-read");
                Main.emit(Json.obj("event", "consumed", "phase", "read_through_crash",
                        "p0", seen.get(0), "p1", seen.get(1)));
            }
        });

        Main.phase("group_through_coordinator_errors", () -> {
            control(ctl, "POST", "/faults", "{\"action\":\"fail\",\"api\":\"FindCoordinator\",\"error\":\"COORDINATOR_NOT_AVAILABLE\",\"count\":1}");
            control(ctl, "POST", "/faults", "{\"action\":\"fail\",\"api\":\"JoinGroup\",\"error\":\"COORDINATOR_LOAD_IN_PROGRESS\",\"count\":2}");
            control(ctl, "POST", "/faults", "{\"action\":\"fail\",\"api\":\"OffsetCommit\",\"error\":\"NOT_COORDINATOR\",\"count\":1}");
            Properties p = Roundtrip.consumerProps(bootstrap, "faults-group");
            p.put("group.id", group);
            p.put("auto.offset.reset", "earliest");
            p.put("enable.auto.commit", "false");
            p.put("retry.backoff.ms", "20");
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                c.subscribe(List.of(topic));
                Map<Integer, List<String>> seen = pollValues(c, count, total -> { });
                // a commit that meets NOT_COORDINATOR is retried by commitSync itself
                c.commitSync(Duration.ofSeconds(30));
                Map<TopicPartition, OffsetAndMetadata> committed = c.committed(
                        java.util.Set.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1)));
                Main.emit(Json.obj("event", "consumed", "phase", "group_through_coordinator_errors",
                        "p0", seen.get(0), "p1", seen.get(1),
                        "committed0", committed.get(new TopicPartition(topic, 0)).offset(),
                        "committed1", committed.get(new TopicPartition(topic, 1)).offset()));
            }
            Main.emit(Json.obj("event", "rules_after_group", "body", control(ctl, "GET", "/faults", null)));
        });
    }
}
