package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

import jakarta.jms.Connection;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.Session;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/** CLIENT_ACKNOWLEDGE, recover(), redelivery, and closing a consumer with prefetched messages. */
class AcknowledgeTest extends JmsTierSupport {

    private static int deliveryCount(Message m) throws Exception {
        return m.getIntProperty("JMSXDeliveryCount");
    }

    @Test
    void recoverRedeliversUnacknowledgedMessagesAndAcknowledgedOnesNeverComeAgain() throws Exception {
        String topic = newTopicName("ack");
        String name = subName("d");
        String id = clientId("a");
        Connection c = connect(id);
        Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        Topic t = s.createTopic(topic);
        MessageConsumer consumer = s.createDurableConsumer(t, name);
        publish(topic, "m1", "m2", "m3");

        List<Message> first = expectTexts(consumer, "m1", "m2");
        for (Message m : first) {
            assertFalse(m.getJMSRedelivered());
            assertEquals(1, deliveryCount(m));
        }
        first.get(1).acknowledge();   // acknowledges m1 and m2 (everything consumed in the session)
        Message m3 = expectTexts(consumer, "m3").get(0);
        assertFalse(m3.getJMSRedelivered());

        s.recover();
        Message again = expectTexts(consumer, "m3").get(0);
        assertTrue(again.getJMSRedelivered(), "recovered message must be marked redelivered");
        assertEquals(2, deliveryCount(again));

        s.recover();
        again = expectTexts(consumer, "m3").get(0);
        assertTrue(again.getJMSRedelivered());
        assertEquals(3, deliveryCount(again));
        expectNothing(consumer, "m1 and m2 were acknowledged");

        // Close the connection without acknowledging m3: it comes again, m1 and m2 never do.
        c.close();
        Connection c2 = connect(id);
        Session s2 = c2.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer back = s2.createDurableConsumer(s2.createTopic(topic), name);
        publish(topic, "m4");
        List<Message> got = expectTexts(back, "m3", "m4");
        assertTrue(got.get(0).getJMSRedelivered(), "m3 was delivered before: it comes back marked redelivered");
        assertTrue(deliveryCount(got.get(0)) >= 2, "JMSXDeliveryCount of m3 after the connection closed: " + deliveryCount(got.get(0)));
        assertFalse(got.get(1).getJMSRedelivered());
        got.get(1).acknowledge();
        c2.close();

        // Everything is acknowledged now: nothing comes back.
        Connection c3 = connect(id);
        Session s3 = c3.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer last = s3.createDurableConsumer(s3.createTopic(topic), name);
        publish(topic, "m5");
        assertEquals(List.of(), textsUntil(last, "m5"), "acknowledged messages must never come again");
    }

    @Test
    void recoverOnASharedSubscription() throws Exception {
        String topic = newTopicName("ack");
        String name = subName("sd");
        Connection c = connect(null);
        Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer consumer = s.createSharedDurableConsumer(s.createTopic(topic), name);
        publish(topic, "s1", "s2");
        expectTexts(consumer, "s1", "s2");
        s.recover();
        List<Message> again = expectTexts(consumer, "s1", "s2");
        for (Message m : again) {
            assertTrue(m.getJMSRedelivered());
            assertEquals(2, deliveryCount(m));
        }
        again.get(1).acknowledge();
        consumer.close();
        MessageConsumer back = s.createSharedDurableConsumer(s.createTopic(topic), name);
        publish(topic, "s3");
        assertEquals(List.of(), textsUntil(back, "s3"), "acknowledged messages after re-attach");
    }

    private void closeWithPrefetched(int ackMode) throws Exception {
        String topic = newTopicName("prefetch");
        String name = subName("d");
        String id = clientId("a");
        Connection c = connect(id, "jms.prefetchPolicy.all=10");
        Session s = c.createSession(false, ackMode);
        Topic t = s.createTopic(topic);
        MessageConsumer consumer = s.createDurableConsumer(t, name);
        String[] msgs = texts("p", 6);
        publish(topic, msgs);
        Message first = expectTexts(consumer, "p-0").get(0);
        if (ackMode == Session.CLIENT_ACKNOWLEDGE) {
            first.acknowledge();
        }
        Thread.sleep(1_000);   // let the rest arrive in the consumer's prefetch buffer
        consumer.close();

        MessageConsumer back = s.createDurableConsumer(t, name);
        publish(topic, "marker");
        List<String> got = textsUntil(back, "marker");
        Map<String, Integer> counts = counts(got);
        List<String> problems = new ArrayList<>();
        if (counts.containsKey("p-0")) {
            problems.add("the acknowledged p-0 came again");
        }
        for (int i = 1; i < msgs.length; i++) {
            int n = counts.getOrDefault(msgs[i], 0);
            if (n != 1) {
                problems.add(msgs[i] + " arrived " + n + " times");
            }
        }
        assertTrue(problems.isEmpty(), problems + " (received " + got + ")");
        expectNothing(back, "no duplicates after the marker");
    }

    @Test
    void closingAConsumerWithPrefetchedMessagesClientAcknowledge() throws Exception {
        closeWithPrefetched(Session.CLIENT_ACKNOWLEDGE);
    }

    @Test
    void closingAConsumerWithPrefetchedMessagesAutoAcknowledge() throws Exception {
        closeWithPrefetched(Session.AUTO_ACKNOWLEDGE);
    }

