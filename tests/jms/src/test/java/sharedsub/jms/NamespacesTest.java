package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import jakarta.jms.Connection;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.JMSException;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/**
 * The seed's subscription table (docs/seeds.md, seed 000) as the client can produce it
 * (docs/wire.md §5, scenarios 4–25 and 33–38): namespaces, sharing, durable backlog, non-durable
 * loss, session close.
 */
class NamespacesTest extends JmsTierSupport {

    @Test
    void everyNamespaceCombinationWithOneBaseNameCoexistsAndEachGetsACopy() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("same");
        Map<String, MessageConsumer> consumers = new LinkedHashMap<>();

        // ClientID A: shared durable (link "name"), shared volatile ("name|volatile1"), plain consumer
        Connection a = connect(clientId("a"));
        Session as = autoSession(a);
        Topic t = as.createTopic(topic);
        consumers.put("shared durable, ClientID A", as.createSharedDurableConsumer(t, name));
        consumers.put("shared volatile, ClientID A", as.createSharedConsumer(t, name));
        consumers.put("plain, ClientID A", as.createConsumer(t));
        // ClientID B: unshared durable "name" (a different container namespace), shared volatile
        Connection b = connect(clientId("b"));
        Session bs = autoSession(b);
        consumers.put("unshared durable, ClientID B", bs.createDurableConsumer(bs.createTopic(topic), name));
        consumers.put("shared volatile, ClientID B", bs.createSharedConsumer(bs.createTopic(topic), name));
        // ClientID C: unshared durable with the same name as B's
        Connection c = connect(clientId("c"));
        Session cs = autoSession(c);
        consumers.put("unshared durable, ClientID C", cs.createDurableConsumer(cs.createTopic(topic), name));
        // no ClientID: global shared durable ("name|global") and global shared volatile ("name|global-volatile1")
        Connection g = connect(null);
        Session gs = autoSession(g);
        consumers.put("shared durable, global", gs.createSharedDurableConsumer(gs.createTopic(topic), name));
        consumers.put("shared volatile, global", gs.createSharedConsumer(gs.createTopic(topic), name));
        consumers.put("plain, no ClientID", gs.createConsumer(gs.createTopic(topic)));

