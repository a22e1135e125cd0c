// shardflow operator console (page.html): keeps a table of the supervision tree current.
//
// Sources, both on this endpoint (src/runtime/inspection/server.ts):
// - GET /tree: the TreeNode snapshot as JSON ({ path, kind, status, mailboxDepth, processed,
//   dropped, restarts, lastError?, children }), fetched at load, after lifecycle events
//   (coalesced to one fetch per REFETCH_DELAY_MS) and every POLL_MS for counters that change
//   without an event (mailbox depth, processed);
// - GET /events: SSE, one named event per lifecycle change (`@shardflow.failed`, ...); the
//   browser's EventSource reconnects by itself when the stream drops, and this page when the
//   endpoint answered 503 (listening before the job's actor system exists).
//
// Plain browser JavaScript, no build step, no dependencies. Every value from the server is put
// into the page with textContent, never as HTML. Rows carry data-path, cells data-field, so that
// tests and scripts can read them.
'use strict';

/** Delay before refetching the tree after an event, in ms; events inside it share one fetch. */
const REFETCH_DELAY_MS = 50;
/** Refetch interval without events, in ms. */
const POLL_MS = 1000;
/** Wait before opening a new event stream after the endpoint refused one, in ms. */
const RECONNECT_MS = 2000;
/** A /tree fetch not answered within this is a job that does not answer (stopped, frozen), in ms. */
const ANSWER_MS = 5000;
/** Events kept in the list. */
const MAX_EVENTS = 200;
const EVENT_TYPES = ['@shardflow.started', '@shardflow.stopped', '@shardflow.failed', '@shardflow.restarted', '@shardflow.escalated'];
const NUMERIC_FIELDS = ['restarts', 'mailboxDepth', 'processed', 'dropped'];

const body = document.body;
const tbody = /** @type {HTMLTableSectionElement} */ (document.querySelector('#tree tbody'));
const summary = /** @type {HTMLElement} */ (document.getElementById('summary'));
const connection = /** @type {HTMLElement} */ (document.getElementById('connection'));
const filter = /** @type {HTMLInputElement} */ (document.getElementById('filter'));
const eventList = /** @type {HTMLOListElement} */ (document.getElementById('events'));

/** path -> row of the table, reused across renders so that a restart can flash its row. */
const rows = new Map();
/** A refetch is scheduled or running. */
let refetchPending = false;
/** The last tree rendered, for the filter. */
let lastTree = null;
/** When the root stopped (the job ended), its time: no more fetches or reconnects. */
let endedAt = null;

/** Fetches /tree and renders it; failures show in the summary line and the next poll retries. */
async function refresh() {
  if (endedAt !== null) return;
  try {
    // A stopped (SIGSTOP) or frozen process keeps its connections open and answers nothing:
    // without a bound the page kept its last table and `live` badge (found by a new user).
    const response = await fetch('/tree', { cache: 'no-store', signal: AbortSignal.timeout(ANSWER_MS) });
    if (!response.ok) throw new Error(`GET /tree answered ${response.status}`);
    lastTree = await response.json();
    render(lastTree);
    if (body.dataset.connection === 'not answering') setConnection('open');
  } catch (err) {
    if (err instanceof DOMException && err.name === 'TimeoutError') {
      setConnection('not answering');
      summary.textContent = `the job has not answered for ${ANSWER_MS / 1000} s (stopped, frozen or overloaded); the table shows its last state, read ${new Date().toLocaleTimeString()} or before`;
      return;
    }
    summary.textContent = `cannot read the tree: ${err instanceof Error ? err.message : String(err)}`;
  }
}

/** Schedules one refresh soon; calls while one is pending are folded into it. */
function scheduleRefresh() {
  if (refetchPending) return;
  refetchPending = true;
  setTimeout(() => {
    refresh().finally(() => { refetchPending = false; });
  }, REFETCH_DELAY_MS);
}

/** Depth-first list of [node, depth], in tree order. */
function flatten(root) {
  const out = [];
  const walk = (node, depth) => {
    out.push([node, depth]);
    for (const child of node.children) walk(child, depth + 1);
  };
  walk(root, 0);
  return out;
}

/** Updates the table in place: new rows are created, gone ones removed, changed restarts flash. */
function render(root) {
  const nodes = flatten(root);
  const seen = new Set();
  const byStatus = new Map();
  let restarts = 0;
  const needle = filter.value.trim();
  const visible = needle === '' ? null : matching(root, needle);
  for (const [node, depth] of nodes) {
    seen.add(node.path);
    byStatus.set(node.status, (byStatus.get(node.status) ?? 0) + 1);
    restarts += node.restarts;
    let row = rows.get(node.path);
    if (row === undefined) {
      row = createRow(node, depth);
      rows.set(node.path, row);
    }
    updateRow(row, node);
    row.classList.toggle('hidden', visible !== null && !visible.has(node.path));
    tbody.appendChild(row); // moves an existing row into tree order
  }
  for (const [path, row] of rows) {
    if (!seen.has(path)) {
      row.remove();
      rows.delete(path);
    }
  }
  const statuses = [...byStatus].map(([status, n]) => `${n} ${status}`).join(', ');
  summary.textContent = `${nodes.length} actors (${statuses}); ${restarts} restarts; updated ${new Date().toLocaleTimeString()}`;
  summary.dataset.restarts = String(restarts);
}

