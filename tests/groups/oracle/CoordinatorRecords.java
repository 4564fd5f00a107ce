// Decodes __consumer_offsets records with Apache Kafka's own group-coordinator serde (the oracle
// for pykbroker's record layout). stdin: one record per line, "<hex key> <hex value or ->";
// stdout: one line per record, "<record type> <key> <value or null>" (the generated toString()),
// or "ERROR <message>" when Kafka cannot read it.
import java.nio.ByteBuffer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.HexFormat;
import org.apache.kafka.coordinator.common.runtime.CoordinatorRecord;
import org.apache.kafka.coordinator.group.GroupCoordinatorRecordSerde;

public class CoordinatorRecords {
    public static void main(String[] args) throws Exception {
        GroupCoordinatorRecordSerde serde = new GroupCoordinatorRecordSerde();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.trim().split(" ");
            try {
                ByteBuffer key = ByteBuffer.wrap(HexFormat.of().parseHex(parts[0]));
                ByteBuffer value = parts[1].equals("-") ? null : ByteBuffer.wrap(HexFormat.of().parseHex(parts[1]));
                CoordinatorRecord r = serde.deserialize(key, value);
                System.out.println(r.key().apiKey() + " " + r.key() + " "
                    + (r.value() == null ? "null" : r.value().message().toString()));
            } catch (Exception e) {
                System.out.println("ERROR " + e);
            }
        }
    }
}
