'use strict';
// A publisher that can send nothing more is not held for the group commit interval
// (sharedsub/core/publish/commit_pace.py), seen from rhea: run by tests/e2e/test_frontend.py
// against a `sharedsub frontend` with a 1 s min_commit_interval, a link credit of 8 and the
// synchronous-send rule off. Not a *.test.js file: the rhea tier does not run it.

const test = require('node:test');
const assert = require('node:assert/strict');
const h = require('./harness.js');

const CREDIT = Number(process.env.SHAREDSUB_PUBLISH_CREDIT); // the frontend's link credit
const HELD = 1000; // ms: the frontend's min_commit_interval; a held group waits up to this

async function sender(connect, topic) {
  const c = await connect();
  const s = c.sender({ name: h.uid('pub'), target: { address: topic, capabilities: ['topic'] } });
  await s.attach();
  return s;
}

/** Send `n` messages without waiting in between; ms until every one is accepted. */
async function round(s, n, label) {
  const start = Date.now();
  const sent = [];
  for (let i = 0; i < n; i++) {
    await s.sendable();
    sent.push(s.send({ body: `${label}-${i}` }, 30000));
  }
  const outcomes = await Promise.all(sent);
  assert.deepEqual(outcomes.map((o) => o.outcome), Array(n).fill('accepted'));
  return Date.now() - start;
}

test('a group whose publisher used up its link credit is committed at once', { timeout: 60000 }, () =>
  h.withClients(async (connect) => {
    const s = await sender(connect, await h.createTopic('credit'));
    await round(s, 1, 'warm-up'); // the topic's first commit loads its table: slower
    // The opener's group starts at once (no group started within HELD ms before it), so the
    // next one may start only HELD ms after it...
    await h.delay(HELD + 200);
    await round(s, 1, 'opener');
    // ...unless its publisher can send nothing more: its last message leaves the link no credit
    // (and its window, as seen, is 1: only the credit rule applies).
    const took = await round(s, CREDIT, 'full');
    assert.ok(took < HELD / 2, `${CREDIT} messages using up the credit took ${took} ms: held for the interval`);
  }));

test('a publisher whose window (below the credit) is full is not held after its first round', { timeout: 90000 }, () =>
  h.withClients(async (connect) => {
    const window = CREDIT / 2;
    const s = await sender(connect, await h.createTopic('window'));
    await round(s, window, 'first'); // its window is seen when these outcomes come back
    let took = 0;
    for (let r = 0; r < 4; r++) took += await round(s, window, `round${r}`);
    assert.ok(took < HELD, `4 rounds of a window of ${window} took ${took} ms: held about ${HELD} ms each`);
  }));
