'use strict';
// rhea clients for the browser tier (tests/browser/test_console.py): not a *.test.js file, so the
// rhea tier does not run it. Each mode prints one JSON line per step on stdout and exits 0 when
// every check passed (1, with the reason on stderr, otherwise).
//
//   node console_clients.js setup   — make the shared durable subscription SHAREDSUB_SUBSCRIPTION
//                                     (global) on SHAREDSUB_TOPIC, leave it without consumers, and
//                                     publish SHAREDSUB_MESSAGES messages with application
//                                     properties color ('red' for every third, n % 3 == 0; else
//                                     'blue') and n; {"published": N} once all are accepted
//   node console_clients.js replay  — attach a consumer, accept the N messages of the backlog
//                                     ({"drained": N}), then wait for the N again, re-delivered by
//                                     a replay started elsewhere (the console), each marked
//                                     redelivered (delivery-count > 0): {"replayed": N}

const h = require('./harness.js');

const TOPIC = process.env.SHAREDSUB_TOPIC;
const SUBSCRIPTION = process.env.SHAREDSUB_SUBSCRIPTION;
const MESSAGES = Number(process.env.SHAREDSUB_MESSAGES || 30);
const REPLAY_WAIT = Number(process.env.SHAREDSUB_REPLAY_WAIT_MS || 180000);

function say(doc) {
  process.stdout.write(`${JSON.stringify(doc)}\n`);
}

async function setup(connect) {
  const c = await connect();
  const r = c.receiver(h.jmsReceiver(`${SUBSCRIPTION}|global`, TOPIC, 'shared-durable', { isGlobal: true }));
  await r.attach();
  const p = await connect();
  const sender = p.sender({ name: h.uid('pub'), target: { address: TOPIC, capabilities: ['topic'] } });
  await sender.attach();
  const sends = [];
  for (let n = 0; n < MESSAGES; n++) {
    await sender.sendable();
    const color = n % 3 === 0 ? 'red' : 'blue';
    sends.push(sender.send({ message_id: `m-${n}`, subject: `message ${n}`, body: `body ${n}`, application_properties: { color, n } }, 60000));
  }
  const outcomes = await Promise.all(sends);
  const refused = outcomes.filter((o) => o.outcome !== 'accepted');
  if (refused.length) throw new Error(`${refused.length} of ${MESSAGES} not accepted: ${h.show(refused[0])}`);
  say({ published: MESSAGES });
}

async function replay(connect) {
  const c = await connect();
  const r = c.receiver({ ...h.jmsReceiver(`${SUBSCRIPTION}|global`, TOPIC, 'shared-durable', { isGlobal: true }), autoaccept: true, credit_window: 100 });
  await r.attach();
  const first = await r.waitMessages(MESSAGES, 120000);
  const ids = (list) => list.map((m) => m.message.message_id).sort();
  say({ drained: first.length });
  const again = await r.waitMessages(2 * MESSAGES, REPLAY_WAIT);
  const replayed = again.slice(MESSAGES);
  const unmarked = replayed.filter((m) => !m.message.delivery_count);
  if (unmarked.length) throw new Error(`${unmarked.length} replayed message(s) not marked redelivered`);
  if (JSON.stringify(ids(replayed)) !== JSON.stringify(ids(first))) {
    throw new Error(`the replay re-delivered ${h.show(ids(replayed))}, not the ${MESSAGES} drained before`);
  }
  await h.delay(2000); // a duplicate would come now
  if (r.messages.length !== 2 * MESSAGES) throw new Error(`${r.messages.length - 2 * MESSAGES} more message(s) after the replay`);
  say({ replayed: replayed.length });
}

const modes = { setup, replay };
const mode = modes[process.argv[2]];
if (!mode || !TOPIC || !SUBSCRIPTION) {
  process.stderr.write('usage: SHAREDSUB_URL=… SHAREDSUB_TOPIC=… SHAREDSUB_SUBSCRIPTION=… node console_clients.js setup|replay\n');
  process.exit(2);
}
h.withClients(mode).then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${err.stack || err}\n`);
    process.exit(1);
  },
);
