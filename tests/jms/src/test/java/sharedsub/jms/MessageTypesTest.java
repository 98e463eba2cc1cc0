package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import jakarta.jms.BytesMessage;
import jakarta.jms.Connection;
import jakarta.jms.DeliveryMode;
import jakarta.jms.MapMessage;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageEOFException;
import jakarta.jms.MessageProducer;
import jakarta.jms.ObjectMessage;
import jakarta.jms.Session;
import jakarta.jms.StreamMessage;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;

import org.junit.jupiter.api.Test;

/** Message bodies, properties and headers round-trip, and selectors see them. */
class MessageTypesTest extends JmsTierSupport {

    private static final byte[] BYTES = {0, 1, 2, (byte) 0xff, 127, -128};

    @Test
    void everyBodyTypeRoundTrips() throws Exception {
        String topic = newTopicName("types");
        Connection c = connect(null, "jms.deserializationPolicy.allowList=java.util,java.lang");
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer consumer = s.createConsumer(t);
        MessageProducer p = s.createProducer(t);

        TextMessage text = s.createTextMessage("héllo wörld ✓");
        p.send(text);

        BytesMessage bytes = s.createBytesMessage();
        bytes.writeBytes(BYTES);
        bytes.writeInt(42);
        p.send(bytes);

        MapMessage map = s.createMapMessage();
        map.setBoolean("bool", true);
        map.setByte("byte", (byte) -3);
        map.setShort("short", (short) 1234);
        map.setChar("char", 'Z');
        map.setInt("int", 70000);
        map.setLong("long", 5_000_000_000L);
        map.setFloat("float", 1.5f);
        map.setDouble("double", 2.25d);
        map.setString("string", "value");
        map.setBytes("bytes", BYTES);
        p.send(map);

        StreamMessage stream = s.createStreamMessage();
        stream.writeBoolean(false);
        stream.writeByte((byte) 9);
        stream.writeShort((short) -2);
        stream.writeChar('q');
        stream.writeInt(-70000);
        stream.writeLong(Long.MIN_VALUE);
        stream.writeFloat(-0.5f);
        stream.writeDouble(Math.PI);
        stream.writeString("in a stream");
        stream.writeBytes(BYTES);
        p.send(stream);

        HashMap<String, Object> payload = new HashMap<>();
        payload.put("list", new ArrayList<>(List.of("a", "b")));
        payload.put("number", 17L);
        ObjectMessage object = s.createObjectMessage(payload);
        p.send(object);

        p.send(s.createMessage());   // no body at all

        Message m = consumer.receive(RECEIVE_MS);
        assertInstanceOf(TextMessage.class, m);
        assertEquals("héllo wörld ✓", ((TextMessage) m).getText());

        m = consumer.receive(RECEIVE_MS);
        assertInstanceOf(BytesMessage.class, m);
        BytesMessage b = (BytesMessage) m;
        assertEquals(BYTES.length + 4, b.getBodyLength());
        byte[] buf = new byte[BYTES.length];
        assertEquals(BYTES.length, b.readBytes(buf));
        assertArrayEquals(BYTES, buf);
        assertEquals(42, b.readInt());

        m = consumer.receive(RECEIVE_MS);
        assertInstanceOf(MapMessage.class, m);
        MapMessage mm = (MapMessage) m;
        assertEquals(true, mm.getObject("bool"));
        assertEquals((byte) -3, mm.getObject("byte"));
        assertEquals((short) 1234, mm.getObject("short"));
        assertEquals('Z', mm.getObject("char"));
        assertEquals(70000, mm.getObject("int"));
        assertEquals(5_000_000_000L, mm.getObject("long"));
        assertEquals(1.5f, mm.getObject("float"));
        assertEquals(2.25d, mm.getObject("double"));
        assertEquals("value", mm.getObject("string"));
        assertArrayEquals(BYTES, mm.getBytes("bytes"));

        m = consumer.receive(RECEIVE_MS);
        assertInstanceOf(StreamMessage.class, m);
        StreamMessage sm = (StreamMessage) m;
        assertEquals(false, sm.readObject());
        assertEquals((byte) 9, sm.readObject());
        assertEquals((short) -2, sm.readObject());
        assertEquals('q', sm.readObject());
        assertEquals(-70000, sm.readObject());
        assertEquals(Long.MIN_VALUE, sm.readObject());
        assertEquals(-0.5f, sm.readObject());
        assertEquals(Math.PI, sm.readObject());
        assertEquals("in a stream", sm.readObject());
        assertArrayEquals(BYTES, (byte[]) sm.readObject());
        try {
            sm.readObject();
            fail("stream should be at its end");
        } catch (MessageEOFException expected) {
            // end of stream
        }

        m = consumer.receive(RECEIVE_MS);
        assertInstanceOf(ObjectMessage.class, m);
        assertEquals(payload, ((ObjectMessage) m).getObject());

        m = consumer.receive(RECEIVE_MS);
        assertNotNull(m, "a message without a body");
        assertFalse(m instanceof TextMessage || m instanceof BytesMessage || m instanceof MapMessage
                || m instanceof StreamMessage || m instanceof ObjectMessage, "plain Message, got " + m.getClass());
    }

