'use strict';
// Delivery and publish (docs/design.md §5): redelivery marking in the header a consumer sees, the
// publisher's outcome, anonymous relay, and rejected transfers that leave the connection up.
//
// rhea 3 quirk: deliveries updated in one event-loop turn are written as disposition ranges, and
// a range of two is sent with the first one's outcome even when the second differs
// (write_dispositions in rhea's session.js). Each settlement below is followed by a turn.

const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./harness.js');

const T = { timeout: 120000 };

async function settle(fn) {
  fn();
  await h.nextTurn();
  await h.delay(20);
}

function header(m) {
  return { delivery_count: m.message.delivery_count || 0, first_acquirer: Boolean(m.message.first_acquirer) };
}

async function publisher(connect, topic) {
  const p = await connect();
  const sender = p.sender({ name: h.uid('pub'), target: { address: topic, capabilities: ['topic'] } });
  await sender.attach();
  await sender.sendable();
  return sender;
}

test('redelivery: released comes again with delivery-count 0 and first-acquirer false; modified(delivery-failed) with count 1; accepted never again', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const sub = h.uid('sub');
    const consumer = c.receiver(h.jmsReceiver(sub, topic, 'durable'));
    await consumer.attach();
    consumer.flow(20);
    const sender = await publisher(connect, topic);
    // first_acquirer set by the publisher, so that the redelivery's "false" is visible.
    assert.equal((await sender.send({ body: 'm1', first_acquirer: true })).outcome, 'accepted');
    assert.equal((await sender.send({ body: 'm2', first_acquirer: true })).outcome, 'accepted');

    const first = await consumer.waitMessages(2);
    assert.deepEqual(first.map((m) => m.message.body).sort(), ['m1', 'm2']);
    for (const m of first) {
      assert.deepEqual(header(m), { delivery_count: 0, first_acquirer: true }, `first delivery of ${m.message.body} as published`);
    }
    const m1 = first.find((m) => m.message.body === 'm1');
    const m2 = first.find((m) => m.message.body === 'm2');
    await settle(() => m1.delivery.release());
    await settle(() => m2.delivery.release({ delivery_failed: true }));

    const again = (await consumer.waitMessages(4)).slice(2);
    const r1 = again.find((m) => m.message.body === 'm1');
    const r2 = again.find((m) => m.message.body === 'm2');
    assert.ok(r1 && r2, `both come again; got ${h.show(again.map((m) => m.message.body))}`);
    assert.deepEqual(header(r1), { delivery_count: 0, first_acquirer: false }, `released m1: count unchanged, first-acquirer false; header ${h.show(r1.message)}`);
    assert.deepEqual(header(r2), { delivery_count: 1, first_acquirer: false }, `modified(delivery-failed) m2: count+1; header ${h.show(r2.message)}`);

    await settle(() => r1.delivery.accept());
    await settle(() => r2.delivery.accept());
    // Positive control before the "nothing else" check.
    assert.equal((await sender.send({ body: 'm3' })).outcome, 'accepted');
    const [, , , , m3] = await consumer.waitMessages(5);
    assert.equal(m3.message.body, 'm3');
    await settle(() => m3.delivery.accept());
    await h.delay(h.QUIET_WAIT);
    assert.equal(consumer.messages.length, 5, `accepted messages never come again; got ${h.show(consumer.messages.map((m) => m.message.body))}`);

    // And not after a re-attach either.
    await consumer.detachLink();
    const back = c.receiver(h.jmsReceiver(sub, topic, 'durable'));
    await back.attach();
    back.flow(10);
    assert.equal((await sender.send({ body: 'm4' })).outcome, 'accepted');
    const [m4] = await back.waitMessages(1);
    assert.equal(m4.message.body, 'm4', `after re-attach only the new message comes; got ${h.show(back.messages.map((m) => m.message.body))}`);
    await settle(() => m4.delivery.accept());
    await h.delay(1000);
    assert.equal(back.messages.length, 1, `nothing accepted comes again; got ${h.show(back.messages.map((m) => m.message.body))}`);
    await back.closeLink();
  }));

