package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import jakarta.jms.IllegalStateRuntimeException;
import jakarta.jms.InvalidDestinationRuntimeException;
import jakarta.jms.InvalidSelectorRuntimeException;
import jakarta.jms.JMSConsumer;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSRuntimeException;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/** The JMS 2.0 simplified API (JMSContext): the same subscriptions, runtime exceptions. */
class ContextApiTest extends JmsTierSupport {

    @Test
    void contextConsumersOfEveryKind() throws Exception {
        String topic = newTopicName("ctx");
        String name = subName("s");
        JMSContext withId = context(clientId("a"), JMSContext.AUTO_ACKNOWLEDGE);
        Topic t = withId.createTopic(topic);
        JMSConsumer sharedDurable = withId.createSharedDurableConsumer(t, name);
        JMSConsumer shared = withId.createSharedConsumer(t, name);
        JMSConsumer durable = withId.createDurableConsumer(t, subName("d"));
        JMSConsumer selected = withId.createDurableConsumer(t, subName("dsel"), "n > 1", false);
        JMSConsumer plain = withId.createConsumer(t);
        JMSContext global = context(null, JMSContext.AUTO_ACKNOWLEDGE);
        JMSConsumer globalShared = global.createSharedDurableConsumer(global.createTopic(topic), name, "n >= 0");

        JMSContext pub = context(null, JMSContext.AUTO_ACKNOWLEDGE);
        pub.createProducer().setProperty("n", 1).send(pub.createTopic(topic), "one");
        pub.createProducer().setProperty("n", 2).send(pub.createTopic(topic), "two");

        for (JMSConsumer c : new JMSConsumer[] {sharedDurable, shared, durable, plain, globalShared}) {
            assertEquals("one", c.receiveBody(String.class, RECEIVE_MS));
            assertEquals("two", c.receiveBody(String.class, RECEIVE_MS));
        }
        assertEquals("two", selected.receiveBody(String.class, RECEIVE_MS));
        assertNull(selected.receiveBody(String.class, NOTHING_MS), "selector n > 1");
    }

    @Test
    void contextUnsubscribeAndItsRuntimeExceptions() throws Exception {
        String topic = newTopicName("ctx");
        String name = subName("d");
        JMSContext ctx = context(clientId("a"), JMSContext.AUTO_ACKNOWLEDGE);
        Topic t = ctx.createTopic(topic);
        JMSConsumer durable = ctx.createDurableConsumer(t, name);
        assertThrows(JMSRuntimeException.class, () -> ctx.unsubscribe(name), "active on this context");
        durable.close();
        ctx.unsubscribe(name);
        assertThrows(InvalidDestinationRuntimeException.class, () -> ctx.unsubscribe(name));
        assertThrows(InvalidDestinationRuntimeException.class, () -> ctx.createConsumer(ctx.createTopic(unknownTopicName())));
        assertThrows(InvalidDestinationRuntimeException.class,
                () -> ctx.createProducer().send(ctx.createTopic(unknownTopicName()), "lost"));
        assertThrows(InvalidSelectorRuntimeException.class, () -> ctx.createSharedConsumer(t, subName("s"), "a = = 1"));

        JMSContext noId = context(null, JMSContext.AUTO_ACKNOWLEDGE);
        assertThrows(IllegalStateRuntimeException.class, () -> noId.createDurableConsumer(noId.createTopic(topic), name));
    }
}