/** Paths of the nodes whose path contains `needle`, and of their ancestors (as `shardflow tree --filter`). */
function matching(root, needle) {
  const paths = new Set();
  const mark = (node) => {
    let any = node.path.includes(needle);
    for (const child of node.children) any = mark(child) || any;
    if (any) paths.add(node.path);
    return any;
  };
  mark(root);
  return paths;
}

function createRow(node, depth) {
  const row = document.createElement('tr');
  row.dataset.path = node.path;
  const cells = [
    ['name', ''], ['kind', ''], ['status', 'status'],
    ['restarts', 'num'], ['mailboxDepth', 'num'], ['processed', 'num'], ['dropped', 'num'],
    ['lastError', 'error'],
  ];
  for (const [field, className] of cells) {
    const cell = document.createElement('td');
    cell.dataset.field = field;
    if (className) cell.className = className;
    row.appendChild(cell);
  }
  const name = row.cells[0];
  name.textContent = depth === 0 ? node.path : node.path.slice(node.path.lastIndexOf('/') + 1);
  name.style.paddingLeft = `${0.6 + depth * 1.2}rem`;
  name.title = node.path;
  return row;
}

function updateRow(row, node) {
  const cell = (field) => row.querySelector(`td[data-field="${field}"]`);
  cell('kind').textContent = node.kind;
  const status = cell('status');
  status.textContent = node.status;
  status.className = `status status-${node.status}`;
  const before = Number(cell('restarts').textContent || '0');
  for (const field of NUMERIC_FIELDS) cell(field).textContent = String(node[field]);
  cell('restarts').classList.toggle('restarts-nonzero', node.restarts > 0);
  if (node.restarts > before) {
    row.classList.remove('flash');
    void row.offsetWidth; // restart the animation
    row.classList.add('flash');
  }
  const error = node.lastError;
  cell('lastError').textContent = error === undefined ? '' : `${error.code ?? error.name}: ${error.message}`;
}

/** Prepends one lifecycle event to the list, dropping the oldest past MAX_EVENTS. */
function logEvent(type, data) {
  const item = document.createElement('li');
  const short = type.replace('@shardflow.', '');
  item.className = `type-${short}`;
  const at = new Date().toLocaleTimeString();
  const reason = data.reason === undefined ? '' : ` ${data.reason.code ?? data.reason.name}: ${data.reason.message}`;
  item.textContent = `${at} ${short} ${data.path} [${data.kind}]${reason}`;
  eventList.prepend(item);
  while (eventList.children.length > MAX_EVENTS) eventList.lastElementChild.remove();
}

function setConnection(state) {
  if (endedAt !== null) return;
  body.dataset.connection = state;
  connection.textContent = state === 'open' ? 'live' : state;
}

/**
 * The root actor stopped: the job ended. Says so (the badge `ended`, the summary line) and
 * stops fetching and reconnecting; the table keeps the last state it read (found by a new
 * user: after the job the page said `reconnecting` for ever, its rows `running`).
 */
function jobEnded(source) {
  endedAt = new Date();
  source.close();
  body.dataset.connection = 'ended';
  connection.textContent = 'ended';
  summary.textContent = `the job ended at ${endedAt.toLocaleTimeString()}; the table shows the last state read before that`;
}

function connect() {
  const source = new EventSource('/events');
  source.onopen = () => {
    setConnection('open');
    scheduleRefresh(); // events may have been missed while disconnected
  };
  source.onerror = () => {
    setConnection('reconnecting');
    // A non-200 answer (503 while the job starts) closes an EventSource for good: retry by hand.
    if (source.readyState === EventSource.CLOSED) setTimeout(connect, RECONNECT_MS);
  };
  for (const type of EVENT_TYPES) {
    source.addEventListener(type, (event) => {
      let data;
      try {
        data = JSON.parse(event.data);
        logEvent(type, data);
      } catch (err) {
        logEvent(type, { path: '?', kind: '?', reason: { name: 'BadEvent', message: String(err) } });
      }
      if (type === '@shardflow.stopped' && data !== undefined && data.path === '/') jobEnded(source);
      else scheduleRefresh();
    });
  }
}

filter.addEventListener('input', () => { if (lastTree !== null) render(lastTree); });
refresh();
setInterval(scheduleRefresh, POLL_MS);
connect();
