/* sharedsub web console, browser side.
 *
 * Hash routes (#/, #/topic/NAME, #/subscription/KEY, #/connections) render a page skeleton once,
 * then the page's /console/api/ JSON is fetched again every session.refresh_seconds and only the
 * figures, tables and charts are redrawn (forms, browse state and dialogs are left alone).
 * Admin actions send the bearer token kept in sessionStorage. Plain ES2020, no dependencies;
 * every value that comes from the server is rendered with textContent, never as HTML.
 */
'use strict';

const TOKEN_KEY = 'sharedsub.console.token';
const API = '/console/api/';
const DASH = '–';
const SVG_NS = 'http://www.w3.org/2000/svg';
const CHART = { width: 600, height: 160, left: 48, right: 10, top: 24, bottom: 20 };

const state = {
  session: null,        // GET /console/api/session
  controller: null,     // the page on screen: {url, update(data), loading}
  timer: null,
  statusKind: null,     // 'load' (cleared by the next successful load) or 'auth'
  loadRefused: false,   // the last page load was answered 401 (the dialog was opened for it)
  pendingNotice: null,  // [text, isError] for #action-result after the next navigation
  browse: null,         // {key, query, input, after, stack, reply, retry} of the last subscription browsed
};

/* ---------- DOM helpers ---------- */

const $ = (selector, root = document) => root.querySelector(selector);

/** Creates an element; props: class, text, data (dataset), on (listeners), other keys are attributes. */
function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = String(value);
    else if (key === 'data') Object.assign(node.dataset, value);
    else if (key === 'on') Object.entries(value).forEach(([event, fn]) => node.addEventListener(event, fn));
    else node.setAttribute(key, value === true ? '' : String(value));
  }
  node.append(...children.filter((child) => child !== null && child !== undefined && child !== false));
  return node;
}

function svgEl(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG_NS, tag);
  Object.entries(attrs).forEach(([key, value]) => node.setAttribute(key, String(value)));
  if (text !== null) node.textContent = text;
  return node;
}

/** Puts a text (or a node) into the element with data-field=NAME under root. */
function setField(root, name, value) {
  const node = root.querySelector(`[data-field="${name}"]`);
  if (!node) return;
  if (value instanceof Node) node.replaceChildren(value);
  else node.textContent = value === null || value === undefined ? DASH : String(value);
}

const topicHref = (name) => `#/topic/${encodeURIComponent(name)}`;
const subscriptionHref = (key) => `#/subscription/${encodeURIComponent(key)}`;
const link = (href, text) => el('a', { href, text });

/** columns: [label, numeric?]; cell classes are set on the <td>s only (not on the <th>s). */
function makeTable(id, columns) {
  const head = el('tr', {}, ...columns.map(([label, numeric]) => el('th', { class: numeric ? 'num' : null, text: label })));
  return el('table', { id, class: 'grid' }, el('thead', {}, head), el('tbody'));
}

function fillTable(table, rows, emptyText) {
  const width = table.tHead.rows[0].cells.length;
  const body = table.tBodies[0];
  if (rows.length) body.replaceChildren(...rows);
  else body.replaceChildren(el('tr', { class: 'empty' }, el('td', { colspan: width, text: emptyText })));
}

function cell(cls, content) {
  return el('td', { class: cls }, content instanceof Node ? content : String(content ?? DASH));
}

function panel(title, ...children) {
  return el('section', { class: 'panel' }, title ? el('h2', { text: title }) : null, ...children);
}

function card(label, field, note = '') {
  return el('section', { class: 'card', data: { card: field } },
    el('div', { class: 'card-label', text: label }),
    el('div', { class: 'card-figure' }, el('span', { data: { field } })),
    el('div', { class: 'card-note', data: { note: field } }, note));
}

function setNote(root, name, text) {
  const node = root.querySelector(`[data-note="${name}"]`);
  if (node) node.textContent = text;
}

function scroller(table) {
  return el('div', { class: 'table-wrap' }, table);
}

/* ---------- formatting ---------- */

const isNum = (n) => typeof n === 'number' && Number.isFinite(n);
const fmtInt = (n) => (isNum(n) ? String(Math.round(n)) : DASH);
const fmtRate = (r) => (isNum(r) ? `${r.toFixed(1)} msg/s` : DASH);
const fmtSeconds = (s) => (isNum(s) ? `${s.toFixed(1)} s` : DASH);
const yesNo = (b) => (b ? 'yes' : 'no');

function fmtBytes(n) {
  if (!isNum(n)) return DASH;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let value = n;
  let i = 0;
  while (Math.abs(value) >= 1024 && i < units.length - 1) { value /= 1024; i += 1; }
  return i === 0 ? `${n} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[i]}`;
}

function fmtAge(seconds) {
  if (!isNum(seconds)) return DASH;
  if (seconds < 90) return `${seconds.toFixed(0)} s`;
  if (seconds < 5400) return `${(seconds / 60).toFixed(0)} min`;
  if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

/** Short numbers for chart labels: 0.4, 12, 3.5k, 1.2M. */
function fmtCompact(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  if (a >= 1e4) return `${(v / 1e3).toFixed(0)}k`;
  if (a >= 1e3) return `${(v / 1e3).toFixed(1)}k`;
  return Number.isInteger(v) ? String(v) : v.toFixed(a < 10 ? 1 : 0);
}

const fmtClock = (epochSeconds) =>
  new Date(epochSeconds * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });

