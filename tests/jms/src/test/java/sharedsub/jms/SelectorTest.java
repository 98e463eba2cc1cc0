package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import jakarta.jms.Connection;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.InvalidSelectorException;
import jakarta.jms.JMSException;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/** Selectors and no-local on subscriptions (docs/wire.md §5 scenarios 16–20, 26–30). */
class SelectorTest extends JmsTierSupport {

    private static void publishColored(Connection c, String topic, String... textColorPairs) throws JMSException {
        Session s = autoSession(c);
        MessageProducer p = s.createProducer(s.createTopic(topic));
        for (int i = 0; i < textColorPairs.length; i += 2) {
            TextMessage m = s.createTextMessage(textColorPairs[i]);
            m.setStringProperty("color", textColorPairs[i + 1]);
            p.send(m);
        }
        s.close();
    }

    private void publishColored(String topic, String... textColorPairs) throws JMSException {
        try (Connection c = factory().createConnection()) {
            publishColored(c, topic, textColorPairs);
        }
    }

    @Test
    void selectorFiltersWhatASubscriptionGets() throws Exception {
        String topic = newTopicName("sel");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer plain = s.createConsumer(t, "color = 'red'");
        MessageConsumer durable = s.createDurableConsumer(t, subName("d"), "color = 'red'", false);
        MessageConsumer shared = s.createSharedDurableConsumer(t, subName("sd"), "color <> 'red'");
        MessageConsumer sharedVolatile = s.createSharedConsumer(t, subName("sv"), "color IN ('green', 'blue')");
        publishColored(topic, "r1", "red", "g1", "green", "r2", "red", "b1", "blue", "x1", "");
        expectTexts(plain, "r1", "r2");
        expectTexts(durable, "r1", "r2");
        expectTexts(shared, "g1", "b1", "x1");
        expectTexts(sharedVolatile, "g1", "b1");
        expectNothing(List.of(plain, durable, shared, sharedVolatile), "only matching messages");
    }

    @Test
    void selectorChangeWhileInactiveStartsANewSubscription() throws Exception {
        String topic = newTopicName("sel");
        String unshared = subName("d");
        String shared = subName("sd");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        s.createDurableConsumer(t, unshared, "color = 'red'", false).close();
        s.createSharedDurableConsumer(t, shared, "color = 'red'").close();
        publishColored(topic, "old-red", "red", "old-blue", "blue");

        MessageConsumer d = s.createDurableConsumer(t, unshared, "color = 'blue'", false);
        MessageConsumer sd = s.createSharedDurableConsumer(t, shared, "color = 'blue'");
        publishColored(topic, "new-red", "red", "new-blue", "blue");
        // The old backlog (old-red) is gone, and old-blue was published before the new selector.
        expectTexts(d, "new-blue");
        expectTexts(sd, "new-blue");
        expectNothing(List.of(d, sd), "only new messages that match the new selector");
    }

    @Test
    void removingOrAddingASelectorWhileInactiveStartsANewSubscription() throws Exception {
        String topic = newTopicName("sel");
        String name = subName("d");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        s.createDurableConsumer(t, name).close();
        publishColored(topic, "backlog-1", "red");
        MessageConsumer withSelector = s.createDurableConsumer(t, name, "color = 'red'", false);
        publishColored(topic, "m-blue", "blue", "m-red", "red");
        expectTexts(withSelector, "m-red");
        withSelector.close();
        publishColored(topic, "backlog-2", "red");
        MessageConsumer without = s.createDurableConsumer(t, name);
        publishColored(topic, "n-blue", "blue");
        expectTexts(without, "n-blue");
    }

    @Test
    void topicChangeWhileInactiveStartsANewSubscription() throws Exception {
        String topic1 = newTopicName("sel1");
        String topic2 = newTopicName("sel2");
        String name = subName("d");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        s.createDurableConsumer(s.createTopic(topic1), name).close();
        publish(topic1, "old-topic");
        MessageConsumer moved = s.createDurableConsumer(s.createTopic(topic2), name);
        publish(topic1, "old-topic-2");
        publish(topic2, "new-topic");
        expectTexts(moved, "new-topic");
        expectNothing(moved, "nothing from the old topic");
    }

    @Test
    void secondSharedConsumerWithAnotherSelectorWhileActiveIsRefused() throws Exception {
        String topic = newTopicName("sel");
        String name = subName("g");
        Connection a = connect(null);
        Session as = autoSession(a);
        MessageConsumer red = as.createSharedDurableConsumer(as.createTopic(topic), name, "color = 'red'");
        // same connection: the client refuses itself (docs/wire.md §1.4)
        assertThrows(JMSException.class, () -> as.createSharedDurableConsumer(as.createTopic(topic), name, "color = 'blue'"));

        Connection b = connect(null);
        Session bs = autoSession(b);
        JMSException e = assertThrows(JMSException.class,
                () -> bs.createSharedDurableConsumer(bs.createTopic(topic), name, "color = 'blue'"));
        assertTrue(!(e instanceof InvalidDestinationException), "expected a resource-locked refusal, got " + e);
        JMSException noSelector = assertThrows(JMSException.class,
                () -> bs.createSharedDurableConsumer(bs.createTopic(topic), name));
        assertTrue(!(noSelector instanceof InvalidDestinationException), "expected a resource-locked refusal, got " + noSelector);
        // the same selector joins
        MessageConsumer red2 = bs.createSharedDurableConsumer(bs.createTopic(topic), name, "color = 'red'");
        // the subscription still works with its selector
        publishColored(topic, "b", "blue", "r1", "red", "r2", "red", "r3", "red", "r4", "red");
        List<List<String>> per = collectSplit(List.of(red, red2), setOf("r1", "r2", "r3", "r4"));
        assertEquals(4, per.get(0).size() + per.get(1).size());
    }

