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
