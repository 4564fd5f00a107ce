package pykbroker.compat;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.CreateTopicsOptions;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/**
 * AdminClient topic and config management: describe cluster, create topics (configs, validate only,
 * errors), list and describe topics, create partitions, describe topic and broker configs, delete topics.
 *
 * Args: prefix (topic name prefix). Topics: prefix-a (3 partitions, retention.ms=123456789,
 * cleanup.policy=compact), prefix-b (broker default partition count and replication factor).
 */
final class AdminScenario {
    private AdminScenario() {}

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String prefix = args.get("prefix");
        String a = prefix + "-a", b = prefix + "-b", v = prefix + "-validate";
        try (Admin admin = Admin.create(Main.base(bootstrap, "compat-admin"))) {
            String[] nodeId = {null};
            Main.phase("describe_cluster", () -> {
                DescribeClusterResult r = admin.describeCluster();
                List<Object> nodes = new ArrayList<>();
                for (Node n : r.nodes().get()) {
                    nodes.add(Json.obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack()));
                    nodeId[0] = Integer.toString(n.id());
                }
                Node ctl = r.controller().get();
                Main.emit(Json.obj("event", "cluster", "cluster_id", r.clusterId().get(), "nodes", nodes,
                        "controller", ctl == null ? null : ctl.id()));
            });

            Main.phase("create_topics", () -> {
                NewTopic ta = new NewTopic(a, 3, (short) 1).configs(Map.of("retention.ms", "123456789", "cleanup.policy", "compact"));
                NewTopic tb = new NewTopic(b, Optional.empty(), Optional.empty());
                CreateTopicsResult r = admin.createTopics(List.of(ta, tb));
                r.all().get();
                for (String t : List.of(a, b)) {
                    Config cfg = r.config(t).get();
                    ConfigEntry ret = cfg.get("retention.ms");
                    Main.emit(Json.obj("event", "created", "topic", t, "partitions", r.numPartitions(t).get(),
                            "replication_factor", r.replicationFactor(t).get(),
                            "topic_id", r.topicId(t).get().toString(),
                            "retention_ms", ret == null ? null : ret.value(),
                            "retention_ms_source", ret == null ? null : ret.source().name()));
                }
            });

            Main.phase("create_errors", () -> {
                Main.emit(Json.obj("event", "create_error", "case", "exists",
                        "error", Main.errorOf(() -> admin.createTopics(List.of(new NewTopic(a, 1, (short) 1))).all().get())));
                Main.emit(Json.obj("event", "create_error", "case", "replication_factor_3",
                        "error", Main.errorOf(() -> admin.createTopics(List.of(new NewTopic(prefix + "-rf3", 1, (short) 3))).all().get())));
                Main.emit(Json.obj("event", "create_error", "case", "bad_config",
                        "error", Main.errorOf(() -> admin.createTopics(List.of(new NewTopic(prefix + "-badcfg", 1, (short) 1)
                                .configs(Map.of("cleanup.policy", "bogus")))).all().get())));
                Main.emit(Json.obj("event", "create_error", "case", "unknown_config",
                        "error", Main.errorOf(() -> admin.createTopics(List.of(new NewTopic(prefix + "-unkcfg", 1, (short) 1)
                                .configs(Map.of("no.such.config", "1")))).all().get())));
                Main.emit(Json.obj("event", "create_error", "case", "bad_name",
                        "error", Main.errorOf(() -> admin.createTopics(List.of(new NewTopic("bad/name", 1, (short) 1))).all().get())));
                Main.emit(Json.obj("event", "create_error", "case", "validate_only",
                        "error", Main.errorOf(() -> admin.createTopics(List.of(new NewTopic(v, 2, (short) 1)),
                                new CreateTopicsOptions().validateOnly(true)).all().get())));
            });

            Main.phase("list_topics", () -> {
                Set<String> names = new TreeSet<>(admin.listTopics().names().get());
                Main.emit(Json.obj("event", "topics", "phase", "after_create", "names", Json.list(names)));
            });

            Main.phase("describe_topics", () -> describe(admin, List.of(a, b), "after_create"));
            Main.phase("describe_unknown", () -> Main.emit(Json.obj("event", "describe_error", "case", "unknown",
                    "error", Main.errorOf(() -> admin.describeTopics(List.of(prefix + "-nope")).allTopicNames().get()))));

