'use strict';
// The publish and consume workloads of bench/workloads.py, driven by rhea: an AMQP 1.0 client
// independent of Proton-C, in its own process, costing the machine less per message than the
// python-qpid-proton client (which on a 2-core machine takes most of a core at 10k msg/s).
//
//   node bench/rhea_client.js '<json arguments>'     (bench/rhea_workloads.py runs it)
//
// Arguments: {"workload": "publish"|"consume"|"many_subs", "url": "amqp://host:port", "address": ..., ...}
// (the keyword arguments of the Python functions of the same names). Output, one JSON object per
// line on stdout: {"mark": name} when a measured span starts or ends (the Python side reads the
// broker's and this process's CPU then), and last {"result": {...}} in the shape the Python
// workloads return. Times are process.hrtime; nothing here depends on the broker's identity.

const crypto = require('node:crypto');
const rhea = require('rhea');

function now() {
  return Number(process.hrtime.bigint()) / 1e9;
}

function mark(name) {
  process.stdout.write(JSON.stringify({ mark: name }) + '\n');
}

// Write the result, close ``conns`` and exit once the peer has answered every close (so the
// last dispositions reach it) or after 5 s.
function finish(result, conns) {
  process.stdout.write(JSON.stringify({ result }) + '\n');
  let open = 0;
  for (const c of conns) {
    if (!c.is_open()) continue;
    open++;
    let closed = false;
    const gone = () => {
      if (closed) return;
      closed = true;
      if (--open === 0) process.exit(0);
    };
    c.once('connection_close', gone);
    c.once('disconnected', gone);
    c.close();
  }
  if (open === 0) process.exit(0);
  setTimeout(() => process.exit(0), 5000);
}

function connect(container, url, extra = {}) {
  const u = new URL(url);
  return container.connect({ host: u.hostname, port: Number(u.port), reconnect: false, idle_time_out: 0, ...extra });
}

// Durable messages with fresh random bodies, encoded before the timed part (as the Python
// workloads do), carrying bench_seq and a bench_sent_ns long (not stamped here).
function encodeMessages(count, size) {
  const out = new Array(count);
  for (let seq = 0; seq < count; seq++) {
    out[seq] = rhea.message.encode({
      durable: true,
      application_properties: { bench_seq: seq, bench_sent_ns: rhea.types.wrap_long(0) },
      body: rhea.message.data_section(crypto.randomBytes(size)),
    });
  }
  return out;
}

function publish(a) {
  const total = a.warmup + a.count;
  const messages = encodeMessages(total, a.size);
  const container = rhea.create_container();
  const conn = connect(container, a.url);
  const errors = [];
  let sent = 0, accepted = 0, notAccepted = 0, tStart = null, tMeasure = null, tEnd = null, done = false;
  const sender = conn.open_sender({ target: { address: a.address }, autosettle: true });
  const report = (timedOut) => {
    if (done) return;
    done = true;
    const measured = Math.max(0, accepted - a.warmup);
    const end = tEnd !== null ? tEnd : now();
    finish({
      msgs_per_s: tMeasure !== null && measured > 0 ? measured / (end - tMeasure) : null,
      measured_accepted: measured,
      measured_s: tMeasure !== null ? end - tMeasure : null,
      sent, accepted, not_accepted: notAccepted, timed_out: timedOut,
      errors: errors.slice(0, 10), error_count: errors.length,
    }, [conn]);
  };
  const pump = () => {
    if (done) return;
    if (tStart === null) {
      tStart = now();
      if (a.warmup === 0) { tMeasure = tStart; mark('start'); }
    }
    while (sender.sendable() && sent < total && sent - (accepted + notAccepted) < a.window) {
      sender.send(messages[sent], undefined, 0);
      sent++;
    }
  };
  const outcome = () => {
    if (accepted === a.warmup && tMeasure === null) { tMeasure = now(); mark('start'); }
    if (accepted + notAccepted >= total) {
      tEnd = now();
      mark('end');
      report(false);
    } else {
      pump();
    }
  };
  container.on('sendable', pump);
  container.on('accepted', () => { accepted++; outcome(); });
  container.on('rejected', (ctx) => { notAccepted++; errors.push(`rejected: ${JSON.stringify(ctx.delivery.remote_state)}`); outcome(); });
  container.on('released', () => { notAccepted++; errors.push('released'); outcome(); });
  container.on('modified', () => { notAccepted++; errors.push('modified'); outcome(); });
  container.on('disconnected', (ctx) => { errors.push(`disconnected: ${ctx.error || ''}`); report(false); });
  container.on('sender_error', (ctx) => { errors.push(`sender error: ${ctx.sender.error}`); report(false); });
  container.on('connection_error', (ctx) => { errors.push(`connection error: ${ctx.connection.error}`); report(false); });
  setTimeout(() => report(true), a.timeout_s * 1000).unref();
}