function fmtIso(iso) {
  if (iso === null || iso === undefined) return DASH;
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

function fmtValue(v) {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function fmtProperties(properties) {
  return Object.entries(properties || {}).map(([k, v]) => `${k}=${fmtValue(v)}`).join(', ');
}

function windowLabel() {
  const s = Number(state.session?.window_seconds) || 3600;
  if (s === 3600) return 'last hour';
  return s % 3600 === 0 ? `last ${s / 3600} hours` : `last ${Math.round(s / 60)} min`;
}

/* ---------- token and API ---------- */

function storedToken() {
  try { return sessionStorage.getItem(TOKEN_KEY); } catch { return null; }
}

const isAdmin = () => Boolean(storedToken()) && Boolean(state.session?.authorized);
const isLocked = () => state.session?.access === 'token' && !state.session.authorized;

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function apiUrl(name, params = {}) {
  const query = new URLSearchParams();
  Object.entries(params).forEach(([k, v]) => { if (v !== null && v !== undefined && v !== '') query.set(k, String(v)); });
  const text = query.toString();
  return API + name + (text ? `?${text}` : '');
}

/** fetch + JSON; throws ApiError for network errors, HTTP errors and {"ok": false} replies. */
async function request(method, path, body) {
  const headers = { Accept: 'application/json' };
  const token = storedToken();
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let response;
  try {
    response = await fetch(path, {
      method, headers, cache: 'no-store', credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError(0, 'network', `cannot reach the service (${err.message})`);
  }
  let doc = null;
  try { doc = await response.json(); } catch { doc = null; }
  if (!response.ok || (doc && doc.ok === false)) {
    const message = doc?.message || `${method} ${path}: HTTP ${response.status}`;
    throw new ApiError(response.status, doc?.error || 'http', message);
  }
  return doc;
}

const apiGet = (path) => request('GET', path);
const apiPost = (path, body) => request('POST', path, body);

/* ---------- notices and dialogs ---------- */

function showStatus(text, kind = 'load') {
  $('#status').textContent = text;
  state.statusKind = kind;
}

function clearStatus(kind = null) {
  if (kind && state.statusKind !== kind) return;
  $('#status').textContent = '';
  state.statusKind = null;
}

function showActionResult(text, isError = false) {
  const node = $('#action-result');
  node.textContent = text;
  node.classList.toggle('notice-error', isError);
  node.classList.toggle('notice-info', !isError);
}

function needToken(message, kind) {
  const text = message || 'this needs the admin token';
  showStatus(text, kind);
  openTokenDialog(text);
}

/** A page load's error goes to #status; a 401 opens the sign-in dialog (once, not on every refresh). */
function reportLoadError(err) {
  const again = state.loadRefused;
  state.loadRefused = err.status === 401;
  if (err.status === 401 && !again) needToken(err.message, 'load');
  else showStatus(err.message, 'load');
}

function reportActionError(err) {
  if (err.status === 401) needToken(err.message, 'auth');
  else showActionResult(err.message, true);
}

function openDialog(dialog) {
  if (!dialog.open) dialog.showModal();
}

function closeDialog(dialog) {
  if (dialog.open) dialog.close();
}

function openTokenDialog(reason = '') {
  $('#token-reason').textContent = reason;
  openDialog($('#token-dialog'));
  $('#token-input').focus();
}

/** Opens #confirm with TEXT; resolves true on OK, false on Cancel or Escape. */
function confirmAction(text) {
  const dialog = $('#confirm');
  $('#confirm-text').textContent = text;
  openDialog(dialog);
  $('#confirm-cancel').focus();
  return new Promise((resolve) => {
    const ok = $('#confirm-ok');
    const cancel = $('#confirm-cancel');
    const finish = (answer) => {
      ok.removeEventListener('click', onOk);
      cancel.removeEventListener('click', onCancel);
      dialog.removeEventListener('close', onCancel);
      closeDialog(dialog);
      resolve(answer);
    };
    const onOk = () => finish(true);
    const onCancel = () => finish(false);
    ok.addEventListener('click', onOk);
    cancel.addEventListener('click', onCancel);
    dialog.addEventListener('close', onCancel);
  });
}

/** Navigates to HASH and shows TEXT in #action-result once there. */
function go(hash, text, isError = false) {
  state.pendingNotice = [text, isError];
  if (location.hash === hash) onHashChange();
  else location.hash = hash;
}

/* ---------- session and header ---------- */

async function loadSession() {
  state.session = await apiGet(apiUrl('session'));
  renderSessionInfo();
}

function renderHeader() {
  const admin = isAdmin();
  const access = $('#access');
  access.textContent = admin ? 'admin' : 'read-only';
  access.classList.toggle('is-admin', admin);
  $('#signout').hidden = !storedToken();
  $('#signin').hidden = admin;
}

function renderSessionInfo() {
  const s = state.session || {};
  const parts = [`sharedsub ${s.version || ''}`.trim()];
  if (s.amqp) parts.push(`AMQP ${s.amqp}`);
  if (s.data_dir) parts.push(`data dir ${s.data_dir}`);
  if (s.member) parts.push(`member slot ${s.member.slot}`);
  parts.push(`refresh every ${s.refresh_seconds || 5} s`);
  $('#footer').textContent = parts.join('  ·  ');
  $('#token-path').textContent = s.data_dir ? ` (here: ${s.data_dir}/_service.json)` : '';
}

function startTimer() {
  clearInterval(state.timer);
  const seconds = Math.max(1, Number(state.session?.refresh_seconds) || 5);
  state.timer = setInterval(refreshPage, seconds * 1000);
}

async function saveToken(event) {
  event.preventDefault();
  const input = $('#token-input');
  const token = input.value.trim();
  input.value = '';
  closeDialog($('#token-dialog'));
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  try {
    await loadSession();
  } catch (err) {
    state.session = { ...state.session, authorized: false };
  }
  if (!state.session.authorized) {
    sessionStorage.removeItem(TOKEN_KEY);
    renderHeader();
    showStatus('the token was refused', 'auth');
    if (isLocked()) renderRoute();
    return;
  }
  clearStatus();
  onAccessChanged();
}

async function signOut() {
  sessionStorage.removeItem(TOKEN_KEY);
  try { await loadSession(); } catch (err) { showStatus(err.message); }
  onAccessChanged();
}

function onAccessChanged() {
  state.loadRefused = false;
  renderHeader();
  startTimer();
  renderRoute();
}

/* ---------- charts ---------- */

/** Draws POINTS ([[epoch_s, value], ...]) as a line; the viewBox is 160 high and as wide as the
 *  SVG is drawn (600 when it is not laid out), so its labels keep their size on wide panels. */
function lineChart(svg, points, { unit = '' } = {}) {
  const { left, right, top, bottom, height } = CHART;
  const width = Math.round(svg.getBoundingClientRect().width) || CHART.width;
  svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
  const data = (points || []).filter((p) => Array.isArray(p) && isNum(p[0]) && isNum(p[1]))
    .sort((a, b) => a[0] - b[0]);
  if (data.length < 2) {
    svg.replaceChildren(svgEl('text', { x: width / 2, y: height / 2, 'text-anchor': 'middle', class: 'chart-empty' }, 'no data yet'));
    return;
  }
  const t0 = data[0][0];
  const t1 = data[data.length - 1][0];
  const values = data.map((p) => p[1]);
  const lo = Math.min(0, ...values);
  const hi = Math.max(...values) > lo ? Math.max(...values) : lo + 1;
  const x = (t) => left + (t1 === t0 ? 0 : (t - t0) / (t1 - t0)) * (width - left - right);
  const y = (v) => top + (1 - (v - lo) / (hi - lo)) * (height - top - bottom);
  const coords = data.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
  const latest = values[values.length - 1];
  const hLine = (v, cls) => svgEl('line', { x1: left, x2: width - right, y1: y(v), y2: y(v), class: cls });
  const label = (px, py, anchor, text, cls = 'chart-label') => svgEl('text', { x: px, y: py, 'text-anchor': anchor, class: cls }, text);
  svg.replaceChildren(
    hLine(hi, 'chart-grid'),
    hLine((hi + lo) / 2, 'chart-grid'),
    hLine(lo, 'chart-axis'),
    svgEl('polygon', { points: `${x(t0)},${y(lo)} ${coords} ${x(t1)},${y(lo)}`, class: 'chart-area' }),
    svgEl('polyline', { points: coords, class: 'chart-line' }),
    svgEl('circle', { cx: x(t1), cy: y(latest), r: 3, class: 'chart-dot' }),
    label(left - 6, y(hi) + 4, 'end', fmtCompact(hi)),
    label(left - 6, y(lo) + 4, 'end', fmtCompact(lo)),
    label(left, height - 3, 'start', fmtClock(t0)),
    label(width - right, height - 3, 'end', fmtClock(t1)),
    label(width - right, 15, 'end', `${fmtCompact(latest)}${unit ? ` ${unit}` : ''}`, 'chart-latest'),
  );
}

function chartPanel(title, id, note) {
  const svg = svgEl('svg', { id, class: 'chart', viewBox: `0 0 ${CHART.width} ${CHART.height}`, role: 'img', 'aria-label': title });
  return { svg, section: el('section', { class: 'panel chart-panel' }, el('h2', { text: title }, el('small', { text: note })), svg) };
}

/* ---------- shared pieces ---------- */

const SUBSCRIPTION_COLUMNS = [['Subscription'], ['Topic'], ['Kind'], ['Backlog', true], ['Consumers', true], ['Delivery rate', true]];

function subscriptionRow(s) {
  const row = el('tr', { data: { subscription: s.key } },
    cell('name', link(subscriptionHref(s.key), s.name)),
    cell('topic', link(topicHref(s.topic), s.topic)),
    cell('kind', s.kind),
    cell('backlog num', fmtInt(s.backlog)),
    cell('consumers num', fmtInt(s.consumers)),
    cell('delivery-rate num', fmtRate(s.delivery_rate)));
  if (s.selector) row.title = `selector: ${s.selector}`;
  return row;
}

function fillSubscriptions(table, subscriptions) {
  fillTable(table, (subscriptions || []).map(subscriptionRow), 'no subscriptions');
}

function pageHead(crumbs, title, ...actions) {
  return el('div', { class: 'page-head' },
    el('div', {}, el('div', { class: 'crumbs' }, ...crumbs), el('h1', { id: 'title', text: title })),
    el('div', { class: 'page-actions' }, ...actions));
}

async function dropTopic(name, onDone) {
  const ok = await confirmAction(`Drop topic "${name}" and the messages it holds? This cannot be undone.`);
  if (!ok) return;
  try {
    const reply = await apiPost('/admin/topics/drop', { topic: name, force: false });
    onDone(reply.message || `topic ${name} dropped`);
  } catch (err) {
    reportActionError(err);
  }
}

/* ---------- overview page ---------- */

function buildOverview(view) {
  const cards = el('div', { class: 'cards' },
    card('Health', 'health'),
    card('Topics', 'topics'),
    card('Subscriptions', 'subscriptions'),
    card('Backlog', 'backlog', 'messages waiting'),
    el('section', { id: 'fanout', class: 'card' },
      el('div', { class: 'card-label', text: 'Fan-out' }),
      el('div', { class: 'card-figure' }, el('span', { data: { field: 'state' } })),
      el('div', { class: 'card-note' }, 'max lag ', el('span', { data: { field: 'lag' } })),
      el('div', { class: 'card-note', data: { field: 'detail' } })),
    el('section', { id: 'storage', class: 'card' },
      el('div', { class: 'card-label', text: 'Storage' }),
      el('div', { class: 'card-figure' }, el('span', { data: { field: 'free' } }), el('small', { text: ' free' })),
      el('div', { class: 'card-note' }, 'writable: ', el('span', { data: { field: 'writable' } })),
      el('div', { class: 'card-note', data: { field: 'note' } })));

  const topicColumns = [['Topic'], ['Partitions', true], ['Publish rate', true], ['Published', true], ['Subscriptions', true]];
  const topics = makeTable('topics', isAdmin() ? [...topicColumns, ['']] : topicColumns);
  const subscriptions = makeTable('subscriptions', SUBSCRIPTION_COLUMNS);
  const cluster = el('section', { id: 'cluster', class: 'panel' });
  const refresh = () => refreshPage();

  topics.addEventListener('click', (event) => {
    const button = event.target.closest('button.drop');
    if (!button) return;
    const name = button.closest('tr').dataset.topic;
    dropTopic(name, (text) => { showActionResult(text); refresh(); });
  });

  view.replaceChildren(
    pageHead([], 'Overview'),
    cards,
    panel('Topics', scroller(topics), isAdmin() ? topicCreateForm(refresh) : null),
    panel('Subscriptions', scroller(subscriptions)),
    cluster);

  return {
    url: apiUrl('overview'),
    update(d) {
      updateOverviewCards(cards, d);
      fillTable(topics, (d.topics || []).map(topicRow), 'no topics yet');
      fillSubscriptions(subscriptions, d.subscriptions);
      renderCluster(cluster, d.cluster);
    },
  };
}

function topicCreateForm(onCreated) {
  const input = el('input', { id: 'topic-create-name', type: 'text', placeholder: 'new topic name', autocomplete: 'off', spellcheck: 'false' });
  const form = el('form', { class: 'inline-form' }, input, el('button', { id: 'topic-create', type: 'submit', text: 'Create topic' }));
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const name = input.value.trim();
    if (!name) { showActionResult('type a topic name first', true); return; }
    try {
      const reply = await apiPost('/admin/topics/create', { topic: name });
      input.value = '';
      showActionResult(reply.message || `topic ${name} created`);
      onCreated();
    } catch (err) {
      reportActionError(err);
    }
  });
  return form;
}

function topicRow(t) {
  return el('tr', { data: { topic: t.name } },
    cell('name', link(topicHref(t.name), t.name)),
    cell('partitions num', fmtInt(t.partitions)),
    cell('publish-rate num', fmtRate(t.publish_rate)),
    cell('published num', fmtInt(t.published)),
    cell('subscriptions num', fmtInt(t.subscriptions)),
    isAdmin() ? el('td', { class: 'actions' }, el('button', { type: 'button', class: 'drop small danger', text: 'Drop' })) : null);
}

function updateOverviewCards(cards, d) {
  const health = d.health || 'unknown';
  setField(cards, 'health', health);
  const healthCard = $('[data-card="health"]', cards);
  healthCard.classList.remove('health-ok', 'health-degraded', 'health-down');
  if (['ok', 'degraded', 'down'].includes(health)) healthCard.classList.add(`health-${health}`);
  if (d.now) setNote(cards, 'health', `as of ${new Date(d.now * 1000).toLocaleTimeString()}`);

  const subs = d.subscriptions || [];
  setField(cards, 'topics', (d.topics || []).length);
  setField(cards, 'subscriptions', subs.length);
  const backlogs = subs.map((s) => s.backlog).filter(isNum);
  setField(cards, 'backlog', backlogs.length ? fmtInt(backlogs.reduce((a, b) => a + b, 0)) : DASH);

  updateFanoutCard($('#fanout', cards), d.fanout || {});
  updateStorageCard($('#storage', cards), d.storage || {});
}

function updateFanoutCard(section, f) {
  setField(section, 'state', f.state || DASH);
  const lags = Object.entries(f.lag_seconds || {}).filter(([, v]) => isNum(v));
  const worst = lags.reduce((best, entry) => (!best || entry[1] > best[1] ? entry : best), null);
  setField(section, 'lag', worst ? fmtSeconds(worst[1]) : DASH);
  const detail = [];
  if (worst && lags.length > 1) detail.push(`on ${worst[0]}`);
  if (f.failing > 0) detail.push(`${f.failing} failing`);
  if (f.restarts > 0) detail.push(`${f.restarts} restarts`);
  setField(section, 'detail', detail.join(' · '));
  const more = [`${fmtInt(f.batches)} batches`, `${fmtInt(f.restarts)} restarts`];
  if (isNum(f.last_batch_at)) more.push(`last batch ${new Date(f.last_batch_at * 1000).toLocaleTimeString()}`);
  section.title = more.join(' · ');
  section.classList.toggle('is-bad', ['stopped', 'restarting'].includes(f.state) || f.failing > 0);
}

function updateStorageCard(section, s) {
  setField(section, 'free', fmtBytes(s.free_bytes));
  setField(section, 'writable', yesNo(s.writable));
  setField(section, 'note', s.fault ? `fault: ${s.fault}` : (s.data_dir || ''));
  section.classList.toggle('is-bad', !s.writable || Boolean(s.fault));
}

function renderCluster(section, cluster) {
  if (!cluster) {
    section.replaceChildren(el('h2', { text: 'Cluster' }), el('p', { class: 'muted', text: 'one member (local data dir)' }));
    return;
  }
  const members = makeTable('members', [['Slot', true], ['State'], ['Host'], ['PID', true], ['Partitions', true], ['Fan-out']]);
  fillTable(members, (cluster.members || []).map((m) => el('tr', { data: m.fanout ? { fanout: 'yes' } : { slot: m.slot } },
    cell('slot num', fmtInt(m.slot)),
    cell('state', el('span', { class: `badge ${m.state === 'running' || m.state === 'live' ? 'badge-ok' : 'badge-muted'}`, text: m.state })),
    cell('host', m.host ?? DASH),
    cell('pid num', fmtInt(m.pid)),
    cell('partitions num', fmtInt(m.partitions)),
    cell('fanout', m.fanout ? 'yes' : ''))), 'no members');
  const dispatch = makeTable('dispatch', [['Subscription'], ['Generation', true], ['Partition', true], ['Slot', true]]);
  fillTable(dispatch, (cluster.dispatch || []).map((r) => el('tr', { data: { subscription: r.subscription, partition: r.partition } },
    cell('subscription', link(subscriptionHref(r.subscription), r.subscription)),
    cell('generation num', fmtInt(r.generation)),
    cell('partition num', fmtInt(r.partition)),
    cell('slot num', fmtInt(r.slot)))), 'nothing dispatched');
  section.replaceChildren(
    el('h2', { text: 'Cluster' }),
    el('div', { class: 'two-cols' },
      el('div', {}, el('h3', { text: 'Members' }), scroller(members)),
      el('div', {}, el('h3', { text: 'Dispatch (partition → member)' }), scroller(dispatch),
        cluster.dispatch_complete === false
          ? el('p', { class: 'muted', text: `the first ${(cluster.dispatch || []).length} records (the partition counts are theirs)` })
          : null)));
}

/* ---------- topic page ---------- */

function buildTopic(view, name) {
  const drop = isAdmin() ? el('button', { id: 'topic-drop', type: 'button', class: 'danger', text: 'Drop topic' }) : null;
  const cards = el('div', { class: 'cards' },
    card('Partitions', 'partitions'), card('Publish rate', 'publish-rate'),
    card('Published', 'published', 'messages in total'), card('Subscriptions', 'subscription-count'));
  const chart = chartPanel('Publish rate', 'chart-publish-rate', `msg/s, ${windowLabel()}`);
  const subscriptions = makeTable('subscriptions', SUBSCRIPTION_COLUMNS);
  if (drop) drop.addEventListener('click', () => dropTopic(name, (text) => go('#/', text)));

  view.replaceChildren(
    pageHead([link('#/', 'Overview'), ' / topic'], name, drop),
    cards, chart.section, panel('Subscriptions', scroller(subscriptions)));

  return {
    url: apiUrl('topic', { name }),
    update(d) {
      $('#title', view).textContent = d.name;
      setField(cards, 'partitions', fmtInt(d.partitions));
      setField(cards, 'publish-rate', fmtRate(d.publish_rate));
      setField(cards, 'published', fmtInt(d.published));
      setField(cards, 'subscription-count', (d.subscriptions || []).length);
      lineChart(chart.svg, d.series?.publish_rate, { unit: 'msg/s' });
      fillSubscriptions(subscriptions, d.subscriptions);
    },
  };
}

/* ---------- subscription page ---------- */

function buildSubscription(view, key) {
  const ctx = { key, name: key };
  const unsubscribe = isAdmin() ? el('button', { id: 'unsubscribe', type: 'button', class: 'danger', text: 'Unsubscribe' }) : null;
  const details = el('dl', { class: 'details' },
    ...detail('Topic', 'topic'), ...detail('Kind', 'kind'), ...detail('Generation', 'generation'),
    ...detail('Selector', 'selector'), ...detail('Namespace', 'namespace'), ...detail('Key', 'key'));
  const cards = el('div', { class: 'cards' },
    card('Backlog', 'backlog'), card('Consumers', 'consumers', 'attached links'),
    card('Delivered', 'delivered'), card('Redelivered', 'redelivered'), card('Dead-lettered', 'dead-lettered'));
  const backlogChart = chartPanel('Backlog', 'chart-backlog', `messages, ${windowLabel()}`);
  const rateChart = chartPanel('Delivery rate', 'chart-delivery-rate', `msg/s, ${windowLabel()}`);
  const consumers = makeTable('consumers', [['Link'], ['Container'], ['Connection'], ['Member', true], ['Attached at']]);
  const partitions = makeTable('partitions', [['Partition', true], ['Messages', true], ['Bytes', true], ['Routed', true]]);
  const history = buildHistory(ctx);
  if (unsubscribe) unsubscribe.addEventListener('click', () => unsubscribeSubscription(ctx));

  view.replaceChildren(
    pageHead([link('#/', 'Overview'), ' / subscription'], key, unsubscribe),
    details, cards,
    el('div', { class: 'two-cols' }, backlogChart.section, rateChart.section),
    el('div', { class: 'two-cols' }, panel('Consumers', scroller(consumers)), panel('Partitions', scroller(partitions))),
    buildBrowse(key),
    history.section);
  history.load();

  return {
    url: apiUrl('subscription', { name: key }),
    update(d) {
      ctx.name = d.name;
      $('#title', view).textContent = d.name;
      updateSubscriptionDetails(details, d);
      updateSubscriptionCards(cards, d);
      lineChart(backlogChart.svg, d.series?.backlog, { unit: 'msg' });
      lineChart(rateChart.svg, d.series?.delivery_rate, { unit: 'msg/s' });
      fillTable(consumers, (d.consumers || []).map(consumerRow), 'no consumer attached');
      fillTable(partitions, (d.partitions || []).map(partitionRow), 'no partitions');
    },
  };
}

function detail(label, field) {
  return [el('dt', { text: label }), el('dd', {}, el('span', { data: { field } }))];
}

function updateSubscriptionDetails(details, d) {
  setField(details, 'topic', link(topicHref(d.topic), d.topic));
  setField(details, 'kind', d.kind);
  setField(details, 'generation', fmtInt(d.generation));
  setField(details, 'selector', d.selector ?? '(none)');
  setField(details, 'namespace', d.namespace || DASH);
  setField(details, 'key', d.key);
}

function updateSubscriptionCards(cards, d) {
  const counts = d.counts || {};
  setField(cards, 'backlog', fmtInt(d.backlog));
  const backlogNote = [];
  if (isNum(d.backlog_bytes)) backlogNote.push(fmtBytes(d.backlog_bytes));
  if (isNum(d.oldest_age_seconds)) backlogNote.push(`oldest ${fmtAge(d.oldest_age_seconds)}`);
  setNote(cards, 'backlog', backlogNote.join(' · ') || 'messages waiting');
  setField(cards, 'consumers', (d.consumers || []).length);
  setField(cards, 'delivered', fmtInt(counts.delivered));
  setNote(cards, 'delivered', `${fmtInt(counts.acknowledged)} acknowledged`);
  setField(cards, 'redelivered', fmtInt(counts.redelivered));
  setField(cards, 'dead-lettered', fmtInt(counts.dead_lettered));
  setNote(cards, 'dead-lettered', `${fmtInt(counts.expired)} expired`);
}

function consumerRow(c) {
  return el('tr', { data: { link: c.link } },
    cell('link', c.link), cell('container', c.container), cell('connection', c.connection),
    cell('member num', fmtInt(c.member)), cell('attached-at', fmtIso(c.attached_at)));
}

function partitionRow(p) {
  return el('tr', { data: { partition: p.partition } },
    cell('partition num', fmtInt(p.partition)), cell('messages num', fmtInt(p.messages)),
    cell('bytes num', fmtBytes(p.bytes)), cell('routed num', fmtInt(p.routed)));
}

async function unsubscribeSubscription(ctx) {
  const ok = await confirmAction(`Unsubscribe "${ctx.name}" (${ctx.key})? Its backlog and position are deleted; this cannot be undone.`);
  if (!ok) return;
  try {
    const reply = await apiPost('/admin/unsubscribe', { subscription: ctx.key });
    go('#/', reply.message || `unsubscribed ${ctx.name}`);
  } catch (err) {
    reportActionError(err);
  }
}

/* ---------- browse (subscription page) ---------- */

function browseStateFor(key) {
  if (!state.browse || state.browse.key !== key) {
    state.browse = { key, query: '', input: '', after: null, stack: [], reply: null, retry: null };
  }
  return state.browse;
}

function buildBrowse(key) {
  const b = browseStateFor(key);
  const ui = {
    input: el('input', { id: 'browse-selector', type: 'text', placeholder: "JMS selector, e.g. color = 'red' AND size > 10", autocomplete: 'off', spellcheck: 'false' }),
    error: el('div', { id: 'browse-error', class: 'form-error', role: 'alert' }),
    summary: el('p', { class: 'muted browse-summary' }),
    table: makeTable('messages', [['Seq', true], ['Published'], ['Message ID'], ['Subject'], ['Priority', true], ['Failures', true], ['State'], ['Properties']]),
    first: el('button', { id: 'browse-first', type: 'button', text: 'First page' }),
    next: el('button', { id: 'browse-next', type: 'button', text: 'Next page' }),
  };
  ui.input.value = b.input;
  ui.input.addEventListener('input', () => { b.input = ui.input.value; });
  const form = el('form', { class: 'inline-form' }, ui.input, el('button', { id: 'browse-run', type: 'submit', class: 'primary', text: 'Browse' }));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    b.stack = [];
    runBrowse(b, ui, ui.input.value.trim(), null);
  });
  ui.first.addEventListener('click', () => { b.stack = []; runBrowse(b, ui, b.query, null); });
  ui.next.addEventListener('click', () => {
    if (b.reply?.next === null || b.reply?.next === undefined) return;
    b.stack.push(b.after);
    runBrowse(b, ui, b.query, b.reply.next);
  });
  renderBrowse(b, ui);
  if (b.retry) {
    const [query, after] = b.retry;
    b.retry = null;
    if (after !== null) b.stack.push(b.after);
    runBrowse(b, ui, query, after);
  }
  return el('section', { id: 'browse', class: 'panel' },
    el('h2', { text: 'Browse' }),
    el('p', { class: 'muted', text: 'Messages waiting for this subscription, oldest first. Browsing does not consume them.' }),
    form, ui.error, ui.summary, scroller(ui.table),
    el('div', { class: 'pager' }, ui.first, ui.next));
}

