package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import jakarta.jms.CompletionListener;
import jakarta.jms.Connection;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/**
 * How the client pulls and pushes: zero-prefetch consumers (every receive is a credit-1 pull that
 * ends with a drain the server must answer), receiveNoWait, MessageListener, asynchronous send.
 */
class PullAndAsyncTest extends JmsTierSupport {

    @Test
    void zeroPrefetchConsumerPullsEachMessageAndAnEmptyPullReturnsNull() throws Exception {
        String topic = newTopicName("pull");
        Connection c = connect(clientId("a"), "jms.prefetchPolicy.all=0");
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer durable = s.createDurableConsumer(t, subName("d"));
        MessageConsumer shared = s.createSharedDurableConsumer(t, subName("sd"));

        long start = System.currentTimeMillis();
        assertNull(durable.receiveNoWait(), "nothing published yet");
        assertNull(shared.receive(500), "nothing published yet");
        assertTrue(System.currentTimeMillis() - start < 10_000,
                "empty pulls must be answered (drain), took " + (System.currentTimeMillis() - start) + " ms");

        publish(topic, "p1", "p2", "p3");
        expectTexts(durable, "p1", "p2", "p3");
        expectTexts(shared, "p1", "p2", "p3");
        expectNothing(List.of(durable, shared), "three messages, three pulls");

        // the consumers still work after empty pulls
        publish(topic, "p4");
        expectTexts(durable, "p4");
        expectTexts(shared, "p4");
    }

    @Test
    void receiveNoWaitOnAPrefetchingConsumerSeesWhatArrived() throws Exception {
        String topic = newTopicName("pull");
        Connection c = connect(null);
        Session s = autoSession(c);
        MessageConsumer consumer = s.createConsumer(s.createTopic(topic));
        assertNull(consumer.receiveNoWait());
        publish(topic, "w1", "w2");
        expectTexts(consumer, "w1");
        long deadline = System.currentTimeMillis() + RECEIVE_MS;
        Message m = null;
        while (m == null && System.currentTimeMillis() < deadline) {
            m = consumer.receiveNoWait();
            if (m == null) {
                Thread.sleep(100);
            }
        }
        assertEquals("w2", m == null ? null : text(m));
    }

    @Test
    void messageListenerGetsMessagesInOrder() throws Exception {
        String topic = newTopicName("listener");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        MessageConsumer consumer = s.createSharedDurableConsumer(s.createTopic(topic), subName("sd"));
        List<String> got = new CopyOnWriteArrayList<>();
        CountDownLatch three = new CountDownLatch(3);
        consumer.setMessageListener(m -> {
            try {
                got.add(((TextMessage) m).getText());
            } catch (Exception e) {
                got.add("error: " + e);
            }
            three.countDown();
        });
        publish(topic, "l1", "l2", "l3");
        assertTrue(three.await(RECEIVE_MS, TimeUnit.MILLISECONDS), "listener got " + got);
        assertEquals(List.of("l1", "l2", "l3"), got);
    }

    @Test
    void asynchronousSendCompletesAndAnUnknownTopicFailsTheCompletion() throws Exception {
        String topic = newTopicName("async");
        Connection c = connect(null);
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer consumer = s.createConsumer(t);
        MessageProducer producer = s.createProducer(null);

        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<Exception> failure = new AtomicReference<>();
        producer.send(t, s.createTextMessage("async-ok"), new CompletionListener() {
            @Override
            public void onCompletion(Message message) {
                done.countDown();
            }

            @Override
            public void onException(Message message, Exception exception) {
                failure.set(exception);
                done.countDown();
            }
        });
        assertTrue(done.await(RECEIVE_MS, TimeUnit.MILLISECONDS), "no completion for an asynchronous send");
        assertNull(failure.get(), "asynchronous send to an existing topic failed");
        expectTexts(consumer, "async-ok");

        CountDownLatch refused = new CountDownLatch(1);
        AtomicReference<Exception> error = new AtomicReference<>();
        producer.send(s.createTopic(unknownTopicName()), s.createTextMessage("async-lost"), new CompletionListener() {
            @Override
            public void onCompletion(Message message) {
                refused.countDown();
            }

            @Override
            public void onException(Message message, Exception exception) {
                error.set(exception);
                refused.countDown();
            }
        });
        assertTrue(refused.await(RECEIVE_MS, TimeUnit.MILLISECONDS), "no completion for a send to an unknown topic");
        assertInstanceOf(InvalidDestinationException.class, error.get(), "completion of a send to an unknown topic");
    }

    @Test
    void messagesPublishedWhileTheConnectionIsStoppedArriveAfterStart() throws Exception {
        String topic = newTopicName("stop");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer durable = s.createDurableConsumer(t, subName("d"));
        MessageConsumer plain = s.createConsumer(t);
        publish(topic, "before-stop");
        expectTexts(durable, "before-stop");
        expectTexts(plain, "before-stop");
        c.stop();   // the client stops its consumers (a drain for each) and delivers nothing
        publish(topic, "while-stopped");
        Thread.sleep(1_000);
        c.start();
        expectTexts(durable, "while-stopped");
        expectTexts(plain, "while-stopped");
    }
}
