package pykbroker.compat;

import java.util.Properties;

/** A group member polling on its own thread (Kafka's consumers are single-threaded), as the group
 *  scenarios start them: its consumer's properties, the topic it subscribes to, the flag that
 *  stops its loop and the error that ended it, if one did.  A subclass's run() is the loop. */
abstract class PollingMember implements Runnable {
    final String name;
    final Properties props;
    final String topic;
    volatile boolean stop = false;
    volatile String error = null;
    final Thread thread;

    PollingMember(String name, Properties props, String topic, String threadPrefix) {
        this.name = name;
        this.props = props;
        this.topic = topic;
        this.thread = new Thread(this, threadPrefix + name);
    }

    void stopAndJoin() throws InterruptedException {
        stop = true;
        thread.join(30_000);
    }
}
