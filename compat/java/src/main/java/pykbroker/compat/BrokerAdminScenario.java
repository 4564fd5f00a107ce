package pykbroker.compat;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.SupportedVersionRange;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * AdminClient calls on the broker itself: describeFeatures, incrementalAlterConfigs /
 * describeConfigs on BROKER resources (per broker and the cluster default ""),
 * describeLogDirs / alterReplicaLogDirs (the broker has two log dirs), describeTopics,
 * describeProducers.
 *
 * Args: prefix (topic name prefix), node (the broker id).
 */
final class BrokerAdminScenario {
    private BrokerAdminScenario() {}

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String prefix = args.get("prefix");
        int node = Integer.parseInt(args.getOrDefault("node", "1"));
        String topic = prefix + "-t";
        try (Admin admin = Admin.create(Main.base(bootstrap, "compat-broker-admin"))) {
            Main.phase("features", () -> {
                FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
                Map<String, Object> sup = new TreeMap<>();
                for (Map.Entry<String, SupportedVersionRange> e : f.supportedFeatures().entrySet())
                    sup.put(e.getKey(), List.of((int) e.getValue().minVersion(), (int) e.getValue().maxVersion()));
                Map<String, Object> fin = new TreeMap<>();
                for (Map.Entry<String, FinalizedVersionRange> e : f.finalizedFeatures().entrySet())
                    fin.put(e.getKey(), List.of((int) e.getValue().minVersionLevel(), (int) e.getValue().maxVersionLevel()));
                Main.emit(Json.obj("event", "features", "supported", sup, "finalized", fin,
                        "epoch", f.finalizedFeaturesEpoch().orElse(-1L)));
            });

            Main.phase("broker_configs", () -> {
                ConfigResource me = new ConfigResource(ConfigResource.Type.BROKER, Integer.toString(node));
                ConfigResource all = new ConfigResource(ConfigResource.Type.BROKER, "");
                admin.incrementalAlterConfigs(Map.of(
                        me, List.of(new AlterConfigOp(new ConfigEntry("log.retention.ms", "7200000"), AlterConfigOp.OpType.SET)),
                        all, List.of(new AlterConfigOp(new ConfigEntry("log.cleaner.backoff.ms", "16000"), AlterConfigOp.OpType.SET))
                )).all().get();
                emitBrokerConfigs(admin, me, "after_set");
                Main.emit(Json.obj("event", "broker_config_error", "case", "read_only",
                        "error", Main.errorOf(() -> admin.incrementalAlterConfigs(Map.of(me, List.of(
                                new AlterConfigOp(new ConfigEntry("log.retention.hours", "5"), AlterConfigOp.OpType.SET))))
                                .all().get())));
                Main.emit(Json.obj("event", "broker_config_error", "case", "bad_value",
                        "error", Main.errorOf(() -> admin.incrementalAlterConfigs(Map.of(me, List.of(
                                new AlterConfigOp(new ConfigEntry("log.retention.ms", "soon"), AlterConfigOp.OpType.SET))))
                                .all().get())));
                admin.incrementalAlterConfigs(Map.of(
                        me, List.of(new AlterConfigOp(new ConfigEntry("log.retention.ms", null), AlterConfigOp.OpType.DELETE)),
                        all, List.of(new AlterConfigOp(new ConfigEntry("log.cleaner.backoff.ms", null), AlterConfigOp.OpType.DELETE))
                )).all().get();
                emitBrokerConfigs(admin, me, "after_delete");
            });

            Main.phase("topic", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 2, (short) 1))).all().get();
                java.util.Properties p = Main.base(bootstrap, "compat-broker-admin-producer");
                p.put("key.serializer", ByteArraySerializer.class.getName());
                p.put("value.serializer", ByteArraySerializer.class.getName());
                try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                    for (int i = 0; i < 100; i++)
                        producer.send(new ProducerRecord<>(topic, 0, null, ("v" + i).getBytes())).get();
                }
                TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                List<Object> parts = new ArrayList<>();
                for (TopicPartitionInfo pi : d.partitions())
                    parts.add(Json.obj("partition", pi.partition(), "leader", pi.leader().id(), "isr", pi.isr().size()));
                Main.emit(Json.obj("event", "described_topic", "topic", d.name(), "internal", d.isInternal(),
                        "topic_id", d.topicId().toString(), "partitions", parts));
            });

            Main.phase("producers", () -> {
                TopicPartition tp = new TopicPartition(topic, 0);
                Collection<ProducerState> states = admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers();
                List<Object> out = new ArrayList<>();
                for (ProducerState s : states)
                    out.add(Json.obj("producer_id", s.producerId(), "epoch", s.producerEpoch(),
                            "last_sequence", s.lastSequence(), "txn_start", s.currentTransactionStartOffset().orElse(-1L)));
                Main.emit(Json.obj("event", "producers", "states", out));
            });

            Main.phase("log_dirs", () -> {
                Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(node)).allDescriptions().get().get(node);
                String current = null, other = null;
                for (Map.Entry<String, LogDirDescription> e : dirs.entrySet()) {
                    if (e.getValue().replicaInfos().containsKey(new TopicPartition(topic, 0))) current = e.getKey();
                }
                for (String d : dirs.keySet()) if (!d.equals(current)) other = d;
                final String dest = other;
                emitDirs(dirs, topic, current, "before");
                TopicPartitionReplica r = new TopicPartitionReplica(topic, 0, node);
                admin.alterReplicaLogDirs(Map.of(r, dest)).all().get();
                Main.emit(Json.obj("event", "alter_error", "case", "unknown_dir", "error", Main.errorOf(() ->
                        admin.alterReplicaLogDirs(Map.of(new TopicPartitionReplica(topic, 1, node), dest + "-missing")).all().get())));
                long deadline = System.currentTimeMillis() + 60_000;
                while (System.currentTimeMillis() < deadline) {
                    var info = admin.describeReplicaLogDirs(List.of(r)).all().get().get(r);
                    if (dest.equals(info.getCurrentReplicaLogDir()) && info.getFutureReplicaLogDir() == null) break;
                    Thread.sleep(100);
                }
                emitDirs(admin.describeLogDirs(List.of(node)).allDescriptions().get().get(node), topic, current, "after");
            });
        }
    }

    private static void emitBrokerConfigs(Admin admin, ConfigResource r, String when) throws Exception {
        Config c = admin.describeConfigs(List.of(r)).all().get().get(r);
        Map<String, Object> out = new TreeMap<>();
        for (String k : List.of("log.retention.ms", "log.retention.hours", "log.cleaner.backoff.ms", "log.dirs")) {
            ConfigEntry e = c.get(k);
            out.put(k, Json.obj("value", e.value(), "source", e.source().name(), "read_only", e.isReadOnly()));
        }
        Main.emit(Json.obj("event", "broker_configs", "when", when, "configs", out));
    }

    private static void emitDirs(Map<String, LogDirDescription> dirs, String topic, String current, String when) {
        List<Object> out = new ArrayList<>();
        for (Map.Entry<String, LogDirDescription> e : new TreeMap<>(dirs).entrySet()) {
            Map<String, Object> reps = new TreeMap<>();
            for (Map.Entry<TopicPartition, ReplicaInfo> ri : e.getValue().replicaInfos().entrySet()) {
                if (!ri.getKey().topic().equals(topic)) continue;
                reps.put(Integer.toString(ri.getKey().partition()), Json.obj("size", ri.getValue().size(),
                        "lag", ri.getValue().offsetLag(), "future", ri.getValue().isFuture()));
            }
            out.add(Json.obj("role", e.getKey().equals(current) ? "current" : "other",
                    "error", e.getValue().error() == null ? null : e.getValue().error().getClass().getSimpleName(),
                    "total_positive", e.getValue().totalBytes().orElse(-1L) > 0,
                    "usable_positive", e.getValue().usableBytes().orElse(-1L) > 0,
                    "replicas", reps));
        }
        Main.emit(Json.obj("event", "log_dirs", "when", when, "dirs", out));
    }
}
