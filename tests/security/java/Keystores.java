// Java kafka-clients over mutual TLS with the stores Kafka users have: a JKS truststore of the
// server CA (ssl.truststore.type left at Kafka's default, JKS) and a PKCS12 keystore with the
// client certificate; produces one record and reads it back.  Run by
// tests/security/test_keystores.py with the cached Kafka 4.4 jars (compat/kafka/oracle.py fetch).
import java.time.Duration;
import java.util.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;

public class Keystores {
    public static void main(String[] a) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", a[0]);
        p.put("security.protocol", "SSL");
        p.put("ssl.truststore.location", a[1]);
        p.put("ssl.truststore.password", a[2]);
        p.put("ssl.keystore.type", "PKCS12");
        p.put("ssl.keystore.location", a[3]);
        p.put("ssl.keystore.password", a[4]);
        Properties pp = new Properties();
        pp.putAll(p);
        pp.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        pp.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        try (Producer<String, String> pr = new KafkaProducer<>(pp)) {
            System.out.println("sent " + pr.send(new ProducerRecord<>("java-keystores", "k", "java-jks-value")).get());
        }
        Properties cp = new Properties();
        cp.putAll(p);
        cp.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        cp.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        try (Consumer<String, String> c = new KafkaConsumer<>(cp)) {
            TopicPartition tp = new TopicPartition("java-keystores", 0);
            c.assign(List.of(tp));
            c.seekToBeginning(List.of(tp));
            long end = System.currentTimeMillis() + 20000;
            while (System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    System.out.println("got " + r.value());
                    return;
                }
            }
        }
        System.out.println("nothing read");
    }
}
