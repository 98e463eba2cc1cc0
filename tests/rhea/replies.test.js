'use strict';
// Successful attaches: the reply source for each JMS consumer kind (docs/wire.md §1.3/§1.4 request
// shapes, §2.7 reply), the stored source a null-source lookup answers with (§2.8, docs/design.md §4.5),
// and the detach replies of unsubscribe and close (§2.9, docs/design.md §4.6).

const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./harness.js');

const T = { timeout: 90000 };

function assertSenderRoleReply(attach, name) {
  assert.equal(attach.name, name, `reply link name; ${h.show(attach)}`);
  assert.equal(attach.role, false, `the server's end of a consumer link is role=sender; ${h.show(attach)}`);
  assert.ok(h.terminusOf(attach, 'target'), `reply target echoed (non-null); ${h.show(attach.target)}`);
}

test('reply source: unshared durable, shared durable (sub, sub|2), global (sub|global, sub|global2), volatile, plain', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const c = await connect({ containerId: cid });
    const g = await connect(); // a connection without ClientID: global names
    const links = [];
    const check = async (client, opts, expected) => {
      const link = client.receiver(opts);
      links.push(link);
      const attach = await link.attach();
      assertSenderRoleReply(attach, opts.name);
      h.assertReplySource(attach, expected);
      return link;
    };
    const durableReply = { address: topic, durableAtLeast: 1, expiry: 'never', distributionMode: 'copy' };
    const volatileReply = { address: topic, durable: 0, expiry: 'link-detach' };

    const d = h.uid('dur');
    await check(c, h.jmsReceiver(d, topic, 'durable'), { ...durableReply, capabilities: ['topic'] });

    const s = h.uid('shared');
    await check(c, h.jmsReceiver(s, topic, 'shared-durable'), { ...durableReply, capabilities: ['shared', 'topic'] });
    await check(c, h.jmsReceiver(`${s}|2`, topic, 'shared-durable'), { ...durableReply, capabilities: ['shared', 'topic'] });

    const gs = h.uid('global');
    const globalReply = { ...durableReply, capabilities: ['global', 'shared', 'topic'] };
    await check(g, h.jmsReceiver(`${gs}|global`, topic, 'shared-durable', { isGlobal: true }), globalReply);
    await check(g, h.jmsReceiver(`${gs}|global2`, topic, 'shared-durable', { isGlobal: true }), globalReply);
    const g2 = await connect();
    await check(g2, h.jmsReceiver(`${gs}|global`, topic, 'shared-durable', { isGlobal: true }), globalReply);

    const v = h.uid('vol');
    await check(c, h.jmsReceiver(`${v}|volatile1`, topic, 'shared-volatile'), {
      ...volatileReply,
      capabilities: ['shared', 'topic'],
      distributionMode: 'copy',
    });
    await check(c, h.jmsReceiver(`${v}|volatile2`, topic, 'shared-volatile'), {
      ...volatileReply,
      capabilities: ['shared', 'topic'],
      distributionMode: 'copy',
    });
    await check(g, h.jmsReceiver(`${v}|global-volatile1`, topic, 'shared-volatile', { isGlobal: true }), {
      ...volatileReply,
      capabilities: ['global', 'shared', 'topic'],
      distributionMode: 'copy',
    });
    // Shared durable and shared volatile of one name coexist (scenario 12).
    await check(c, h.jmsReceiver(`${s}|volatile1`, topic, 'shared-volatile'), {
      ...volatileReply,
      capabilities: ['shared', 'topic'],
      distributionMode: 'copy',
    });
    // A plain topic consumer.
    const plainName = `qpid-jms:receiver:ID:${h.uid('c')}:1:1:1:${topic}`;
    await check(c, { name: plainName, source: h.jmsSource(topic, 'plain') }, { ...volatileReply, capabilities: ['topic'] });

    // Unsubscribe the durable ones (closed=true on each; the last link of each deletes it).
    for (const link of links) {
      if (!link.detached.done) await link.closeLink();
    }
  }));