async function runBrowse(b, ui, query, after) {
  ui.error.textContent = '';
  ui.summary.textContent = 'loading…';
  try {
    const reply = await apiGet(apiUrl('browse', { subscription: b.key, selector: query, after, limit: 50 }));
    Object.assign(b, { query, after, reply });
  } catch (err) {
    if (after !== null && b.stack.length) b.stack.pop();
    if (err.status === 401) {
      b.retry = [query, after];
      ui.error.textContent = 'Browsing needs the admin token: sign in.';
      needToken(err.message, 'auth');
    } else {
      ui.error.textContent = err.message;
    }
  }
  renderBrowse(b, ui);
}

function renderBrowse(b, ui) {
  const reply = b.reply;
  ui.next.disabled = !reply || reply.next === null || reply.next === undefined;
  ui.first.disabled = !reply || b.after === null;
  if (!reply) {
    ui.summary.textContent = 'Type a selector (or none) and press Browse.';
    fillTable(ui.table, [], 'not browsed yet');
    return;
  }
  const messages = reply.messages || [];
  const selector = reply.selector ?? (b.query || null);
  ui.summary.textContent = `page ${b.stack.length + 1} · ${messages.length} messages shown · ${fmtInt(reply.scanned)} scanned · selector: ${selector ?? '(none)'}`;
  fillTable(ui.table, messages.map(messageRow), 'no message matches');
}

