package pykbroker.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * A GROUP config taking effect (kafka-clients 4.x): records are produced before any share consumer
 * exists; the Admin sets share.auto.offset.reset=earliest on the share group (IncrementalAlterConfigs
 * on a GROUP resource) and describes it back; then a KafkaShareConsumer of that group must receive
 * the records produced before it joined (with Kafka's default, latest, it would get none of them).
 *
 * Args: topic, group, count (5).
 */
final class ShareConfigScenario {
    private ShareConfigScenario() {}

    static void run(String bootstrap, Map<String, String> args) throws Exception {
        String topic = args.getOrDefault("topic", "java-share-config");
        String group = args.getOrDefault("group", "java-share-config");
        int count = Integer.parseInt(args.getOrDefault("count", "5"));
        Properties pp = Main.base(bootstrap, "share-config-producer");
        pp.put("key.serializer", StringSerializer.class.getName());
        pp.put("value.serializer", StringSerializer.class.getName());
        // by name: kafka-clients 3.9 (which the scenarios also build against) has no GROUP type
        ConfigResource res = new ConfigResource(ConfigResource.Type.valueOf("GROUP"), group);
        try (Admin admin = Admin.create(Main.base(bootstrap, "share-config-admin"));
             KafkaProducer<String, String> producer = new KafkaProducer<>(pp)) {
            Main.phase("setup", () -> {
                admin.createTopics(List.of(new NewTopic(topic, 1, Main.replicationFactor(args)))).all().get();
                for (int i = 0; i < count; i++) producer.send(new ProducerRecord<>(topic, 0, null, "early-" + i)).get();
            });
            Main.phase("alter_config", () -> {
                admin.incrementalAlterConfigs(Map.of(res, List.of(new AlterConfigOp(
                        new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET)))).all().get();
                Config c = admin.describeConfigs(List.of(res)).all().get().get(res);
                ConfigEntry e = c.get("share.auto.offset.reset");
                ConfigEntry lock = c.get("share.record.lock.duration.ms");
                Main.emit(Json.obj("event", "described", "value", e.value(), "source", e.source().name(),
                        "lock_value", lock.value(), "lock_source", lock.source().name()));
            });
            Main.phase("consume", () -> {
                Properties p = ShareScenario.consumerProps(bootstrap, group, "share-config-consumer", false);
                List<String> values = new ArrayList<>();
                try (KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p)) {
                    c.subscribe(List.of(topic));
                    long deadline = System.currentTimeMillis() + 90_000;
                    while (values.size() < count && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(300))) values.add(r.value());
                    }
                }
                Main.emit(Json.obj("event", "consumed", "values", values));
            });
        }
    }
}
