package pykbroker.streams;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.*;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.common.GroupType;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.*;
import org.apache.kafka.streams.kstream.*;

/**
 * The streams-group (KIP-1071) application of tests/java/test_streams_groups.py.  Two modes, JSON lines on stdout.
 *   run BOOTSTRAP APP_ID INPUT OUTPUT STATE_DIR : word count (groupBy = repartition, count = state store)
 *       with group.protocol=streams; prints {"event":"state",...} on every state change; closes when
 *       stdin reaches EOF (the test closes it), then prints {"event":"closed"}.
 *   admin BOOTSTRAP APP_ID : describeStreamsGroups and listGroups(type streams), then exits.
 */
public final class StreamsApp {
    static String q(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static synchronized void out(String json) {
        System.out.println(json);
        System.out.flush();
    }

    public static void main(String[] a) throws Exception {
        if (a[0].equals("admin")) {
            admin(a[1], a[2]);
            return;
        }
        String bootstrap = a[1], app = a[2], input = a[3], output = a[4], stateDir = a[5];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, app);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");

        StreamsBuilder b = new StreamsBuilder();
        KStream<String, String> lines = b.stream(input);
        lines.flatMapValues(v -> Arrays.asList(v.toLowerCase(Locale.ROOT).split("\\W+")))
             .filter((k, w) -> !w.isEmpty())
             .groupBy((k, w) -> w)
             .count(Materialized.as("counts"))
             .toStream()
             .to(output, Produced.with(Serdes.String(), Serdes.Long()));
        KafkaStreams ks = new KafkaStreams(b.build(), p);
        ks.setStateListener((n, o) -> out("{\"event\":\"state\",\"state\":" + q(n.name()) + "}"));
        ks.setUncaughtExceptionHandler(e -> {
            out("{\"event\":\"error\",\"message\":" + q(String.valueOf(e)) + "}");
            return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        ks.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        while (in.readLine() != null) { }
        ks.close(java.time.Duration.ofSeconds(30));
        out("{\"event\":\"closed\"}");
    }

    static void admin(String bootstrap, String app) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin admin = Admin.create(p)) {
            StreamsGroupDescription d = admin.describeStreamsGroups(List.of(app)).all().get(30, TimeUnit.SECONDS).get(app);
            StringBuilder members = new StringBuilder();
            for (StreamsGroupMemberDescription m : d.members()) {
                if (members.length() > 0) members.append(',');
                int active = 0;
                for (StreamsGroupMemberAssignment.TaskIds t : m.assignment().activeTasks()) active += t.partitions().size();
                members.append("{\"member_id\":").append(q(m.memberId())).append(",\"epoch\":").append(m.memberEpoch())
                       .append(",\"active\":").append(active).append('}');
            }
            StringBuilder subs = new StringBuilder();
            for (StreamsGroupSubtopologyDescription s : d.subtopologies()) {
                if (subs.length() > 0) subs.append(',');
                subs.append("{\"id\":").append(q(s.subtopologyId())).append(",\"sources\":").append(q(String.join(",", s.sourceTopics())))
                    .append(",\"changelogs\":").append(q(String.join(",", s.stateChangelogTopics().keySet())))
                    .append(",\"repartition_sources\":").append(q(String.join(",", s.repartitionSourceTopics().keySet()))).append('}');
            }
            out("{\"event\":\"describe\",\"group\":" + q(d.groupId()) + ",\"state\":" + q(String.valueOf(d.groupState()))
                + ",\"group_epoch\":" + d.groupEpoch() + ",\"target_epoch\":" + d.targetAssignmentEpoch()
                + ",\"topology_epoch\":" + d.topologyEpoch() + ",\"members\":[" + members + "],\"subtopologies\":[" + subs + "]}");
            Collection<GroupListing> gl = admin.listGroups(new ListGroupsOptions().withTypes(Set.of(GroupType.STREAMS)))
                                               .all().get(30, TimeUnit.SECONDS);
            StringBuilder groups = new StringBuilder();
            for (GroupListing g : gl) {
                if (groups.length() > 0) groups.append(',');
                groups.append("{\"group\":").append(q(g.groupId())).append(",\"type\":").append(q(String.valueOf(g.type().orElse(null))))
                      .append(",\"protocol\":").append(q(g.protocol())).append(",\"state\":").append(q(String.valueOf(g.groupState().orElse(null)))).append('}');
            }
            out("{\"event\":\"list\",\"groups\":[" + groups + "]}");
        }
    }
}