function messageRow(m) {
  const known = ['pending', 'redelivered'].includes(m.state) ? m.state : 'other';
  const row = el('tr', { data: { seq: m.seq } },
    cell('seq num', fmtInt(m.seq)),
    cell('published', fmtIso(m.published_at)),
    cell('message-id', m.message_id ?? DASH),
    cell('subject', m.subject ?? ''),
    cell('priority num', fmtInt(m.priority)),
    cell('failures num', fmtInt(m.delivery_failures)),
    cell('state', el('span', { class: `badge badge-${known}`, text: m.state ?? DASH })),
    cell('properties', fmtProperties(m.properties)));
  const extra = [`partition ${m.partition}`, fmtBytes(m.size), m.durable ? 'durable' : 'not durable'];
  if (m.correlation_id) extra.push(`correlation id ${m.correlation_id}`);
  row.title = extra.join(' · ');
  return row;
}

/* ---------- history and replay (subscription page) ---------- */

function buildHistory(ctx) {
  const list = el('ol', { id: 'history', class: 'history' });
  const note = el('p', { class: 'muted' });
  const load = () => loadHistory(ctx, list, note);
  list.addEventListener('click', (event) => {
    const button = event.target.closest('button.replay');
    if (!button) return;
    const item = button.closest('li');
    replay(ctx, { version: Number(item.dataset.version) }, `table version ${item.dataset.version} (${item.dataset.when})`, load);
  });
  const section = el('section', { id: 'history-panel', class: 'panel' },
    el('h2', { text: 'History' }), note, isAdmin() ? replayTimeForm(ctx, load) : null, list);
  return { section, load };
}

