package pykbroker.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListSet;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ConsumerGroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * A consumer group seen by its members and by the AdminClient: one member takes every partition,
 * a second member joins (rebalance splits the partitions), list/describe groups and committed
 * offsets while it is stable, the second member leaves (the first takes everything back), the
 * group empties, and is deleted.
 *
 * Args: topic, group, protocol (classic|consumer), partitions (4), count (40).
 */
final class GroupsScenario {
    private GroupsScenario() {}

    /** One group member, polling on its own thread (KafkaConsumer is single-threaded). */
    static final class Member extends PollingMember {
        final Set<Integer> assignment = new ConcurrentSkipListSet<>();
        final AtomicInteger consumed = new AtomicInteger();
        volatile boolean closed = false;

        Member(String name, Properties props, String topic) {
            super(name, props, topic, "member-");
        }

        @Override
        public void run() {
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(props)) {
                c.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        for (TopicPartition tp : parts) assignment.remove(tp.partition());
                        Main.emit(Json.obj("event", "rebalance", "member", name, "kind", "revoked", "partitions", ids(parts)));
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        for (TopicPartition tp : parts) assignment.add(tp.partition());
                        Main.emit(Json.obj("event", "rebalance", "member", name, "kind", "assigned", "partitions", ids(parts)));
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> parts) {
                        for (TopicPartition tp : parts) assignment.remove(tp.partition());
                        Main.emit(Json.obj("event", "rebalance", "member", name, "kind", "lost", "partitions", ids(parts)));
                    }
                });
                while (!stop) {
                    ConsumerRecords<byte[], byte[]> rs = c.poll(Duration.ofMillis(100));
                    if (!rs.isEmpty()) {
                        consumed.addAndGet(rs.count());
                        c.commitSync();
                    }
                }
            } catch (Throwable t) {
                error = Main.unwrap(t).getClass().getSimpleName() + ": " + Main.unwrap(t).getMessage();
                Main.emit(Json.obj("event", "member_error", "member", name, "error", error));
                t.printStackTrace();
            } finally {
                closed = true;
            }
        }
    }

    static List<Object> ids(Collection<TopicPartition> parts) {
        Set<Integer> s = new TreeSet<>();
        for (TopicPartition tp : parts) s.add(tp.partition());
        return new ArrayList<>(s);
    }

    static void waitFor(String what, long timeoutMs, BooleanSupplier cond) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!cond.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) throw new IllegalStateException("timed out waiting for " + what);
            Thread.sleep(50);
        }
    }

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        String group = args.get("group");
        String protocol = args.getOrDefault("protocol", "classic");
        int partitions = Integer.parseInt(args.getOrDefault("partitions", "4"));
        int count = Integer.parseInt(args.getOrDefault("count", "40"));

        try (Admin admin = Admin.create(Main.base(bootstrap, "compat-admin"))) {
            boolean ok = Main.phase("setup", () -> {
                admin.createTopics(List.of(new NewTopic(topic, partitions, Main.replicationFactor(args)))).all().get();
                Properties p = Main.base(bootstrap, "compat-producer");
                p.put("key.serializer", ByteArraySerializer.class.getName());
                p.put("value.serializer", ByteArraySerializer.class.getName());
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                    for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, i % partitions, null, ("g" + i).getBytes()));
                    producer.flush();
                }
            });
            if (!ok) return;

            Member a = member(bootstrap, "a", group, protocol, topic);
            Member b = member(bootstrap, "b", group, protocol, topic);
            Set<Integer> all = new TreeSet<>();
            for (int i = 0; i < partitions; i++) all.add(i);

            ok = Main.phase("one_member", () -> {
                a.thread.start();
                waitFor("member a to own every partition and consume every record", 45_000,
                        () -> a.error != null || (a.assignment.equals(all) && a.consumed.get() >= count));
                Main.check(a.error == null, "member a failed: " + a.error);
                Main.emit(Json.obj("event", "assignment", "phase", "one_member", "a", new ArrayList<>(a.assignment), "consumed", a.consumed.get()));
            });
            if (!ok) { a.stopAndJoin(); return; }

            Main.phase("two_members", () -> {
                b.thread.start();
                waitFor("a and b to split the partitions", 45_000, () -> {
                    if (a.error != null || b.error != null) return true;
                    Set<Integer> sa = new TreeSet<>(a.assignment), sb = new TreeSet<>(b.assignment);
                    if (sa.isEmpty() || sb.isEmpty()) return false;
                    Set<Integer> union = new TreeSet<>(sa);
                    union.addAll(sb);
                    sa.retainAll(sb);
                    return sa.isEmpty() && union.equals(all);
                });
                Main.check(a.error == null && b.error == null, "member failed: " + a.error + " / " + b.error);
                Main.emit(Json.obj("event", "assignment", "phase", "two_members", "a", new ArrayList<>(a.assignment),
                        "b", new ArrayList<>(b.assignment)));
            });

            Main.phase("admin_stable", () -> {
                adminView(admin, group, "stable");
            });

            Main.phase("member_leaves", () -> {
                b.stopAndJoin();
                waitFor("a to own every partition again", 45_000, () -> a.error != null || a.assignment.equals(all));
                Main.check(a.error == null, "member a failed: " + a.error);
                Main.emit(Json.obj("event", "assignment", "phase", "after_leave", "a", new ArrayList<>(a.assignment)));
            });

            Main.phase("group_empty", () -> {
                a.stopAndJoin();
                adminView(admin, group, "empty");
            });

            Main.phase("delete_group", () -> {
                Main.emit(Json.obj("event", "delete_group", "error",
                        Main.errorOf(() -> admin.deleteConsumerGroups(List.of(group)).all().get())));
                Main.emit(Json.obj("event", "describe_group_error", "case", "deleted", "error",
                        Main.errorOf(() -> {
                            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
                            Main.emit(Json.obj("event", "group", "phase", "deleted", "state", d.state().name(), "members", d.members().size()));
                        })));
                listGroups(admin, group, "deleted");
            });
        }
    }

    static Member member(String bootstrap, String name, String group, String protocol, String topic) {
        Properties p = Roundtrip.consumerProps(bootstrap, "compat-member-" + name);
        p.put("group.id", group);
        p.put("group.protocol", protocol);
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        // a classic member learns of a rebalance at its next heartbeat: 500 ms instead of the
        // client's 3 s default (the consumer protocol takes the broker's interval, and refuses
        // this setting)
        if (protocol.equals("classic")) p.put("heartbeat.interval.ms", "500");
        return new Member(name, p, topic);
    }

    static void listGroups(Admin admin, String group, String phase) throws Exception {
        List<Object> found = new ArrayList<>();
        for (ConsumerGroupListing l : admin.listConsumerGroups().all().get()) {
            if (l.groupId().equals(group)) {
                found.add(Json.obj("group_id", l.groupId(), "simple", l.isSimpleConsumerGroup(),
                        "state", l.state().map(Enum::name).orElse(null),
                        "type", l.type().map(Enum::name).orElse(null)));
            }
        }
        Main.emit(Json.obj("event", "list_groups", "phase", phase, "found", found));
    }

    static void adminView(Admin admin, String group, String phase) throws Exception {
        listGroups(admin, group, phase);
        ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members()) {
            Set<Integer> parts = new TreeSet<>();
            for (TopicPartition tp : m.assignment().topicPartitions()) parts.add(tp.partition());
            members.add(Json.obj("member_id", m.consumerId(), "client_id", m.clientId(), "host", m.host(),
                    "group_instance_id", m.groupInstanceId().orElse(null), "partitions", new ArrayList<>(parts)));
        }
        Main.emit(Json.obj("event", "group", "phase", phase, "group_id", d.groupId(), "state", d.state().name(),
                "type", d.type() == null ? null : d.type().name(), "simple", d.isSimpleConsumerGroup(),
                "assignor", d.partitionAssignor(), "coordinator", d.coordinator() == null ? null : d.coordinator().id(),
                "members", members));
        Map<TopicPartition, OffsetAndMetadata> offs = admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
        List<Object> list = new ArrayList<>();
        for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offs.entrySet()) {
            list.add(Json.obj("topic", e.getKey().topic(), "partition", e.getKey().partition(),
                    "offset", e.getValue() == null ? null : e.getValue().offset()));
        }
        Main.emit(Json.obj("event", "group_offsets", "phase", phase, "offsets", list));
    }
}
