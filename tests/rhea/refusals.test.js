'use strict';
// Every refusal: attach with a null source (and null target), then detach closed=true with the
// condition and a description a person can act on (docs/wire.md §2.2 / D13, docs/design.md §4.10). The Qpid
// JMS client reads any non-null source as "found"/"opened" (docs/wire.md §1.7), so an empty source
// terminus is as wrong as an address.

const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./harness.js');

const T = { timeout: 90000 };

test('refused: unknown topic (plain consumer and JMS durable subscriber) is amqp:not-found', T, () =>
  h.withClients(async (connect) => {
    const c = await connect();
    const missing = h.uid('no-such-topic');
    await h.assertRefused(c.receiver({ name: h.uid('plain'), source: { address: missing } }), 'amqp:not-found', {
      descriptionIncludes: [missing],
    });
    await h.assertRefused(c.receiver(h.jmsReceiver(h.uid('dur'), missing, 'durable')), 'amqp:not-found', {
      descriptionIncludes: [missing],
    });
    await h.assertRefused(c.receiver(h.jmsReceiver(h.uid('sh'), `${missing}/a.b`, 'shared-durable')), 'amqp:not-found', {
      descriptionIncludes: [missing],
    });
  }));

test('refused: a second consumer on an unshared durable subscription (other connection, other session) is amqp:resource-locked', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const sub = h.uid('sub');
    const a = await connect({ containerId: cid });
    const first = a.receiver(h.jmsReceiver(sub, topic, 'durable'));
    h.assertReplySource(await first.attach(), { address: topic, capabilities: ['topic'], expiry: 'never' });

    const b = await connect({ containerId: cid }); // same container-id, no sole-connection desired
    await h.assertRefused(b.receiver(h.jmsReceiver(sub, topic, 'durable')), 'amqp:resource-locked', {
      descriptionIncludes: [sub],
    });
    await h.assertRefused(a.receiver(h.jmsReceiver(sub, topic, 'durable')), 'amqp:resource-locked', {
      descriptionIncludes: [sub],
    }); // another session of the same connection
    // The first consumer is untouched by the refusals.
    assert.equal(first.detached.done, false, 'the refusals must not detach the first consumer');
    const closed = await first.closeLink();
    assert.equal(closed.closed, true);
    assert.equal(closed.error, undefined, `unsubscribe of the last link: no error; got ${h.show(closed)}`);
  }));

test('refused: shared vs unshared durable with one name in one container is amqp:resource-locked, consumers or not (wire.md §5.15)', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const c = await connect({ containerId: cid });

    // Unshared durable `sub` attached, then shared durable `sub|2` from the same container.
    const sub = h.uid('sub');
    const unshared = c.receiver(h.jmsReceiver(sub, topic, 'durable'));
    await unshared.attach();
    await h.assertRefused(c.receiver(h.jmsReceiver(`${sub}|2`, topic, 'shared-durable')), 'amqp:resource-locked', {
      descriptionIncludes: [sub],
    });
    await h.assertRefused(c.receiver(h.jmsReceiver(sub, topic, 'shared-durable')), 'amqp:resource-locked');
    await unshared.closeLink();

    // The reverse order, with no consumer attached: shared durable `sub2` exists (detached
    // closed=false), then an unshared durable `sub2`.
    const sub2 = h.uid('sub');
    const shared = c.receiver(h.jmsReceiver(sub2, topic, 'shared-durable'));
    await shared.attach();
    const kept = await shared.detachLink();
    assert.notEqual(kept.closed, true, `detach closed=false of a durable link is answered closed=false; got ${h.show(kept)}`);
    await h.assertRefused(c.receiver(h.jmsReceiver(sub2, topic, 'durable')), 'amqp:resource-locked', {
      descriptionIncludes: [sub2],
    });
    // Clean up: unsubscribe the shared one through the lookup.
    const lookup = c.receiver(h.lookupReceiver(sub2));
    assert.ok(h.terminusOf(await lookup.attach(), 'source'), 'lookup of the shared durable finds it');
    const gone = await lookup.closeLink();
    assert.equal(gone.error, undefined, `unsubscribe: no error; got ${h.show(gone)}`);
  }));

test('refused: joining an active shared durable subscription with another selector or another topic is amqp:resource-locked', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const other = await h.createTopic();
    const cid = h.uid('client');
    const sub = h.uid('sub');
    const c = await connect({ containerId: cid });
    const first = c.receiver(h.jmsReceiver(sub, topic, 'shared-durable', { selector: "colour = 'red'" }));
    await first.attach();

    const bySelector = await h.assertRefused(
      c.receiver(h.jmsReceiver(`${sub}|2`, topic, 'shared-durable', { selector: "colour = 'blue'" })),
      'amqp:resource-locked',
      { descriptionIncludes: [sub] },
    );
    assert.match(bySelector.description, /selector/i, 'the description says the selector differs');
    const byTopic = await h.assertRefused(
      c.receiver(h.jmsReceiver(`${sub}|3`, other, 'shared-durable', { selector: "colour = 'red'" })),
      'amqp:resource-locked',
      { descriptionIncludes: [sub] },
    );
    assert.match(byTopic.description, /topic/i, 'the description says the topic differs');
    const noSelector = await h.assertRefused(
      c.receiver(h.jmsReceiver(`${sub}|4`, topic, 'shared-durable')),
      'amqp:resource-locked',
    );
    assert.match(noSelector.description, /selector/i);

    // Global namespace too, from another container.
    const gsub = h.uid('gsub');
    const g1 = c.receiver(h.jmsReceiver(`${gsub}|global`, topic, 'shared-durable', { isGlobal: true }));
    await g1.attach();
    const d = await connect();
    await h.assertRefused(
      d.receiver(h.jmsReceiver(`${gsub}|global`, other, 'shared-durable', { isGlobal: true })),
      'amqp:resource-locked',
      { descriptionIncludes: [gsub] },
    );
    // Positive control: the same topic and selector joins.
    const join = c.receiver(h.jmsReceiver(`${sub}|5`, topic, 'shared-durable', { selector: "colour = 'red'" }));
    h.assertReplySource(await join.attach(), {
      address: topic,
      capabilities: ['shared', 'topic'],
      expiry: 'never',
      selector: "colour = 'red'",
    });
  }));