function replayTimeForm(ctx, reload) {
  const input = el('input', { id: 'replay-time', type: 'datetime-local', step: 1 });
  const form = el('form', { class: 'inline-form' },
    el('label', { for: 'replay-time', text: 'Replay from a time' }), input,
    el('button', { id: 'replay-time-run', type: 'submit', text: 'Replay from this time' }));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const ms = input.value ? new Date(input.value).getTime() : NaN;
    if (!isNum(ms)) { showActionResult('pick a date and time to replay from', true); return; }
    replay(ctx, { timestamp: new Date(ms).toISOString() }, new Date(ms).toLocaleString(), reload);
  });
  return form;
}

async function loadHistory(ctx, list, note) {
  try {
    const reply = await apiGet(apiUrl('history', { subscription: ctx.key }));
    note.textContent = `Versions of the Delta table ${reply.table || ''}, newest first.`;
    const items = (reply.versions || []).map(historyItem);
    list.replaceChildren(...(items.length ? items : [el('li', { class: 'empty', text: 'no versions' })]));
  } catch (err) {
    if (err.status === 401) needToken(err.message, 'auth');
    note.textContent = `history not available: ${err.message}`;
  }
}

function historyItem(v) {
  const when = isNum(v.timestamp_ms) ? new Date(v.timestamp_ms).toLocaleString() : DASH;
  const removed = isNum(v.files_removed) && v.files_removed ? `, ${v.files_removed} file(s) removed` : '';
  const added = isNum(v.rows_added) ? `${v.rows_added} row(s) added` : isNum(v.files_added) ? `${v.files_added} file(s) added` : '';
  const rows = `${added}${removed}`;
  return el('li', { data: { version: v.version, when } },
    el('span', { class: 'version', text: `v${v.version}` }),
    el('span', { class: 'when', text: when }),
    el('span', { class: 'badge badge-muted operation', text: v.operation ?? DASH }),
    el('span', { class: 'rows muted', text: rows }),
    isAdmin() ? el('button', { type: 'button', class: 'replay small', text: 'Replay from here' }) : null);
}