            Main.phase("create_partitions", () -> {
                admin.createPartitions(Map.of(a, NewPartitions.increaseTo(5))).all().get();
                // On a cluster the describe may reach a broker whose metadata has not caught up
                // yet (as with Apache Kafka, whose tests wait for partition metadata too).
                // The description reported is the one that ended the wait: the next describe may
                // reach another broker, still behind.
                long deadline = System.currentTimeMillis() + 30_000;
                Map<String, TopicDescription> seen = admin.describeTopics(List.of(a)).allTopicNames().get();
                while (seen.get(a).partitions().size() < 5 && System.currentTimeMillis() < deadline) {
                    Thread.sleep(100);
                    seen = admin.describeTopics(List.of(a)).allTopicNames().get();
                }
                emitTopics(seen, List.of(a), "after_create_partitions");
                Main.emit(Json.obj("event", "create_partitions_error", "case", "decrease",
                        "error", Main.errorOf(() -> admin.createPartitions(Map.of(a, NewPartitions.increaseTo(2))).all().get())));
                Main.emit(Json.obj("event", "create_partitions_error", "case", "same",
                        "error", Main.errorOf(() -> admin.createPartitions(Map.of(a, NewPartitions.increaseTo(5))).all().get())));
                Main.emit(Json.obj("event", "create_partitions_error", "case", "unknown",
                        "error", Main.errorOf(() -> admin.createPartitions(Map.of(prefix + "-nope", NewPartitions.increaseTo(5))).all().get())));
            });

            Main.phase("describe_configs_topic", () -> {
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, a);
                emitConfig(res, admin.describeConfigs(List.of(res)).all().get().get(res));
            });
            Main.phase("describe_configs_broker", () -> {
                Main.check(nodeId[0] != null, "broker id known from describe_cluster");
                ConfigResource res = new ConfigResource(ConfigResource.Type.BROKER, nodeId[0]);
                emitConfig(res, admin.describeConfigs(List.of(res)).all().get().get(res));
            });
            Main.phase("describe_configs_unknown_topic", () -> {
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, prefix + "-nope");
                Main.emit(Json.obj("event", "describe_configs_error", "case", "unknown_topic",
                        "error", Main.errorOf(() -> admin.describeConfigs(List.of(res)).all().get())));
            });

            Main.phase("delete_topics", () -> {
                admin.deleteTopics(List.of(b)).all().get();
                Main.emit(Json.obj("event", "delete_error", "case", "unknown",
                        "error", Main.errorOf(() -> admin.deleteTopics(List.of(prefix + "-nope")).all().get())));
                // Deletion is asynchronous in Kafka: wait until the topic is gone from listings.
                long deadline = System.currentTimeMillis() + 15_000;
                Set<String> names;
                do {
                    names = new TreeSet<>(admin.listTopics().names().get());
                    if (!names.contains(b)) break;
                    Thread.sleep(100);
                } while (System.currentTimeMillis() < deadline);
                Main.emit(Json.obj("event", "topics", "phase", "after_delete", "names", Json.list(names)));
                Main.emit(Json.obj("event", "describe_error", "case", "deleted",
                        "error", Main.errorOf(() -> admin.describeTopics(List.of(b)).allTopicNames().get())));
            });
        }
    }

    static void describe(Admin admin, Collection<String> topics, String phase) throws Exception {
        emitTopics(admin.describeTopics(topics).allTopicNames().get(), topics, phase);
    }

    static void emitTopics(Map<String, TopicDescription> d, Collection<String> topics, String phase) {
        for (String t : topics) {
            TopicDescription td = d.get(t);
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo p : td.partitions()) {
                List<Object> replicas = new ArrayList<>(), isr = new ArrayList<>();
                for (Node n : p.replicas()) replicas.add(n.id());
                for (Node n : p.isr()) isr.add(n.id());
                parts.add(Json.obj("partition", p.partition(), "leader", p.leader() == null ? null : p.leader().id(),
                        "replicas", replicas, "isr", isr));
            }
            Main.emit(Json.obj("event", "topic", "phase", phase, "name", td.name(), "internal", td.isInternal(),
                    "topic_id", td.topicId() == null ? null : td.topicId().toString(), "partitions", parts));
        }
    }

    static void emitConfig(ConfigResource res, Config cfg) {
        List<Object> entries = new ArrayList<>();
        for (ConfigEntry e : cfg.entries()) {
            entries.add(Json.obj("name", e.name(), "value", e.value(), "source", e.source().name(),
                    "default", e.isDefault(), "read_only", e.isReadOnly(), "sensitive", e.isSensitive(),
                    "type", e.type().name(), "synonyms", e.synonyms().size()));
        }
        Main.emit(Json.obj("event", "config", "type", res.type().name(), "name", res.name(), "entries", entries));
    }
}
