// The console's entry point: the hash router, the token dialog, the
// session's role (GET /v1/whoami) and the keyboard shortcuts.
//
// Routes live in the URL's fragment (#/instances/<id>), so the host
// serves one page at / and every view is a link that can be shared or
// reloaded; the fragment is never sent to the server.

import * as api from './api.js';
import {h, replace, zoneOffset, zoneName} from './format.js';
import {session, showBanner, clearBanner} from './ui.js';
import * as instances from './pages/instances.js';
import * as instance from './pages/instance.js';
import * as workflows from './pages/workflows.js';
import * as workflow from './pages/workflow.js';
import * as schedules from './pages/schedules.js';
import * as schedule from './pages/schedule.js';
import * as flow from './pages/flow.js';
import * as flowkey from './pages/flowkey.js';
import * as plugins from './pages/plugins.js';
import * as plugin from './pages/plugin.js';
import * as events from './pages/events.js';
import * as batches from './pages/batches.js';
import * as batch from './pages/batch.js';

// Each route: a pattern over the path after "#/", the nav section it
// belongs to, and the page module whose render(ctx) draws it.
const routes = [
  [/^instances$/, 'instances', instances],
  [/^instances\/([^/]+)$/, 'instances', instance],
  [/^workflows$/, 'workflows', workflows],
  [/^workflows\/([^/]+)$/, 'workflows', workflow],
  [/^schedules$/, 'schedules', schedules],
  [/^schedules\/([^/]+)$/, 'schedules', schedule],
  [/^flow$/, 'flow', flow],
  [/^flow\/([^/]+)$/, 'flow', flowkey],
  [/^plugins$/, 'plugins', plugins],
  [/^plugins\/([^/]+)$/, 'plugins', plugin],
  [/^events$/, 'events', events],
  [/^batches$/, 'batches', batches],
  [/^batches\/([^/]+)$/, 'batches', batch],
];

const main = document.getElementById('main');
let cleanup = null;
let current = '';
// sessionError is why the role is unknown; it stays above every page.
let sessionError = null;

// parseHash splits "#/instances/x?status=failed" into path and query.
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const i = raw.indexOf('?');
  return {path: i < 0 ? raw : raw.slice(0, i), query: new URLSearchParams(i < 0 ? '' : raw.slice(i + 1))};
}

async function render(force = false) {
  const {path, query} = parseHash();
  if (!path) {
    location.replace('#/instances');
    return;
  }
  const key = location.hash;
  if (!force && key === current) return;
  current = key;
  if (cleanup) {
    try {
      cleanup();
    } catch {
      // a page's cleanup must not keep the next one from drawing
    }
    cleanup = null;
  }
  clearBanner();
  if (sessionError) showBanner(sessionError);
  let found = null;
  for (const [re, nav, page] of routes) {
    const m = path.match(re);
    if (m) {
      found = {nav, page, params: m.slice(1).map(decodeURIComponent)};
      break;
    }
  }
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (found && a.dataset.nav === found.nav) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.replaceChildren();
  if (!found) {
    replace(main, h('h1', {}, 'Not found'), h('p', {}, 'No page at ', h('code', {}, location.hash), '. ', h('a', {href: '#/instances'}, 'Instances')));
    focusPage();
    return;
  }
  try {
    const c = await found.page.render({main, params: found.params, query});
    if (key === current) cleanup = typeof c === 'function' ? c : null;
    else if (typeof c === 'function') c(); // the person moved on meanwhile
  } catch (e) {
    showBanner(e);
  }
  if (key === current) focusPage();
}

// focusPage moves the focus to the new page's heading (or main), as a
// page load would, so a screen reader announces it and Tab goes on from
// the top of the page. Not when the person has meanwhile moved into the
// page, nor from an open dialog.
function focusPage() {
  const at = document.activeElement;
  if (document.querySelector('dialog[open]') || (at && at !== main && main.contains(at))) return;
  const heading = main.querySelector('h1');
  const target = heading || main;
  if (heading && !heading.hasAttribute('tabindex')) heading.tabIndex = -1;
  target.focus({preventScroll: true});
}

// --- the token dialog ---

const dialog = document.getElementById('token-dialog');
const form = document.getElementById('token-form');
const input = document.getElementById('token-input');

