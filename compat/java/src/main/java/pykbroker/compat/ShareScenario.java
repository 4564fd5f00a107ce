package pykbroker.compat;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * KIP-932 share groups with the real KafkaShareConsumer (kafka-clients 4.x).
 *
 * Phase "two_consumers": two share consumers of one group on one topic (implicit acknowledgement);
 * every produced record must be delivered exactly once across them; the AdminClient describes the
 * group meanwhile.  Phase "explicit": one consumer with share.acknowledgement.mode=explicit accepts,
 * releases and rejects records (the released one comes back with delivery count 2, the rejected
 * one never), then leaves a record unacknowledged and closes: the next consumer of the group gets
 * it with delivery count 2.
 *
 * The share group starts at the end of the partitions (share.auto.offset.reset=latest), so each
 * phase first produces markers to every partition until one is received (the share partition then
 * exists and every later record is delivered).
 *
 * Args: topic, group, partitions (2), count (60).
 */
final class ShareScenario {
    private ShareScenario() {}

    static Properties consumerProps(String bootstrap, String group, String clientId, boolean explicit) {
        Properties p = Main.base(bootstrap, clientId);
        p.put("group.id", group);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        return p;
    }

    static Object deliveryCount(ConsumerRecord<?, ?> r) {
        try {   // ConsumerRecord.deliveryCount() is a 4.x method (the scenarios also build against 3.9)
            Object o = r.getClass().getMethod("deliveryCount").invoke(r);
            return ((java.util.Optional<?>) o).orElse(null);
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    static Object call(Object target, String name, Class<?>[] types, Object... args) throws Exception {
        Method m = target.getClass().getMethod(name, types);
        m.setAccessible(true);
        return m.invoke(target, args);
    }

    static Object call(Object target, String name) throws Exception {
        return call(target, name, new Class<?>[0]);
    }

    /** A polling consumer on its own thread (KafkaShareConsumer is single-threaded). */
    static final class Member extends PollingMember {
        final Map<String, List<String>> seen;
        int count = 0;

        Member(String name, Properties props, String topic, Map<String, List<String>> seen) {
            super(name, props, topic, "share-");
            this.seen = seen;
        }

        @Override
        public void run() {
            try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(props)) {
                c.subscribe(List.of(topic));
                while (!stop) {
                    ConsumerRecords<String, String> recs = c.poll(Duration.ofMillis(300));
                    for (ConsumerRecord<String, String> r : recs) {
                        seen.computeIfAbsent(r.value(), k -> new CopyOnWriteArrayList<>()).add(name);
                        count++;
                    }
                }
            } catch (Throwable t) {
                error = t.toString();
                t.printStackTrace();
            }
        }
    }

    /** listShareGroupOffsets(group) for every partition: "topic-partition" -> [start offset, lag or null]. */
    static Map<String, Object> listOffsets(Admin admin, String group) throws Exception {
        Object spec = Class.forName("org.apache.kafka.clients.admin.ListShareGroupOffsetsSpec").getConstructor().newInstance();
        Object res = call(admin, "listShareGroupOffsets", new Class<?>[]{Map.class}, Map.of(group, spec));
        Object byTp = ((org.apache.kafka.common.KafkaFuture<?>) call(res, "partitionsToOffsetInfo",
                new Class<?>[]{String.class}, group)).get();
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<?, ?> e : ((Map<?, ?>) byTp).entrySet()) {
            Object info = e.getValue();
            if (info == null) { out.put(e.getKey().toString(), null); continue; }
            Object lag = ((java.util.Optional<?>) call(info, "lag")).orElse(null);
            out.put(e.getKey().toString(), List.of(call(info, "startOffset"), String.valueOf(lag)));
        }
        return out;
    }

