package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import jakarta.jms.Connection;
import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSProducer;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/**
 * Transacted sessions (AMQP transactions: a coordinator link, declare/discharge), written to the
 * JMS spec: committed work happens, rolled-back work does not.
 */
class TransactionTest extends JmsTierSupport {

    @Test
    void committedPublishIsDeliveredWhole() throws Exception {
        String topic = newTopicName("tx");
        Connection sub = connect(null);
        Session ss = autoSession(sub);
        MessageConsumer consumer = ss.createConsumer(ss.createTopic(topic));

        Connection pubConn = connect(null);
        Session tx = pubConn.createSession(true, Session.SESSION_TRANSACTED);
        assertTrue(tx.getTransacted());
        MessageProducer p = tx.createProducer(tx.createTopic(topic));
        p.send(tx.createTextMessage("t1"));
        p.send(tx.createTextMessage("t2"));
        p.send(tx.createTextMessage("t3"));
        // Positive control: a message published outside the transaction after its sends arrives
        // first and alone (a quiet wait with nothing received would prove less).
        publish(topic, "marker");
        assertEquals(List.of(), textsUntil(consumer, "marker"), "nothing of an uncommitted transaction is delivered");
        expectNothing(consumer, "nothing of an uncommitted transaction is delivered");
        tx.commit();
        expectTexts(consumer, "t1", "t2", "t3");
    }

    @Test
    void rolledBackPublishIsNeverDelivered() throws Exception {
        String topic = newTopicName("tx");
        Connection sub = connect(null);
        Session ss = autoSession(sub);
        MessageConsumer consumer = ss.createConsumer(ss.createTopic(topic));

        Connection pubConn = connect(null);
        Session tx = pubConn.createSession(true, Session.SESSION_TRANSACTED);
        MessageProducer p = tx.createProducer(tx.createTopic(topic));
        p.send(tx.createTextMessage("rolled-back-1"));
        p.send(tx.createTextMessage("rolled-back-2"));
        tx.rollback();
        p.send(tx.createTextMessage("committed"));
        tx.commit();
        assertEquals(List.of(), textsUntil(consumer, "committed"), "rolled-back messages were delivered");
    }

    @Test
    void transactedConsumerThatCommitsDoesNotSeeTheMessagesAgain() throws Exception {
        String topic = newTopicName("tx");
        String name = subName("d");
        String id = clientId("a");
        Connection c = connect(id);
        Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
        Topic t = tx.createTopic(topic);
        MessageConsumer consumer = tx.createDurableConsumer(t, name);
        publish(topic, "c1", "c2", "c3");
        expectTexts(consumer, "c1", "c2", "c3");
        tx.commit();
        expectNothing(consumer, "committed messages are gone");
        c.close();

        Connection c2 = connect(id);
        Session s2 = autoSession(c2);
        MessageConsumer back = s2.createDurableConsumer(s2.createTopic(topic), name);
        publish(topic, "marker");
        assertEquals(List.of(), textsUntil(back, "marker"), "messages consumed in a committed transaction came again");
    }

    @Test
    void transactedConsumerThatRollsBackGetsTheMessagesAgain() throws Exception {
        String topic = newTopicName("tx");
        String name = subName("d");
        String id = clientId("a");
        Connection c = connect(id);
        Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
        Topic t = tx.createTopic(topic);
        MessageConsumer consumer = tx.createDurableConsumer(t, name);
        publish(topic, "r1", "r2");
        for (Message m : expectTexts(consumer, "r1", "r2")) {
            assertFalse(m.getJMSRedelivered());
        }
        tx.rollback();
        List<Message> again = expectTexts(consumer, "r1", "r2");
        for (Message m : again) {
            assertTrue(m.getJMSRedelivered(), "a message of a rolled-back transaction comes again marked redelivered");
            assertTrue(m.getIntProperty("JMSXDeliveryCount") >= 2, "JMSXDeliveryCount " + m.getIntProperty("JMSXDeliveryCount"));
        }
        tx.commit();
        c.close();

        Connection c2 = connect(id);
        Session s2 = autoSession(c2);
        MessageConsumer back = s2.createDurableConsumer(s2.createTopic(topic), name);
        publish(topic, "marker");
        assertEquals(List.of(), textsUntil(back, "marker"), "committed after the rollback: nothing comes again");
    }

