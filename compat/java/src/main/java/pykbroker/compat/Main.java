package pykbroker.compat;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.CompletionException;


/**
 * Entry point: {@code Main <scenario> <bootstrap> [key=value ...]}, or
 * {@code Main batch <bootstrap> [timeout_s=N] [parallel=N]} with one scenario per stdin line,
 * {@code <run id> TAB <scenario> [TAB key=value ...]}.
 *
 * Every line on stdout is one JSON object with an "event" field; client logs go to stderr.
 * A scenario is a sequence of phases: a phase that throws is reported as
 * {"event":"phase_error","phase":...,"error":<exception class>,"message":...} and the scenario
 * goes on with the next phase; the exit code is 1 if any phase failed, 2 on a fatal error or the
 * watchdog timeout ({@code timeout_s=}, default 120).
 *
 * The batch mode saves a JVM start (and the class loading of kafka-clients) per scenario: its
 * scenarios run in one JVM, {@code parallel} at a time (default: all at once; they must use
 * topics and groups of their own), and every event a scenario emits carries {"run": <its id>},
 * from whichever thread (its clients' callback threads and its members' threads inherit the tag).
 * Each run ends with its own {"event":"done","failed":...} or {"event":"fatal",...} (then no
 * done), as a single scenario's JVM would; the JVM exits 1 if any run failed, 2 on the watchdog.
 */
public final class Main {
    static volatile boolean failed = false;

    /** One scenario of a batch: its id (the "run" of its events) and whether a phase of it failed. */
    static final class Run {
        final String id;
        volatile boolean failed = false;

        Run(String id) {
            this.id = id;
        }
    }

    /** The run the current thread works for; threads a scenario starts inherit it. Null outside a batch. */
    static final InheritableThreadLocal<Run> RUN = new InheritableThreadLocal<>();

    interface Phase { void run() throws Exception; }

