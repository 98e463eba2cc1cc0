package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import jakarta.jms.Connection;
import jakarta.jms.InvalidClientIDException;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;

import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * Two members of one data dir on object storage (issue 30; run by
 * tests/jms/test_jms_tier.py::test_qpid_jms_tier_on_two_members, which starts them): the first at
 * {@code sharedsub.url}, the second at {@code sharedsub.secondUrl} (its pid in
 * {@code sharedsub.secondPid}). A global shared durable subscription is served from both; a
 * consumer on a {@code failover:} URI carries on on the first member when the second is killed.
 * The kill comes last (the order below).
 */
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class ClusterTest extends JmsTierSupport {

    static final String SECOND_URL = System.getProperty("sharedsub.secondUrl", "amqp://127.0.0.1:5673");
    static final long SECOND_PID = Long.parseLong(System.getProperty("sharedsub.secondPid", "-1"));
    /** How long members take to hand a partition over to a member whose consumer just attached. */
    static final long HAND_OVER_MS = 5_000;

    private Connection connectTo(String url, String... options) throws Exception {
        Connection c = track(factoryAt(url, options).createConnection());
        c.start();
        return c;
    }

    @Test
    @Order(1)
    void aGlobalSharedDurableSubscriptionIsServedFromBothMembersEachMessageOnce() throws Exception {
        String topic = newTopicName("both");
        String sub = subName("both");
        Connection a = connectTo(URL);
        Connection b = connectTo(SECOND_URL);
        Session sa = autoSession(a);
        Session sb = autoSession(b);
        MessageConsumer ca = sa.createSharedDurableConsumer(sa.createTopic(topic), sub);
        MessageConsumer cb = sb.createSharedDurableConsumer(sb.createTopic(topic), sub);
        Thread.sleep(HAND_OVER_MS);
        String[] fromA = texts("a", 40);
        String[] fromB = texts("b", 40);
        publish(a, topic, fromA);
        publish(b, topic, fromB);
        Set<String> all = setOf(fromA);
        all.addAll(setOf(fromB));
        List<List<String>> per = collectSplit(List.of(ca, cb), all);
        assertEveryConsumerGotSome(per);
        for (List<String> got : per) {  // each publisher's messages in its order, at each consumer
            for (String who : List.of("a-", "b-")) {
                List<Integer> seen = new ArrayList<>();
                for (String t : got) {
                    if (t.startsWith(who)) {
                        seen.add(Integer.parseInt(t.substring(2)));
                    }
                }
                List<Integer> sorted = new ArrayList<>(seen);
                sorted.sort(null);
                assertEquals(sorted, seen, "out of order at a consumer: " + got);
            }
        }
    }

    @Test
    @Order(2)
    void aClientIdConnectedToOneMemberIsRefusedByTheOther() throws Exception {
        String id = clientId("both");
        Connection first = track(new JmsConnectionFactory(URL).createConnection());
        first.setClientID(id);
        first.start();
        Connection second = track(new JmsConnectionFactory(SECOND_URL).createConnection());
        assertThrows(InvalidClientIDException.class, () -> second.setClientID(id));
    }

    @Test
    @Order(3)
    void anUnsubscribeOnOneMemberIsRefusedWhileTheOtherHasAConsumer() throws Exception {
        String topic = newTopicName("unsub");
        String sub = subName("unsub");
        Connection a = connectTo(URL);
        Session sa = autoSession(a);
        MessageConsumer active = sa.createSharedDurableConsumer(sa.createTopic(topic), sub);
        Thread.sleep(HAND_OVER_MS);  // the second member reads the catalog and the first's consumer
        Session sb = autoSession(connectTo(SECOND_URL));
        JMSException refused = assertThrows(JMSException.class, () -> sb.unsubscribe(sub));
        assertTrue(!(refused instanceof InvalidDestinationException), "the subscription exists: " + refused);
        publish(a, topic, "still-subscribed");
        expectTexts(active, "still-subscribed");
        active.close();
        long deadline = System.currentTimeMillis() + 4 * HAND_OVER_MS;
        while (true) {  // the first member says it has no consumer within a reading or two
            try {
                sb.unsubscribe(sub);
                break;
            } catch (JMSException e) {
                if (e instanceof InvalidDestinationException || System.currentTimeMillis() > deadline) {
                    throw e;
                }
                Thread.sleep(250);
            }
        }
        MessageConsumer fresh = sa.createSharedDurableConsumer(sa.createTopic(topic), sub);
        publish(a, topic, "new");
        assertEquals(List.of(), textsUntil(fresh, "new"), "a backlog after the unsubscribe on the other member");
    }

    @Test
    @Order(4)
    void aSharedNonDurableSubscriptionOutlivesItsLastConsumerOnOneMember() throws Exception {
        String topic = newTopicName("volatile");
        String sub = subName("volatile");
        Connection a = connectTo(URL);
        Connection b = connectTo(SECOND_URL);
        Session sa = autoSession(a);
        Session sb = autoSession(b);
        MessageConsumer leaving = sa.createSharedConsumer(sa.createTopic(topic), sub);
        MessageConsumer staying = sb.createSharedConsumer(sb.createTopic(topic), sub);
        Thread.sleep(HAND_OVER_MS);
        leaving.close();
        String[] fromA = texts("a", 20);
        String[] fromB = texts("b", 20);
        publish(a, topic, fromA);
        publish(b, topic, fromB);
        Set<String> all = setOf(fromA);
        all.addAll(setOf(fromB));
        List<List<String>> got = collectSplit(List.of(staying), all);
        assertEquals(all, new HashSet<>(got.get(0)), "what the remaining consumer on the other member got");
    }

    @Test
    @Order(5)
    void aFailoverConsumerCarriesOnOnTheSurvivorWhenItsMemberIsKilled() throws Exception {
        assertTrue(SECOND_PID > 0, "sharedsub.secondPid is not set");
        String topic = newTopicName("failover");
        String sub = subName("failover");
        Connection onA = connectTo(URL);
        Connection failover = track(factoryAt(
            "failover:(" + SECOND_URL + "," + URL + ")?failover.maxReconnectAttempts=60&failover.reconnectDelay=250")
            .createConnection());
        failover.start();
        Session sa = autoSession(onA);
        Session sf = failover.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer ca = sa.createSharedDurableConsumer(sa.createTopic(topic), sub);
        MessageConsumer cf = sf.createSharedDurableConsumer(sf.createTopic(topic), sub);
        Thread.sleep(HAND_OVER_MS);
        String[] before = texts("before", 40);
        publish(connectTo(SECOND_URL), topic, before);  // the second member's partition: its consumer's
        // The failover consumer takes them without acknowledging: they come again after the
        // kill, marked redelivered.
        Map<String, Integer> seen = new HashMap<>();
        Set<String> unacked = new HashSet<>();
        long deadline = System.currentTimeMillis() + RECEIVE_MS;
        while (seen.size() < before.length && System.currentTimeMillis() < deadline) {
            for (MessageConsumer c : List.of(ca, cf)) {
                Message m = c.receive(50);
                if (m != null) {
                    String t = text(m);
                    seen.merge(t, 1, Integer::sum);
                    if (c == cf) {
                        unacked.add(t);
                    }
                }
            }
        }
        assertEquals(before.length, seen.size(), "before the kill: " + seen);
        assertTrue(!unacked.isEmpty(), "the failover consumer got none of its member's messages: " + seen);
        ProcessHandle.of(SECOND_PID).ifPresentOrElse(ProcessHandle::destroyForcibly, () -> fail("no process " + SECOND_PID));
        String[] after = texts("after", 40);
        publish(onA, topic, after);
        Set<String> expected = setOf(after);
        expected.addAll(unacked);  // the failover consumer's unacknowledged ones come again
        Set<String> again = new HashSet<>();
        deadline = System.currentTimeMillis() + 4 * RECEIVE_MS;
        while (!again.containsAll(expected) && System.currentTimeMillis() < deadline) {
            for (MessageConsumer c : List.of(ca, cf)) {
                Message m;
                try {
                    m = c.receive(100);
                } catch (jakarta.jms.JMSException e) {
                    continue;  // (the failover consumer while it reconnects)
                }
                if (m != null) {
                    String t = text(m);
                    if (unacked.contains(t)) {
                        assertTrue(m.getJMSRedelivered(), "'" + t + "' came again without JMSRedelivered");
                    } else {
                        assertTrue(!again.contains(t) || m.getJMSRedelivered(), "'" + t + "' twice without JMSRedelivered");
                    }
                    again.add(t);
                    m.acknowledge();
                }
            }
        }
        Set<String> missing = new HashSet<>(expected);
        missing.removeAll(again);
        assertTrue(missing.isEmpty(), "never delivered after the kill: " + missing);
    }
}
