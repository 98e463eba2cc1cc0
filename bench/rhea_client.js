'use strict';
// The publish and consume workloads of bench/workloads.py, driven by rhea: an AMQP 1.0 client
// independent of Proton-C, in its own process, costing the machine less per message than the
// python-qpid-proton client (which on a 2-core machine takes most of a core at 10k msg/s).
//
//   node bench/rhea_client.js '<json arguments>'     (bench/rhea_workloads.py runs it)
//
// Arguments: {"workload": "publish"|"consume", "url": "amqp://host:port", "address": ..., ...}
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

function connect(container, url) {
  const u = new URL(url);
  return container.connect({ host: u.hostname, port: Number(u.port), reconnect: false, idle_time_out: 0 });
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

const args = JSON.parse(process.argv[2]);
if (args.workload === 'publish') publish(args);
else if (args.workload === 'consume') consume(args);
else throw new Error(`unknown workload ${args.workload}`);