test('reply source echoes the selector filter (0x468C00000004) and the no-local filter; unknown filters are left out', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const c = await connect({ containerId: h.uid('client') });
    const selector = "colour IN ('red', 'green') AND JMSPriority > 3";
    const sub = h.uid('sub');
    const link = c.receiver(h.jmsReceiver(sub, topic, 'durable', { selector, noLocal: true }));
    h.assertReplySource(await link.attach(), {
      address: `${topic}`,
      capabilities: ['topic'],
      expiry: 'never',
      selector,
      noLocal: true,
    });
    await link.closeLink();

    // A pattern address, a selector under the descriptor's symbolic name, and an unknown filter.
    const opts = h.jmsReceiver(h.uid('sub'), `${topic}/orders.*`, 'shared-durable');
    opts.source.filter = {
      'my-selector': h.rhea.types.described(h.rhea.types.wrap_symbol('apache.org:selector-filter:string'), h.rhea.types.wrap_string('a = 1')),
      'x-unknown': h.rhea.types.described(h.rhea.types.wrap_symbol('example.org:unknown-filter'), h.rhea.types.wrap_string('?')),
    };
    const link2 = c.receiver(opts);
    h.assertReplySource(await link2.attach(), {
      address: `${topic}/orders.*`,
      capabilities: ['shared', 'topic'],
      expiry: 'never',
      selector: 'a = 1',
      noLocal: false,
    });
    await link2.closeLink();
  }));

test('lookup (null source) answers with the stored source, also after the consumer detached closed=false; then unsubscribe', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const selector = "kind = 'x'";

    // Unshared durable with selector and no-local, detached closed=false.
    const sub = h.uid('sub');
    const a = await connect({ containerId: cid });
    const original = a.receiver(h.jmsReceiver(sub, `${topic}/a.#`, 'durable', { selector, noLocal: true }));
    await original.attach();
    const kept = await original.detachLink();
    assert.notEqual(kept.closed, true, `detach closed=false of a durable link: reply closed=false; got ${h.show(kept)}`);
    assert.equal(kept.error, undefined, `no error; got ${h.show(kept)}`);

    const b = await connect({ containerId: cid }); // a new connection, as Session.unsubscribe uses
    const lookup = b.receiver(h.lookupReceiver(sub));
    const found = await lookup.attach();
    assert.ok(/^described 0x28/.test(lookup.link.rawAttach.source), `lookup reply carries a source terminus; ${lookup.link.rawAttach.source}`);
    assertSenderRoleReply(found, sub);
    h.assertReplySource(found, {
      address: `${topic}/a.#`,
      capabilities: ['topic'],
      durableAtLeast: 1,
      expiry: 'never',
      distributionMode: 'copy',
      selector,
      noLocal: true,
    });
    const gone = await lookup.closeLink();
    assert.equal(gone.closed, true, h.show(gone));
    assert.equal(gone.error, undefined, `unsubscribe succeeded: no error; got ${h.show(gone)}`);

    // Shared durable global, looked up from another container by `sub|global`.
    const gsub = h.uid('gsub');
    const g = await connect();
    const g1 = g.receiver(h.jmsReceiver(`${gsub}|global`, topic, 'shared-durable', { isGlobal: true, selector }));
    await g1.attach();
    await g1.detachLink();
    const other = await connect();
    const glookup = other.receiver(h.lookupReceiver(`${gsub}|global`));
    h.assertReplySource(await glookup.attach(), {
      address: topic,
      capabilities: ['global', 'shared', 'topic'],
      durableAtLeast: 1,
      expiry: 'never',
      distributionMode: 'copy',
      selector,
    });
    const ggone = await glookup.closeLink();
    assert.equal(ggone.error, undefined, `global unsubscribe: no error; got ${h.show(ggone)}`);

    // Shared durable with a ClientID, looked up by `sub` while nothing is attached.
    const ssub = h.uid('ssub');
    const s1 = a.receiver(h.jmsReceiver(ssub, topic, 'shared-durable'));
    const s2 = a.receiver(h.jmsReceiver(`${ssub}|2`, topic, 'shared-durable'));
    await s1.attach();
    await s2.attach();
    await s1.detachLink();
    await s2.detachLink();
    const slookup = b.receiver(h.lookupReceiver(ssub));
    h.assertReplySource(await slookup.attach(), {
      address: topic,
      capabilities: ['shared', 'topic'],
      durableAtLeast: 1,
      expiry: 'never',
      distributionMode: 'copy',
    });
    assert.equal((await slookup.closeLink()).error, undefined);
  }));

