package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;

import jakarta.jms.Connection;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/**
 * The link names the client generates for shared consumers (docs/wire.md §1.4, §5 scenario 50):
 * {@code sub}, {@code sub|2}, {@code sub|global}, {@code sub|global2}, {@code sub|volatile1},
 * {@code sub|global-volatile1}, ... Several consumers of each kind on one connection must all join
 * the one subscription and split its messages.
 */
class LinkNamesTest extends JmsTierSupport {

    private interface Create {
        MessageConsumer create(Session s, Topic t, String name) throws Exception;
    }

    private void splitsAcrossConsumersOnOneConnection(String clientId, Create create) throws Exception {
        String topic = newTopicName("links");
        String name = subName("sub");
        Connection c = connect(clientId);
        List<MessageConsumer> consumers = new ArrayList<>();
        // two on one session, a third on another session of the same connection
        Session s1 = autoSession(c);
        Session s2 = autoSession(c);
        consumers.add(create.create(s1, s1.createTopic(topic), name));
        consumers.add(create.create(s1, s1.createTopic(topic), name));
        consumers.add(create.create(s2, s2.createTopic(topic), name));
        String[] msgs = texts("n", 24);
        publish(topic, msgs);
        List<List<String>> per = collectSplit(consumers, setOf(msgs));
        assertEveryConsumerGotSome(per);

        // Closing one does not free its number: the next consumer gets a new one (e.g. sub|4).
        consumers.remove(0).close();
        consumers.add(create.create(s2, s2.createTopic(topic), name));
        String[] more = texts("m", 18);
        publish(topic, more);
        per = collectSplit(consumers, setOf(more));
        assertEveryConsumerGotSome(per);
        expectNothing(consumers, "each message to exactly one consumer");
    }

    @Test
    void sharedDurableWithClientId() throws Exception {   // sub, sub|2, sub|3, then sub|4
        splitsAcrossConsumersOnOneConnection(clientId("a"), (s, t, n) -> s.createSharedDurableConsumer(t, n));
    }

    @Test
    void sharedDurableGlobal() throws Exception {   // sub|global, sub|global2, sub|global3, sub|global4
        splitsAcrossConsumersOnOneConnection(null, (s, t, n) -> s.createSharedDurableConsumer(t, n));
    }

    @Test
    void sharedVolatileWithClientId() throws Exception {   // sub|volatile1, sub|volatile2, ...
        splitsAcrossConsumersOnOneConnection(clientId("a"), (s, t, n) -> s.createSharedConsumer(t, n));
    }

    @Test
    void sharedVolatileGlobal() throws Exception {   // sub|global-volatile1, sub|global-volatile2, ...
        splitsAcrossConsumersOnOneConnection(null, (s, t, n) -> s.createSharedConsumer(t, n));
    }

    @Test
    void numberingRestartsAfterAllConsumersClosed() throws Exception {
        String topic = newTopicName("links");
        String name = subName("sub");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer one = s.createSharedDurableConsumer(t, name);   // sub
        MessageConsumer two = s.createSharedDurableConsumer(t, name);   // sub|2
        one.close();
        two.close();
        publish(topic, "backlog");
        MessageConsumer again = s.createSharedDurableConsumer(t, name);   // sub again (a re-attach)
        MessageConsumer again2 = s.createSharedDurableConsumer(t, name);  // sub|2 again
        publish(topic, "live-1", "live-2", "live-3", "live-4");
        List<List<String>> per = collectSplit(List.of(again, again2), setOf("backlog", "live-1", "live-2", "live-3", "live-4"));
        assertEquals(5, per.get(0).size() + per.get(1).size());
    }

    @Test
    void durableAndVolatileSharedWithOneNameOnOneConnection() throws Exception {
        String topic = newTopicName("links");
        String name = subName("sub");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer d1 = s.createSharedDurableConsumer(t, name);   // sub
        MessageConsumer v1 = s.createSharedConsumer(t, name);          // sub|volatile1
        MessageConsumer d2 = s.createSharedDurableConsumer(t, name);   // sub|2
        MessageConsumer v2 = s.createSharedConsumer(t, name);          // sub|volatile2
        String[] msgs = texts("x", 12);
        publish(topic, msgs);
        assertEveryConsumerGotSome(collectSplit(List.of(d1, d2), setOf(msgs)));
        assertEveryConsumerGotSome(collectSplit(List.of(v1, v2), setOf(msgs)));
        expectNothing(List.of(d1, d2, v1, v2), "one copy per subscription");
    }
}