    @Test
    void secondSharedConsumerWithAnotherTopicWhileActiveIsRefused() throws Exception {
        String topic1 = newTopicName("sel1");
        String topic2 = newTopicName("sel2");
        String name = subName("g");
        Connection a = connect(null);
        Session as = autoSession(a);
        MessageConsumer first = as.createSharedDurableConsumer(as.createTopic(topic1), name);
        Connection b = connect(null);
        Session bs = autoSession(b);
        JMSException e = assertThrows(JMSException.class, () -> bs.createSharedDurableConsumer(bs.createTopic(topic2), name));
        assertTrue(!(e instanceof InvalidDestinationException), "expected a resource-locked refusal, got " + e);
        publish(topic1, "still-on-topic1");
        expectTexts(first, "still-on-topic1");
    }

    @Test
    void noLocalDurableSubscriberDoesNotGetItsOwnConnectionsMessages() throws Exception {
        String topic = newTopicName("sel");
        String name = subName("nl");
        Connection own = connect(clientId("own"));
        Session s = autoSession(own);
        Topic t = s.createTopic(topic);
        MessageConsumer noLocal = s.createDurableConsumer(t, name, null, true);
        Connection other = connect(clientId("other"));
        Session os = autoSession(other);
        MessageConsumer everything = os.createConsumer(os.createTopic(topic));

        publish(own, topic, "own-1", "own-2");
        publish(other, topic, "other-1");
        publish(own, topic, "own-3");
        publish(topic, "anonymous-1");

        assertEquals(List.of("other-1"), textsUntil(noLocal, "anonymous-1"),
                "a no-local subscriber gets others' messages, not its own connection's");
        expectNothing(noLocal, "no-local: nothing of its own");
        expectTexts(everything, "own-1", "own-2", "other-1", "own-3", "anonymous-1");
    }

    @Test
    void noLocalPlainConsumer() throws Exception {
        String topic = newTopicName("sel");
        Connection own = connect(null);
        Session s = autoSession(own);
        MessageConsumer noLocal = s.createConsumer(s.createTopic(topic), null, true);
        publish(own, topic, "own-1");
        publish(topic, "other-1");
        assertEquals(List.of(), textsUntil(noLocal, "other-1"), "a no-local consumer must not get its own connection's messages");
    }

    @Test
    void invalidSelectorIsRefusedByTheClient() throws Exception {
        String topic = newTopicName("sel");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        String bad = "color = = 'red'";
        assertThrows(InvalidSelectorException.class, () -> s.createConsumer(t, bad));
        assertThrows(InvalidSelectorException.class, () -> s.createDurableConsumer(t, subName("d"), bad, false));
        assertThrows(InvalidSelectorException.class, () -> s.createSharedDurableConsumer(t, subName("sd"), bad));
        assertThrows(InvalidSelectorException.class, () -> s.createSharedConsumer(t, subName("sv"), bad));
    }

    /**
     * With {@code jms.validateSelector=false} the selector goes to the server, which refuses it
     * with {@code amqp:invalid-field}. Qpid JMS maps that condition to a plain JMSException (only
     * not-found, unauthorized-access, resource-limit-exceeded and transaction-rollback get a
     * subclass: AmqpSupport#convertToNonFatalException), so that is what the application sees.
     */
    @Test
    void invalidSelectorIsRefusedByTheServerWhenTheClientDoesNotValidate() throws Exception {
        String topic = newTopicName("sel");
        Connection c = connect(clientId("a"), "jms.validateSelector=false");
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        String bad = "color = = 'red'";
        for (String kind : List.of("plain", "durable", "shared durable", "shared")) {
            JMSException e = assertThrows(JMSException.class, () -> {
                switch (kind) {
                    case "plain" -> s.createConsumer(t, bad);
                    case "durable" -> s.createDurableConsumer(t, subName("d"), bad, false);
                    case "shared durable" -> s.createSharedDurableConsumer(t, subName("sd"), bad);
                    default -> s.createSharedConsumer(t, subName("sv"), bad);
                }
            }, kind + " consumer with an invalid selector");
            assertEquals(JMSException.class, e.getClass(), kind + ": exception class " + e.getClass().getName() + ": " + e.getMessage());
            assertTrue(e.getMessage().contains("invalid-field"), kind + ": message names the condition: " + e.getMessage());
        }
        // nothing was created for the refused durable subscriptions
        assertThrows(InvalidDestinationException.class, () -> s.unsubscribe(subName("d")));
        assertThrows(InvalidDestinationException.class, () -> s.unsubscribe(subName("sd")));
        // and the same names work with a valid selector
        MessageConsumer ok = s.createDurableConsumer(t, subName("d"), "color = 'red'", false);
        publishColored(topic, "r", "red");
        expectTexts(ok, "r");
    }

    @Test
    void noLocalChangeWhileInactiveStartsANewSubscription() throws Exception {
        String topic = newTopicName("sel");
        String name = subName("d");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        s.createDurableConsumer(t, name, null, false).close();
        publish(topic, "backlog");
        MessageConsumer noLocal = s.createDurableConsumer(t, name, null, true);
        publish(c, topic, "own");
        publish(topic, "marker");
        assertEquals(List.of(), textsUntil(noLocal, "marker"), "noLocal toggled: a new subscription without the old backlog");
    }
}