    private static void setAllProperties(Message m, boolean matching) throws Exception {
        m.setBooleanProperty("pBool", matching);
        m.setByteProperty("pByte", matching ? (byte) 7 : (byte) 8);
        m.setShortProperty("pShort", matching ? (short) 300 : (short) 301);
        m.setIntProperty("pInt", matching ? 70000 : 70001);
        m.setLongProperty("pLong", matching ? 5_000_000_000L : 5_000_000_001L);
        m.setFloatProperty("pFloat", matching ? 1.5f : 2.5f);
        m.setDoubleProperty("pDouble", matching ? 2.25d : 3.25d);
        m.setStringProperty("pString", matching ? "hello" : "bye");
        m.setObjectProperty("pObject", matching ? Integer.valueOf(42) : Integer.valueOf(43));
        m.setObjectProperty("pObjectString", matching ? "obj" : "other");
    }

    @Test
    void everyPropertyTypeRoundTripsAndSelectorsSeeIt() throws Exception {
        String topic = newTopicName("props");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        Map<String, String> selectors = new LinkedHashMap<>();
        selectors.put("boolean", "pBool = TRUE");
        selectors.put("byte", "pByte = 7");
        selectors.put("short", "pShort = 300");
        selectors.put("int", "pInt = 70000");
        selectors.put("long", "pLong = 5000000000");
        selectors.put("float", "pFloat > 1.4 AND pFloat < 1.6");
        selectors.put("double", "pDouble = 2.25");
        selectors.put("String", "pString = 'hello'");
        selectors.put("Object(Integer)", "pObject = 42");
        selectors.put("Object(String)", "pObjectString LIKE 'o_j'");
        selectors.put("arithmetic across numeric types", "pByte + pShort = 307 AND pLong > pInt * 70000");
        selectors.put("IS NOT NULL / BETWEEN", "pInt IS NOT NULL AND pDouble BETWEEN 2 AND 3");
        selectors.put("missing property", "pMissing IS NULL AND pString IN ('hello', 'x')");
        Map<String, MessageConsumer> consumers = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : selectors.entrySet()) {
            consumers.put(e.getKey(), s.createConsumer(t, e.getValue()));
        }
        MessageConsumer all = s.createDurableConsumer(t, subName("all"));

        MessageProducer p = s.createProducer(t);
        TextMessage miss = s.createTextMessage("non-matching");
        setAllProperties(miss, false);
        p.send(miss);
        TextMessage hit = s.createTextMessage("matching");
        setAllProperties(hit, true);
        p.send(hit);

        // The non-matching message was published first: a selector that wrongly lets it through
        // shows it before the matching one.
        List<String> failures = new ArrayList<>();
        for (Map.Entry<String, MessageConsumer> e : consumers.entrySet()) {
            Message m = e.getValue().receive(RECEIVE_MS);
            String got = m == null ? null : text(m);
            if (!"matching".equals(got)) {
                failures.add(e.getKey() + " [" + selectors.get(e.getKey()) + "] got " + got);
            }
        }
        assertTrue(failures.isEmpty(), "selectors on properties: " + failures);