        publish(topic, "m1", "m2", "m3");
        List<String> failures = new ArrayList<>();
        for (Map.Entry<String, MessageConsumer> e : consumers.entrySet()) {
            try {
                expectTexts(e.getValue(), "m1", "m2", "m3");
            } catch (AssertionError err) {
                failures.add(e.getKey() + ": " + err.getMessage());
            }
        }
        assertTrue(failures.isEmpty(), "subscriptions without their own copy: " + failures);
        expectNothing(new ArrayList<>(consumers.values()), "each subscription gets exactly one copy");
    }

    @Test
    void unsharedDurableThenSharedDurableWithTheSameNameAndClientIdIsRefused() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("clash");
        String id = clientId("a");
        Connection first = connect(id);
        Session fs = autoSession(first);
        Topic t = fs.createTopic(topic);
        MessageConsumer unshared = fs.createDurableConsumer(t, name);
        // on the same connection the client itself refuses (docs/wire.md §1.4)
        assertThrows(JMSException.class, () -> fs.createSharedDurableConsumer(t, name));
        unshared.close();
        first.close();

        // from a new connection with the same ClientID, the server must refuse it: the subscription
        // exists as an unshared durable one, with no consumer attached (docs/wire.md §2.6, D6)
        Connection second = connect(id);
        Session ss = autoSession(second);
        JMSException e = assertThrows(JMSException.class, () -> ss.createSharedDurableConsumer(ss.createTopic(topic), name));
        assertTrue(!(e instanceof InvalidDestinationException), "refusal should be resource-locked, got " + e);
        // the unshared one is still there with its backlog
        publish(topic, "kept");
        MessageConsumer back = ss.createDurableConsumer(ss.createTopic(topic), name);
        expectTexts(back, "kept");
    }

    @Test
    void sharedDurableThenUnsharedDurableWithTheSameNameAndClientIdIsRefused() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("clash");
        String id = clientId("a");
        Connection first = connect(id);
        Session fs = autoSession(first);
        Topic t = fs.createTopic(topic);
        MessageConsumer shared = fs.createSharedDurableConsumer(t, name);
        assertThrows(JMSException.class, () -> fs.createDurableConsumer(t, name));
        shared.close();
        first.close();

        Connection second = connect(id);
        Session ss = autoSession(second);
        JMSException e = assertThrows(JMSException.class, () -> ss.createDurableConsumer(ss.createTopic(topic), name));
        assertTrue(!(e instanceof InvalidDestinationException), "refusal should be resource-locked, got " + e);
        publish(topic, "kept");
        MessageConsumer back = ss.createSharedDurableConsumer(ss.createTopic(topic), name);
        expectTexts(back, "kept");
    }

    @Test
    void twoUnsharedDurableConsumersWithOneNameOnOneConnectionFailOnTheClient() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("d");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer first = s.createDurableConsumer(t, name);
        Session other = autoSession(c);
        assertThrows(JMSException.class, () -> other.createDurableConsumer(other.createTopic(topic), name));
        publish(topic, "still-works");
        expectTexts(first, "still-works");
    }

    @Test
    void sharedDurableConsumersOnTwoConnectionsSplitTheMessages() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("split");
        Connection a = connect(null);
        Connection b = connect(null);
        Session as = autoSession(a);
        Session bs = autoSession(b);
        MessageConsumer ca = as.createSharedDurableConsumer(as.createTopic(topic), name);
        MessageConsumer cb = bs.createSharedDurableConsumer(bs.createTopic(topic), name);
        String[] msgs = texts("split", 20);
        publish(topic, msgs);
        List<List<String>> per = collectSplit(List.of(ca, cb), setOf(msgs));
        assertEveryConsumerGotSome(per);
        expectNothing(List.of(ca, cb), "every message goes to exactly one consumer of a shared subscription");
    }

    @Test
    void sharedDurableConsumersWithOneClientIdOnTwoSessionsSplitTheMessages() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("split");
        Connection a = connect(clientId("a"));
        Session s1 = autoSession(a);
        Session s2 = autoSession(a);
        MessageConsumer c1 = s1.createSharedDurableConsumer(s1.createTopic(topic), name);   // link "name"
        MessageConsumer c2 = s2.createSharedDurableConsumer(s2.createTopic(topic), name);   // link "name|2"
        String[] msgs = texts("split", 20);
        publish(topic, msgs);
        List<List<String>> per = collectSplit(List.of(c1, c2), setOf(msgs));
        assertEveryConsumerGotSome(per);
        expectNothing(List.of(c1, c2), "every message goes to exactly one consumer of a shared subscription");
    }

    @Test
    void sharedVolatileConsumersOnTwoConnectionsSplitTheMessages() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("split");
        Connection a = connect(null);
        Connection b = connect(null);
        Session as = autoSession(a);
        Session bs = autoSession(b);
        MessageConsumer ca = as.createSharedConsumer(as.createTopic(topic), name);
        MessageConsumer cb = bs.createSharedConsumer(bs.createTopic(topic), name);
        String[] msgs = texts("split", 20);
        publish(topic, msgs);
        List<List<String>> per = collectSplit(List.of(ca, cb), setOf(msgs));
        assertEveryConsumerGotSome(per);
        expectNothing(List.of(ca, cb), "every message goes to exactly one consumer of a shared subscription");
    }

    @Test
    void sharedVolatileWithDifferentClientIdsAreTwoSubscriptions() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("v");
        Connection a = connect(clientId("a"));
        Connection b = connect(clientId("b"));
        Session as = autoSession(a);
        Session bs = autoSession(b);
        MessageConsumer ca = as.createSharedConsumer(as.createTopic(topic), name);
        MessageConsumer cb = bs.createSharedConsumer(bs.createTopic(topic), name);
        publish(topic, "m1", "m2");
        expectTexts(ca, "m1", "m2");
        expectTexts(cb, "m1", "m2");
    }

    @Test
    void durableBacklogIsKeptWhileNoConsumerIsAttachedAndDeliveredOnReattach() throws Exception {
        String topic = newTopicName("ns");
        String unshared = subName("d");
        String shared = subName("sd");
        String id = clientId("a");
        Connection c = connect(id);
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        s.createDurableConsumer(t, unshared).close();
        s.createSharedDurableConsumer(t, shared).close();
        Connection g = connect(null);
        Session gs = autoSession(g);
        gs.createSharedDurableConsumer(gs.createTopic(topic), shared).close();
        c.close();
        g.close();

        publish(topic, "b1", "b2", "b3");

        Connection c2 = connect(id);
        Session s2 = autoSession(c2);
        expectTexts(s2.createDurableConsumer(s2.createTopic(topic), unshared), "b1", "b2", "b3");
        expectTexts(s2.createSharedDurableConsumer(s2.createTopic(topic), shared), "b1", "b2", "b3");
        Connection g2 = connect(null);
        Session gs2 = autoSession(g2);
        expectTexts(gs2.createSharedDurableConsumer(gs2.createTopic(topic), shared), "b1", "b2", "b3");
    }

    @Test
    void nonDurableSubscriptionsLoseWhatIsPublishedWhileTheyAreGone() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("v");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer plain = s.createConsumer(t);
        MessageConsumer volatileShared = s.createSharedConsumer(t, name);
        Connection g = connect(null);
        Session gs = autoSession(g);
        MessageConsumer globalVolatile = gs.createSharedConsumer(gs.createTopic(topic), name);
        publish(topic, "seen");
        expectTexts(plain, "seen");
        expectTexts(volatileShared, "seen");
        expectTexts(globalVolatile, "seen");
        plain.close();
        volatileShared.close();
        globalVolatile.close();

        publish(topic, "lost");

        plain = s.createConsumer(t);
        volatileShared = s.createSharedConsumer(t, name);
        globalVolatile = gs.createSharedConsumer(gs.createTopic(topic), name);
        publish(topic, "marker");
        assertEquals(List.of(), textsUntil(plain, "marker"), "plain consumer");
        assertEquals(List.of(), textsUntil(volatileShared, "marker"), "shared volatile, ClientID");
        assertEquals(List.of(), textsUntil(globalVolatile, "marker"), "shared volatile, global");
    }

    @Test
    void closingASessionWithAnOpenDurableSubscriberKeepsTheSubscription() throws Exception {
        String topic = newTopicName("ns");
        String unshared = subName("d");
        String shared = subName("sd");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer d = s.createDurableConsumer(t, unshared);
        MessageConsumer sd = s.createSharedDurableConsumer(t, shared);
        publish(topic, "before");
        expectTexts(d, "before");
        expectTexts(sd, "before");
        s.close();   // only 'end' goes out: no detach of the durable links

        publish(topic, "while-closed");

        Session s2 = autoSession(c);
        expectTexts(s2.createDurableConsumer(s2.createTopic(topic), unshared), "while-closed");
        expectTexts(s2.createSharedDurableConsumer(s2.createTopic(topic), shared), "while-closed");
    }

    @Test
    void closingAConnectionWithAnOpenDurableSubscriberKeepsTheSubscription() throws Exception {
        String topic = newTopicName("ns");
        String name = subName("d");
        String id = clientId("a");
        Connection c = connect(id);
        Session s = autoSession(c);
        s.createDurableConsumer(s.createTopic(topic), name);
        c.close();
        publish(topic, "while-closed");
        Connection c2 = connect(id);
        Session s2 = autoSession(c2);
        expectTexts(s2.createDurableConsumer(s2.createTopic(topic), name), "while-closed");
    }
}
