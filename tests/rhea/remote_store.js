'use strict';
// Publish and consume with rhea through a service whose bucket answers like a remote store (issue
// 42): run by tests/e2e/test_s3_remote_latency.py against a serve reached its S3 server through
// the delay proxy (bench/delay_proxy.py). Not a *.test.js file: the rhea tier does not run it.

const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./harness.js');

const MESSAGES = Number(process.env.SHAREDSUB_MESSAGES || 200);
const WINDOW = 50; // messages in flight, unsettled, per round
const DEADLINE = 90000; // ms for every message to arrive

test('a shared durable subscription with two consumers gets every accepted message once', { timeout: DEADLINE + 60000 }, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic('remote');
    const name = h.uid('shared');
    const consumers = [];
    for (const link of [`${name}|global`, `${name}|global2`]) {
      const c = await connect(); // no ClientID: global names
      const r = c.receiver({ ...h.jmsReceiver(link, topic, 'shared-durable', { isGlobal: true }), autoaccept: true, credit_window: 100 });
      await r.attach();
      consumers.push(r);
    }
    const p = await connect();
    const sender = p.sender({ name: h.uid('pub'), target: { address: topic, capabilities: ['topic'] } });
    await sender.attach();
    const outcomes = [];
    for (let first = 0; first < MESSAGES; first += WINDOW) {
      const round = [];
      for (let i = first; i < Math.min(first + WINDOW, MESSAGES); i++) {
        await sender.sendable();
        round.push(sender.send({ body: `m${i}` }, 60000));
      }
      outcomes.push(...(await Promise.all(round)));
    }
    assert.deepEqual(outcomes.map((o) => o.outcome), Array(MESSAGES).fill('accepted'));
    const received = () => consumers.flatMap((r) => r.messages);
    const start = Date.now();
    while (received().length < MESSAGES) {
      if (Date.now() - start > DEADLINE) break;
      await h.delay(50);
    }
    await h.delay(2000); // a duplicate would come now
    const bodies = received().map((m) => m.message.body).sort();
    const expected = Array.from({ length: MESSAGES }, (_, i) => `m${i}`).sort();
    assert.deepEqual(bodies, expected, `${bodies.length} of ${MESSAGES} delivered (each once expected)`);
    assert.ok(received().every((m) => !m.message.delivery_count), 'no message was redelivered');
  }));