        // the received copy keeps each property's type and value
        Message m = expectTexts(all, "non-matching", "matching").get(1);
        assertEquals(Boolean.TRUE, m.getObjectProperty("pBool"));
        assertEquals(Byte.valueOf((byte) 7), m.getObjectProperty("pByte"));
        assertEquals(Short.valueOf((short) 300), m.getObjectProperty("pShort"));
        assertEquals(Integer.valueOf(70000), m.getObjectProperty("pInt"));
        assertEquals(Long.valueOf(5_000_000_000L), m.getObjectProperty("pLong"));
        assertEquals(Float.valueOf(1.5f), m.getObjectProperty("pFloat"));
        assertEquals(Double.valueOf(2.25d), m.getObjectProperty("pDouble"));
        assertEquals("hello", m.getObjectProperty("pString"));
        assertEquals(Integer.valueOf(42), m.getObjectProperty("pObject"));
        assertEquals("obj", m.getObjectProperty("pObjectString"));
        assertTrue(m.propertyExists("pLong"));
        assertFalse(m.propertyExists("pMissing"));
        expectNothing(new ArrayList<>(consumers.values()), "selector consumers: only the matching message");
    }

    @Test
    void headersAreVisibleAndSelectable() throws Exception {
        String topic = newTopicName("hdr");
        Connection c = connect(null);
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer all = s.createConsumer(t);
        MessageConsumer byPriority = s.createConsumer(t, "JMSPriority = 7");
        MessageConsumer byType = s.createConsumer(t, "JMSType = 'order'");
        MessageConsumer byCorrelation = s.createConsumer(t, "JMSCorrelationID = 'corr-1'");
        MessageConsumer byMode = s.createConsumer(t, "JMSDeliveryMode = 'NON_PERSISTENT'");
        MessageConsumer byPersistent = s.createConsumer(t, "JMSDeliveryMode = 'PERSISTENT'");
        MessageConsumer byExpiration = s.createConsumer(t, "JMSExpiration > 0");
        MessageConsumer byTimestamp = s.createConsumer(t, "JMSTimestamp > " + (System.currentTimeMillis() - 600_000));

        MessageProducer p = s.createProducer(t);
        TextMessage plain = s.createTextMessage("plain");
        p.send(plain, DeliveryMode.PERSISTENT, 4, 0);
        TextMessage special = s.createTextMessage("special");
        special.setJMSType("order");
        special.setJMSCorrelationID("corr-1");
        long before = System.currentTimeMillis();
        p.send(special, DeliveryMode.NON_PERSISTENT, 7, 60_000);
        long after = System.currentTimeMillis();

        List<Message> got = expectTexts(all, "plain", "special");
        Message m0 = got.get(0);
        assertEquals(DeliveryMode.PERSISTENT, m0.getJMSDeliveryMode());
        assertEquals(4, m0.getJMSPriority());
        assertEquals(0L, m0.getJMSExpiration());
        assertEquals(null, m0.getJMSType());
        assertEquals(null, m0.getJMSCorrelationID());
        Message m = got.get(1);
        assertEquals(7, m.getJMSPriority());
        assertEquals(DeliveryMode.NON_PERSISTENT, m.getJMSDeliveryMode());
        assertEquals("order", m.getJMSType());
        assertEquals("corr-1", m.getJMSCorrelationID());
        assertTrue(m.getJMSExpiration() >= before + 60_000 && m.getJMSExpiration() <= after + 60_000,
                "JMSExpiration " + m.getJMSExpiration() + " should be send time + 60 s");
        assertNotNull(m.getJMSMessageID());
        assertTrue(m.getJMSMessageID().startsWith("ID:"), m.getJMSMessageID());
        assertEquals(special.getJMSMessageID(), m.getJMSMessageID());
        assertTrue(m.getJMSTimestamp() >= before - 1000 && m.getJMSTimestamp() <= after + 1000);
        assertInstanceOf(Topic.class, m.getJMSDestination());
        assertEquals(topic, ((Topic) m.getJMSDestination()).getTopicName());
        assertFalse(m.getJMSRedelivered());

        expectTexts(byPriority, "special");
        expectTexts(byType, "special");
        expectTexts(byCorrelation, "special");
        expectTexts(byMode, "special");
        expectTexts(byPersistent, "plain");
        expectTexts(byExpiration, "special");
        expectTexts(byTimestamp, "plain", "special");
        expectNothing(List.of(byPriority, byType, byCorrelation, byMode, byPersistent, byExpiration), "header selectors");
    }

    @Test
    void replyToAndMessageIdSelectorsWork() throws Exception {
        String topic = newTopicName("hdr");
        Connection c = connect(null);
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer all = s.createConsumer(t);
        MessageConsumer byId = s.createConsumer(t, "JMSMessageID LIKE 'ID:%'");
        MessageConsumer byReplyTo = s.createConsumer(t, "JMSReplyTo IS NOT NULL");
        MessageProducer p = s.createProducer(t);
        TextMessage first = s.createTextMessage("first");
        first.setJMSReplyTo(s.createTopic("replies-" + uid));
        p.send(first);
        p.send(s.createTextMessage("second"));
        Message m = expectTexts(all, "first", "second").get(0);
        assertInstanceOf(Topic.class, m.getJMSReplyTo());
        assertEquals("replies-" + uid, ((Topic) m.getJMSReplyTo()).getTopicName());
        assertEquals(first.getJMSMessageID(), m.getJMSMessageID());
        expectTexts(byId, "first", "second");
        expectTexts(byReplyTo, "first");
        expectNothing(byReplyTo, "JMSReplyTo IS NOT NULL: only the message with a reply-to");
    }

    @Test
    void anAlreadyExpiredMessageIsNotDelivered() throws Exception {
        String topic = newTopicName("ttl");
        String name = subName("d");
        String id = clientId("a");
        // jms.localMessageExpiry=false: the client would otherwise drop expired messages itself,
        // hiding what the server delivers.
        Connection c = connect(id, "jms.localMessageExpiry=false");
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        s.createDurableConsumer(t, name).close();
        MessageConsumer plain = s.createConsumer(t);

        MessageProducer p = s.createProducer(t);
        p.send(s.createTextMessage("short-lived"), DeliveryMode.PERSISTENT, 4, 1_000);
        p.send(s.createTextMessage("long-lived"), DeliveryMode.PERSISTENT, 4, 0);
        // the plain consumer is attached: it may or may not see short-lived in time; it is the
        // positive control that both were routed
        List<String> seen = textsUntil(plain, "long-lived");
        assertTrue(seen.isEmpty() || seen.equals(List.of("short-lived")), "plain consumer saw " + seen);
        Thread.sleep(1_500);   // short-lived has expired by now

        MessageConsumer d = s.createDurableConsumer(t, name);
        assertEquals(List.of(), textsUntil(d, "long-lived"), "an expired message must not be delivered");
    }

    @Test
    void aLargeMessageRoundTrips() throws Exception {
        String topic = newTopicName("large");
        Connection c = connect(clientId("a"));
        Session s = autoSession(c);
        Topic t = s.createTopic(topic);
        MessageConsumer durable = s.createDurableConsumer(t, subName("d"));
        byte[] payload = new byte[400_000];   // many AMQP frames each way
        new java.util.Random(7).nextBytes(payload);
        BytesMessage big = s.createBytesMessage();
        big.writeBytes(payload);
        big.setStringProperty("kind", "big");
        s.createProducer(t).send(big);
        Message m = durable.receive(RECEIVE_MS);
        assertInstanceOf(BytesMessage.class, m);
        BytesMessage got = (BytesMessage) m;
        assertEquals(payload.length, got.getBodyLength());
        byte[] back = new byte[payload.length];
        assertEquals(payload.length, got.readBytes(back));
        assertArrayEquals(payload, back);
        assertEquals("big", got.getStringProperty("kind"));
    }
}
