// What every page shares: the session's role, how errors and notices are
// shown, and small building blocks (sections, key-value lists, forms).

import {h, replace} from './format.js';

// session is what GET /v1/whoami said of the token: role is null until
// it answered (or when it could not), and then no action is offered;
// token is the token's configured name (never its secret); traceURL is
// the host's trace viewer, a URL with {trace_id} where a trace id goes
// (tracing.viewer_url), or '' when it has none.
export const session = {role: null, authenticated: false, token: '', traceURL: ''};

const rank = {reader: 1, operator: 2, admin: 3};

// can reports whether the token may take an action that needs role
// ('operator': run, cancel, send events; 'admin': change definitions).
export function can(role) {
  return (rank[session.role] || 0) >= rank[role];
}

// errorBox shows an API error as the person should read it: the problem's
// detail, each item of its errors with path and line, and its request id
// (what the host's log is searched by).
export function errorBox(err, attrs = {}) {
  if (err && err.name === 'AbortError') return h('span');
  const items = (err && err.errors) || [];
  return h('div', {class: 'error-box', role: 'alert', 'data-test': 'error', ...attrs},
    h('p', {class: 'error-detail'}, err && err.status ? `${err.status}: ` : '', err ? (err.detail || err.message || String(err)) : 'unknown error'),
    items.length ? h('ul', {class: 'error-list'}, items.map((e) => h('li', {},
      e.path ? h('code', {}, e.path) : null, e.path ? ': ' : '', e.message || '',
      e.line ? h('span', {class: 'muted'}, ` (line ${e.line}${e.column ? `, column ${e.column}` : ''})`) : null))) : null,
    err && (err.path || err.requestId) ? h('p', {class: 'muted small-text'},
      err.path ? [h('code', {}, `${err.method || 'GET'} ${err.path}`), err.requestId ? ', ' : ''] : '',
      err.requestId ? ['request id ', h('code', {}, err.requestId)] : '') : null);
}

// showBanner shows an error above the page until dismissed or replaced.
export function showBanner(err) {
  const b = document.getElementById('banner');
  replace(b, errorBox(err), h('button', {type: 'button', class: 'small', 'data-test': 'dismiss-error', onclick: clearBanner}, 'Dismiss'));
  b.hidden = false;
}

export function clearBanner() {
  const b = document.getElementById('banner');
  b.hidden = true;
  b.replaceChildren();
}

let noticeTimer = null;

// notify shows a short success message (role=status, read out by screen readers).
export function notify(text) {
  const n = document.getElementById('notice');
  replace(n, text);
  n.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => {
    n.hidden = true;
  }, 6000);
}

export function section(title, attrs, ...children) {
  return h('section', {class: 'card', ...attrs}, title ? h('h2', {}, title) : null, ...children);
}

// kv is a description list of [label, value] pairs; null values are left out.
export function kv(pairs, attrs = {}) {
  return h('dl', {class: 'kv', ...attrs}, pairs.filter((p) => p && p[1] !== null && p[1] !== undefined)
    .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

export function loading(text = 'Loading…') {
  return h('p', {class: 'muted', 'aria-busy': 'true'}, text);
}

// slot is a placeholder that an async load fills: with what it answers,
// or with the error it throws, shown where the content would be.
export function slot(load, attrs = {}) {
  const el = h('div', {class: 'slot', ...attrs}, loading());
  Promise.resolve().then(load).then((content) => replace(el, content), (err) => replace(el, errorBox(err)));
  return el;
}

// parseJSONField reads a textarea meant to hold JSON; empty is undefined.
// A syntax error is thrown as an error the form shows.
export function parseJSONField(text, what) {
  if (!text.trim()) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new Error(`${what} is not valid JSON: ${e.message}`);
  }
}

// actionForm builds a form whose submit (a button, or Enter in a field)
// runs act(form) with the button disabled, and shows its error in the
// form. It never submits anywhere itself (the CSP has form-action 'none').
export function actionForm(attrs, fields, submitLabel, act) {
  const out = h('div', {class: 'form-result'});
  const button = h('button', {type: 'submit', class: attrs.danger ? 'danger' : 'primary', 'data-test': attrs['data-test'] ? `${attrs['data-test']}-submit` : null}, submitLabel);
  const {danger, ...rest} = attrs;
  const form = h('form', {class: 'action-form', ...rest}, fields, h('div', {class: 'buttons'}, button), out);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    button.disabled = true;
    out.replaceChildren();
    try {
      const res = await act(form);
      if (res instanceof Node) replace(out, res);
    } catch (e) {
      replace(out, errorBox(e));
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

// field is a labelled input; the label's for matches the control's id.
let fieldSeq = 0;
export function field(label, control, hint) {
  const id = control.id || `f${++fieldSeq}`;
  control.id = id;
  return h('div', {class: 'field'}, h('label', {for: id}, label), control, hint ? h('p', {class: 'hint muted'}, hint) : null);
}

// prioritySelect is the choice of a priority in the ready queue, for a
// start or an event: empty (the workflow's own, what its definition
// gives) or 1 (served first) to 5 (served last).
export function prioritySelect(attrs = {}) {
  return h('select', {name: 'priority', ...attrs},
    h('option', {value: ''}, 'the workflow\'s own'),
    [1, 2, 3, 4, 5].map((p) => h('option', {value: String(p)}, p === 1 ? '1 (served first)' : p === 5 ? '5 (served last)' : String(p))));
}

// liveState is the onState of a page's stream, drawn into el: live, or
// why not and when it tries again. A failure is shown, not swallowed.
export function liveState(el) {
  return (state, err, delay) => {
    el.dataset.state = state;
    if (state === 'open') replace(el, h('span', {class: 'dot'}), 'live');
    else if (state === 'error') replace(el, h('span', {class: 'error-inline'}, `live updates unavailable: ${err.detail}`));
    else if (state === 'retry') {
      replace(el, err ? h('span', {class: 'error-inline', title: `${err.method || 'GET'} ${err.path}`},
        `live updates unavailable (${err.status ? `${err.status} ` : ''}${err.detail}); retrying in ${Math.round(delay / 1000)}s`)
        : `reconnecting in ${Math.round(delay / 1000)}s…`);
    }
  };
}

// modal opens a dialog over the page (a <dialog> shown modal, in main, so
// that it goes with the page): its title, a Close button, and body, where
// the caller draws. Esc and Close close it; once closed it leaves the
// page and onClose runs, once. A page that moves on removes it with the
// rest of main: a caller that waits on the host checks m.closed, which
// says either. It answers {dialog, body, close(), closed}.
let modalSeq = 0;
export function modal(title, attrs = {}, onClose = null) {
  const id = `modal-${++modalSeq}`;
  const test = attrs['data-test'];
  const body = h('div', {class: 'modal-body'});
  const dialog = h('dialog', {class: 'modal', 'aria-labelledby': id, ...attrs},
    h('div', {class: 'modal-head'}, h('h2', {id}, title),
      h('button', {type: 'button', class: 'small', 'data-test': test ? `${test}-close` : null, onclick: () => close()}, 'Close')),
    body);
  let ended = false;
  const close = () => {
    if (dialog.open) dialog.close();
  };
  dialog.addEventListener('close', () => {
    if (ended) return;
    ended = true;
    dialog.remove();
    if (onClose) onClose();
  });
  document.getElementById('main').append(dialog);
  dialog.showModal();
  return {
    dialog, body, close,
    get closed() {
      return ended || !dialog.isConnected;
    },
  };
}

// sleep waits ms, for a page that polls the host.
export function sleep(ms) {
  return new Promise((resolve) => {
    setTimeout(resolve, ms);
  });
}