// The source a Qpid JMS global shared durable consumer sends (bench/workloads.py
// shared_durable_source): capabilities topic, shared, global; durable unsettled-state; expiry never.
function sharedDurableSource(address) {
  return { address, durable: 2, expiry_policy: 'never', capabilities: ['topic', 'shared', 'global'] };
}

function consume(a) {
  const container = rhea.create_container();
  const errors = [];
  const perConsumer = new Array(a.consumers).fill(0);
  const perConsumerFirst = new Array(a.consumers).fill(0);
  const seen = new Set();
  const receivers = [];
  const conns = [];
  let opened = 0, duplicates = 0, redelivered = 0, unstamped = 0, done = false;
  let tConnect = now(), tAttached = null, tFirst = null, tDone = null;
  const report = (timedOut) => {
    if (done) return;
    done = true;
    const end = tDone !== null ? tDone : now();
    const span = tFirst !== null ? end - tFirst : null;
    finish({
      msgs_per_s: span && seen.size > 1 ? (seen.size - 1) / span : null,
      measured_s: span,
      distinct_accepted: seen.size,
      missing: a.count - seen.size,
      deliveries: perConsumer.reduce((x, y) => x + y, 0),
      per_consumer_accepted: perConsumer,
      per_consumer_first_accepted: perConsumerFirst,
      duplicates, redelivered, unstamped_messages: unstamped,
      attach_s: tAttached !== null ? tAttached - tConnect : null,
      attach_to_first_delivery_ms: tFirst !== null && tAttached !== null ? (tFirst - tAttached) * 1000 : null,
      timed_out: timedOut, errors: errors.slice(0, 10), error_count: errors.length,
    }, conns);
  };
  for (let i = 0; i < a.consumers; i++) {
    const conn = connect(container, a.url);
    conns.push(conn);
    const source = a.shared_durable ? sharedDurableSource(a.address) : { address: a.address };
    const rcv = conn.open_receiver({ name: a.link_name, source, credit_window: 0, autoaccept: false });
    rcv.bench_consumer = i;
    receivers.push(rcv);
  }
  container.on('receiver_open', (ctx) => {
    if (!ctx.receiver.remote.attach || !ctx.receiver.remote.attach.source) return; // a refusal: its detach ends the run
    opened++;
    if (opened === a.consumers) {
      tAttached = now();
      mark('attached');
      for (const r of receivers) r.add_credit(a.prefetch);
    }
  });
  container.on('message', (ctx) => {
    const t = now();
    ctx.delivery.accept();
    const rcv = ctx.receiver;
    if (!done) rcv.add_credit(1);
    if (tFirst === null) { tFirst = t; mark('first'); }
    const i = rcv.bench_consumer;
    perConsumer[i]++;
    const msg = ctx.message;
    if (msg.delivery_count) redelivered++;
    const seq = msg.application_properties ? msg.application_properties.bench_seq : undefined;
    if (seq === undefined) { unstamped++; return; }
    if (seen.has(seq)) { duplicates++; return; }
    seen.add(seq);
    perConsumerFirst[i]++;
    if (seen.size === a.count && tDone === null) {
      tDone = now();
      mark('done');
      report(false);
    }
  });
  container.on('receiver_error', (ctx) => { errors.push(`receiver error: ${ctx.receiver.error}`); report(false); });
  container.on('connection_error', (ctx) => { errors.push(`connection error: ${ctx.connection.error}`); report(false); });
  container.on('disconnected', (ctx) => { errors.push(`disconnected: ${ctx.error || ''}`); report(false); });
  setTimeout(() => report(true), a.timeout_s * 1000).unref();
}

// The source a Qpid JMS createDurableSubscriber sends (unshared durable, bench/many_subs.py):
// capability topic only; durable unsettled-state; expiry never; the JMS selector as a filter.
function durableSubscriberSource(address, selector) {
  return { address, durable: 2, expiry_policy: 'never', capabilities: ['topic'], filter: rhea.filter.selector(selector) };
}

// Messages n = 0..count-1 of the many_subs workload: durable, fresh random body, application
// properties k = n % modulo (what the selectors test) and bench_seq = n, typed as a Qpid JMS
// client types setIntProperty and setLongProperty (rhea would send a positive number as uint).
function encodeKeyedMessages(count, size, modulo) {
  const out = new Array(count);
  for (let n = 0; n < count; n++) {
    out[n] = rhea.message.encode({
      durable: true,
      application_properties: { k: rhea.types.wrap_int(n % modulo), bench_seq: rhea.types.wrap_long(n) },
      body: rhea.message.data_section(crypto.randomBytes(size)),
    });
  }
  return out;
}

// How many of messages 0..count-1 carry k = r (0 <= r < modulo).
function expectedFor(r, count, modulo) {
  return r < count ? Math.floor((count - 1 - r) / modulo) + 1 : 0;
}