test('detach: unsubscribe while another consumer is attached is closed=true with amqp:resource-locked and keeps the subscription', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const gsub = h.uid('gsub');
    const a = await connect();
    const active = a.receiver(h.jmsReceiver(`${gsub}|global`, topic, 'shared-durable', { isGlobal: true }));
    await active.attach();

    // Another application unsubscribes: lookup, then detach closed=true (scenario 44).
    const b = await connect();
    const lookup = b.receiver(h.lookupReceiver(`${gsub}|global`));
    assert.ok(h.terminusOf(await lookup.attach(), 'source'), 'the lookup finds the active subscription');
    const refused = await lookup.closeLink();
    assert.equal(refused.closed, true, `reply closed=true; got ${h.show(refused)}`);
    assert.equal(String(refused.error && refused.error.condition), 'amqp:resource-locked', h.show(refused));
    assert.ok(refused.error.description.includes(gsub), `description names the subscription; ${h.show(refused)}`);

    // Same container: `sub|2` closed while `sub` stays (scenario 37).
    const cid = h.uid('client');
    const c = await connect({ containerId: cid });
    const sub = h.uid('sub');
    const s1 = c.receiver(h.jmsReceiver(sub, topic, 'shared-durable'));
    const s2 = c.receiver(h.jmsReceiver(`${sub}|2`, topic, 'shared-durable'));
    await s1.attach();
    await s2.attach();
    const locked = await s2.closeLink();
    assert.equal(locked.closed, true, h.show(locked));
    assert.equal(String(locked.error && locked.error.condition), 'amqp:resource-locked', h.show(locked));

    // The subscriptions stay: the remaining consumers get a message published now.
    active.flow(10);
    s1.flow(10);
    const p = await connect();
    const sender = p.sender({ target: { address: topic } });
    await sender.sendable();
    assert.equal((await sender.send({ body: 'still-here' })).outcome, 'accepted');
    assert.equal((await active.waitMessages(1))[0].message.body, 'still-here');
    assert.equal((await s1.waitMessages(1))[0].message.body, 'still-here');
    assert.equal(active.detached.done, false, 'the remaining consumer stays attached');

    // Clean up: the last links' closed=true deletes them without error.
    assert.equal((await active.closeLink()).error, undefined);
    assert.equal((await s1.closeLink()).error, undefined);
  }));

test('detach: closed=false keeps a durable subscription and its backlog; closed=true of the last link deletes it', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const sub = h.uid('sub');
    const c = await connect({ containerId: cid });
    const p = await connect();
    const sender = p.sender({ target: { address: topic } });
    await sender.sendable();

    const first = c.receiver(h.jmsReceiver(sub, topic, 'durable'));
    await first.attach();
    first.flow(10);
    assert.equal((await sender.send({ body: 'one' })).outcome, 'accepted');
    const [m1] = await first.waitMessages(1);
    m1.delivery.accept();
    await h.delay(200);
    const kept = await first.detachLink();
    assert.notEqual(kept.closed, true, `closed=false of a durable link is answered closed=false (scenario 33); got ${h.show(kept)}`);
    assert.equal(kept.error, undefined, h.show(kept));

    assert.equal((await sender.send({ body: 'while-away' })).outcome, 'accepted');

    const again = c.receiver(h.jmsReceiver(sub, topic, 'durable'));
    await again.attach();
    again.flow(10);
    const [m2] = await again.waitMessages(1);
    assert.equal(m2.message.body, 'while-away', 'the backlog published while detached is delivered on re-attach (scenario 21)');
    m2.delivery.accept();
    await h.delay(200);
    const deleted = await again.closeLink();
    assert.equal(deleted.closed, true, h.show(deleted));
    assert.equal(deleted.error, undefined, `closed=true of the last link deletes without error (scenario 36); got ${h.show(deleted)}`);
    await h.assertRefused(c.receiver(h.lookupReceiver(sub)), 'amqp:not-found');

    // A volatile (expiry link-detach) link detached closed=false is answered closed=true (scenario 35).
    const vol = c.receiver(h.jmsReceiver(`${h.uid('v')}|volatile1`, topic, 'shared-volatile'));
    await vol.attach();
    const volReply = await vol.detachLink();
    assert.equal(volReply.closed, true, `link-detach expiry: reply closed=true; got ${h.show(volReply)}`);
    assert.equal(volReply.error, undefined, h.show(volReply));
  }));

