'use strict';
// Local transactions as a Qpid JMS transacted session uses them on the publish side (AMQP 1.0
// §4): a coordinator link, declare -> declared(txn-id), transfers carrying transactional-state,
// discharge -> accepted. Committed publishes are delivered, rolled-back ones never.

const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./harness.js');

const T = { timeout: 120000 };

async function setup(connect) {
  const topic = await h.createTopic();
  const c = await connect({ containerId: h.uid('client') });
  const consumer = c.receiver({ name: h.uid('plain'), source: h.jmsSource(topic, 'plain') });
  await consumer.attach();
  consumer.flow(20);
  const p = await connect({ containerId: h.uid('producer') });
  const coordinator = p.coordinator();
  const attach = await coordinator.attach();
  const sender = p.sender({ name: h.uid('pub'), target: { address: topic, capabilities: ['topic'] } });
  await sender.attach();
  await coordinator.sendable();
  await sender.sendable();
  return { topic, consumer, coordinator, attach, sender };
}

async function declare(coordinator) {
  const declared = await coordinator.send(h.txn.declare());
  assert.equal(declared.outcome, 'declared', `declare is answered with declared(txn-id); got ${h.show(declared)}`);
  const txnId = declared.state.txn_id;
  assert.ok(Buffer.isBuffer(txnId) && txnId.length > 0, `declared carries a binary txn-id; got ${h.show(declared.state)}`);
  return txnId;
}

test('transactions: coordinator attach, declare -> declared; a transactional publish is delivered only after discharge(commit)', T, () =>
  h.withClients(async (connect) => {
    const { consumer, coordinator, attach, sender } = await setup(connect);
    assert.ok(
      /^described 0x30/.test(coordinator.link.rawAttach.target),
      `the coordinator attach reply carries a coordinator target (Qpid JMS needs a non-null remote target); frame target: ${coordinator.link.rawAttach.target} ${h.show(attach.target)}`,
    );
    const txnId = await declare(coordinator);

    const inTxn = await sender.send({ body: 'in-txn' }, h.EVENT_TIMEOUT, { state: h.txn.state(txnId) });
    assert.equal(inTxn.outcome, 'transactional-state', `a transactional transfer is answered with transactional-state; got ${h.show(inTxn)}`);
    assert.ok(Buffer.from(inTxn.state.txn_id).equals(txnId), `same txn-id; ${h.show(inTxn.state)}`);
    assert.equal(inTxn.state.outcome && inTxn.state.outcome.constructor.composite_type, 'accepted', `its outcome is accepted; ${h.show(inTxn.state)}`);

    // Positive control, then the transactional message must not have arrived.
    assert.equal((await sender.send({ body: 'plain' })).outcome, 'accepted');
    await consumer.waitMessages(1);
    await h.delay(2000);
    assert.deepEqual(consumer.messages.map((m) => m.message.body), ['plain'], 'nothing of an open transaction is delivered');

    const discharged = await coordinator.send(h.txn.discharge(txnId, false));
    assert.equal(discharged.outcome, 'accepted', `discharge(commit) is accepted; got ${h.show(discharged)}`);
    const [, committed] = await consumer.waitMessages(2);
    assert.equal(committed.message.body, 'in-txn', 'committed: delivered');
  }));

test('transactions: discharge(fail=true) rolls back (never delivered); an unknown txn-id is rejected with amqp:transaction:unknown-id', T, () =>
  h.withClients(async (connect) => {
    const { consumer, coordinator, sender } = await setup(connect);
    const txnId = await declare(coordinator);
    const inTxn = await sender.send({ body: 'rolled-back' }, h.EVENT_TIMEOUT, { state: h.txn.state(txnId) });
    assert.equal(inTxn.outcome, 'transactional-state', h.show(inTxn));
    const discharged = await coordinator.send(h.txn.discharge(txnId, true));
    assert.equal(discharged.outcome, 'accepted', `discharge(rollback) is accepted; got ${h.show(discharged)}`);

    const unknown = await coordinator.send(h.txn.discharge(Buffer.from('no-such-txn'), false));
    assert.equal(unknown.outcome, 'rejected', `discharge of an unknown txn-id: rejected; got ${h.show(unknown)}`);
    assert.equal(String(unknown.state.error && unknown.state.error.condition), 'amqp:transaction:unknown-id', h.show(unknown.state));

    assert.equal((await sender.send({ body: 'after' })).outcome, 'accepted'); // positive control
    await consumer.waitMessages(1);
    await h.delay(h.QUIET_WAIT);
    assert.deepEqual(consumer.messages.map((m) => m.message.body), ['after'], 'a rolled-back message is never delivered');
  }));

test('transactions: a consumer acknowledgement inside a transaction: rolled back -> the message comes again; committed -> never again', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const consumer = c.receiver(h.jmsReceiver(h.uid('sub'), topic, 'durable'));
    await consumer.attach();
    consumer.flow(20);
    const coordinator = c.coordinator(); // the transaction belongs to the consumer's connection
    await coordinator.attach();
    await coordinator.sendable();
    const p = await connect();
    const sender = p.sender({ target: { address: topic } });
    await sender.sendable();
    assert.equal((await sender.send({ body: 'm1' })).outcome, 'accepted');
    const [first] = await consumer.waitMessages(1);

    // Acknowledged in a transaction that is rolled back: the acknowledgement is undone.
    const txn1 = await declare(coordinator);
    first.delivery.update(true, h.txn.accepted(txn1)); // Qpid JMS settles with transactional-state
    await h.nextTurn();
    await h.delay(200);
    assert.equal((await coordinator.send(h.txn.discharge(txn1, true))).outcome, 'accepted');
    const [, again] = await consumer.waitMessages(2);
    assert.equal(again.message.body, 'm1', 'a rolled-back acknowledgement: the message comes again');

    // Acknowledged in a transaction that commits: gone for good.
    const txn2 = await declare(coordinator);
    again.delivery.update(true, h.txn.accepted(txn2));
    await h.nextTurn();
    await h.delay(200);
    assert.equal((await coordinator.send(h.txn.discharge(txn2, false))).outcome, 'accepted');
    assert.equal((await sender.send({ body: 'm2' })).outcome, 'accepted'); // positive control
    const [, , m2] = await consumer.waitMessages(3);
    assert.equal(m2.message.body, 'm2');
    m2.delivery.accept();
    await h.delay(h.QUIET_WAIT);
    assert.deepEqual(consumer.messages.map((m) => m.message.body), ['m1', 'm1', 'm2'], 'a committed acknowledgement: never again');

    // Not after a re-attach either.
    await consumer.detachLink();
    const back = c.receiver(h.jmsReceiver(consumer.name, topic, 'durable'));
    await back.attach();
    back.flow(10);
    assert.equal((await sender.send({ body: 'm3' })).outcome, 'accepted');
    const [m3] = await back.waitMessages(1);
    assert.equal(m3.message.body, 'm3', `after re-attach only the new message; got ${h.show(back.messages.map((m) => m.message.body))}`);
    m3.delivery.accept();
    await h.delay(200);
    await back.closeLink();
  }));