// Many unshared durable subscriptions on one topic (bench/many_subs.py has the contract):
// `subscriptions` links `sub-<i>`, selector `k = <i % modulo>`, over ceil(N / links_per_connection)
// connections of container `container_id` (the JMS ClientID), all attaches sent at once. Links
// i < `consumers` stay attached with `prefetch` credit, topped up per message; the others are
// detached (closed=false: the subscription stays) as soon as their attach is answered. Marks:
// attach_start, attached (every attach answered, every detach too), then, when `pause` is set,
// the workload waits for a line on stdin (the Python side measures the idle broker meanwhile);
// publish_start (first send), published (last accepted), delivered (last expected delivery).
function manySubs(a) {
  const modulo = a.modulo;
  const messages = encodeKeyedMessages(a.count, a.size, modulo);
  const rcvContainer = rhea.create_container({ id: a.container_id });
  const pubContainer = rhea.create_container();
  const errors = [];
  const conns = [];
  const nconn = Math.max(1, Math.ceil(a.subscriptions / a.links_per_connection));
  const seen = [];  // per consumed receiver: the bench_seqs received
  const got = new Array(a.consumers).fill(0);  // distinct expected messages per consumed receiver
  let expectedTotal = 0;
  for (let i = 0; i < a.consumers; i++) {
    seen.push(new Set());
    expectedTotal += expectedFor(i % modulo, a.count, modulo);
  }
  let answered = 0, refused = 0, detachesLeft = a.subscriptions - a.consumers, done = false;
  let deliveries = 0, accepted = 0, distinct = 0, duplicates = 0, redelivered = 0, wrong = 0, unstamped = 0;
  let sent = 0, pubAccepted = 0, notAccepted = 0, unexpectedDetaches = 0;
  let tAttach0 = null, tAttached = null, tPub0 = null, tPublished = null, tLastIn = null;
  let sender = null, publishing = false, attachTimer = null, runTimer = null;

  const report = (timedOut) => {
    if (done) return;
    done = true;
    const pubSpan = tPublished !== null && tPub0 !== null ? tPublished - tPub0 : null;
    const deliverSpan = tLastIn !== null && tPub0 !== null ? tLastIn - tPub0 : null;
    const attachSpan = tAttached !== null && tAttach0 !== null ? tAttached - tAttach0 : null;
    const short = [];
    for (let i = 0; i < a.consumers; i++) {
      const want = expectedFor(i % modulo, a.count, modulo);
      if (got[i] < want) short.push([i, got[i], want]);
    }
    const sorted = got.slice().sort((x, y) => x - y);
    finish({
      subscriptions: a.subscriptions, consumers: a.consumers, connections: nconn, count: a.count,
      attach_s: attachSpan, attach_per_s: attachSpan ? a.subscriptions / attachSpan : null,
      attaches_answered: answered, attaches_refused: refused, unexpected_detaches: unexpectedDetaches,
      sent, accepted_by_broker: pubAccepted, not_accepted: notAccepted,
      publish_s: pubSpan, publish_msgs_per_s: pubSpan ? pubAccepted / pubSpan : null,
      expected_deliveries: expectedTotal, deliveries, deliveries_accepted: accepted, distinct_deliveries: distinct,
      duplicates, redelivered, wrong, unstamped, missing: expectedTotal - distinct,
      deliver_s: deliverSpan, deliveries_per_s: deliverSpan ? expectedTotal / deliverSpan : null,
      per_consumer_min: sorted.length ? sorted[0] : null,
      per_consumer_median: sorted.length ? sorted[Math.floor(sorted.length / 2)] : null,
      per_consumer_max: sorted.length ? sorted[sorted.length - 1] : null,
      consumers_short: short.length, consumers_short_first: short.slice(0, 10),
      timed_out: timedOut, errors: errors.slice(0, 10), error_count: errors.length,
    }, sender ? [...conns, sender.connection] : conns);
  };

  // The run ends once every message has its outcome and every expected delivery is in (the
  // 'delivered' mark is then; deliver_s still ends at the last expected delivery).
  const maybeDone = () => {
    if (done || tPublished === null || distinct < expectedTotal) return;
    if (tLastIn === null) tLastIn = tPublished; // no deliveries expected
    mark('delivered');
    report(false);
  };

  const startPublishing = () => {
    if (publishing || done) return;
    publishing = true;
    runTimer = setTimeout(() => report(true), a.timeout_s * 1000);
    runTimer.unref();
    const conn = connect(pubContainer, a.url);
    sender = conn.open_sender({ target: { address: a.address }, autosettle: true });
    const pump = () => {
      if (done) return;
      if (tPub0 === null) { tPub0 = now(); mark('publish_start'); }
      while (sender.sendable() && sent < a.count && sent - (pubAccepted + notAccepted) < a.window) {
        sender.send(messages[sent], undefined, 0);
        sent++;
      }
    };
    const outcome = () => {
      if (pubAccepted + notAccepted >= a.count) {
        tPublished = now();
        mark('published');
        // Deliveries may all be in already (a broker may deliver before it answers the sender).
        maybeDone();
      } else {
        pump();
      }
    };
    pubContainer.on('sendable', pump);
    pubContainer.on('accepted', () => { pubAccepted++; outcome(); });
    pubContainer.on('rejected', (ctx) => { notAccepted++; errors.push(`rejected: ${JSON.stringify(ctx.delivery.remote_state)}`); outcome(); });
    pubContainer.on('released', () => { notAccepted++; errors.push('released'); outcome(); });
    pubContainer.on('modified', () => { notAccepted++; errors.push('modified'); outcome(); });
    pubContainer.on('sender_error', (ctx) => { errors.push(`sender error: ${ctx.sender.error}`); report(false); });
    pubContainer.on('connection_error', (ctx) => { errors.push(`publisher connection error: ${ctx.connection.error}`); report(false); });
    pubContainer.on('disconnected', (ctx) => { errors.push(`publisher disconnected: ${ctx.error || ''}`); report(false); });
  };

  const attachPhaseOver = () => {
    if (answered + refused < a.subscriptions || detachesLeft > 0 || tAttached !== null) return;
    tAttached = now();
    clearTimeout(attachTimer);
    if (refused > 0) { report(false); return; }
    mark('attached');
    if (a.pause) process.stdin.once('data', startPublishing);
    else startPublishing();
  };

  rcvContainer.on('receiver_open', (ctx) => {
    const r = ctx.receiver;
    if (!r.remote.attach || !r.remote.attach.source) return; // a refusal: its detach follows
    answered++;
    if (r.bench_index < a.consumers) r.add_credit(a.prefetch);
    else { r.bench_detaching = true; r.detach(); }
    attachPhaseOver();
  });
  rcvContainer.on('receiver_close', (ctx) => {
    const r = ctx.receiver;
    if (r.bench_detaching && !r.bench_detached) {
      r.bench_detached = true;
      detachesLeft--;
      attachPhaseOver();
      return;
    }
    if (!r.remote.attach || !r.remote.attach.source) {
      refused++;
      errors.push(`attach of ${r.name} refused: ${JSON.stringify(r.remote.detach && r.remote.detach.error)}`);
      attachPhaseOver();
      return;
    }
    if (!done) { unexpectedDetaches++; errors.push(`${r.name} detached by the broker: ${JSON.stringify(r.remote.detach && r.remote.detach.error)}`); }
  });
  rcvContainer.on('receiver_error', () => {}); // counted in receiver_close
  rcvContainer.on('message', (ctx) => {
    const t = now();
    ctx.delivery.accept();
    accepted++;
    deliveries++;
    const r = ctx.receiver;
    if (!done) r.add_credit(1);
    const i = r.bench_index;
    const msg = ctx.message;
    const props = msg.application_properties || {};
    const seq = props.bench_seq;
    if (seq === undefined) { unstamped++; return; }
    if (Number(props.k) !== i % modulo || Number(seq) % modulo !== i % modulo) { wrong++; return; }
    if (i >= a.consumers) { wrong++; return; }
    if (seen[i].has(seq)) {
      if (msg.delivery_count) redelivered++; else duplicates++;
      return;
    }
    seen[i].add(seq);
    got[i]++;
    distinct++;
    if (distinct === expectedTotal) {
      tLastIn = t;
      maybeDone();
    }
  });
  rcvContainer.on('connection_error', (ctx) => { errors.push(`connection error: ${ctx.connection.error}`); report(false); });
  rcvContainer.on('disconnected', (ctx) => { errors.push(`disconnected: ${ctx.error || ''}`); report(false); });

  attachTimer = setTimeout(() => report(true), a.attach_timeout_s * 1000);
  attachTimer.unref();
  for (let c = 0; c < nconn; c++) {
    conns.push(connect(rcvContainer, a.url, { container_id: a.container_id }));
  }
  tAttach0 = now();
  mark('attach_start');
  for (let i = 0; i < a.subscriptions; i++) {
    const conn = conns[Math.floor(i / a.links_per_connection)];
    const source = durableSubscriberSource(a.address, `k = ${i % modulo}`);
    const r = conn.open_receiver({ name: `sub-${i}`, source, credit_window: 0, autoaccept: false });
    r.bench_index = i;
  }
}

const args = JSON.parse(process.argv[2]);
if (args.workload === 'publish') publish(args);
else if (args.workload === 'consume') consume(args);
else if (args.workload === 'many_subs') manySubs(args);
else throw new Error(`unknown workload ${args.workload}`);