// askToken shows the dialog for a 401 and answers the token entered, or
// rejects when the person cancels (the request then shows its 401).
function askToken(err) {
  return new Promise((resolve, reject) => {
    replace(document.getElementById('token-reason'),
      api.token() ? `The host refused the token: ${err.detail}` : `This host needs a bearer token: ${err.detail}`);
    input.value = '';
    const done = (ok) => {
      form.removeEventListener('submit', onSubmit);
      dialog.removeEventListener('cancel', onCancel);
      document.getElementById('token-cancel').removeEventListener('click', onCancel);
      if (dialog.open) dialog.close();
      if (ok) {
        resolve(api.token());
        // A new token may have another role: once the console is up,
        // ask again and redraw the page with the actions it allows.
        if (started) refreshSession().then(() => render(true));
      } else {
        reject(err);
      }
    };
    const onSubmit = (ev) => {
      ev.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      api.setToken(t);
      done(true);
    };
    const onCancel = (ev) => {
      ev.preventDefault();
      done(false);
    };
    form.addEventListener('submit', onSubmit);
    dialog.addEventListener('cancel', onCancel);
    document.getElementById('token-cancel').addEventListener('click', onCancel);
    if (!dialog.open) dialog.showModal();
    input.focus();
  });
}

api.onUnauthorized(askToken);

// --- the session ---

// refreshSession asks the host what the token may do. Until it answers,
// and when it cannot, no action is offered: showing a button the token
// may not use would only lead to a 403.
async function refreshSession() {
  const who = document.getElementById('who');
  try {
    const w = await api.get('/v1/whoami');
    session.role = w.role || null;
    session.authenticated = Boolean(w.authenticated);
    sessionError = null;
    session.token = w.token || '';
    session.traceURL = w.trace_url || '';
    replace(who, h('span', {class: `badge role-${session.role}`, 'data-role': session.role}, session.role),
      session.authenticated ? (session.token ? h('span', {class: 'muted', 'data-test': 'token-name'}, ` token ${session.token}`) : '')
        : h('span', {class: 'muted'}, ' (no tokens on this host)'));
  } catch (e) {
    session.role = null;
    session.authenticated = false;
    session.token = '';
    session.traceURL = '';
    replace(who, h('span', {class: 'badge'}, 'role unknown'));
    sessionError = null;
    if (e.status !== 401) {
      e.detail = `cannot tell what this token may do, so no actions are offered: ${e.detail}`;
      sessionError = e;
      showBanner(e);
    }
  }
  document.getElementById('forget').hidden = !api.token();
}

document.getElementById('forget').addEventListener('click', () => {
  api.setToken('');
  refreshSession().then(() => render(true));
});

// --- keyboard ---
//
// "/" focuses the page's search box, "g" then a letter goes to a section,
// "?" shows the list (the keys dialog in index.html). None fires while
// typing in a field, with Ctrl, Alt or Meta held, or over a dialog.

const GO = {i: '#/instances', w: '#/workflows', s: '#/schedules', f: '#/flow', p: '#/plugins', e: '#/events', b: '#/batches'};
const keysDialog = document.getElementById('keys-dialog');
let pendingG = 0; // when "g" was pressed, for the letter that follows

function typing(t) {
  return t instanceof HTMLElement && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
}

document.addEventListener('keydown', (ev) => {
  if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing || typing(ev.target) || document.querySelector('dialog[open]')) return;
  const g = pendingG && Date.now() - pendingG < 1500;
  pendingG = 0;
  if (g && GO[ev.key]) {
    ev.preventDefault();
    location.hash = GO[ev.key];
    return;
  }
  if (ev.key === 'g') {
    pendingG = Date.now();
  } else if (ev.key === '?') {
    ev.preventDefault();
    keysDialog.showModal();
  } else if (ev.key === '/') {
    const search = main.querySelector('[data-search]');
    if (search) {
      ev.preventDefault();
      search.focus();
      if (search.select) search.select();
    }
  }
});

document.getElementById('keys-close').addEventListener('click', () => keysDialog.close());

// The skip link's "#main" is not a route: it moves the focus instead.
document.getElementById('skip-link').addEventListener('click', (ev) => {
  ev.preventDefault();
  main.focus();
});

replace(document.getElementById('zone'), `times in ${zoneOffset()}${zoneName() ? ` (${zoneName()})` : ''}`);
window.addEventListener('hashchange', () => render());
let started = false;
refreshSession().then(() => {
  started = true;
  render();
});
