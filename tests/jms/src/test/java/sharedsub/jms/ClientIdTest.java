package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertThrows;

import jakarta.jms.Connection;
import jakarta.jms.InvalidClientIDException;
import jakarta.jms.InvalidClientIDRuntimeException;
import jakarta.jms.JMSContext;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;

import org.junit.jupiter.api.Test;

/** One connection per ClientID (docs/wire.md §5 scenario 2). */
class ClientIdTest extends JmsTierSupport {

    @Test
    void secondConnectionWithTheSameClientIdFails() throws Exception {
        String id = clientId("dup");
        Connection first = connect(id);
        Connection second = track(factory().createConnection());
        assertThrows(InvalidClientIDException.class, () -> second.setClientID(id));

        // The ClientID set in the URI: the failure comes when the connection opens.
        assertThrows(InvalidClientIDException.class, () -> track(factory("jms.clientID=" + id).createConnection()).start());

        // The first connection is unharmed.
        String topic = newTopicName("cid");
        Session s = autoSession(first);
        MessageConsumer consumer = s.createConsumer(s.createTopic(topic));
        publish(topic, "first-still-works");
        expectTexts(consumer, "first-still-works");
    }

    @Test
    void secondContextWithTheSameClientIdFails() {
        String id = clientId("dup");
        JMSContext first = context(id, JMSContext.AUTO_ACKNOWLEDGE);
        first.start();
        JMSContext second = context(null, JMSContext.AUTO_ACKNOWLEDGE);
        assertThrows(InvalidClientIDRuntimeException.class, () -> second.setClientID(id));
    }

    @Test
    void clientIdIsFreeAgainAfterTheConnectionCloses() throws Exception {
        String id = clientId("reuse");
        Connection first = connect(id);
        first.close();
        Connection again = connect(id);
        String topic = newTopicName("cid");
        Session s = autoSession(again);
        MessageConsumer consumer = s.createConsumer(s.createTopic(topic));
        publish(topic, "reused");
        expectTexts(consumer, "reused");
    }
}
