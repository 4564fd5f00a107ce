// Kafka's own quota rate and throttle time, for compat/kafka/quota/rate_oracle.py.
//
// Builds a quota sensor as Kafka 4.4's ClientQuotaManager does (a Sensor holding one plain Rate,
// MetricConfig timeWindow(window ms) samples(n) quota(upper bound)) and feeds it the events read
// from stdin, one "timeMs value check" a line (check 0: recorded without checking the quota, as
// unrecordQuotaSensor records a negative value).  For each event it prints
// "throttleMs measuredRate windowSizeMs": the throttle QuotaUtils.throttleTime gives (0 within the
// quota, -1 for an unchecked event), and the rate and window the quota check saw.
// Run with Java's source launcher:  java -cp <kafka-clients + kafka-server-common jars>
//     QuotaRate.java <samples> <windowMs> <bound> < events
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.metrics.MetricConfig;
import org.apache.kafka.common.metrics.Metrics;
import org.apache.kafka.common.metrics.Quota;
import org.apache.kafka.common.metrics.QuotaViolationException;
import org.apache.kafka.common.metrics.Sensor;
import org.apache.kafka.common.metrics.stats.Rate;
import org.apache.kafka.server.quota.QuotaUtils;

public class QuotaRate {
    public static void main(String[] args) throws Exception {
        int samples = Integer.parseInt(args[0]);
        long windowMs = Long.parseLong(args[1]);
        double bound = Double.parseDouble(args[2]);
        MetricConfig config = new MetricConfig().timeWindow(windowMs, TimeUnit.MILLISECONDS).samples(samples)
            .quota(new Quota(bound, true));
        Metrics metrics = new Metrics();
        Sensor sensor = metrics.sensor("quota", config);
        MetricName name = metrics.metricName("byte-rate", "Produce", "");
        Rate rate = new Rate();
        sensor.add(name, rate, config);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        StringBuilder out = new StringBuilder();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.trim().split(" ");
            if (f.length < 3) continue;
            long t = Long.parseLong(f[0]);
            double v = Double.parseDouble(f[1]);
            boolean check = !f[2].equals("0");
            long throttle = check ? 0 : -1;
            try {
                sensor.record(v, t, check);
            } catch (QuotaViolationException e) {
                throttle = QuotaUtils.throttleTime(e, t);
            }
            double measured = check ? rate.measure(config, t) : Double.NaN;   // what KafkaMetric.measurableValue reads
            long window = check ? rate.windowSize(config, t) : -1;
            out.append(throttle).append(' ').append(measured).append(' ').append(window).append('\n');
        }
        System.out.print(out);
        metrics.close();
    }
}