test('redelivery: a link detached with an unsettled delivery hands it to the other consumer with delivery-count+1, first-acquirer false', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const sub = h.uid('sub');
    const c = await connect({ containerId: cid });
    const one = c.receiver(h.jmsReceiver(sub, topic, 'shared-durable'));
    const two = c.receiver(h.jmsReceiver(`${sub}|2`, topic, 'shared-durable'));
    await one.attach();
    await two.attach();
    one.flow(1); // only `one` has credit: the message goes there
    const sender = await publisher(connect, topic);
    assert.equal((await sender.send({ body: 'held', first_acquirer: true })).outcome, 'accepted');
    const [held] = await one.waitMessages(1);
    assert.deepEqual(header(held), { delivery_count: 0, first_acquirer: true });

    two.flow(10);
    const reply = await one.detachLink(); // closed=false, the delivery still unsettled
    assert.notEqual(reply.closed, true, h.show(reply));
    const [moved] = await two.waitMessages(1);
    assert.equal(moved.message.body, 'held');
    assert.deepEqual(header(moved), { delivery_count: 1, first_acquirer: false }, `unsettled on a detached link: count+1; header ${h.show(moved.message)}`);
    await settle(() => moved.delivery.accept());

    // Connection lost with an unsettled delivery: the same.
    const d = await connect({ containerId: h.uid('client2') });
    const gsub = h.uid('gsub');
    const g1 = d.receiver(h.jmsReceiver(`${gsub}|global`, topic, 'shared-durable', { isGlobal: true }));
    await g1.attach();
    const e = await connect();
    const g2 = e.receiver(h.jmsReceiver(`${gsub}|global`, topic, 'shared-durable', { isGlobal: true }));
    await g2.attach();
    g1.flow(1);
    assert.equal((await sender.send({ body: 'dropped' })).outcome, 'accepted');
    await g1.waitMessages(1);
    g2.flow(10);
    d.connection.socket.destroy(); // no detach, no close
    const [again] = await g2.waitMessages(1);
    assert.equal(again.message.body, 'dropped');
    assert.deepEqual(header(again), { delivery_count: 1, first_acquirer: false }, `unsettled on a lost connection: count+1; ${h.show(again.message)}`);
    await settle(() => again.delivery.accept());
    await two.closeLink();
    await g2.closeLink();
  }));

test('publish: accepted only once stored (an accepted message is then delivered), settled by the server', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const consumer = c.receiver({ name: h.uid('plain'), source: h.jmsSource(topic, 'plain') });
    await consumer.attach();
    consumer.flow(10);
    const p = await connect();
    const sender = p.sender({ name: h.uid('pub'), target: { address: topic, capabilities: ['topic'] } });
    const attach = await sender.attach();
    assert.ok(h.terminusOf(attach, 'target'), `publisher attach reply carries the target; ${h.show(attach)}`);
    assert.equal(h.terminusOf(attach, 'target').address, topic);
    await sender.sendable();
    const outcome = await sender.send({ body: 'stored', application_properties: { n: 1 } });
    assert.equal(outcome.outcome, 'accepted', h.show(outcome));
    assert.equal(outcome.settled, true, 'the server settles the accepted delivery');
    const [m] = await consumer.waitMessages(1);
    assert.equal(m.message.body, 'stored');
    assert.equal(m.message.application_properties.n, 1);
  }));

