'use strict';
// Shared helpers for the rhea tier: connections, watched links, topics, frame inspection.
//
// rhea decodes every performative it receives and keeps the last one of each kind on its
// endpoints: connection.remote.open / .close, link.remote.attach / .detach. A remote terminus
// comes through terminus.unwrap(), which gives null for a null (absent) source or target and a
// source/target object for a described terminus, even an empty one: so `source === null` tells
// a null source from a source terminus with no address, which is what the Qpid JMS client tells
// apart (docs/wire.md §1.7).

const assert = require('node:assert/strict');
const { execFile } = require('node:child_process');
const crypto = require('node:crypto');
const rhea = require('rhea');

// Keep the exact bytes of every message rhea decodes (as message.raw), so a test can compare
// what a consumer got with what was published, byte for byte.
const messageCodec = require('rhea/lib/message.js');
const decodeMessage = messageCodec.decode;
messageCodec.decode = function (buffer) {
  const decoded = decodeMessage(buffer);
  Object.defineProperty(decoded, 'raw', { value: Buffer.from(buffer), enumerable: false });
  return decoded;
};

// Transactions (AMQP 1.0 §4): rhea 3 neither decodes the declared / transactional-state outcomes
// nor puts a state on a transfer. Both are added here, on rhea's own codec objects.
const unwrapOutcome = messageCodec.unwrap_outcome;
const TXN_OUTCOMES = { 0x33: 'declared', 'amqp:declared:list': 'declared', 0x34: 'transactional-state', 'amqp:transactional-state:list': 'transactional-state' };
messageCodec.unwrap_outcome = function (outcome) {
  const kind = outcome && outcome.descriptor ? TXN_OUTCOMES[outcome.descriptor.value] : undefined;
  if (!kind) return unwrapOutcome(outcome);
  const fields = Array.isArray(outcome.value) ? outcome.value : [];
  const result = { '@': kind, txn_id: fields[0] ? fields[0].value : undefined };
  if (kind === 'transactional-state' && fields[1] && fields[1].descriptor) result.outcome = unwrapOutcome(fields[1]);
  return result;
};
const terminusCodec = require('rhea/lib/terminus.js');
const unwrapTerminus = terminusCodec.unwrap;
terminusCodec.unwrap = function (field) {
  // rhea knows only source and target; a coordinator target (0x30) would warn and read as null.
  if (field && field.descriptor && (field.descriptor.value === 0x30 || field.descriptor.value === 'amqp:coordinator:list')) {
    return { '@': 'coordinator', value: field.value };
  }
  return unwrapTerminus(field);
};
const framesCodec = require('rhea/lib/frames.js');
const transferStates = new Map(); // delivery-tag hex -> described delivery state for its transfer
const makeTransfer = framesCodec.transfer;
framesCodec.transfer = function (fields) {
  const frame = makeTransfer(fields);
  if (transferStates.size && fields.delivery_tag) {
    const state = transferStates.get(Buffer.from(fields.delivery_tag).toString('hex'));
    if (state) {
      for (let i = 0; i < 7; i++) if (frame.value[i] === undefined) frame.value[i] = rhea.types.Null();
      frame.value[7] = state; // transfer field 'state'
    }
  }
  return frame;
};

const EVENT_TIMEOUT = 30000; // expected events: routing by the Spark job takes 0.3-3 s
// "Nothing arrives" windows, always after a positive control (a message sent after the unwanted
// ones, received): by then anything unwanted was routed too, so 1 s shows what 4 s did.
const QUIET_WAIT = 1000;

