// Java kafka-clients over SASL_SSL (PEM truststore, hostname verification on): a PLAIN admin creates a
// SCRAM-SHA-512 user, which produces and consumes; a wrong password fails.  Run by
// tests/security/test_java_client.py with the cached Kafka 4.4 jars (compat/kafka/oracle.py fetch).
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;

public class Scram {
    static Properties base(String bootstrap, String ca, String mech, String user, String pw, String module) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_SSL");
        p.put("ssl.truststore.type", "PEM");
        p.put("ssl.truststore.location", ca);
        p.put("sasl.mechanism", mech);
        p.put("sasl.jaas.config", module + " required username=\"" + user + "\" password=\"" + pw + "\";");
        return p;
    }
    static Properties load(String path) throws Exception {
        Properties p = new Properties();
        try (java.io.FileReader r = new java.io.FileReader(path)) { p.load(r); }
        return p;
    }
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], ca = a[1];
        Properties ap = base(bootstrap, ca, "PLAIN", "admin", "admin-secret", "org.apache.kafka.common.security.plain.PlainLoginModule");
        try (Admin admin = Admin.create(ap)) {
            admin.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion("alice",
                new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "alice-secret"))).all().get();
            System.out.println("described " + admin.describeUserScramCredentials(List.of("alice")).all().get());
        }
        // the SCRAM user's settings from the file pykbroker.Broker.java_properties_file wrote
        Properties pp = load(a[2]);
        pp.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        pp.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        try (Producer<String, String> pr = new KafkaProducer<>(pp)) {
            System.out.println("sent " + pr.send(new ProducerRecord<>("java-scram", "k", "java-value")).get());
        }
        Properties cp = load(a[2]);
        cp.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        cp.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        cp.put("group.id", "jg");
        try (Consumer<String, String> c = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition("java-scram", 0);
            c.assign(List.of(tp)); c.seekToBeginning(List.of(tp));
            long end = System.currentTimeMillis() + 20000;
            while (System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : c.poll(java.time.Duration.ofMillis(500))) {
                    System.out.println("got " + r.value()); end = 0; break;
                }
            }
        }
        Properties bad = load(a[3]);
        bad.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        bad.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        bad.put("max.block.ms", "10000");
        try (Producer<String, String> pr = new KafkaProducer<>(bad)) {
            pr.send(new ProducerRecord<>("java-scram", "k", "v")).get();
            System.out.println("WRONG PASSWORD ACCEPTED");
        } catch (Exception e) { System.out.println("wrong password: " + e); }
    }
}