test('publish: an anonymous-relay sender (null target) with `to` set is accepted and delivered; an unknown `to` is rejected, the link stays', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const consumer = c.receiver({ name: h.uid('plain'), source: h.jmsSource(topic, 'plain') });
    await consumer.attach();
    consumer.flow(10);
    const p = await connect();
    const relay = p.sender({ name: h.uid('anon') }); // rhea leaves the target null
    await relay.attach();
    assert.equal(relay.link.rawAttach && relay.detached.done, false, 'the anonymous relay link is not refused');
    await relay.sendable();
    const missing = h.uid('no-such-topic');
    const bad = await relay.send({ to: missing, body: 'lost' });
    assert.equal(bad.outcome, 'rejected', `unknown topic in 'to': rejected; got ${h.show(bad)}`);
    assert.equal(String(bad.state.error && bad.state.error.condition), 'amqp:not-found', h.show(bad.state));
    const good = await relay.send({ to: topic, body: 'relayed' });
    assert.equal(good.outcome, 'accepted', h.show(good));
    const [m] = await consumer.waitMessages(1);
    assert.equal(m.message.body, 'relayed');
    assert.equal(p.connection.remote.close, undefined, 'the connection stays open');

    // The Qpid JMS anonymous producer sends a target terminus without an address (not a null
    // target) and needs a non-null target in the reply (docs/wire.md §1.7, §1.10).
    const jmsRelay = p.sender({
      name: `qpid-jms:sender:ID:${h.uid('p')}:1:1:1`,
      target: {},
      source: { address: 'ID:producer', outcomes: ['amqp:accepted:list', 'amqp:rejected:list', 'amqp:released:list', 'amqp:modified:list'] },
    });
    const attach = await jmsRelay.attach();
    assert.ok(/^described 0x29/.test(jmsRelay.link.rawAttach.target), `reply target must be non-null for the JMS producer; frame target: ${jmsRelay.link.rawAttach.target}`);
    assert.equal(jmsRelay.detached.done, false, h.show(attach));
    await jmsRelay.sendable();
    const viaJms = await jmsRelay.send({ to: topic, body: 'relayed-jms', message_annotations: { 'x-opt-jms-dest': 1, 'x-opt-jms-msg-type': 5 } });
    assert.equal(viaJms.outcome, 'accepted', h.show(viaJms));
    const [, m2] = await consumer.waitMessages(2);
    assert.equal(m2.message.body, 'relayed-jms');
  }));

async function publishSetup(connect) {
  const topic = await h.createTopic();
  const c = await connect({ containerId: h.uid('client') });
  const consumer = c.receiver({ name: h.uid('plain'), source: h.jmsSource(topic, 'plain') });
  await consumer.attach();
  consumer.flow(10);
  const p = await connect();
  const sender = p.sender({ name: h.uid('pub'), target: { address: topic } });
  const attach = await sender.attach();
  await sender.sendable();
  return { topic, consumer, p, sender, attach };
}

async function assertStillWorks({ consumer, p, sender }) {
  assert.equal(sender.detached.done, false, 'the publisher link stays attached');
  assert.equal(p.connection.remote.close, undefined, 'the connection stays open');
  await sender.sendable();
  const ok = await sender.send({ body: 'after' });
  assert.equal(ok.outcome, 'accepted', h.show(ok));
  const [m] = await consumer.waitMessages(1);
  assert.equal(m.message.body, 'after', 'the rejected message is not delivered');
}

test('publish: a message above the advertised max-message-size is rejected (amqp:link:message-size-exceeded); link and connection stay', T, () =>
  h.withClients(async (connect) => {
    const setup = await publishSetup(connect);
    const limit = Number(setup.attach.max_message_size || 0);
    assert.ok(limit > 0, `the publisher attach reply advertises max-message-size (server default 1 MiB); got ${h.show(setup.attach)}`);
    const big = await setup.sender.send({ body: Buffer.alloc(limit + 1024, 7) });
    assert.equal(big.outcome, 'rejected', `a message above max-message-size ${limit}: rejected; got ${h.show(big)}`);
    assert.equal(String(big.state.error && big.state.error.condition), 'amqp:link:message-size-exceeded', h.show(big.state));
    assert.ok((big.state.error.description || '').length >= 20, h.show(big.state));
    await assertStillWorks(setup);
  }));