test('session end and connection close without detach (as Qpid JMS closes them) keep a durable subscription; a volatile one goes', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const a = await connect({ containerId: cid });

    // Durable subscriber on a session that is ended with only `end` (scenario 38).
    const sub = h.uid('sub');
    const session = a.session();
    const durable = a.receiver(h.jmsReceiver(sub, topic, 'durable'), session);
    await durable.attach();
    // Shared volatile on another session, also ended with only `end`.
    const vol = h.uid('vol');
    const vsession = a.session();
    const volatile = a.receiver(h.jmsReceiver(`${vol}|volatile1`, topic, 'shared-volatile'), vsession);
    await volatile.attach();
    session.end();
    vsession.end();
    await h.delay(500);

    const p = await connect();
    const sender = p.sender({ target: { address: topic } });
    await sender.sendable();
    assert.equal((await sender.send({ body: 'while-gone' })).outcome, 'accepted');

    // The durable one is found by the lookup, with its backlog.
    const lookup = a.receiver(h.lookupReceiver(sub));
    h.assertReplySource(await lookup.attach(), { address: topic, capabilities: ['topic'], expiry: 'never' });
    lookup.flow(10);
    const [kept] = await lookup.waitMessages(1);
    assert.equal(kept.message.body, 'while-gone');
    await settle(kept);

    // The volatile one was deleted with its session: a new `vol|volatile1` starts empty.
    const again = a.receiver(h.jmsReceiver(`${vol}|volatile1`, topic, 'shared-volatile'));
    await again.attach();
    again.flow(10);
    assert.equal((await sender.send({ body: 'after' })).outcome, 'accepted'); // positive control
    await again.waitMessages(1);
    await h.delay(h.QUIET_WAIT);
    assert.deepEqual(again.messages.map((m) => m.message.body), ['after'], 'the volatile subscription did not outlive its session');

    // Connection closed without detaching: the durable subscription stays.
    await lookup.detachLink();
    const b = await connect({ containerId: cid });
    const onB = b.receiver(h.jmsReceiver(sub, topic, 'durable'));
    await onB.attach();
    await b.close();
    await h.delay(500);
    const c = await connect({ containerId: cid });
    const found = c.receiver(h.lookupReceiver(sub));
    h.assertReplySource(await found.attach(), { address: topic, capabilities: ['topic'], expiry: 'never' });
    assert.equal((await found.closeLink()).error, undefined, 'unsubscribe after the connection closed');
  }));

test('refused: the lookup of an unshared durable subscription whose consumer is attached is amqp:resource-locked', T, () =>
  h.withClients(async (connect) => {
    const topic = await h.createTopic();
    const cid = h.uid('client');
    const sub = h.uid('sub');
    const a = await connect({ containerId: cid });
    const active = a.receiver(h.jmsReceiver(sub, topic, 'durable'));
    await active.attach();
    const b = await connect({ containerId: cid });
    await h.assertRefused(b.receiver(h.lookupReceiver(sub)), 'amqp:resource-locked', { descriptionIncludes: [sub] });
    assert.equal(active.detached.done, false, 'the active consumer stays');
    assert.equal((await active.closeLink()).error, undefined);
  }));

function settle(m) {
  m.delivery.accept();
  return h.delay(50);
}
