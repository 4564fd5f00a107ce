package pykbroker.compat;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DeleteConsumerGroupsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Admin.listConfigResources (KIP-1142, kafka-clients 4.1+, called by reflection so that the
 * 3.9 build compiles; ListConfigResources v1), listClientMetricsResources (v0 on 3.9) and
 * deleteConsumerGroups (DeleteGroups v3 on 4.4, v2 on 3.9) for a group with offsets only, a group
 * with a live member, an unknown group.
 *
 * Args: prefix (topic and group name prefix).
 */
final class ConfigResourcesScenario {
    private ConfigResourcesScenario() {}

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String prefix = args.get("prefix");
        String topic = prefix + "-t";
        String offsetsOnly = prefix + "-offsets", live = prefix + "-live", unknown = prefix + "-unknown";
        try (Admin admin = Admin.create(Main.base(bootstrap, "compat-config-resources"))) {
            Main.phase("setup", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 1, Main.replicationFactor(args)))).all().get();
                admin.alterConsumerGroupOffsets(offsetsOnly,
                        Map.of(new TopicPartition(topic, 0), new OffsetAndMetadata(0))).all().get();
            });

            Main.phase("list_config_resources", () -> {
                Method all = null, typed = null;
                for (Method m : Admin.class.getMethods()) {
                    if (!m.getName().equals("listConfigResources")) continue;
                    if (m.getParameterCount() == 0) all = m; else typed = m;
                }
                if (all == null) {
                    Main.emit(Json.obj("event", "config_resources", "case", "all", "available", false));
                    return;
                }
                Main.emit(Json.obj("event", "config_resources", "case", "all", "available", true,
                        "resources", listed(all.invoke(admin), topic)));
                Object options = typed.getParameterTypes()[1].getDeclaredConstructor().newInstance();
                for (ConfigResource.Type type : List.of(ConfigResource.Type.TOPIC, ConfigResource.Type.BROKER,
                        ConfigResource.Type.valueOf("GROUP"))) {   // by name: kafka-clients 3.9 has no GROUP type
                    Main.emit(Json.obj("event", "config_resources", "case", type.name(),
                            "resources", listed(typed.invoke(admin, Set.of(type), options), topic)));
                }
                final Method t = typed;
                Main.emit(Json.obj("event", "config_resources_error", "case", "unknown_type", "error",
                        Main.errorOf(() -> listed(t.invoke(admin, Set.of(ConfigResource.Type.UNKNOWN), options), topic))));
            });

            Main.phase("list_client_metrics_resources", () -> {
                @SuppressWarnings("deprecation")
                Collection<?> r = admin.listClientMetricsResources().all().get();
                Main.emit(Json.obj("event", "client_metrics_resources", "count", r.size()));
            });

            Main.phase("delete_groups", () -> {
                java.util.Properties p = Roundtrip.consumerProps(bootstrap, "compat-config-resources-member");
                p.put("group.id", live);
                p.put("enable.auto.commit", "false");
                try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
                    c.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 60_000;
                    while (c.assignment().isEmpty() && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(200));
                    Main.check(!c.assignment().isEmpty(), "the live member got its partition");
                    DeleteConsumerGroupsResult r = admin.deleteConsumerGroups(List.of(offsetsOnly, live, unknown));
                    for (Map.Entry<String, String> e : Map.of("offsets_only", offsetsOnly, "live", live, "unknown", unknown).entrySet()) {
                        final String g = e.getValue();
                        Main.emit(Json.obj("event", "delete_group", "case", e.getKey(),
                                "error", Main.errorOf(() -> r.deletedGroups().get(g).get())));
                    }
                }
            });
        }
    }

    /** [type, name] of the listed resources, this scenario's topic and every non-topic resource. */
    static List<Object> listed(Object result, String topic) throws Exception {
        @SuppressWarnings("unchecked")
        Collection<ConfigResource> rs = ((org.apache.kafka.common.KafkaFuture<Collection<ConfigResource>>)
                result.getClass().getMethod("all").invoke(result)).get();
        TreeSet<String> out = new TreeSet<>();
        for (ConfigResource r : rs) {
            if (r.type() != ConfigResource.Type.TOPIC || r.name().equals(topic)) out.add(r.type().name() + ":" + r.name());
        }
        return new ArrayList<>(out);
    }
}