test('publish: an undecodable transfer is rejected (amqp:decode-error), not stored; link and connection stay', T, () =>
  h.withClients(async (connect) => {
    const setup = await publishSetup(connect);
    // An amqp-value section whose string claims 16 bytes but carries 2: not an AMQP message.
    const truncated = Buffer.from([0x00, 0x53, 0x77, 0xa1, 0x10, 0x61, 0x62]);
    const broken = await setup.sender.send(truncated);
    assert.equal(
      broken.outcome,
      'rejected',
      `an undecodable transfer (bytes ${truncated.toString('hex')}) must be rejected: once accepted it is stored and ` +
        `delivered as is, and every consumer fails to decode it; got disposition ${h.show(broken)}`,
    );
    assert.ok(broken.state.error, h.show(broken.state));
    assert.equal(String(broken.state.error.condition), 'amqp:decode-error', h.show(broken.state));
    await assertStillWorks(setup);
  }));

test('drain: a flow with drain=true and no message available is answered with a flow (drain, link-credit 0, delivery-count advanced)', T, () =>
  // Qpid JMS drains for receiveNoWait()/receive(timeout) with prefetch 0 and when it stops a
  // consumer (Connection.stop, transacted rollback); without an answer it fails the consumer
  // after amqp.drainTimeout (60 s, QPIDJMS-175).
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const consumer = c.receiver(h.jmsReceiver(h.uid('sub'), topic, 'durable'));
    await consumer.attach();
    const before = consumer.link.delivery_count;
    consumer.flow(1);
    consumer.link.drain_credit();
    const answer = await consumer.waitFlow(
      (f) => f.handle !== undefined && f.drain === true,
      10000,
      'the drain answer: flow(drain=true, link-credit=0)',
    );
    consumer.link.drain = false; // rhea keeps draining on every later flow otherwise
    assert.equal(Number(answer.link_credit), 0, `drained: link-credit 0; ${h.show(answer)}`);
    assert.equal(Number(answer.delivery_count), before + 1, `drained: delivery-count advanced by the unused credit; ${h.show(answer)}`);

    // The link still delivers with new credit.
    consumer.flow(1);
    const p = await connect();
    const sender = p.sender({ target: { address: topic } });
    await sender.sendable();
    assert.equal((await sender.send({ body: 'after-drain' })).outcome, 'accepted');
    const [m] = await consumer.waitMessages(1);
    assert.equal(m.message.body, 'after-drain');
    await settle(() => m.delivery.accept());
    await consumer.closeLink();
  }));

test('round trip: a message as Qpid JMS sends it (header, JMS annotations, properties, typed application properties) arrives byte for byte', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const consumer = c.receiver(h.jmsReceiver(h.uid('sub'), topic, 'shared-durable'));
    await consumer.attach();
    consumer.flow(10);
    const p = await connect({ containerId: h.uid('producer') });
    const sender = p.sender({ name: h.uid('pub'), target: { address: topic, capabilities: ['topic'] } });
    await sender.sendable();
    const types = h.rhea.types;
    const sent = {
      durable: true,
      priority: 7,
      ttl: 600000,
      message_annotations: { 'x-opt-jms-msg-type': types.wrap_byte(5), 'x-opt-jms-dest': types.wrap_byte(1) },
      message_id: `ID:${h.uid('m')}:1:1:1-1`,
      to: topic,
      subject: 'order',
      reply_to: 'replies',
      correlation_id: 'ID:corr-1',
      content_type: 'text/plain',
      creation_time: new Date(Date.now() - 1000),
      absolute_expiry_time: new Date(Date.now() + 600000),
      group_id: 'g',
      application_properties: {
        s: 'text',
        i: types.wrap_int(-3),
        l: types.wrap_long(1234567890123),
        d: types.wrap_double(2.5),
        b: true,
        n: null,
      },
      body: types.wrap_string('hello JMS'),
      footer: { 'x-footer': 'f' },
    };
    const bytes = h.encodeMessage(sent);
    assert.equal((await sender.send(bytes)).outcome, 'accepted');
    const [m] = await consumer.waitMessages(1);
    assert.equal(
      m.message.raw.toString('hex'),
      bytes.toString('hex'),
      `first delivery byte for byte; got ${h.show(m.message)}`,
    );
    assert.equal(m.message.body, 'hello JMS');
    await settle(() => m.delivery.accept());

    // A message larger than the frame size goes in several transfer frames both ways.
    const frameSize = Number(p.connection.remote.open.max_frame_size || 0);
    const large = h.encodeMessage({
      message_id: 'ID:large',
      application_properties: { part: 'large' },
      body: types.wrap_binary(Buffer.alloc(Math.max(frameSize, 16384) * 8 + 123, 0x5a)),
    });
    assert.equal((await sender.send(large)).outcome, 'accepted');
    const [, big] = await consumer.waitMessages(2);
    assert.equal(big.message.raw.length, large.length, 'the multi-frame message arrives whole');
    assert.ok(big.message.raw.equals(large), 'the multi-frame message arrives byte for byte');
    await settle(() => big.delivery.accept());
  }));

