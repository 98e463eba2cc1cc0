package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.jms.Connection;
import jakarta.jms.JMSSecurityException;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.Topic;

import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.Test;

/**
 * SASL and TLS as a JMS application sees them, against a second, secured service the wrapper
 * starts (tests/secure_service.py: a users file with one user, an amqps listener with a throwaway
 * CA, anonymous clients refused, topics created on first use; no fan-out, so these tests only
 * publish). The wrapper passes its URLs, the user and a PKCS12 trust store holding the CA.
 *
 * <p>A send of a persistent message returns once the server accepted it, i.e. stored it: that is
 * the proof that the connection was authenticated and works.
 */
class SecurityTest extends JmsTierSupport {

    static final String SECURE_URL = required("sharedsub.secureUrl"); // amqps://localhost:PORT
    static final String SECURE_AMQP_URL = required("sharedsub.secureAmqpUrl"); // amqp://127.0.0.1:PORT
    static final String TRUST_STORE = required("sharedsub.trustStore");
    static final String USER = required("sharedsub.secureUser");
    static final String PASSWORD = required("sharedsub.securePassword");
    // The second user: may consume everywhere, publish only to topics named open-*, and may not
    // use the first user's subscriptions (tests/secure_service.py PERMISSIONS).
    static final String OTHER_USER = required("sharedsub.secureOtherUser");
    static final String OTHER_PASSWORD = required("sharedsub.secureOtherPassword");

    private static String required(String name) {
        String value = System.getProperty(name, "");
        return value.startsWith("${") ? "" : value; // an unset property arrives as its own placeholder
    }

    private static String tls() {
        return "transport.trustStoreLocation=" + TRUST_STORE + "&transport.trustStorePassword=changeit";
    }

    private Connection connectTo(String url, String options) throws Exception {
        assertTrue(!url.isEmpty() && !TRUST_STORE.isEmpty(),
                "sharedsub.secureUrl / secureAmqpUrl / trustStore are not set: run the tier through tests/jms/test_jms_tier.py");
        Connection c = track(new JmsConnectionFactory(url + "?" + options).createConnection());
        c.start();
        return c;
    }

    private void publishOne(Connection c) throws Exception {
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        MessageProducer producer = s.createProducer(s.createTopic("jms-secured-" + uid));
        producer.send(s.createTextMessage("over an authenticated connection"));
    }

    private static String credentials(String password) {
        return "jms.username=" + USER + "&jms.password=" + password;
    }

    @Test
    void scramSha256OverAmqpsWithATrustStore() throws Exception {
        Connection c = connectTo(SECURE_URL, credentials(PASSWORD) + "&amqp.saslMechanisms=SCRAM-SHA-256&" + tls());
        publishOne(c); // the client checked the server's SCRAM signature (sasl-outcome additional-data)
    }

    @Test
    void theClientPicksScramSha512ByItselfOverPlainAmqp() throws Exception {
        Connection c = connectTo(SECURE_AMQP_URL, credentials(PASSWORD));
        publishOne(c);
    }

    @Test
    void aWrongPasswordIsAJmsSecurityException() {
        JMSSecurityException e = assertThrows(JMSSecurityException.class,
                () -> connectTo(SECURE_URL, credentials("not-the-password") + "&amqp.saslMechanisms=SCRAM-SHA-256&" + tls()));
        assertNotNull(e.getMessage());
    }

    private Connection as(String user, String password, String clientId) throws Exception {
        return connectTo(SECURE_AMQP_URL, "jms.username=" + user + "&jms.password=" + password + "&jms.clientID=" + clientId);
    }

    @Test
    void aProducerOutsideThePublishGrantIsAJmsSecurityException() throws Exception {
        Connection c = as(OTHER_USER, OTHER_PASSWORD, "jms-other-" + uid);
        Session s = c.createSession(false, Session.AUTO_ACKNOWLEDGE);
        JMSSecurityException e = assertThrows(JMSSecurityException.class,
                () -> s.createProducer(s.createTopic("closed-" + uid)));
        assertTrue(e.getMessage().contains("no publish permission"), e.getMessage());
        // Inside the grant the same user publishes (the persistent send returns once stored).
        s.createProducer(s.createTopic("open-" + uid)).send(s.createTextMessage("inside the grant"));
    }

    @Test
    void anotherUserCannotUseOrUnsubscribeASharedDurableSubscription() throws Exception {
        String clientId = "jms-owned-" + uid;
        String name = "owned-" + uid;
        Connection owner = as(USER, PASSWORD, clientId);
        Session s = owner.createSession(false, Session.AUTO_ACKNOWLEDGE);
        Topic topic = s.createTopic("owned-topic-" + uid);
        s.createSharedDurableConsumer(topic, name).close(); // the subscription stays
        owner.close();

        Connection other = as(OTHER_USER, OTHER_PASSWORD, clientId);
        Session os = other.createSession(false, Session.AUTO_ACKNOWLEDGE);
        JMSSecurityException attach = assertThrows(JMSSecurityException.class,
                () -> os.createSharedDurableConsumer(topic, name));
        assertTrue(attach.getMessage().contains("belongs to another user"), attach.getMessage());
        assertThrows(JMSSecurityException.class, () -> os.createSharedDurableConsumer(topic, name, "color = 'red'"));
        assertThrows(JMSSecurityException.class, () -> os.unsubscribe(name));
        other.close();

        Connection back = as(USER, PASSWORD, clientId);
        back.createSession(false, Session.AUTO_ACKNOWLEDGE).unsubscribe(name); // the owner may
    }

    @Test
    void noCredentialsIsAJmsSecurityExceptionWhenAnonymousIsRefused() {
        // The client would use SASL ANONYMOUS; the server does not offer it once users exist.
        assertThrows(JMSSecurityException.class, () -> connectTo(SECURE_AMQP_URL, "jms.clientID=jms-anon-" + uid));
    }
}
