package sharedsub.jms;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import jakarta.jms.Connection;
import jakarta.jms.ConnectionFactory;
import jakarta.jms.JMSContext;
import jakarta.jms.JMSException;
import jakarta.jms.Message;
import jakarta.jms.MessageConsumer;
import jakarta.jms.MessageProducer;
import jakarta.jms.Session;
import jakarta.jms.TextMessage;
import jakarta.jms.Topic;

import org.apache.qpid.jms.JmsConnectionFactory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInfo;

/**
 * Shared plumbing of the tier: the server's URL and data dir (system properties set by
 * tests/jms/test_jms_tier.py), topic creation through the sharedsub command line, unique names,
 * connections closed after each test, and receive helpers with the tier's two timeouts.
 *
 * Everything a test does to the server goes through the Jakarta Messaging API of the Qpid JMS
 * client; the only other channel is {@code python -m sharedsub topics create}, because a topic
 * must exist before it is used.
 */
abstract class JmsTierSupport {

    static final String URL = System.getProperty("sharedsub.url", "amqp://127.0.0.1:5672");
    static final String DATA_DIR = System.getProperty("sharedsub.dataDir", "data");
    static final String PYTHON = System.getProperty("sharedsub.python", "python3");

    /** Wait for a message that must arrive (routing by the Spark job takes ~0.3–3 s). */
    static final long RECEIVE_MS = 30_000;
    /**
     * Wait used to check that nothing (more) arrives. Every use comes after a positive control
     * (the expected messages, or a marker published after the unwanted ones, already received on
     * the same consumers), so what should not arrive would have been routed by then: one second
     * shows what the three of the tier's first version did.
     */
    static final long NOTHING_MS = 1_000;

    private final Deque<AutoCloseable> resources = new ArrayDeque<>();
    /** Short unique token of this test: topic, subscription and ClientID names carry it. */
    protected String uid;
    protected String testName;

    @BeforeEach
    void tierSetUp(TestInfo info) {
        uid = UUID.randomUUID().toString().replace("-", "").substring(0, 10);
        testName = info.getTestMethod().map(m -> m.getName()).orElse("test");
    }

    @AfterEach
    void tierTearDown() {
        while (!resources.isEmpty()) {
            AutoCloseable r = resources.pop();
            try {
                r.close();
            } catch (Exception ignored) {
                // the test's outcome is what matters; a connection the server closed is fine here
            }
        }
    }

    // ------------------------------------------------------------------ names and topics

    /** A unique subscription name (no '|', which the client refuses). */
    protected String subName(String hint) {
        return hint + "-" + uid;
    }

    /** A unique ClientID. */
    protected String clientId(String hint) {
        return "jms-" + hint + "-" + uid;
    }

    /** Create a fresh topic through the command line; the running service picks it up. */
    protected String newTopicName(String hint) {
        String name = "jms-" + hint + "-" + uid;
        createTopic(name);
        return name;
    }

    /** A name no topic has (for the refusal tests). */
    protected String unknownTopicName() {
        return "jms-missing-" + uid;
    }