    static void warmUp(KafkaProducer<String, String> producer, String topic, int partitions,
                       Map<String, List<String>> seen, String tag) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        Set<Integer> ready = new java.util.TreeSet<>();
        int round = 0;
        while (ready.size() < partitions) {
            Main.check(System.currentTimeMillis() < deadline, "share partitions warmed up within 60 s");
            for (int p = 0; p < partitions; p++) {
                if (!ready.contains(p)) producer.send(new ProducerRecord<>(topic, p, null, "warm-" + tag + "-" + p + "-" + round)).get();
            }
            Thread.sleep(700);
            for (String v : seen.keySet()) {
                if (v.startsWith("warm-" + tag + "-")) ready.add(Integer.parseInt(v.split("-")[2]));
            }
            round++;
        }
    }

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String topic = args.getOrDefault("topic", "java-share");
        String group = args.getOrDefault("group", "java-share");
        int partitions = Integer.parseInt(args.getOrDefault("partitions", "2"));
        int count = Integer.parseInt(args.getOrDefault("count", "60"));
        Properties pp = Main.base(bootstrap, "share-producer");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        pp.put("linger.ms", "0");

        try (Admin admin = Admin.create(Main.base(bootstrap, "share-admin"));
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            Main.phase("setup", () -> admin.createTopics(List.of(new NewTopic(topic, partitions, Main.replicationFactor(args)))).all().get());

            Main.phase("two_consumers", () -> {
                Map<String, List<String>> seen = new ConcurrentHashMap<>();
                Member a = new Member("a", consumerProps(bootstrap, group, "share-a", false), topic, seen);
                Member b = new Member("b", consumerProps(bootstrap, group, "share-b", false), topic, seen);
                a.thread.start();
                b.thread.start();
                try {
                    warmUp(producer, topic, partitions, seen, "t");
                    for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, i % partitions, null, "v-" + i)).get();
                    long deadline = System.currentTimeMillis() + 60_000;
                    while (System.currentTimeMillis() < deadline) {
                        int got = 0;
                        for (int i = 0; i < count; i++) if (seen.containsKey("v-" + i)) got++;
                        if (got == count) break;
                        Thread.sleep(200);
                    }
                    Thread.sleep(1500);   // anything delivered twice would show up now
                    Map<String, Object> byMember = new TreeMap<>();
                    List<Object> values = new ArrayList<>();
                    List<Object> dups = new ArrayList<>();
                    for (int i = 0; i < count; i++) {
                        List<String> who = seen.get("v-" + i);
                        if (who == null) continue;
                        values.add("v-" + i);
                        if (who.size() > 1) dups.add("v-" + i);
                        for (String w : who) byMember.merge(w, 1, (x, y) -> (Integer) x + (Integer) y);
                    }
                    Main.emit(Json.obj("event", "delivered", "values", values, "duplicates", dups, "by_member", byMember));
                    // the AdminClient's view (4.x API, called reflectively: the tree also builds against 3.9);
                    // a member takes a new assignment at its next heartbeat (every 5 s): described until
                    // each member holds its own partition, or 30 s
                    Map<String, Object> described = null;
                    long until = System.currentTimeMillis() + 30_000;
                    while (true) {
                        Object res = call(admin, "describeShareGroups", new Class<?>[]{Collection.class}, List.of(group));
                        Object all = ((org.apache.kafka.common.KafkaFuture<?>) call(res, "all")).get();
                        Object desc = ((Map<?, ?>) all).get(group);
                        List<Object> members = new ArrayList<>();
                        Set<String> seenTps = new java.util.TreeSet<>();
                        int held = 0;
                        for (Object m : (Collection<?>) call(desc, "members")) {
                            Object asg = call(m, "assignment");
                            List<Object> tps = new ArrayList<>();
                            for (Object tp : (Collection<?>) call(asg, "topicPartitions")) {
                                tps.add(tp.toString());
                                seenTps.add(tp.toString());
                                held++;
                            }
                            members.add(Json.obj("client_id", call(m, "clientId"), "partitions", tps));
                        }
                        described = Json.obj("event", "describe", "state", String.valueOf(call(desc, "groupState")),
                                "members", members, "group_epoch", call(desc, "groupEpoch"));
                        if ((held == partitions && seenTps.size() == partitions) || System.currentTimeMillis() > until) break;
                        Thread.sleep(500);
                    }
                    Main.emit(described);
                } finally {
                    a.stop = true;
                    b.stop = true;
                    a.thread.join(30_000);
                    b.thread.join(30_000);
                }
                Main.emit(Json.obj("event", "members_done", "a_error", a.error, "b_error", b.error));
            });

            Main.phase("explicit", () -> {
                String g = group + "-explicit";
                Map<String, List<String>> seen = new ConcurrentHashMap<>();
                List<Object> log = new ArrayList<>();
                try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(consumerProps(bootstrap, g, "share-x", true))) {
                    c.subscribe(List.of(topic));
                    // warm-up: the markers are accepted as they come
                    long deadline = System.currentTimeMillis() + 60_000;
                    Set<Integer> ready = new java.util.TreeSet<>();
                    int round = 0;
                    while (ready.size() < partitions) {
                        Main.check(System.currentTimeMillis() < deadline, "explicit warm-up within 60 s");
                        for (int p = 0; p < partitions; p++)
                            if (!ready.contains(p)) producer.send(new ProducerRecord<>(topic, p, null, "warm-x-" + p + "-" + round)).get();
                        round++;
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(700))) {
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                            if (r.value().startsWith("warm-x-")) ready.add(r.partition());
                        }
                        c.commitSync();
                    }
                    for (String v : List.of("r-accept", "r-release", "r-reject")) producer.send(new ProducerRecord<>(topic, 0, null, v)).get();
                    Map<String, Integer> pending = new HashMap<>(Map.of("r-accept", 1, "r-release", 1, "r-reject", 1));
                    boolean releasedBack = false;
                    deadline = System.currentTimeMillis() + 60_000;
                    while ((!pending.isEmpty() || !releasedBack) && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                            Object dc = deliveryCount(r);
                            log.add(Json.obj("value", r.value(), "delivery_count", dc, "offset", r.offset()));
                            if (r.value().startsWith("warm-")) {
                                c.acknowledge(r, AcknowledgeType.ACCEPT);
                            } else if (r.value().equals("r-release") && pending.containsKey("r-release")) {
                                c.acknowledge(r, AcknowledgeType.RELEASE);
                                pending.remove("r-release");
                            } else if (r.value().equals("r-release")) {
                                c.acknowledge(r, AcknowledgeType.ACCEPT);
                                releasedBack = true;
                            } else if (r.value().equals("r-reject")) {
                                c.acknowledge(r, AcknowledgeType.REJECT);
                                pending.remove("r-reject");
                            } else {
                                c.acknowledge(r, AcknowledgeType.ACCEPT);
                                pending.remove(r.value());
                            }
                        }
                        Map<?, ?> res = c.commitSync();
                        for (Object e : res.values())
                            if (((java.util.Optional<?>) e).isPresent()) log.add(Json.obj("commit_error", String.valueOf(((java.util.Optional<?>) e).get())));
                    }
                    // nothing more may come: the rejected and accepted records are done
                    long quiet = System.currentTimeMillis() + 2500;
                    while (System.currentTimeMillis() < quiet) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                            log.add(Json.obj("value", r.value(), "delivery_count", deliveryCount(r), "offset", r.offset(), "late", true));
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                        c.commitSync();
                    }
                    // a record left unacknowledged when the consumer closes goes back to the group
                    producer.send(new ProducerRecord<>(topic, 0, null, "u-unacked")).get();
                    deadline = System.currentTimeMillis() + 30_000;
                    boolean got = false;
                    while (!got && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                            log.add(Json.obj("value", r.value(), "delivery_count", deliveryCount(r), "offset", r.offset(), "unacked", true));
                            if (r.value().equals("u-unacked")) got = true;
                            else c.acknowledge(r, AcknowledgeType.ACCEPT);
                        }
                    }
                    Main.check(got, "u-unacked received");
                }
                try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(consumerProps(bootstrap, g, "share-y", true))) {
                    c.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 60_000;
                    boolean got = false;
                    while (!got && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                            log.add(Json.obj("value", r.value(), "delivery_count", deliveryCount(r), "offset", r.offset(), "second", true));
                            c.acknowledge(r, AcknowledgeType.ACCEPT);
                            if (r.value().equals("u-unacked")) got = true;
                        }
                        c.commitSync();
                    }
                }
                Main.emit(Json.obj("event", "explicit", "log", log));
            });

            // the AdminClient's share group offsets (4.x API, called reflectively: the tree also builds against 3.9)
            Main.phase("admin_offsets", () -> {
                String g = group + "-explicit";
                org.apache.kafka.common.TopicPartition tp0 = new org.apache.kafka.common.TopicPartition(topic, 0);
                Main.emit(Json.obj("event", "offsets", "when", "consumed", "offsets", listOffsets(admin, g)));
                Object alter = call(admin, "alterShareGroupOffsets", new Class<?>[]{String.class, Map.class}, g, Map.of(tp0, 0L));
                ((org.apache.kafka.common.KafkaFuture<?>) call(alter, "all")).get();
                Main.emit(Json.obj("event", "offsets", "when", "altered", "offsets", listOffsets(admin, g)));
                Object del = call(admin, "deleteShareGroupOffsets", new Class<?>[]{String.class, Set.class}, g, Set.of(topic));
                ((org.apache.kafka.common.KafkaFuture<?>) call(del, "all")).get();
                Main.emit(Json.obj("event", "offsets", "when", "deleted", "offsets", listOffsets(admin, g)));
                Object dg = call(admin, "deleteShareGroups", new Class<?>[]{Collection.class}, List.of(g));
                ((org.apache.kafka.common.KafkaFuture<?>) call(dg, "all")).get();
                Object res = call(admin, "describeShareGroups", new Class<?>[]{Collection.class}, List.of(g));
                String err = Main.errorOf(() -> ((org.apache.kafka.common.KafkaFuture<?>) call(res, "all")).get());
                Main.emit(Json.obj("event", "group_deleted", "describe_error", err));
            });
        }
    }
}
