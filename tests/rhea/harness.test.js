'use strict';
// Self-checks of the tier's assertions, no server needed: attach frames are encoded and decoded
// with rhea's own codec, so a refusal whose source is an empty source terminus (the defect fixed
// in connectors/amqp/consumers.py `refuse`) is proven to fail assertRefused.

const test = require('node:test');
const assert = require('node:assert/strict');
const frames = require('rhea/lib/frames.js');
const terminus = require('rhea/lib/terminus.js');
const h = require('./harness.js');

/** An attach frame from the server, through rhea's encoder and decoder, seen as the tier sees it. */
function receivedAttach(source, target) {
  const performative = frames.attach({ name: 'sub', handle: 0, role: false, source, target });
  const frame = frames.read_frame(frames.write_frame(frames.amqp_frame(0, performative.described())));
  const fields = frame.performative.value;
  const raw = { source: h.rawTerminus(fields[5]), target: h.rawTerminus(fields[6]) };
  // as rhea's link.on_attach does
  frame.performative.source = terminus.unwrap(frame.performative.source);
  frame.performative.target = terminus.unwrap(frame.performative.target);
  return { raw, attach: frame.performative };
}

function fakeRefusedLink({ raw, attach }) {
  return {
    name: 'sub',
    link: { rawAttach: raw },
    attach: async () => attach,
    detach: async () => ({
      closed: true,
      error: { condition: 'amqp:not-found', description: 'No subscription link found: sub was never created' },
    }),
  };
}

test('harness: a refusal with a null source and null target passes assertRefused', async () => {
  const received = receivedAttach(null, null);
  assert.equal(received.raw.source, 'null');
  await h.assertRefused(fakeRefusedLink(received), 'amqp:not-found');
});

test('harness: a refusal whose source is an empty source terminus (no address) fails assertRefused', async () => {
  const received = receivedAttach(terminus.source({}).described(), null);
  assert.match(received.raw.source, /^described 0x28/);
  await assert.rejects(h.assertRefused(fakeRefusedLink(received), 'amqp:not-found'), /must carry a null source/);
});

test('harness: a refusal with a source address, or with an empty target terminus, fails assertRefused', async () => {
  await assert.rejects(
    h.assertRefused(fakeRefusedLink(receivedAttach(terminus.source({ address: 't' }).described(), null)), 'amqp:not-found'),
    /must carry a null source/,
  );
  await assert.rejects(
    h.assertRefused(fakeRefusedLink(receivedAttach(null, terminus.target({}).described())), 'amqp:not-found'),
    /null target/,
  );
});

test('harness: assertReplySource reads the selector filter by descriptor and notices a missing one', () => {
  const filter = h.selectorFilter("a = 'b'");
  const source = terminus.source({ address: 't', durable: 1, expiry_policy: 'never', capabilities: ['topic'], filter }).described();
  const { attach } = receivedAttach(source, terminus.target({}).described());
  h.assertReplySource(attach, { address: 't', capabilities: ['topic'], durable: 1, expiry: 'never', selector: "a = 'b'" });
  assert.throws(() => h.assertReplySource(attach, { address: 't', capabilities: ['topic'], selector: "a = 'c'" }), /selector echoed/);
  const bare = receivedAttach(terminus.source({ address: 't', capabilities: ['topic'] }).described(), null).attach;
  assert.throws(() => h.assertReplySource(bare, { address: 't', capabilities: ['topic'], selector: "a = 'b'" }), /one selector filter/);
  assert.throws(() => h.assertReplySource(bare, { address: 't', capabilities: ['shared', 'topic'] }), /capabilities/);
});

test('harness: waitFlow sees a drain answer from a peer that honours drain (a local rhea listener)', async () => {
  const server = h.rhea.create_container({ id: 'drain-peer' });
  server.on('sender_draining', (ctx) => ctx.sender.set_drained(true));
  server.on('error', () => {});
  const listener = server.listen({ port: 0, host: '127.0.0.1' });
  await new Promise((resolve) => listener.on('listening', resolve));
  const saved = process.env.SHAREDSUB_URL;
  process.env.SHAREDSUB_URL = `amqp://127.0.0.1:${listener.address().port}`;
  const client = new h.Client({ containerId: h.uid('self') });
  try {
    await client.open();
    const r = client.receiver({ name: 'drain-me', source: { address: 'q' } });
    await r.attach();
    r.flow(1);
    r.link.drain_credit();
    const answer = await r.waitFlow((f) => f.handle !== undefined && f.drain === true, 5000, 'drain answer');
    assert.equal(Number(answer.link_credit), 0);
    assert.equal(Number(answer.delivery_count), 1);
  } finally {
    await client.close();
    listener.close();
    if (saved === undefined) delete process.env.SHAREDSUB_URL;
    else process.env.SHAREDSUB_URL = saved;
  }
});