/** POST /admin/replay with TARGET ({version} or {timestamp}) after a confirmation. */
async function replay(ctx, target, described, reload) {
  const ok = await confirmAction(`Replay subscription "${ctx.name}" (${ctx.key}) from ${described}? `
    + 'Its messages from that point are delivered again.');
  if (!ok) return;
  try {
    const reply = await apiPost('/admin/replay', { subscription: ctx.key, ...target });
    showActionResult(reply.message || `replay started: ${JSON.stringify(reply)}`);
    reload();
    refreshPage();
  } catch (err) {
    reportActionError(err);
  }
}

/* ---------- connections page ---------- */

function buildConnections(view) {
  const intro = el('p', { class: 'muted' });
  const connections = makeTable('connections', [['Connection'], ['Container'], ['User'], ['Links', true]]);
  const recorded = makeTable('recorded-consumers', [['Subscription'], ['Link'], ['Container'], ['Connection'], ['Member', true], ['Attached at']]);
  view.replaceChildren(
    pageHead([], 'Connections'), intro,
    panel('AMQP connections', scroller(connections)),
    panel('Consumers recorded in the catalog (whole cluster)', scroller(recorded)));
  return {
    url: apiUrl('connections'),
    update(d) {
      intro.textContent = d.member === null || d.member === undefined
        ? 'Connections open on this service.' : `Connections open on member ${d.member}.`;
      fillTable(connections, (d.connections || []).flatMap(connectionRows), 'no connections');
      fillTable(recorded, (d.recorded_consumers || []).map(recordedRow), 'no consumers recorded');
    },
  };
}

