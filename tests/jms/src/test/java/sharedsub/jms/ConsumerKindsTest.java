package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import jakarta.jms.Connection;
import jakarta.jms.InvalidDestinationException;
import jakarta.jms.JMSException;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/**
 * Each kind of topic consumer the Jakarta Messaging API can create, against a real server:
 * shared durable, shared non-durable, unshared durable (with a ClientID), plain; and the
 * refusals for an unknown topic.
 */
class ConsumerKindsTest extends JmsTierSupport {

    @Test
    void sharedDurableConsumerWithClientIdReceives() throws Exception {
        String topic = newTopicName("kinds");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        MessageConsumer consumer = s.createSharedDurableConsumer(s.createTopic(topic), subName("sd"));
        publish(topic, "one", "two");
        expectTexts(consumer, "one", "two");
    }

    @Test
    void sharedDurableConsumerWithoutClientIdReceives() throws Exception {
        String topic = newTopicName("kinds");
        Connection c = connect(null);
        Session s = autoSession(c);
        MessageConsumer consumer = s.createSharedDurableConsumer(s.createTopic(topic), subName("sdg"));
        publish(topic, "one", "two");
        expectTexts(consumer, "one", "two");
    }

    @Test
    void sharedConsumerReceives() throws Exception {
        String topic = newTopicName("kinds");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        MessageConsumer withId = s.createSharedConsumer(s.createTopic(topic), subName("sv"));
        Connection g = connect(null);
        Session gs = autoSession(g);
        MessageConsumer global = gs.createSharedConsumer(gs.createTopic(topic), subName("sv"));
        publish(topic, "one", "two");
        expectTexts(withId, "one", "two");
        expectTexts(global, "one", "two");
    }

    @Test
    void durableConsumerWithClientIdReceives() throws Exception {
        String topic = newTopicName("kinds");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        MessageConsumer consumer = s.createDurableConsumer(s.createTopic(topic), subName("d"));
        publish(topic, "one", "two");
        expectTexts(consumer, "one", "two");
        // the classic API name for the same thing
        MessageConsumer subscriber = s.createDurableSubscriber(s.createTopic(topic), subName("d2"));
        publish(topic, "three");
        expectTexts(subscriber, "three");
        expectTexts(consumer, "three");
    }

    @Test
    void durableConsumerWithoutClientIdFailsOnTheClient() throws Exception {
        String topic = newTopicName("kinds");
        Connection c = connect(null);
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        // JMS 2.0 §6.11.1 / Qpid JMS: an unshared durable subscription needs a ClientID.
        jakarta.jms.IllegalStateException e =
                assertThrows(jakarta.jms.IllegalStateException.class, () -> s.createDurableConsumer(t, subName("d")));
        assertTrue(e.getMessage() != null && !e.getMessage().isEmpty());
        // The connection is still usable.
        MessageConsumer plain = s.createConsumer(t);
        publish(topic, "after");
        expectTexts(plain, "after");
    }

    @Test
    void plainTopicConsumerGetsOnlyWhatIsPublishedAfterItExists() throws Exception {
        String topic = newTopicName("kinds");
        publish(topic, "before");
        Connection c = connect(null);
        Session s = autoSession(c);
        MessageConsumer consumer = s.createConsumer(s.createTopic(topic));
        publish(topic, "after-1", "after-2");
        expectTexts(consumer, "after-1", "after-2");
        expectNothing(consumer, "a plain consumer must not see messages published before it was created");
    }

    @Test
    void consumerOnUnknownTopicIsInvalidDestination() throws Exception {
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(unknownTopicName());
        assertThrows(InvalidDestinationException.class, () -> s.createConsumer(t));
        assertThrows(InvalidDestinationException.class, () -> s.createSharedDurableConsumer(t, subName("sd")));
        assertThrows(InvalidDestinationException.class, () -> s.createSharedConsumer(t, subName("sv")));
        assertThrows(InvalidDestinationException.class, () -> s.createDurableConsumer(t, subName("d")));
        // nothing was created: the subscription name is unknown
        assertThrows(InvalidDestinationException.class, () -> s.unsubscribe(subName("d")));
    }

    @Test
    void producerOnUnknownTopicIsInvalidDestination() throws Exception {
        Connection c = connect(null);
        Session s = autoSession(c);
        Topic t = s.createTopic(unknownTopicName());
        assertThrows(InvalidDestinationException.class, () -> s.createProducer(t));
    }

    @Test
    void anonymousProducerSendToUnknownTopicIsInvalidDestination() throws Exception {
        String topic = newTopicName("kinds");
        Connection c = connect(null);
        Session s = autoSession(c);
        MessageConsumer consumer = s.createConsumer(s.createTopic(topic));
        MessageProducer anonymous = s.createProducer(null);
        JMSException e = assertThrows(JMSException.class,
                () -> anonymous.send(s.createTopic(unknownTopicName()), s.createTextMessage("lost")));
        assertEquals(InvalidDestinationException.class, e.getClass(), "exception for a send to an unknown topic: " + e);
        // the same producer still works for a topic that exists
        anonymous.send(s.createTopic(topic), s.createTextMessage("kept"));
        expectTexts(consumer, "kept");
    }

    @Test
    void topicSubscriberOfTheClassicApi() throws Exception {
        String topic = newTopicName("kinds");
        Connection c = connect(null);
        Session s = autoSession(c);
        jakarta.jms.TopicSession ts = ((jakarta.jms.TopicConnection) c).createTopicSession(false, Session.AUTO_ACKNOWLEDGE);
        jakarta.jms.TopicSubscriber sub = ts.createSubscriber(ts.createTopic(topic));
        jakarta.jms.TopicPublisher pub = ts.createPublisher(ts.createTopic(topic));
        pub.publish(ts.createTextMessage("via-publisher"));
        List<jakarta.jms.Message> got = expectTexts(sub, "via-publisher");
        assertTrue(got.get(0).getJMSDestination() instanceof Topic);
        assertEquals(topic, ((Topic) got.get(0).getJMSDestination()).getTopicName());
        s.close();
    }
}
