import java.lang.reflect.Method;
import java.util.Collection;
import java.util.TreeMap;

import org.apache.kafka.common.message.ApiMessageType;
import org.apache.kafka.common.protocol.ApiKeys;

/**
 * Prints, as one JSON object {api_key: [min, max]}, the API version ranges a broker built from
 * the kafka-clients jar on the classpath advertises in ApiVersions: the APIs in scope for the
 * listener type given (BROKER for a KRaft broker, ZK_BROKER for a ZooKeeper one), from their
 * oldest version to their latest stable one (unstable last versions are off by default).
 * Used to generate pykbroker/profiles.py (tools/kafka_api_versions/README.md).
 */
public final class ApiVersionsDump {
    public static void main(String[] args) throws Exception {
        ApiMessageType.ListenerType listener = ApiMessageType.ListenerType.valueOf(args[0]);
        Collection<ApiKeys> keys;
        try {
            Method m = ApiKeys.class.getMethod("apisForListener", ApiMessageType.ListenerType.class);
            @SuppressWarnings("unchecked") Collection<ApiKeys> k = (Collection<ApiKeys>) m.invoke(null, listener);
            keys = k;
        } catch (NoSuchMethodException e) {   // 2.8: one method per listener type
            String name = listener.name().equals("ZK_BROKER") ? "zkBrokerApis" : "brokerApis";
            @SuppressWarnings("unchecked") Collection<ApiKeys> k = (Collection<ApiKeys>) ApiKeys.class.getMethod(name).invoke(null);
            keys = k;
        }
        TreeMap<Integer, String> out = new TreeMap<>();
        for (ApiKeys k : keys) {
            short latest;
            try {
                latest = (Short) ApiKeys.class.getMethod("latestVersion", boolean.class).invoke(k, false);
            } catch (NoSuchMethodException e) {   // before unstable versions existed
                latest = k.latestVersion();
            }
            if (latest < k.oldestVersion()) continue;   // only an unstable version: not advertised
            out.put((int) k.id, "[" + k.oldestVersion() + ", " + latest + "]");
        }
        StringBuilder sb = new StringBuilder("{");
        for (var e : out.entrySet()) {
            if (sb.length() > 1) sb.append(", ");
            sb.append('"').append(e.getKey()).append("\": ").append(e.getValue());
        }
        System.out.println(sb.append('}'));
    }
}