function connectionRows(c) {
  const links = c.links || [];
  const row = el('tr', { data: { connection: c.id } },
    cell('id', c.id), cell('container', c.container), cell('user', c.user ?? DASH),
    cell('links num', String(links.length)));
  if (!links.length) return [row];
  const nested = makeTable(null, [['Link'], ['Role'], ['Address / subscription'], ['Credit', true], ['Unsettled', true]]);
  nested.classList.add('nested');
  fillTable(nested, links.map(linkRow), '');
  return [row, el('tr', { class: 'links' }, el('td', { colspan: 4 }, nested))];
}

function linkRow(l) {
  const target = l.subscription ? link(subscriptionHref(l.subscription), l.subscription) : (l.address ?? DASH);
  return el('tr', { class: 'link' },
    cell('name', l.name), cell('role', el('span', { class: `badge badge-${l.role === 'consumer' ? 'ok' : 'muted'}`, text: l.role })),
    cell('target', target), cell('credit num', fmtInt(l.credit)), cell('unsettled num', fmtInt(l.unsettled)));
}

function recordedRow(r) {
  return el('tr', { data: { subscription: r.subscription } },
    cell('subscription', link(subscriptionHref(r.subscription), r.subscription)),
    cell('link', r.link), cell('container', r.container), cell('connection', r.connection),
    cell('member num', fmtInt(r.member)), cell('attached-at', fmtIso(r.attached_at)));
}