    @Test
    void consumeAndPublishInOneTransaction() throws Exception {
        String in = newTopicName("txin");
        String out = newTopicName("txout");
        String name = subName("d");
        Connection c = connect(clientId("a"));
        Session watch = autoSession(c);
        MessageConsumer outWatcher = watch.createConsumer(watch.createTopic(out));
        Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
        MessageConsumer consumer = tx.createDurableConsumer(tx.createTopic(in), name);
        MessageProducer forward = tx.createProducer(tx.createTopic(out));
        publish(in, "work");
        Message m = expectTexts(consumer, "work").get(0);
        forward.send(tx.createTextMessage("done-" + text(m)));
        tx.rollback();
        Message again = expectTexts(consumer, "work").get(0);
        assertTrue(again.getJMSRedelivered());
        forward.send(tx.createTextMessage("done-again"));
        tx.commit();
        assertEquals(List.of(), textsUntil(outWatcher, "done-again"), "the rolled-back forward must not appear");
    }

    @Test
    void contextSessionTransactedPublishCommitAndRollback() throws Exception {
        String topic = newTopicName("tx");
        Connection sub = connect(null);
        Session ss = autoSession(sub);
        MessageConsumer consumer = ss.createConsumer(ss.createTopic(topic));

        JMSContext ctx = context(null, JMSContext.SESSION_TRANSACTED);
        assertTrue(ctx.getTransacted());
        Topic t = ctx.createTopic(topic);
        JMSProducer p = ctx.createProducer();
        p.send(t, "ctx-rolled-back");
        ctx.rollback();
        p.send(t, "ctx-1");
        p.send(t, "ctx-2");
        ctx.commit();
        assertEquals(List.of("ctx-1"), textsUntil(consumer, "ctx-2"), "JMSContext transaction");
    }

    @Test
    void contextSessionTransactedConsumeCommitAndRollback() throws Exception {
        String topic = newTopicName("tx");
        String name = subName("sd");
        JMSContext ctx = context(null, JMSContext.SESSION_TRANSACTED);
        Topic t = ctx.createTopic(topic);
        JMSConsumer consumer = ctx.createSharedDurableConsumer(t, name);
        publish(topic, "k1", "k2");
        assertEquals("k1", consumer.receiveBody(String.class, RECEIVE_MS));
        assertEquals("k2", consumer.receiveBody(String.class, RECEIVE_MS));
        ctx.rollback();
        Message m1 = consumer.receive(RECEIVE_MS);
        Message m2 = consumer.receive(RECEIVE_MS);
        assertEquals("k1", m1 == null ? null : text(m1));
        assertEquals("k2", m2 == null ? null : text(m2));
        assertTrue(m1.getJMSRedelivered() && m2.getJMSRedelivered(), "redelivered after the context's rollback");
        ctx.commit();
        consumer.close();

        JMSConsumer back = ctx.createSharedDurableConsumer(t, name);
        publish(topic, "marker");
        assertEquals("marker", back.receiveBody(String.class, RECEIVE_MS), "committed messages came again");
        ctx.commit();
    }

    @Test
    void closingATransactedSessionRollsBackWhatItConsumedAndPublished() throws Exception {
        String topic = newTopicName("tx");
        String name = subName("d");
        String id = clientId("a");
        Connection watcher = connect(null);
        Session ws = autoSession(watcher);
        MessageConsumer watch = ws.createConsumer(ws.createTopic(topic));

        Connection c = connect(id);
        Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
        Topic t = tx.createTopic(topic);
        MessageConsumer consumer = tx.createDurableConsumer(t, name);
        publish(topic, "x1");
        expectTexts(consumer, "x1");
        assertEquals(List.of(), textsUntil(watch, "x1"));
        tx.createProducer(t).send(tx.createTextMessage("uncommitted"));
        tx.close();   // JMS: closing a transacted session rolls its transaction back
        Session s2 = autoSession(c);
        MessageConsumer back = s2.createDurableConsumer(s2.createTopic(topic), name);
        Message again = expectTexts(back, "x1").get(0);
        assertTrue(again.getJMSRedelivered(), "consumed in a rolled-back transaction: redelivered");
        publish(topic, "marker");
        assertEquals(List.of(), textsUntil(back, "marker"));
        assertEquals(List.of(), textsUntil(watch, "marker"), "the uncommitted publish must never appear");
    }

    @Test
    void aTransactionOfAClosedConnectionIsNeverCommitted() throws Exception {
        String topic = newTopicName("tx");
        Connection sub = connect(null);
        Session ss = autoSession(sub);
        MessageConsumer consumer = ss.createConsumer(ss.createTopic(topic));
        Connection c = connect(null);
        Session tx = c.createSession(true, Session.SESSION_TRANSACTED);
        tx.createProducer(tx.createTopic(topic)).send(tx.createTextMessage("never"));
        c.close();
        publish(topic, "marker");
        assertEquals(List.of(), textsUntil(consumer, "marker"), "a transaction left open by a closed connection was delivered");
    }
}