    public static void main(String[] argv) throws Exception {
        if (argv.length < 2) {
            System.err.println("usage: Main <roundtrip|admin|offsets|groups|faults|txn|produce_load|consume_group|batch> <bootstrap> [key=value ...]");
            System.exit(64);
        }
        String scenario = argv[0];
        String bootstrap = argv[1];
        Map<String, String> args = keyValues(argv, 2);
        long timeoutS = Long.parseLong(args.getOrDefault("timeout_s", "120"));
        if (scenario.equals("batch")) {
            batch(bootstrap, args, timeoutS);
            return;
        }
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(timeoutS * 1000);
            } catch (InterruptedException e) {
                return;
            }
            emit(Json.obj("event", "fatal", "error", "timeout", "message", "scenario still running after " + timeoutS + " s"));
            Runtime.getRuntime().halt(2);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        emit(Json.obj("event", "start", "scenario", scenario, "client_version", clientVersion(),
                "java_version", System.getProperty("java.version")));
        try {
            dispatch(scenario, bootstrap, args);
        } catch (Throwable t) {
            Throwable c = unwrap(t);
            emit(Json.obj("event", "fatal", "error", c.getClass().getSimpleName(), "message", String.valueOf(c.getMessage())));
            c.printStackTrace();
            System.out.flush();
            Runtime.getRuntime().halt(2);
        }
        emit(Json.obj("event", "done", "failed", failed));
        System.out.flush();
        // halt: a stuck client thread must not keep the JVM alive after the scenario finished.
        Runtime.getRuntime().halt(failed ? 1 : 0);
    }

    static Map<String, String> keyValues(String[] a, int from) {
        Map<String, String> args = new HashMap<>();
        for (int i = from; i < a.length; i++) {
            int eq = a[i].indexOf('=');
            if (eq < 0) throw new IllegalArgumentException("argument is not key=value: " + a[i]);
            args.put(a[i].substring(0, eq), a[i].substring(eq + 1));
        }
        return args;
    }

    static void dispatch(String scenario, String bootstrap, Map<String, String> args) throws Exception {
        switch (scenario) {
            case "roundtrip": Roundtrip.run(bootstrap, args); break;
            case "admin": AdminScenario.run(bootstrap, args); break;
            case "broker_admin": BrokerAdminScenario.run(bootstrap, args); break;
            case "offsets": OffsetsScenario.run(bootstrap, args); break;
            case "groups": GroupsScenario.run(bootstrap, args); break;
            case "faults": FaultsScenario.run(bootstrap, args); break;
            case "txn": TxnScenario.run(bootstrap, args); break;
            case "config_resources": ConfigResourcesScenario.run(bootstrap, args); break;
            case "share": ShareScenario.run(bootstrap, args); break;
            case "share_config": ShareConfigScenario.run(bootstrap, args); break;
            case "produce_load": Load.produce(bootstrap, args); break;
            case "consume_group": Load.consumeGroup(bootstrap, args); break;
            default: throw new IllegalArgumentException("unknown scenario " + scenario);
        }
    }

    /** The batch mode (see the class comment): the runs from stdin, {@code parallel} at a time. */
    static void batch(String bootstrap, Map<String, String> batchArgs, long timeoutS) throws Exception {
        List<String[]> specs = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (!line.isBlank()) specs.add(line.split("\t"));
        }
        int parallel = Integer.parseInt(batchArgs.getOrDefault("parallel", Integer.toString(Math.max(1, specs.size()))));
        Set<String> unfinished = ConcurrentHashMap.newKeySet();
        for (String[] spec : specs) unfinished.add(spec[0]);
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(timeoutS * 1000);
            } catch (InterruptedException e) {
                return;
            }
            for (String id : unfinished) {
                emit(Json.obj("event", "fatal", "run", id, "error", "timeout",
                        "message", "batch still running after " + timeoutS + " s"));
            }
            Runtime.getRuntime().halt(2);
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();

        String version = clientVersion();
        ExecutorService pool = Executors.newFixedThreadPool(parallel, r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        List<Run> runs = new ArrayList<>();
        for (String[] spec : specs) {
            Run run = new Run(spec[0]);
            runs.add(run);
            pool.submit(() -> {
                RUN.set(run);
                Thread.currentThread().setName("run-" + run.id);
                emit(Json.obj("event", "start", "scenario", spec[1], "client_version", version,
                        "java_version", System.getProperty("java.version")));
                try {
                    dispatch(spec[1], bootstrap, keyValues(spec, 2));
                    emit(Json.obj("event", "done", "failed", run.failed));
                } catch (Throwable t) {
                    Throwable c = unwrap(t);
                    run.failed = true;
                    emit(Json.obj("event", "fatal", "error", c.getClass().getSimpleName(), "message", String.valueOf(c.getMessage())));
                    c.printStackTrace();
                } finally {
                    unfinished.remove(run.id);
                    RUN.remove();
                }
            });
        }
        pool.shutdown();
        while (!pool.awaitTermination(1, TimeUnit.SECONDS)) { /* the watchdog bounds the wait */ }
        boolean any = false;
        for (Run r : runs) any |= r.failed;
        System.out.flush();
        Runtime.getRuntime().halt(any ? 1 : 0);
    }

    /** kafka-clients' own version, from the properties file its jar carries (the parser class moved in 4.x). */
    static String clientVersion() {
        Properties p = new Properties();
        try (java.io.InputStream in = Main.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) p.load(in);
        } catch (java.io.IOException e) {
            return "unknown";
        }
        return p.getProperty("version", "unknown");
    }

    static synchronized void emit(Map<String, Object> event) {
        Run run = RUN.get();
        if (run != null) event.putIfAbsent("run", run.id);
        System.out.println(Json.write(event));
        System.out.flush();
    }

    /** Run one phase; on an exception, report it and carry on. Returns true if the phase succeeded. */
    static boolean phase(String name, Phase p) {
        long t0 = System.nanoTime();
        try {
            p.run();
            emit(Json.obj("event", "phase_ok", "phase", name, "ms", (System.nanoTime() - t0) / 1_000_000));
            return true;
        } catch (Throwable t) {
            Throwable c = unwrap(t);
            failed = true;
            Run run = RUN.get();
            if (run != null) run.failed = true;
            emit(Json.obj("event", "phase_error", "phase", name, "error", c.getClass().getSimpleName(),
                    "message", String.valueOf(c.getMessage())));
            c.printStackTrace();
            return false;
        }
    }

    /** The class name of the exception a call raised (null if none): used for expected errors. */
    static String errorOf(Phase p) {
        try {
            p.run();
            return null;
        } catch (Throwable t) {
            return unwrap(t).getClass().getSimpleName();
        }
    }

    static Throwable unwrap(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException) && t.getCause() != null) t = t.getCause();
        return t;
    }

    /** Properties every client gets: short timeouts so a broker bug fails fast instead of hanging. */
    static Properties base(String bootstrap, String clientId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("client.id", clientId);
        p.put("request.timeout.ms", "15000");
        p.put("default.api.timeout.ms", "20000");
        return p;
    }

    /** The replication factor of the topics a scenario creates: {@code replication_factor=} (default
     *  1, a single broker; 3 on a 3-broker cluster, whose min.insync.replicas=2 refuses acks=all
     *  writes to a topic with fewer replicas, as Kafka does). */
    static short replicationFactor(Map<String, String> args) {
        return Short.parseShort(args.getOrDefault("replication_factor", "1"));
    }

    static void check(boolean cond, String what) {
        if (!cond) throw new IllegalStateException("check failed: " + what);
    }
}
