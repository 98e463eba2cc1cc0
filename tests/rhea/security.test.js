'use strict';
// SASL against a second service the wrapper starts with a users file (test_rhea_tier.py):
// SHAREDSUB_SECURE_URL (amqps:// of its TLS listener; the CA in SHAREDSUB_SECURE_CA) and
// SHAREDSUB_SECURE_AMQP_URL (its plain amqp listener), user SHAREDSUB_SECURE_USER with
// SHAREDSUB_SECURE_PASSWORD; anonymous clients are refused there and topics are created on first use.
// rhea speaks SASL PLAIN when given a username and password (it has no SCRAM client).

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const rhea = require('rhea');
const h = require('./harness.js');

const T = { timeout: 60000 };

function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tier through tests/rhea/test_rhea_tier.py`);
  return value;
}

/** Connect to the secured service, publish one message; resolves 'accepted' or the error condition. */
function publishOnce(url, options) {
  const u = new URL(url);
  const connectOptions = { host: u.hostname, port: Number(u.port), reconnect: false, ...options };
  if (u.protocol === 'amqps:') {
    Object.assign(connectOptions, { transport: 'tls', servername: 'localhost', ca: [fs.readFileSync(env('SHAREDSUB_SECURE_CA'))] });
  }
  const container = rhea.create_container({ id: h.uid('rhea-sec') });
  return new Promise((resolve) => {
    let done = false;
    const finish = (result) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(result);
    };
    const timer = setTimeout(() => finish('timeout'), 20000);
    container.on('sendable', (ctx) => {
      if (!ctx.sender.sent_one && ctx.sender.sendable()) {
        ctx.sender.sent_one = true;
        ctx.sender.send({ body: 'hello over SASL' });
      }
    });
    container.on('accepted', (ctx) => { finish('accepted'); ctx.connection.close(); });
    container.on('rejected', (ctx) => { finish('rejected'); ctx.connection.close(); });
    container.on('connection_error', (ctx) => {
      const e = ctx.connection.get_error() || ctx.error;
      finish(String(e && e.condition));
    });
    container.on('disconnected', (ctx) => finish(`disconnected: ${ctx.error && (ctx.error.condition || ctx.error.message)}`));
    container.on('error', (ctx) => finish(`error: ${ctx.error}`));
    const conn = container.connect(connectOptions);
    conn.open_sender(h.uid('secured'));
  });
}

test('SASL PLAIN with the right password over amqps: the connection opens and a publish is accepted', T, async () => {
  const result = await publishOnce(env('SHAREDSUB_SECURE_URL'), {
    username: env('SHAREDSUB_SECURE_USER'), password: env('SHAREDSUB_SECURE_PASSWORD'),
  });
  assert.equal(result, 'accepted');
});

test('SASL PLAIN with the right password over plain amqp works too', T, async () => {
  const result = await publishOnce(env('SHAREDSUB_SECURE_AMQP_URL'), {
    username: env('SHAREDSUB_SECURE_USER'), password: env('SHAREDSUB_SECURE_PASSWORD'),
  });
  assert.equal(result, 'accepted');
});

test('SASL PLAIN with a wrong password fails with amqp:unauthorized-access (sasl-outcome auth)', T, async () => {
  const result = await publishOnce(env('SHAREDSUB_SECURE_URL'), {
    username: env('SHAREDSUB_SECURE_USER'), password: 'not-the-password',
  });
  assert.equal(result, 'amqp:unauthorized-access');
});

test('SASL ANONYMOUS is refused by a service with users (anonymous = auto)', T, async () => {
  const result = await publishOnce(env('SHAREDSUB_SECURE_AMQP_URL'), { username: 'anonymous' });
  assert.equal(result, 'amqp:unauthorized-access');
});

// ------------------------------------------------------------------ authorization
// The secured service has a permissions file (tests/secure_service.py PERMISSIONS): the tier user
// may publish and consume everywhere; the other user may consume everywhere, publish only to
// topics named open-*, and may not use the tier user's subscriptions.

function as(who, extra = {}) {
  const user = who === 'other' ? env('SHAREDSUB_SECURE_OTHER_USER') : env('SHAREDSUB_SECURE_USER');
  const password = who === 'other' ? env('SHAREDSUB_SECURE_OTHER_PASSWORD') : env('SHAREDSUB_SECURE_PASSWORD');
  return { url: env('SHAREDSUB_SECURE_AMQP_URL'), username: user, password, ...extra };
}

test('a publisher outside the user\'s publish grant is refused with amqp:unauthorized-access naming the permission', T, async () => {
  await h.withClients(async (connect) => {
    const other = await connect(as('other'));
    const topic = h.uid('closed');
    await h.assertRefused(other.sender({ name: h.uid('pub'), target: { address: topic } }), 'amqp:unauthorized-access', {
      descriptionIncludes: ['no publish permission', topic],
    });
    const allowed = other.sender({ name: h.uid('pub'), target: { address: h.uid('open') } });
    await allowed.attach();
    await allowed.sendable();
    assert.equal((await allowed.send({ body: 'inside the grant' })).outcome, 'accepted');
  });
});

test('on an anonymous relay a message to a topic outside the grant is rejected, the next one accepted', T, async () => {
  await h.withClients(async (connect) => {
    const other = await connect(as('other'));
    const relay = other.sender({ name: h.uid('relay') }); // rhea leaves the target null: anonymous relay
    await relay.attach();
    await relay.sendable();
    const no = await relay.send({ to: h.uid('closed'), body: 'no' });
    assert.equal(no.outcome, 'rejected');
    assert.equal(String(no.state.error.condition), 'amqp:unauthorized-access');
    assert.ok(String(no.state.error.description).includes('no publish permission'));
    await relay.sendable();
    assert.equal((await relay.send({ to: h.uid('open'), body: 'yes' })).outcome, 'accepted');
  });
});

test('another user cannot attach to, re-create or unsubscribe a shared durable subscription', T, async () => {
  const clientId = h.uid('rhea-app');
  const sub = h.uid('owned');
  const topic = h.uid('owned-topic');
  await h.withClients(async (connect) => {
    const owner = await connect(as('owner', { containerId: clientId }));
    const mine = owner.receiver(h.jmsReceiver(sub, topic, 'shared-durable'));
    await mine.attach();
    await mine.detachLink(); // closed=false: the subscription stays
    await owner.close();

    const other = await connect(as('other', { containerId: clientId }));
    const expect = ['belongs to another user', 'manage permission', sub];
    await h.assertRefused(other.receiver(h.jmsReceiver(sub, topic, 'shared-durable')), 'amqp:unauthorized-access', { descriptionIncludes: expect });
    await h.assertRefused(
      other.receiver(h.jmsReceiver(sub, topic, 'shared-durable', { selector: "color = 'red'" })),
      'amqp:unauthorized-access',
      { descriptionIncludes: expect },
    );
    await h.assertRefused(other.receiver(h.lookupReceiver(sub)), 'amqp:unauthorized-access', { descriptionIncludes: expect });
    await other.close();

    // The owner still has it, and may unsubscribe it.
    const back = await connect(as('owner', { containerId: clientId }));
    const lookup = back.receiver(h.lookupReceiver(sub));
    const attach = await lookup.attach();
    assert.notEqual(h.terminusOf(attach, 'source'), null);
    const detach = await lookup.closeLink();
    assert.ok(!detach.error, `the owner's unsubscribe: ${h.show(detach)}`);
  });
});
