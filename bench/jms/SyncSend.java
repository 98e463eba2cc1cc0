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
 * <p>Arguments: URL TOPIC WARMUP COUNT. Prints one line: {@code sent=COUNT seconds=S}.
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
            long start = System.nanoTime();
            for (int i = 0; i < count; i++) {
                send(session, producer, body);
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            System.out.printf("sent=%d seconds=%.6f%n", count, seconds);
        }
    }

    private static void send(Session session, MessageProducer producer, byte[] body) throws Exception {
        BytesMessage message = session.createBytesMessage();
        message.writeBytes(body);
        producer.send(message);
    }
}