function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (the pytest wrapper tests/rhea/test_rhea_tier.py sets it)`);
  return value;
}

function serverAddress() {
  const url = new URL(env('SHAREDSUB_URL'));
  return { host: url.hostname, port: Number(url.port) };
}

function uid(prefix) {
  return `${prefix}-${crypto.randomBytes(5).toString('hex')}`;
}

function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function nextTurn() {
  return new Promise((resolve) => setImmediate(resolve));
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function deferred() {
  let resolve;
  let reject;
  const promise = new Promise((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject, done: false };
}

/** Create a topic with the sharedsub command line; the running service picks it up. */
function createTopic(prefix = 'rt') {
  const name = uid(prefix);
  return new Promise((resolve, reject) => {
    execFile(
      env('SHAREDSUB_PYTHON'),
      ['-m', 'sharedsub', 'topics', 'create', name, '--data-dir', env('SHAREDSUB_DATA_DIR')],
      { timeout: 60000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`topics create ${name} failed: ${error.message}\n${stdout}\n${stderr}`));
        else resolve(name);
      },
    );
  });
}

// ------------------------------------------------------------------------------- printing

function plain(value, depth = 0) {
  // A JSON-friendly view of decoded AMQP values (for assertion messages).
  if (depth > 8) return '…';
  if (value === null || value === undefined) return value === null ? null : undefined;
  if (Buffer.isBuffer(value)) return `<binary ${value.toString('hex')}>`;
  if (typeof value === 'bigint') return value.toString();
  if (Array.isArray(value)) return value.map((v) => plain(v, depth + 1));
  if (typeof value === 'object' && value.type && 'value' in value && value.type.name) { // a rhea Typed value
    const out = { [`<${value.type.name}>`]: plain(value.value, depth + 1) };
    if (value.descriptor) out.descriptor = plain(value.descriptor, depth + 1);
    return out;
  }
  if (typeof value === 'object' && value.constructor && value.constructor.descriptor) {
    // a composite (source, target, error, ...): its named fields
    const out = { '@': String(value.constructor) };
    for (const k in value) {
      if (k === 'value' || typeof value[k] === 'function') continue;
      const v = value[k];
      if (v !== undefined && v !== null) out[k] = plain(v, depth + 1);
    }
    return out;
  }
  if (typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) {
      if (typeof v !== 'function') out[k] = plain(v, depth + 1);
    }
    return out;
  }
  return value;
}

function show(value) {
  try {
    return JSON.stringify(plain(value));
  } catch (e) {
    return String(value);
  }
}

/** What a terminus field of an attach frame held: 'absent' (list too short), 'null', or
 * 'described <code> (<n> fields)' for a source (0x28) / target (0x29) terminus. */
function rawTerminus(field) {
  if (field === undefined) return 'absent';
  if (field === null || (field.type && field.type.name === 'Null')) return 'null';
  if (field.descriptor) {
    const d = field.descriptor.value;
    const code = typeof d === 'number' ? `0x${d.toString(16)}` : String(d);
    const n = Array.isArray(field.value) ? field.value.length : '?';
    return `described ${code} (${n} fields)`;
  }
  return `undescribed ${show(field)}`;
}

/** The remote terminus of a decoded attach: null when the frame had a null (or no) terminus. */
function terminusOf(attach, which) {
  const t = attach[which];
  if (t === undefined || t === null || (t.type && t.type.name === 'Null')) return null;
  return t;
}

// ------------------------------------------------------------------------------- connections

class Client {
  /**
   * One AMQP connection from its own rhea container.
   * options: containerId, desiredCapabilities, properties (open properties), idleTimeout (ms),
   * saslAnonymous (a SASL layer with ANONYMOUS, as Qpid JMS connects by default), url (another
   * service's amqp://host:port instead of the main one), username and password (SASL PLAIN).
   */
  constructor(options = {}) {
    this.containerId = options.containerId || uid('rhea');
    this.container = rhea.create_container({ id: this.containerId });
    this.errors = [];
    this.container.on('error', (e) => this.errors.push(e));
    const { host, port } = options.url
      ? { host: new URL(options.url).hostname, port: Number(new URL(options.url).port) }
      : serverAddress();
    const connectOptions = {
      host,
      port,
      reconnect: false,
      container_id: this.containerId,
      idle_time_out: options.idleTimeout || 0,
    };
    if (options.desiredCapabilities) connectOptions.desired_capabilities = options.desiredCapabilities;
    if (options.properties) connectOptions.properties = options.properties;
    if (options.saslAnonymous) connectOptions.username = 'anonymous'; // rhea then speaks SASL ANONYMOUS
    if (options.username) Object.assign(connectOptions, { username: options.username, password: options.password });
    this.opened = deferred();
    this.closed = deferred();
    this.disconnected = deferred();
    this.connection = this.container.connect(connectOptions);
    this.connection.on('connection_open', () => this.opened.resolve(this.connection.remote.open));
    this.connection.on('connection_close', () => {
      this.closed.done = true;
      this.closed.resolve(this.connection.remote.close);
    });
    this.connection.on('connection_error', () => {});
    this.connection.on('disconnected', (ctx) => {
      this.disconnected.done = true;
      this.disconnected.resolve(ctx && ctx.error);
      this.opened.reject(new Error(`disconnected before open: ${ctx && ctx.error}`));
    });
    this.opened.promise.catch(() => {});
    this.sessions = [];
  }

  /** Wait for the server's open frame; returns the open performative. */
  open() {
    return withTimeout(this.opened.promise, EVENT_TIMEOUT, `open from the server (container ${this.containerId})`);
  }

  /** A new session (rhea keys links by name within a session, so same-name links need one each). */
  session() {
    const s = this.connection.create_session();
    // Keep each attach's source and target exactly as decoded from the frame, before rhea
    // re-wraps them (it turns a null terminus into a Typed Null, an unknown one into null).
    const onAttach = s.on_attach;
    s.on_attach = function (frame) {
      const fields = frame.performative.value || [];
      const name = frame.performative.name;
      const raw = { source: rawTerminus(fields[5]), target: rawTerminus(fields[6]) };
      const result = onAttach.call(this, frame);
      const link = this.links[name];
      if (link) link.rawAttach = raw;
      return result;
    };
    s.on('session_error', () => {});
    s.on('session_close', () => {});
    s.begin();
    this.sessions.push(s);
    return s;
  }

  /**
   * Open a receiver (our receiver: the server's sender). opts are rhea link options: name,
   * source ({address, durable, expiry_policy, capabilities, filter, distribution_mode} or
   * undefined for a null source), target (undefined: an empty target; null: a null target),
   * autoaccept, credit_window.
   */
  receiver(opts, session) {
    const s = session || this.session();
    const o = { autoaccept: false, credit_window: 0, ...opts };
    return new WatchedLink(s.open_receiver(o), true, this);
  }

  /** Open a sender (publisher). opts: name, target ({address} or null for anonymous relay). */
  sender(opts, session) {
    const s = session || this.session();
    return new WatchedLink(s.open_sender(opts), false, this);
  }

  /** A transaction coordinator link, as Qpid JMS opens one for a transacted session. */
  coordinator(session) {
    const s = session || this.session();
    const t = rhea.types;
    const link = s.open_sender({
      name: `qpid-jms:coordinator:${uid('txn')}`,
      source: { address: uid('txn-src'), outcomes: ['amqp:accepted:list', 'amqp:rejected:list', 'amqp:released:list', 'amqp:modified:list'] },
    });
    // The attach goes out on the next tick: make its target a coordinator (0x30) with the
    // local-transactions capability.
    link.local.attach.target = t.described(t.wrap_ulong(0x30), t.wrap_list([t.wrap_symbol('amqp:local-transactions')]));
    return new WatchedLink(link, false, this);
  }

  /** Close the connection and wait for the close (or the socket's end). */
  async close() {
    if (this.connection.is_closed() || this.closed.done) return;
    try {
      if (!this.connection.remote.close) this.connection.close();
      await withTimeout(Promise.race([this.closed.promise, this.disconnected.promise]), 10000, 'connection close');
    } catch (e) {
      // ignore: the socket is dropped below
    } finally {
      try {
        this.connection.close();
      } catch (e) {
        /* closed already */
      }
      if (this.connection.socket) this.connection.socket.destroy();
    }
  }
}

/** Run fn with clients that are closed afterwards whatever happens. */
async function withClients(fn) {
  const clients = [];
  const make = async (options) => {
    const c = new Client(options);
    clients.push(c);
    await c.open();
    return c;
  };
  try {
    return await fn(make);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

class WatchedLink {
  constructor(link, isReceiver, client) {
    this.link = link;
    this.client = client;
    this.isReceiver = isReceiver;
    this.attached = deferred();
    this.detached = deferred();
    this.messages = []; // {message, delivery}
    this.outcomes = new Map(); // sender: delivery -> deferred outcome
    this._waiters = [];
    const role = isReceiver ? 'receiver' : 'sender';
    link.on(`${role}_open`, () => {
      this.attached.done = true;
      this.attached.resolve(link.remote.attach);
    });
    link.on(`${role}_error`, () => {});
    link.on(`${role}_close`, () => {
      this.detached.done = true;
      this.detached.resolve(link.remote.detach);
    });
    if (isReceiver) {
      // Keep every flow frame the server sends on this link (drain replies).
      this.flows = [];
      const onFlow = link.on_flow;
      link.on_flow = (frame) => {
        this.flows.push(frame.performative);
        this._notify();
        return onFlow.call(link, frame);
      };
      link.on('message', (ctx) => {
        this.messages.push({ message: ctx.message, delivery: ctx.delivery });
        this._notify();
      });
    } else {
      for (const outcome of ['accepted', 'rejected', 'released', 'modified']) {
        link.on(outcome, (ctx) => {
          const d = this.outcomes.get(ctx.delivery);
          if (d) d.resolve({ outcome, state: ctx.delivery.remote_state, settled: ctx.delivery.remote_settled });
        });
      }
      // Outcomes rhea does not know (declared, transactional-state) come only as 'settled'.
      link.on('settled', (ctx) => {
        const d = this.outcomes.get(ctx.delivery);
        const state = ctx.delivery.remote_state;
        if (d) d.resolve({ outcome: state && state['@'] ? state['@'] : 'settled', state, settled: true });
      });
    }
  }

  get name() {
    return this.link.name;
  }

  /** The server's attach frame. */
  attach(ms = EVENT_TIMEOUT) {
    return withTimeout(this.attached.promise, ms, `attach of link ${this.link.name}`);
  }

  /** The server's detach frame. */
  detach(ms = EVENT_TIMEOUT) {
    return withTimeout(this.detached.promise, ms, `detach of link ${this.link.name}`);
  }

  /** Give credit. */
  flow(n) {
    this.link.add_credit(n);
  }

  _notify() {
    for (const w of this._waiters.slice()) w();
  }

  /** Wait until at least n messages have arrived; returns them. */
  waitMessages(n, ms = EVENT_TIMEOUT) {
    if (this.messages.length >= n) return Promise.resolve(this.messages.slice());
    return withTimeout(
      new Promise((resolve) => {
        const w = () => {
          if (this.messages.length >= n) {
            this._waiters.splice(this._waiters.indexOf(w), 1);
            resolve(this.messages.slice());
          }
        };
        this._waiters.push(w);
      }),
      ms,
      `${n} message(s) on ${this.link.name} (have ${this.messages.length}: ${show(this.messages.map((m) => m.message.body))})`,
    );
  }

  /** Wait for a flow frame from the server matching pred; returns it. */
  waitFlow(pred, ms = EVENT_TIMEOUT, what = 'a flow frame') {
    const found = () => this.flows.find(pred);
    if (found()) return Promise.resolve(found());
    return withTimeout(
      new Promise((resolve) => {
        const w = () => {
          const f = found();
          if (f) {
            this._waiters.splice(this._waiters.indexOf(w), 1);
            resolve(f);
          }
        };
        this._waiters.push(w);
      }),
      ms,
      `${what} on ${this.link.name} (flows so far: ${show(this.flows)})`,
    );
  }

  /** Send a message (an object for rhea's encoder, or a Buffer sent as raw format-0 bytes);
   * resolves to {outcome, state} once the server settles it. */
  send(message, ms = EVENT_TIMEOUT, { state } = {}) {
    const d = deferred();
    let tag;
    if (state) {
      tag = Buffer.from(uid('tag'));
      transferStates.set(tag.toString('hex'), state);
    }
    const delivery = Buffer.isBuffer(message) ? this.link.send(message, tag, 0) : this.link.send(message, tag);
    this.outcomes.set(delivery, d);
    return withTimeout(d.promise, ms, `outcome of a message sent on ${this.link.name}`);
  }

  /** Wait until the sender has credit. */
  async sendable(ms = EVENT_TIMEOUT) {
    const start = Date.now();
    while (!this.link.sendable()) {
      if (Date.now() - start > ms) throw new Error(`no credit on ${this.link.name} after ${ms} ms`);
      await delay(20);
    }
  }

  /** Detach closed=false and wait for the reply. */
  async detachLink() {
    this.link.detach();
    return this.detach();
  }

  /** Detach closed=true and wait for the reply. */
  async closeLink() {
    this.link.close();
    return this.detach();
  }
}

// ------------------------------------------------------------------------------- JMS shapes

const SELECTOR_DESCRIPTOR = 0x0000468c00000004;
const NO_LOCAL_DESCRIPTOR = 0x0000468c00000003;

function selectorFilter(selector) {
  return { 'jms-selector': rhea.filter.selector(selector)['jms-selector'] };
}

function noLocalFilter() {
  // The Qpid JMS client puts the string NoLocalFilter{} inside (docs/wire.md §1.5).
  return { 'no-local': rhea.types.described(rhea.types.wrap_ulong(NO_LOCAL_DESCRIPTOR), rhea.types.wrap_string('NoLocalFilter{}')) };
}

/** A source as the Qpid JMS client sends it for each consumer kind (docs/wire.md §1.3). */
function jmsSource(topic, kind, { selector, noLocal, isGlobal } = {}) {
  const caps = ['topic'];
  if (kind === 'shared-durable' || kind === 'shared-volatile') caps.push('shared');
  if (isGlobal) caps.push('global');
  const durable = kind === 'durable' || kind === 'shared-durable';
  const source = {
    address: topic,
    durable: durable ? 2 : 0,
    expiry_policy: durable ? 'never' : 'link-detach',
    capabilities: caps,
    outcomes: ['amqp:accepted:list', 'amqp:rejected:list', 'amqp:released:list', 'amqp:modified:list'],
    default_outcome: rhea.message.modified({ delivery_failed: true }).described(),
  };
  if (durable) source.distribution_mode = 'copy';
  const filter = {};
  if (selector) Object.assign(filter, selectorFilter(selector));
  if (noLocal) Object.assign(filter, noLocalFilter());
  if (Object.keys(filter).length) source.filter = filter;
  return source;
}

/** The JMS client's receiver link options for a subscription (name, source, snd/rcv modes). */
function jmsReceiver(linkName, topic, kind, extra = {}) {
  return { name: linkName, source: jmsSource(topic, kind, extra), snd_settle_mode: 0, rcv_settle_mode: 0 };
}

/** The unsubscribe lookup: null source, link name `sub` (ClientID) or `sub|global`, the latter
 * with link desired-capabilities [shared, global] as Qpid JMS sends them (docs/wire.md §1.9). */
function lookupReceiver(linkName) {
  const opts = { name: linkName, snd_settle_mode: 0, rcv_settle_mode: 0 };
  if (/\|global$/.test(linkName)) opts.desired_capabilities = ['shared', 'global'];
  return opts;
}

// ------------------------------------------------------------------------------- assertions

function symbolsOf(value) {
  if (value === undefined || value === null) return [];
  const list = Array.isArray(value) ? value : [value];
  return list.map((v) => String(v));
}

function descriptorOf(typed) {
  if (!typed || !typed.descriptor) return undefined;
  const d = typed.descriptor;
  const v = d.value !== undefined ? d.value : d;
  if (Buffer.isBuffer(v)) return v.readBigUInt64BE(0);
  if (typeof v === 'number') return BigInt(v);
  return v; // a symbol descriptor
}

function valueOf(typed) {
  if (typed && typed.value !== undefined && typed.type) return typed.value;
  return typed;
}

/** Assert a refusal (docs/wire.md §2.2, docs/design.md §4.10): attach with null source and null target,
 * then detach closed=true with the condition and a description. Returns the detach error. */
async function assertRefused(link, condition, { descriptionIncludes = [], nullTarget = true } = {}) {
  const attach = await link.attach();
  const raw = link.link.rawAttach || {};
  assert.ok(
    raw.source === 'null' || raw.source === 'absent',
    `refused link ${link.name}: the attach reply must carry a null source, not a source terminus ` +
      `(Qpid JMS reads any source as "found"); frame source: ${raw.source} ${show(attach.source)}`,
  );
  assert.equal(terminusOf(attach, 'source'), null, `refused link ${link.name}: decoded source ${show(attach.source)}`);
  if (nullTarget) {
    assert.ok(
      raw.target === 'null' || raw.target === 'absent',
      `refused link ${link.name}: the attach reply should carry a null target (wire.md §2.2, D13); frame target: ${raw.target} ${show(attach.target)}`,
    );
  }
  const detach = await link.detach();
  assert.equal(detach.closed, true, `refusal of ${link.name}: detach must be closed=true; got ${show(detach)}`);
  assert.ok(detach.error, `refusal of ${link.name}: detach must carry an error; got ${show(detach)}`);
  assert.equal(String(detach.error.condition), condition, `refusal of ${link.name}: condition; detach ${show(detach)}`);
  const description = detach.error.description || '';
  assert.ok(description.length >= 20, `refusal of ${link.name}: a description a person can act on; got ${JSON.stringify(description)}`);
  for (const part of descriptionIncludes) {
    assert.ok(description.includes(part), `refusal of ${link.name}: description should mention ${JSON.stringify(part)}; got ${JSON.stringify(description)}`);
  }
  return detach.error;
}

/** Assert a successful subscription attach reply source. */
function assertReplySource(attach, expected) {
  const src = terminusOf(attach, 'source');
  assert.ok(src, `attach of ${attach.name} succeeded, so the reply needs a source; got ${show(src)}`);
  const where = `reply source of ${attach.name}: ${show(src)}`;
  assert.equal(src.address, expected.address, `address; ${where}`);
  assert.deepEqual(symbolsOf(src.capabilities), expected.capabilities, `capabilities [global?, shared?, topic]; ${where}`);
  if (expected.durable !== undefined) assert.equal(Number(src.durable), expected.durable, `durable; ${where}`);
  if (expected.durableAtLeast !== undefined) {
    assert.ok(Number(src.durable) >= expected.durableAtLeast, `durable >= ${expected.durableAtLeast}; ${where}`);
  }
  if (expected.expiry !== undefined) assert.equal(String(src.expiry_policy), expected.expiry, `expiry-policy; ${where}`);
  if (expected.distributionMode !== undefined) {
    assert.equal(src.distribution_mode === undefined || src.distribution_mode === null ? null : String(src.distribution_mode), expected.distributionMode, `distribution-mode; ${where}`);
  }
  const filter = src.filter || {};
  const entries = Object.entries(filter);
  const selectors = entries.filter(([, v]) => descriptorOf(v) === BigInt(SELECTOR_DESCRIPTOR) || descriptorOf(v) === 'apache.org:selector-filter:string');
  const noLocals = entries.filter(([, v]) => descriptorOf(v) === BigInt(NO_LOCAL_DESCRIPTOR) || descriptorOf(v) === 'apache.org:no-local-filter:list');
  if (expected.selector === undefined || expected.selector === null) {
    assert.equal(selectors.length, 0, `no selector filter expected; ${where}`);
  } else {
    assert.equal(selectors.length, 1, `one selector filter (descriptor 0x468C00000004) expected; ${where}`);
    assert.equal(valueOf(selectors[0][1]), expected.selector, `selector echoed; ${where}`);
  }
  assert.equal(noLocals.length, expected.noLocal ? 1 : 0, `no-local filter ${expected.noLocal ? 'expected' : 'unexpected'}; ${where}`);
  assert.equal(entries.length, selectors.length + noLocals.length, `only applied filters echoed; ${where}`);
}

/** A message whose only section is an amqp-value holding `value`, as raw bytes. rhea's encoder
 * cannot do this for a described value: it sets the amqp-value descriptor on the value itself,
 * replacing the value's own descriptor. */
function amqpValueMessage(value) {
  const writer = new rhea.types.Writer();
  writer.write(value);
  return Buffer.concat([Buffer.from([0x00, 0x53, 0x77]), writer.toBuffer()]);
}

/** Transaction bodies and states (AMQP 1.0 §4.5); declare/discharge are raw message bytes. */
const txn = {
  declare: () => amqpValueMessage(rhea.types.described(rhea.types.wrap_ulong(0x31), rhea.types.wrap_list([]))),
  discharge: (txnId, fail) =>
    amqpValueMessage(
      rhea.types.described(rhea.types.wrap_ulong(0x32), rhea.types.wrap_list([rhea.types.wrap_binary(txnId), rhea.types.wrap_boolean(fail)])),
    ),
  state: (txnId) => rhea.types.described(rhea.types.wrap_ulong(0x34), rhea.types.wrap_list([rhea.types.wrap_binary(txnId)])),
  /** transactional-state(txn-id, accepted): a consumer's acknowledgement inside a transaction. */
  accepted: (txnId) =>
    rhea.types.described(
      rhea.types.wrap_ulong(0x34),
      rhea.types.wrap_list([rhea.types.wrap_binary(txnId), rhea.types.described(rhea.types.wrap_ulong(0x24), rhea.types.wrap_list([]))]),
    ),
};

module.exports = {
  txn,
  EVENT_TIMEOUT,
  QUIET_WAIT,
  Client,
  WatchedLink,
  withClients,
  createTopic,
  uid,
  delay,
  nextTurn,
  withTimeout,
  show,
  plain,
  rawTerminus,
  terminusOf,
  symbolsOf,
  descriptorOf,
  valueOf,
  jmsSource,
  jmsReceiver,
  lookupReceiver,
  selectorFilter,
  noLocalFilter,
  assertRefused,
  assertReplySource,
  SELECTOR_DESCRIPTOR,
  NO_LOCAL_DESCRIPTOR,
  rhea,
  encodeMessage: messageCodec.encode,
};
