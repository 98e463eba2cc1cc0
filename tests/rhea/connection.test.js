'use strict';
// Connection open: offered capabilities (docs/wire.md §1.1, §2.1, scenario 1) and the refusal of a
// second connection for a container that desires sole-connection-for-container (scenario 2).

const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./harness.js');

const T = { timeout: 60000 };
const JMS_DESIRED = ['sole-connection-for-container', 'DELAYED_DELIVERY', 'ANONYMOUS-RELAY', 'SHARED-SUBS'];

test('open offers SHARED-SUBS, ANONYMOUS-RELAY and sole-connection-for-container', T, () =>
  h.withClients(async (connect) => {
    for (const options of [{}, { containerId: h.uid('client'), desiredCapabilities: JMS_DESIRED }]) {
      const c = await connect(options);
      const open = c.connection.remote.open;
      const offered = h.symbolsOf(open.offered_capabilities);
      for (const cap of ['SHARED-SUBS', 'ANONYMOUS-RELAY', 'sole-connection-for-container']) {
        assert.ok(offered.includes(cap), `open offered-capabilities should include ${cap}; got ${h.show(open)}`);
      }
      assert.equal(c.connection.remote.close, undefined, 'the connection stays open');
    }
  }));

test('a second connection for a container that desires sole-connection-for-container is closed with amqp:invalid-field', T, () =>
  h.withClients(async (connect) => {
    const cid = h.uid('client');
    const first = await connect({ containerId: cid, desiredCapabilities: JMS_DESIRED });

    // Without the desire the same container-id may connect again (positive control).
    const relaxed = await connect({ containerId: cid });
    assert.equal(relaxed.connection.remote.close, undefined, 'no sole-connection desired: accepted');

    const second = new h.Client({ containerId: cid, desiredCapabilities: JMS_DESIRED });
    try {
      const open = await second.open();
      const props = open.properties || {};
      assert.equal(
        props['amqp:connection-establishment-failed'],
        true,
        `the open must carry property amqp:connection-establishment-failed=true; got ${h.show(open)}`,
      );
      const close = await h.withTimeout(second.closed.promise, h.EVENT_TIMEOUT, 'close of the refused connection');
      const error = close.error;
      assert.ok(error, `close must carry an error; got ${h.show(close)}`);
      assert.equal(String(error.condition), 'amqp:invalid-field', h.show(close));
      assert.ok(error.info, `close error info expected; got ${h.show(close)}`);
      assert.equal(String(error.info['invalid-field']), 'container-id', `info {invalid-field: container-id}; got ${h.show(close)}`);
      assert.ok((error.description || '').includes(cid), `the description names the container-id; got ${h.show(close)}`);
    } finally {
      await second.close();
    }

    // The first connection is untouched and still works.
    assert.equal(first.connection.remote.close, undefined, 'the first connection stays open');
    const topic = await h.createTopic();
    const r = first.receiver({ name: h.uid('plain'), source: { address: topic } });
    assert.ok(h.terminusOf(await r.attach(), 'source'), 'the first connection can still attach');
  }));

test('idle timeout: the server keeps a connection alive whose open asks for idle-time-out 1 s (Qpid JMS asks for 60 s)', T, () =>
  h.withClients(async (connect) => {
    const c = await connect({ containerId: h.uid('client'), idleTimeout: 1000, desiredCapabilities: JMS_DESIRED });
    let frames = 0;
    c.connection.socket.on('data', () => {
      frames += 1;
    });
    // rhea closes a connection that hears nothing for twice its idle-time-out (2 s here): 3 s
    // idle is past that, with room for a late frame.
    await h.delay(3000);
    assert.equal(c.errors.length, 0, `no idle-timeout error; got ${c.errors.map(String)}`);
    assert.equal(c.connection.remote.close, undefined, 'still open');
    assert.ok(!c.disconnected.done && c.connection.is_open(), 'still connected');
    assert.ok(frames >= 2, `the server sent empty frames while idle; got ${frames} reads in 3 s`);
    const topic = await h.createTopic();
    const r = c.receiver({ name: h.uid('plain'), source: { address: topic } });
    assert.ok(h.terminusOf(await r.attach(), 'source'), 'the connection still works');
  }));

test('SASL: a connection with a SASL layer and ANONYMOUS (Qpid JMS uses a SASL layer by default) opens and works', T, () =>
  h.withClients(async (connect) => {
    const c = await connect({ containerId: h.uid('client'), saslAnonymous: true, desiredCapabilities: JMS_DESIRED });
    assert.ok(c.connection.sasl_transport, 'the SASL layer was used');
    assert.ok(h.symbolsOf(c.connection.remote.open.offered_capabilities).includes('SHARED-SUBS'));
    const topic = await h.createTopic();
    const r = c.receiver(h.jmsReceiver(h.uid('sub'), topic, 'shared-durable'));
    assert.ok(h.terminusOf(await r.attach(), 'source'), 'attach works over the SASL connection');
    assert.equal((await r.closeLink()).error, undefined);
  }));
