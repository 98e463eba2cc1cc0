import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import org.apache.qpid.jms.JmsConnectionFactory;

/**
 * A JMS application that publishes persistent 1 KB messages one at a time with the Qpid JMS
 * client's defaults: a persistent message outside a transaction is sent synchronously (send()
 * returns once the broker accepted it). Used by bench/jms_sync_publish.py.
 *
 * <p>Arguments: URL TOPIC WARMUP COUNT. Prints one line: {@code sent=COUNT seconds=S p50_ms=...
 * p90_ms=... p99_ms=... max_ms=...} (each measured send's time in {@code send()}).
 */
public final class SyncSend {
    private SyncSend() {}

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String topic = args[1];
        int warmup = Integer.parseInt(args[2]);
        int count = Integer.parseInt(args[3]);
        byte[] body = new byte[1024];
        try (Connection connection = new JmsConnectionFactory(url).createConnection()) {
            Session session = connection.createSession(false, Session.AUTO_ACKNOWLEDGE);
            MessageProducer producer = session.createProducer(session.createTopic(topic));
            producer.setDeliveryMode(DeliveryMode.PERSISTENT);
            for (int i = 0; i < warmup; i++) {
                send(session, producer, body);
            }
            long[] took = new long[count];
            long start = System.nanoTime();
            for (int i = 0; i < count; i++) {
                long before = System.nanoTime();
                send(session, producer, body);
                took[i] = System.nanoTime() - before;
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            java.util.Arrays.sort(took);
            System.out.printf(
                    "sent=%d seconds=%.6f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f max_ms=%.3f%n",
                    count, seconds, ms(took, 0.50), ms(took, 0.90), ms(took, 0.99), took[count - 1] / 1e6);
        }
    }

    private static double ms(long[] sorted, double q) {
        return sorted[Math.min(sorted.length - 1, (int) (q * sorted.length))] / 1e6;
    }

    private static void send(Session session, MessageProducer producer, byte[] body) throws Exception {
        BytesMessage message = session.createBytesMessage();
        message.writeBytes(body);
        producer.send(message);
    }
}