/* ---------- other views ---------- */

function buildLocked(view) {
  const button = el('button', { type: 'button', class: 'primary', text: 'Sign in' });
  button.addEventListener('click', () => openTokenDialog());
  view.replaceChildren(el('section', { class: 'panel locked' },
    el('h1', { text: 'This console needs the admin token' }),
    el('p', { class: 'muted', text: 'This service shows its console to holders of its admin token only.' }),
    button));
  openTokenDialog();
  return null;
}

function buildNotFound(view) {
  view.replaceChildren(el('section', { class: 'panel' },
    el('h1', { text: 'No such page' }), el('p', {}, link('#/', 'Back to the overview'))));
  return null;
}

/* ---------- routing and refresh ---------- */

function parseRoute() {
  const [page, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  let param = null;
  try { param = decodeURIComponent(rest.join('/')); } catch { return { page: 'notfound' }; }
  if (page === '' && !rest.length) return { page: 'overview' };
  if (page === 'connections') return { page: 'connections' };
  if ((page === 'topic' || page === 'subscription') && param) return { page, param };
  return { page: 'notfound' };
}

const PAGES = {
  overview: buildOverview,
  topic: buildTopic,
  subscription: buildSubscription,
  connections: buildConnections,
  notfound: buildNotFound,
};

function renderRoute() {
  const route = parseRoute();
  document.querySelectorAll('[data-nav]').forEach((a) => {
    const active = a.dataset.nav === (route.page === 'connections' ? 'connections' : 'overview');
    a.classList.toggle('active', active);
  });
  const view = $('#view');
  state.controller = isLocked() ? buildLocked(view) : PAGES[route.page](view, route.param);
  refreshPage();
}

/** Fetches the current page's API and redraws its figures; ignores replies for a page left since. */
async function refreshPage() {
  const controller = state.controller;
  if (!controller || controller.loading) return;
  controller.loading = true;
  try {
    const data = await apiGet(controller.url);
    if (controller !== state.controller) return;
    controller.update(data);
    state.loadRefused = false;
    clearStatus('load');
  } catch (err) {
    if (controller === state.controller) reportLoadError(err);
  } finally {
    controller.loading = false;
  }
}

function onHashChange() {
  const [text, isError] = state.pendingNotice || ['', false];
  state.pendingNotice = null;
  state.loadRefused = false;
  showActionResult(text, isError);
  if (state.statusKind === 'auth') clearStatus();
  renderRoute();
}

function wireChrome() {
  $('#signin').addEventListener('click', () => openTokenDialog());
  $('#signout').addEventListener('click', signOut);
  $('#token-form').addEventListener('submit', saveToken);
  $('#token-cancel').addEventListener('click', () => {
    $('#token-input').value = '';
    closeDialog($('#token-dialog'));
  });
  $('#token-dialog').addEventListener('close', () => { $('#token-input').value = ''; });
  window.addEventListener('hashchange', onHashChange);
}

async function boot() {
  try {
    await loadSession();
  } catch (err) {
    showStatus(`cannot load the console session: ${err.message} (retrying)`);
    setTimeout(boot, 5000);
    return;
  }
  if (storedToken() && !state.session.authorized) {
    sessionStorage.removeItem(TOKEN_KEY);
    showStatus('the token was refused', 'auth');
  } else {
    clearStatus();
  }
  renderHeader();
  startTimer();
  renderRoute();
}

wireChrome();
boot();
