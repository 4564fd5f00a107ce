// Java kafka-clients 4.4 and delegation tokens over SASL_PLAINTEXT: the Admin's
// createDelegationToken / describeDelegationToken / renewDelegationToken / expireDelegationToken,
// then producers and consumers logging in with the token (ScramLoginModule, tokenauth=true).
// Run by tests/security/test_delegation_tokens.py with the cached Kafka 4.4 jars; one mode per run:
//   lifecycle <bootstrap>                          the Admin calls, their refusals, a token producer/consumer
//   produce <bootstrap> <id> <hmac> <mech> <topic> <value>
//   consume <bootstrap> <id> <hmac> <mech> <topic>
import java.util.*;
import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.security.token.delegation.TokenInformation;

public class DelegationTokens {
    static final String PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule";
    static final String SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule";

    static Properties plain(String bootstrap, String user) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", "PLAIN");
        p.put("sasl.jaas.config", PLAIN + " required username=\"" + user + "\" password=\"" + user + "-secret\";");
        p.put("default.api.timeout.ms", "20000");
        p.put("request.timeout.ms", "10000");
        return p;
    }
    static Properties token(String bootstrap, String id, String hmac, String mech) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("security.protocol", "SASL_PLAINTEXT");
        p.put("sasl.mechanism", mech);
        p.put("sasl.jaas.config", SCRAM + " required username=\"" + id + "\" password=\"" + hmac + "\" tokenauth=\"true\";");
        return p;
    }
    static String cause(Exception e) {
        Throwable t = e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
        return t.getClass().getSimpleName();
    }
    static void produce(Properties p, String topic, String value) {
        p.put("key.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.StringSerializer");
        p.put("max.block.ms", "10000");
        try (Producer<String, String> pr = new KafkaProducer<>(p)) {
            System.out.println("sent " + pr.send(new ProducerRecord<>(topic, "k", value)).get());
        } catch (Exception e) { System.out.println("produce failed: " + cause(e)); }
    }
    static void consume(Properties p, String topic) {
        p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
        p.put("group.id", "token-group");
        try (Consumer<String, String> c = new KafkaConsumer<>(p)) {
            TopicPartition tp = new TopicPartition(topic, 0);
            c.assign(List.of(tp)); c.seekToBeginning(List.of(tp));
            long end = System.currentTimeMillis() + 20000;
            while (System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : c.poll(java.time.Duration.ofMillis(500))) {
                    System.out.println("got " + r.value()); end = 0; break;
                }
            }
            c.commitSync();
            System.out.println("committed " + c.committed(Set.of(tp)).get(tp).offset());
        } catch (Exception e) { System.out.println("consume failed: " + cause(e)); }
    }
    static String show(TokenInformation t) {
        return "owner=" + t.owner() + " requester=" + t.tokenRequester() + " renewers=" + t.renewers()
            + " expiry-issue=" + (t.expiryTimestamp() - t.issueTimestamp()) + " max-issue=" + (t.maxTimestamp() - t.issueTimestamp());
    }

    public static void main(String[] a) throws Exception {
        String mode = a[0], bootstrap = a[1];
        if (mode.equals("produce")) { produce(token(bootstrap, a[2], a[3], a[4]), a[5], a[6]); return; }
        if (mode.equals("consume")) { consume(token(bootstrap, a[2], a[3], a[4]), a[5]); return; }
        DelegationToken tok;
        try (Admin alice = Admin.create(plain(bootstrap, "alice"))) {
            tok = alice.createDelegationToken(new CreateDelegationTokenOptions()
                .renewers(List.of(new KafkaPrincipal("User", "bob")))).delegationToken().get();
            System.out.println("created " + show(tok.tokenInfo()) + " hmac-bytes=" + tok.hmac().length);
            for (DelegationToken t : alice.describeDelegationToken().delegationTokens().get())
                System.out.println("described " + show(t.tokenInfo()) + " same-hmac=" + t.hmacAsBase64String().equals(tok.hmacAsBase64String()));
            // KIP-373: a token for another owner (no authorizer: allowed)
            DelegationToken forBob = alice.createDelegationToken(new CreateDelegationTokenOptions()
                .owner(new KafkaPrincipal("User", "bob"))).delegationToken().get();
            System.out.println("created for bob " + show(forBob.tokenInfo()));
            System.out.println("described owner bob " + alice.describeDelegationToken(new DescribeDelegationTokenOptions()
                .owners(List.of(new KafkaPrincipal("User", "bob")))).delegationTokens().get().size());
        }
        try (Admin bob = Admin.create(plain(bootstrap, "bob"))) {
            long expiry = bob.renewDelegationToken(tok.hmac(), new RenewDelegationTokenOptions().renewTimePeriodMs(3600000))
                .expiryTimestamp().get();
            System.out.println("renewed by bob expiry-issue=" + (expiry - tok.tokenInfo().issueTimestamp()));
            try {
                bob.renewDelegationToken("not-a-token-hmac".getBytes()).expiryTimestamp().get();
            } catch (Exception e) { System.out.println("renew unknown: " + cause(e)); }
        }
        try (Admin carol = Admin.create(plain(bootstrap, "carol"))) {
            try {
                carol.renewDelegationToken(tok.hmac()).expiryTimestamp().get();
                System.out.println("CAROL RENEWED");
            } catch (Exception e) { System.out.println("renew by carol: " + cause(e)); }
            try {
                carol.expireDelegationToken(tok.hmac()).expiryTimestamp().get();
                System.out.println("CAROL EXPIRED");
            } catch (Exception e) { System.out.println("expire by carol: " + cause(e)); }
        }
        String id = tok.tokenInfo().tokenId(), hmac = tok.hmacAsBase64String();
        produce(token(bootstrap, id, hmac, "SCRAM-SHA-256"), "dt-topic", "token-value");
        consume(token(bootstrap, id, hmac, "SCRAM-SHA-512"), "dt-topic");
        try (Admin byToken = Admin.create(token(bootstrap, id, hmac, "SCRAM-SHA-512"))) {
            try {
                byToken.createDelegationToken().delegationToken().get();
                System.out.println("TOKEN CREATED A TOKEN");
            } catch (Exception e) { System.out.println("create with a token: " + cause(e)); }
        }
        try (Admin alice = Admin.create(plain(bootstrap, "alice"))) {
            long at = alice.expireDelegationToken(tok.hmac(), new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1))
                .expiryTimestamp().get();
            System.out.println("expired now " + (Math.abs(at - System.currentTimeMillis()) < 60000));
            System.out.println("described after expiry " + alice.describeDelegationToken().delegationTokens().get().stream()
                .filter(t -> t.tokenInfo().tokenId().equals(id)).count());
        }
        produce(token(bootstrap, id, hmac, "SCRAM-SHA-256"), "dt-topic", "after-expiry");
    }
}
