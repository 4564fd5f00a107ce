// Java kafka-clients over SASL_PLAINTEXT with GSSAPI (the JDK's Krb5LoginModule with a keytab):
// produces binary records, reads them back and prints their hex; a client whose keytab holds a
// stale key fails to log in.  Run by tests/security/test_gssapi.py with -Djava.security.krb5.conf
// pointing at the test KDC's krb5.conf.
// args: bootstrap topic principal keytab stale-principal stale-keytab
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;

public class Gssapi {
    static Properties base(String bootstrap, String principal, String keytab) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "GSSAPI");
        p.put("sasl.kerberos.service.name", "kafka");
        p.put("sasl.jaas.config", "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true "
            + "storeKey=true keyTab=\"" + keytab + "\" principal=\"" + principal + "\";");
        return p;
    }
    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }
    public static void main(String[] a) throws Exception {
        String bootstrap = a[0], topic = a[1];
        Properties pp = base(bootstrap, a[2], a[3]);
        pp.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        pp.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        pp.put("acks", "all");
        try (Producer<byte[], byte[]> pr = new KafkaProducer<>(pp)) {
            for (int i = 0; i < 5; i++) {
                byte[] v = new byte[64 + i];
                for (int j = 0; j < v.length; j++) v[j] = (byte) (j * 7 + i);
                System.out.println("sent " + hex(v) + " " + pr.send(new ProducerRecord<>(topic, 0, null, v)).get().offset());
            }
        }
        Properties cp = base(bootstrap, a[2], a[3]);
        cp.put("key.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        cp.put("value.deserializer", "org.apache.kafka.common.serialization.ByteArrayDeserializer");
        cp.put("group.id", "java-gssapi");
        try (Consumer<byte[], byte[]> c = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp)); c.seekToBeginning(List.of(tp));
            int got = 0;
            long end = System.currentTimeMillis() + 30000;
            while (got < 5 && System.currentTimeMillis() < end) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(java.time.Duration.ofMillis(500))) {
                    System.out.println("got " + hex(r.value()) + " " + r.offset()); got++;
                }
            }
            c.commitSync();
            System.out.println("committed as group java-gssapi");
        }
        Properties bad = base(bootstrap, a[4], a[5]);
        bad.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        bad.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        bad.put("max.block.ms", "10000");
        try (Producer<byte[], byte[]> pr = new KafkaProducer<>(bad)) {
            pr.send(new ProducerRecord<>(topic, new byte[] {1})).get();
            System.out.println("STALE KEYTAB ACCEPTED");
        } catch (Exception e) {
            StringBuilder chain = new StringBuilder();
            for (Throwable t = e; t != null; t = t.getCause()) chain.append(" / ").append(t);
            System.out.println("stale keytab:" + chain);
        }
    }
}
