package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import jakarta.jms.Connection;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.JMSException;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/** {@code Session.unsubscribe} (docs/wire.md §1.9, §5 scenarios 40–44). */
class UnsubscribeTest extends JmsTierSupport {

    @Test
    void unsubscribeAfterCloseDropsTheBacklogAndTheNextConsumerGetsOnlyNewMessages() throws Exception {
        String topic = newTopicName("unsub");
        String name = subName("d");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer consumer = s.createDurableConsumer(t, name);
        publish(topic, "first");
        expectTexts(consumer, "first");
        consumer.close();
        publish(topic, "backlog");   // kept for the subscription while no consumer is attached
        s.unsubscribe(name);
        MessageConsumer again = s.createDurableConsumer(t, name);
        publish(topic, "new");
        assertEquals(java.util.List.of(), textsUntil(again, "new"),
                "after unsubscribe a durable consumer of the same name starts a new, empty subscription");
        again.close();
        s.unsubscribe(name);
    }

    @Test
    void unsubscribeSharedDurableAfterAllConsumersClosed() throws Exception {
        String topic = newTopicName("unsub");
        String name = subName("sd");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer one = s.createSharedDurableConsumer(t, name);
        MessageConsumer two = s.createSharedDurableConsumer(t, name);
        // while either is open on this connection the client refuses without asking the server
        assertThrows(JMSException.class, () -> s.unsubscribe(name));
        one.close();
        assertThrows(JMSException.class, () -> s.unsubscribe(name));
        two.close();
        publish(topic, "backlog");
        s.unsubscribe(name);
        MessageConsumer again = s.createSharedDurableConsumer(t, name);
        publish(topic, "new");
        assertEquals(java.util.List.of(), textsUntil(again, "new"), "backlog of the unsubscribed subscription");
    }

    @Test
    void unsubscribeOfUnknownNameIsInvalidDestination() throws Exception {
        Connection withId = connect(clientId("a"));
        Session s = autoSession(withId);
        assertThrows(InvalidDestinationException.class, () -> s.unsubscribe(subName("never")));
        Connection global = connect(null);
        Session gs = autoSession(global);
        assertThrows(InvalidDestinationException.class, () -> gs.unsubscribe(subName("never")));
        // twice: the second unsubscribe of a real subscription finds nothing
        String topic = newTopicName("unsub");
        s.createDurableConsumer(s.createTopic(topic), subName("twice")).close();
        s.unsubscribe(subName("twice"));
        assertThrows(InvalidDestinationException.class, () -> s.unsubscribe(subName("twice")));
    }

    @Test
    void unsubscribeWhileActiveOnThisConnectionFailsOnTheClient() throws Exception {
        String topic = newTopicName("unsub");
        String name = subName("d");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        MessageConsumer consumer = s.createDurableConsumer(s.createTopic(topic), name);
        assertThrows(JMSException.class, () -> s.unsubscribe(name));
        publish(topic, "still-there");
        expectTexts(consumer, "still-there");
    }

    @Test
    void unsubscribeWhileActiveOnAnotherConnectionFailsAndTheSubscriptionStays() throws Exception {
        String topic = newTopicName("unsub");
        String name = subName("g");
        Connection a = connect(null);
        Session as = autoSession(a);
        Topic t = as.createTopic(topic);
        MessageConsumer active = as.createSharedDurableConsumer(t, name);

        Connection b = connect(null);
        Session bs = autoSession(b);
        JMSException e = assertThrows(JMSException.class, () -> bs.unsubscribe(name));
        assertTrue(!(e instanceof InvalidDestinationException),
                "the subscription exists, so the refusal must not say it does not: " + e);

        publish(topic, "still-subscribed");
        expectTexts(active, "still-subscribed");

        active.close();
        publish(topic, "backlog");
        bs.unsubscribe(name);   // no consumers left anywhere: now it goes
        MessageConsumer fresh = bs.createSharedDurableConsumer(bs.createTopic(topic), name);
        publish(topic, "new");
        assertEquals(java.util.List.of(), textsUntil(fresh, "new"), "backlog after the unsubscribe");
    }

    @Test
    void unsubscribeGlobalSharedDurableFromANewConnectionWithoutClientId() throws Exception {
        String topic = newTopicName("unsub");
        String name = subName("g");
        Connection a = connect(null);
        Session as = autoSession(a);
        MessageConsumer consumer = as.createSharedDurableConsumer(as.createTopic(topic), name);
        consumer.close();
        a.close();
        publish(topic, "backlog");

        Connection b = connect(null);
        Session bs = autoSession(b);
        bs.unsubscribe(name);
        assertThrows(InvalidDestinationException.class, () -> bs.unsubscribe(name), "second unsubscribe");

        Connection c = connect(null);
        Session cs = autoSession(c);
        MessageConsumer fresh = cs.createSharedDurableConsumer(cs.createTopic(topic), name);
        publish(topic, "new");
        assertEquals(java.util.List.of(), textsUntil(fresh, "new"), "backlog after the global unsubscribe");
    }

    @Test
    void unsubscribeWithClientIdFromALaterConnection() throws Exception {
        String topic = newTopicName("unsub");
        String name = subName("d");
        String id = clientId("a");
        Connection first = connect(id);
        Session fs = autoSession(first);
        fs.createDurableConsumer(fs.createTopic(topic), name);
        first.close();   // the subscription outlives the connection

        Connection later = connect(id);
        Session ls = autoSession(later);
        ls.unsubscribe(name);
        assertThrows(InvalidDestinationException.class, () -> ls.unsubscribe(name));
    }

    @Test
    void unsubscribeDoesNotFindANonDurableSubscriptionOfThatName() throws Exception {
        String topic = newTopicName("unsub");
        String name = subName("v");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        MessageConsumer volatileShared = s.createSharedConsumer(s.createTopic(topic), name);
        Connection g = connect(null);
        Session gs = autoSession(g);
        MessageConsumer globalVolatile = gs.createSharedConsumer(gs.createTopic(topic), name);
        // unsubscribe is about durable subscriptions: there is none of that name
        assertThrows(InvalidDestinationException.class, () -> s.unsubscribe(name));
        assertThrows(InvalidDestinationException.class, () -> gs.unsubscribe(name));
        publish(topic, "still-there");
        expectTexts(volatileShared, "still-there");
        expectTexts(globalVolatile, "still-there");
    }

    @Test
    void unsubscribeRemovesOnlyTheSubscriptionOfItsNamespace() throws Exception {
        String topic = newTopicName("unsub");
        String name = subName("same");
        String idA = clientId("a");
        String idB = clientId("b");
        Connection a = connect(idA);
        Session as = autoSession(a);
        as.createDurableConsumer(as.createTopic(topic), name).close();
        Connection b = connect(idB);
        Session bs = autoSession(b);
        bs.createSharedDurableConsumer(bs.createTopic(topic), name).close();
        Connection g = connect(null);
        Session gs = autoSession(g);
        gs.createSharedDurableConsumer(gs.createTopic(topic), name).close();
        publish(topic, "backlog");

        Connection other = connect(null);
        autoSession(other).unsubscribe(name);   // the global one

        expectTexts(as.createDurableConsumer(as.createTopic(topic), name), "backlog");
        expectTexts(bs.createSharedDurableConsumer(bs.createTopic(topic), name), "backlog");
        MessageConsumer fresh = gs.createSharedDurableConsumer(gs.createTopic(topic), name);
        publish(topic, "new");
        assertEquals(java.util.List.of(), textsUntil(fresh, "new"), "the global subscription was unsubscribed");
    }
}