test('refused: an invalid selector is amqp:invalid-field with info {field: filter}, naming the selector', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    for (const [kind, name] of [
      ['shared-durable', h.uid('sub')],
      ['durable', h.uid('sub')],
      ['plain', `qpid-jms:receiver:ID:${h.uid('c')}:1:1:1:${topic}`],
    ]) {
      const selector = 'colour = = 3';
      const opts =
        kind === 'plain'
          ? { name, source: h.jmsSource(topic, 'plain', { selector }) }
          : h.jmsReceiver(name, topic, kind, { selector });
      const error = await h.assertRefused(c.receiver(opts), 'amqp:invalid-field', { descriptionIncludes: [selector] });
      assert.ok(error.info, `${kind}: error info expected; got ${h.show(error)}`);
      assert.equal(String(error.info.field), 'filter', `${kind}: info {field: filter}; got ${h.show(error)}`);
    }
    // Nothing was created: the lookup of the durable names finds nothing.
  }));

test('refused: the unsubscribe lookup of a subscription that does not exist is amqp:not-found (`sub` and `sub|global`)', T, () =>
  h.withClients(async (connect) => {
    const c = await connect({ containerId: h.uid('client') });
    const name = h.uid('never');
    await h.assertRefused(c.receiver(h.lookupReceiver(name)), 'amqp:not-found', { descriptionIncludes: [name] });
    const g = await connect(); // no ClientID: the global lookup
    await h.assertRefused(g.receiver(h.lookupReceiver(`${name}|global`)), 'amqp:not-found', {
      descriptionIncludes: [name],
    });
  }));

test('refused: the lookup of a subscription that was just deleted is amqp:not-found', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const c = await connect({ containerId: cid });
    const sub = h.uid('sub');
    const link = c.receiver(h.jmsReceiver(sub, topic, 'durable'));
    await link.attach();
    const deleted = await link.closeLink(); // closed=true, last link: unsubscribe
    assert.equal(deleted.closed, true);
    assert.equal(deleted.error, undefined, `unsubscribe: no error; got ${h.show(deleted)}`);
    await h.assertRefused(c.receiver(h.lookupReceiver(sub)), 'amqp:not-found', { descriptionIncludes: [sub] });

    // Shared global: deleted by the unsubscribe of a lookup, then looked up again.
    const gsub = h.uid('gsub');
    const g = c.receiver(h.jmsReceiver(`${gsub}|global`, topic, 'shared-durable', { isGlobal: true }));
    await g.attach();
    await g.detachLink();
    const other = await connect();
    const lookup = other.receiver(h.lookupReceiver(`${gsub}|global`));
    assert.ok(h.terminusOf(await lookup.attach(), 'source'), 'the global lookup finds it');
    const gone = await lookup.closeLink();
    assert.equal(gone.error, undefined, `unsubscribe: no error; got ${h.show(gone)}`);
    await h.assertRefused(other.receiver(h.lookupReceiver(`${gsub}|global`)), 'amqp:not-found', {
      descriptionIncludes: [gsub],
    });
  }));

test('refused: a receiver attach with a null target is amqp:invalid-field', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const opts = { ...h.jmsReceiver(h.uid('sub'), topic, 'shared-durable'), target: null };
    const link = c.receiver(opts);
    await h.assertRefused(link, 'amqp:invalid-field', { descriptionIncludes: ['target'] });
  }));

test('refused: a publisher (sender link) to an unknown topic is amqp:not-found with a null target', T, () =>
  h.withClients(async (connect) => {
    const c = await connect({ containerId: h.uid('client') });
    const missing = h.uid('no-such-topic');
    const sender = c.sender({
      name: `qpid-jms:sender:ID:${h.uid('p')}:1:1:1:${missing}`,
      target: { address: missing, capabilities: ['topic'] },
      source: { address: 'ID:producer', outcomes: ['amqp:accepted:list', 'amqp:rejected:list', 'amqp:released:list', 'amqp:modified:list'] },
    });
    const attach = await sender.attach();
    const raw = sender.link.rawAttach;
    assert.ok(raw.target === 'null' || raw.target === 'absent', `refused publisher: the Qpid JMS producer needs a null target; frame target: ${raw.target} ${h.show(attach.target)}`);
    assert.ok(raw.source === 'null' || raw.source === 'absent', `refused publisher: null source too (wire.md §2.2); frame source: ${raw.source} ${h.show(attach.source)}`);
    const detach = await sender.detach();
    assert.equal(detach.closed, true, h.show(detach));
    assert.equal(String(detach.error && detach.error.condition), 'amqp:not-found', h.show(detach));
    assert.ok(detach.error.description.includes(missing), h.show(detach));
  }));