    static void createTopic(String name) {
        List<String> cmd = List.of(PYTHON, "-m", "sharedsub", "topics", "create", name, "--data-dir", DATA_DIR);
        try {
            ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
            String root = System.getProperty("sharedsub.root");
            if (root != null) {
                pb.directory(new File(root));
            }
            Process p = pb.start();
            byte[] out = p.getInputStream().readAllBytes();
            if (!p.waitFor(120, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                fail("topics create " + name + " did not finish in 120 s");
            }
            if (p.exitValue() != 0) {
                fail("topics create " + name + " exited " + p.exitValue() + ": " + new String(out, StandardCharsets.UTF_8));
            }
        } catch (IOException e) {
            fail("cannot run " + cmd + ": " + e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            fail("interrupted creating topic " + name);
        }
    }

    // ------------------------------------------------------------------ connections

    /**
     * Options on every connection.
     * <ul>
     * <li>{@code jms.receiveLocalOnly=true}: by default a receive(timeout) on a prefetching
     * consumer that finds its buffer empty when the timeout ends drains the link (credit to 0
     * until the client grants it again). The tier polls several consumers of one shared
     * subscription with short receives; a consumer caught mid-drain when a routed batch is
     * dispatched gets none of it, which is correct AMQP but makes "every consumer got some"
     * a race. The drain path itself is tested in {@link PullAndAsyncTest} (prefetch 0 and
     * receiveNoWait, which this option does not affect).</li>
     * <li>{@code amqp.drainTimeout=15000}: a drain the server does not answer fails the consumer
     * after 15 s instead of the default 60 s (same exception, less waiting).</li>
     * </ul>
     */
    static final String BASE_OPTIONS = "jms.receiveLocalOnly=true&amqp.drainTimeout=15000";

    /** A factory for the server's URL with extra URI options ("jms.prefetchPolicy.all=5", ...). */
    protected static ConnectionFactory factory(String... options) {
        return factoryAt(URL, options);
    }

    /** As {@link #factory}, for another URL (another server, a failover URI). */
    protected static ConnectionFactory factoryAt(String base, String... options) {
        String url = base + (base.contains("?") ? "&" : "?") + BASE_OPTIONS;
        if (options.length > 0) {
            url += "&" + String.join("&", options);
        }
        return new JmsConnectionFactory(url);
    }

    /** A started connection; clientId null means none (global shared subscriptions). */
    protected Connection connect(String clientId, String... options) throws JMSException {
        Connection c = factory(options).createConnection();
        track(c);
        if (clientId != null) {
            c.setClientID(clientId);
        }
        c.start();
        return c;
    }

    /** A JMSContext (auto-started on first consumer) closed after the test. */
    protected JMSContext context(String clientId, int sessionMode, String... options) {
        JMSContext ctx = factory(options).createContext(sessionMode);
        track(ctx);
        if (clientId != null) {
            ctx.setClientID(clientId);
        }
        return ctx;
    }

    protected <T extends AutoCloseable> T track(T resource) {
        resources.push(resource);
        return resource;
    }

    protected static Session autoSession(Connection c) throws JMSException {
        return c.createSession(false, Session.AUTO_ACKNOWLEDGE);
    }

    // ------------------------------------------------------------------ publishing

    /** Publish text messages (persistent, so each send waits for the server's accept). */
    protected static void publish(Connection c, String topic, String... texts) throws JMSException {
        Session s = autoSession(c);
        try {
            MessageProducer p = s.createProducer(s.createTopic(topic));
            for (String t : texts) {
                p.send(s.createTextMessage(t));
            }
        } finally {
            s.close();
        }
    }

    /** Publish on a connection of its own (no ClientID): a publisher that is not "local" to anyone. */
    protected void publish(String topic, String... texts) throws JMSException {
        try (Connection c = factory().createConnection()) {
            publish(c, topic, texts);
        }
    }

    // ------------------------------------------------------------------ receiving

    protected static String text(Message m) throws JMSException {
        assertNotNull(m);
        assertTrue(m instanceof TextMessage, "expected a TextMessage, got " + m.getClass().getName());
        return ((TextMessage) m).getText();
    }

    /** Receive exactly the given texts in this order, each within RECEIVE_MS. */
    protected static List<Message> expectTexts(MessageConsumer c, String... texts) throws JMSException {
        List<Message> got = new ArrayList<>();
        List<String> seen = new ArrayList<>();
        for (String want : texts) {
            Message m = c.receive(RECEIVE_MS);
            if (m == null) {
                fail("expected '" + want + "' within " + RECEIVE_MS + " ms; received so far " + seen + " of " + Arrays.toString(texts));
            }
            seen.add(text(m));
            got.add(m);
        }
        assertEquals(Arrays.asList(texts), seen, "messages received, in order");
        return got;
    }

    /** Receive texts until {@code marker} arrives (within RECEIVE_MS each); return those before it. */
    protected static List<String> textsUntil(MessageConsumer c, String marker) throws JMSException {
        List<String> seen = new ArrayList<>();
        while (true) {
            Message m = c.receive(RECEIVE_MS);
            if (m == null) {
                fail("marker '" + marker + "' did not arrive within " + RECEIVE_MS + " ms; received " + seen);
            }
            String t = text(m);
            if (t.equals(marker)) {
                return seen;
            }
            seen.add(t);
        }
    }

    /** Nothing (more) arrives within NOTHING_MS. */
    protected static void expectNothing(MessageConsumer c, String why) throws JMSException {
        Message m = c.receive(NOTHING_MS);
        if (m != null) {
            String body = m instanceof TextMessage ? ((TextMessage) m).getText() : m.toString();
            assertNull(m, why + ": unexpected message '" + body + "'");
        }
    }

    /** Nothing more arrives at any of the consumers: one NOTHING_MS wait, then a poll of the rest. */
    protected static void expectNothing(List<MessageConsumer> cs, String why) throws JMSException {
        for (int i = 0; i < cs.size(); i++) {
            Message m = i == 0 ? cs.get(i).receive(NOTHING_MS) : cs.get(i).receive(200);
            if (m != null) {
                String body = m instanceof TextMessage ? ((TextMessage) m).getText() : m.toString();
                fail(why + ": consumer #" + (i + 1) + " got an unexpected message '" + body + "'");
            }
        }
    }

    /**
     * Shared-subscription split: poll the consumers round-robin until {@code expected} messages
     * arrived in total (RECEIVE_MS overall); return the texts each consumer got. Fails on a
     * duplicate or a text that was not expected.
     */
    protected static List<List<String>> collectSplit(List<MessageConsumer> cs, Set<String> expected) throws JMSException {
        List<List<String>> per = new ArrayList<>();
        for (int i = 0; i < cs.size(); i++) {
            per.add(new ArrayList<>());
        }
        Set<String> seen = new HashSet<>();
        long deadline = System.currentTimeMillis() + RECEIVE_MS;
        while (seen.size() < expected.size()) {
            if (System.currentTimeMillis() > deadline) {
                fail("only " + seen.size() + " of " + expected.size() + " messages arrived at the shared consumers: " + per);
            }
            for (int i = 0; i < cs.size(); i++) {
                Message m = cs.get(i).receive(50);
                if (m != null) {
                    String t = text(m);
                    assertTrue(expected.contains(t), "unexpected message '" + t + "' at consumer #" + (i + 1));
                    assertTrue(seen.add(t), "message '" + t + "' delivered twice (consumers got " + per + ")");
                    per.get(i).add(t);
                }
            }
        }
        return per;
    }

    /** Each consumer of a shared subscription got at least one message. */
    protected static void assertEveryConsumerGotSome(List<List<String>> per) {
        for (int i = 0; i < per.size(); i++) {
            assertTrue(!per.get(i).isEmpty(), "consumer #" + (i + 1) + " of the shared subscription got nothing: " + per);
        }
    }

    protected static Set<String> setOf(String... items) {
        return new HashSet<>(Arrays.asList(items));
    }

    protected static String[] texts(String prefix, int n) {
        String[] out = new String[n];
        for (int i = 0; i < n; i++) {
            out[i] = prefix + "-" + i;
        }
        return out;
    }

    /** Counts how many times each text was received. */
    protected static Map<String, Integer> counts(List<String> texts) {
        Map<String, Integer> m = new HashMap<>();
        for (String t : texts) {
            m.merge(t, 1, Integer::sum);
        }
        return m;
    }
}