test('publish: a pre-settled message (sender settle mode settled) is stored and delivered', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const consumer = c.receiver({ name: h.uid('plain'), source: h.jmsSource(topic, 'plain') });
    await consumer.attach();
    consumer.flow(10);
    const p = await connect();
    const sender = p.sender({ name: h.uid('presettled'), target: { address: topic }, snd_settle_mode: 1 });
    await sender.attach();
    await sender.sendable();
    const delivery = sender.link.send({ body: 'fire-and-forget' });
    assert.equal(delivery.settled, true, 'rhea sends it settled');
    const [m] = await consumer.waitMessages(1);
    assert.equal(m.message.body, 'fire-and-forget');
  }));

test('expiry: a message whose absolute-expiry-time has passed is not delivered (JMSExpiration)', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const consumer = c.receiver(h.jmsReceiver(h.uid('sub'), topic, 'durable'));
    await consumer.attach();
    consumer.flow(10);
    const sender = await publisher(connect, topic);
    const past = new Date(Date.now() - 60000);
    assert.equal((await sender.send({ body: 'expired', absolute_expiry_time: past, creation_time: new Date(Date.now() - 120000) })).outcome, 'accepted');
    assert.equal((await sender.send({ body: 'fresh' })).outcome, 'accepted'); // positive control
    const [m] = await consumer.waitMessages(1);
    await h.delay(h.QUIET_WAIT);
    assert.deepEqual(consumer.messages.map((x) => x.message.body), ['fresh'], 'only the unexpired message comes');
    await settle(() => m.delivery.accept());
    await consumer.closeLink();
  }));

test('filters as rhea encodes them: the selector (ulong descriptor) and the no-local filter (string NoLocalFilter{}) route as JMS expects', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const own = await connect({ containerId: cid });
    const consumer = own.receiver(h.jmsReceiver(h.uid('sub'), topic, 'durable', { selector: "colour = 'red'", noLocal: true }));
    await consumer.attach();
    consumer.flow(20);
    const ownSender = own.sender({ target: { address: topic } });
    const other = await connect({ containerId: h.uid('other') });
    const otherSender = other.sender({ target: { address: topic } });
    await ownSender.sendable();
    await otherSender.sendable();
    const props = (colour) => ({ application_properties: { colour } });
    assert.equal((await ownSender.send({ body: 'own-red', ...props('red') })).outcome, 'accepted');
    assert.equal((await otherSender.send({ body: 'other-blue', ...props('blue') })).outcome, 'accepted');
    assert.equal((await otherSender.send({ body: 'other-red', ...props('red') })).outcome, 'accepted'); // positive control
    const [m] = await consumer.waitMessages(1);
    m.delivery.accept();
    await h.delay(h.QUIET_WAIT);
    assert.deepEqual(
      consumer.messages.map((x) => x.message.body),
      ['other-red'],
      'only red, and not from the subscriber\'s own container',
    );
    await consumer.closeLink();
  }));