    /**
     * A consumer of a shared subscription closes with prefetched messages; they go to both other
     * consumers, one of which joined after they were first sent (dispatch rule 21,
     * sharedsub/core/dispatch.py). Proved by counts, not timing: every given-back message arrives
     * once, and each remaining consumer gets at least one of them (round-robin: about half).
     */
    @Test
    void messagesAClosedConsumerGivesBackSpreadOverTheOthersOneThatJoinedSinceIncluded() throws Exception {
        String topic = newTopicName("spread");
        String name = subName("sd");
        Connection a = connect(null);
        Session as = autoSession(a);
        MessageConsumer ca = as.createSharedDurableConsumer(as.createTopic(topic), name);
        // C takes at most 10 and never hands one to the application, so it never asks for more:
        // of the 40 it holds 10 (round-robin with A), and the rest, the marker too, go to A.
        Connection c = connect(null, "jms.prefetchPolicy.all=10");
        Session cs = autoSession(c);
        MessageConsumer cc = cs.createSharedDurableConsumer(cs.createTopic(topic), name);
        String[] sent = texts("g", 40);
        publish(topic, sent);
        publish(topic, "marker");
        List<String> atA = textsUntil(ca, "marker");
        Set<String> held = setOf(sent);
        atA.forEach(held::remove);
        assertEquals(40 - held.size(), atA.size(), "A got a message twice: " + atA);
        assertTrue(held.size() >= 4, "C should hold about 10 of the 40 prefetched; it holds " + held);

        // B joins after all 40 were sent. It is live with credit once it has received a probe
        // (C has no credit left, so each probe goes to A or B, in turn).
        Connection b = connect(null);
        Session bs = autoSession(b);
        MessageConsumer cb = bs.createSharedDurableConsumer(bs.createTopic(topic), name);
        List<MessageConsumer> remaining = List.of(ca, cb);
        for (int i = 0; ; i++) {
            assertTrue(i < 6, "B got none of " + i + " probes");
            String probe = "probe-" + i;
            publish(topic, probe);
            if (!collectSplit(remaining, setOf(probe)).get(1).isEmpty()) {
                break;
            }
        }

        cc.close();   // its prefetched messages go back to the subscription
        List<List<String>> per = collectSplit(remaining, held);
        assertEveryConsumerGotSome(per);
        expectNothing(remaining, "every given-back message once");
    }

    @Test
    void dupsOkAcknowledgeDeliversEverything() throws Exception {
        String topic = newTopicName("ack");
        Connection c = connect(clientId("a"));
        Session s = c.createSession(false, Session.DUPS_OK_ACKNOWLEDGE);
        MessageConsumer consumer = s.createDurableConsumer(s.createTopic(topic), subName("d"));
        publish(topic, "d1", "d2", "d3");
        expectTexts(consumer, "d1", "d2", "d3");
    }

    @Test
    void aMessageTheClientRejectsAfterTooManyRedeliveriesNeverComesAgain() throws Exception {
        String topic = newTopicName("ack");
        String name = subName("d");
        String id = clientId("a");
        String[] options = {"jms.redeliveryPolicy.maxRedeliveries=1", "jms.redeliveryPolicy.outcome=REJECTED"};
        Connection c = connect(id, options);
        Session s = c.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer consumer = s.createDurableConsumer(s.createTopic(topic), name);
        publish(topic, "poison");
        expectTexts(consumer, "poison");
        s.recover();
        assertTrue(expectTexts(consumer, "poison").get(0).getJMSRedelivered());
        s.recover();   // redelivery 2 > maxRedeliveries 1: the client settles it as rejected
        publish(topic, "marker");
        Message marker = consumer.receive(RECEIVE_MS);
        assertEquals("marker", marker == null ? null : text(marker),
                "the client must not hand out a message past its redelivery limit");
        marker.acknowledge();
        c.close();

        Connection c2 = connect(id, options);
        Session s2 = c2.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer back = s2.createDurableConsumer(s2.createTopic(topic), name);
        publish(topic, "marker-2");
        assertEquals(List.of(), textsUntil(back, "marker-2"), "a rejected message must never be delivered again");
    }

    @Test
    void unacknowledgedMessagesOfAClosedConnectionGoToTheOtherSharedConsumer() throws Exception {
        String topic = newTopicName("ack");
        String name = subName("sd");
        Connection a = connect(null, "jms.prefetchPolicy.all=1");
        Session as = a.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer ca = as.createSharedDurableConsumer(as.createTopic(topic), name);
        publish(topic, "u1");
        Message held = ca.receive(RECEIVE_MS);
        assertEquals("u1", held == null ? null : text(held));

        Connection b = connect(null);
        Session bs = b.createSession(false, Session.CLIENT_ACKNOWLEDGE);
        MessageConsumer cb = bs.createSharedDurableConsumer(bs.createTopic(topic), name);
        a.close();   // u1 was delivered to A and never acknowledged
        Message m = expectTexts(cb, "u1").get(0);
        assertTrue(m.getJMSRedelivered(), "u1 was delivered before: JMSRedelivered");
        assertTrue(deliveryCount(m) >= 2, "JMSXDeliveryCount " + deliveryCount(m));
        m.acknowledge();
        publish(topic, "marker");
        assertEquals(List.of(), textsUntil(cb, "marker"));
    }
}
