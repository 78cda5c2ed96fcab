// The instances page: newest first, filtered by workflow, status and
// time range, or found by exact id, or by the event and correlation key
// they wait for (GET /v1/instances: id, event, key), or by a query of
// their search attributes (q, docs/operations.md#search), with counts by
// status as chips, live updates from the instances stream, paging by
// next_cursor, a bulk cancel of the selected rows, and, for a query, a
// batch job over every instance it matches ("Apply to all matching…",
// docs/operations.md#batch-operations).

import * as api from '../api.js';
import {h, replace, timeEl, statusBadge, STATUSES, TERMINAL, links, toRFC3339, toLocalInput, throttle} from '../format.js';
import {can, errorBox, field, notify, liveState, modal, actionForm, parseJSONField, sleep} from '../ui.js';
import {FINISHED} from './batch.js';

const PAGE = 50;

// waitingSummary says in a few words what a suspended instance waits on.
export function waitingSummary(w) {
  if (!w) return '';
  const parts = [];
  for (const b of w.bookmarks || []) parts.push(h('span', {class: 'wait'}, 'event ', h('code', {}, b.event), b.key ? [' key ', h('code', {}, b.key)] : ''));
  for (const t of w.timers || []) parts.push(h('span', {class: 'wait'}, `${t.kind || 'timer'} due `, timeEl(t.due)));
  return parts;
}

// heldNote says that a start is held: created while its workflow was
// paused, it starts when the workflow is resumed
// (docs/operations.md#pause-a-workflow).
export function heldNote(it) {
  return h('a', {class: 'wait st-paused', href: links.workflow(it.workflow), 'data-test': 'held',
    title: 'created while its workflow was paused; it starts when the workflow is resumed'}, 'held: workflow paused');
}

// byteOffsetToIndex converts a byte offset into the UTF-8 encoding of
// text (where the host says a query is wrong) into an index of the
// string, as JavaScript counts (UTF-16 code units).
export function byteOffsetToIndex(text, offset) {
  const bytes = new TextEncoder().encode(text);
  return new TextDecoder().decode(bytes.slice(0, Math.max(0, Math.min(offset, bytes.length)))).length;
}

// queryProblem shows a query the host refused: the query with the
// offending token marked (or a mark at its end when the problem is
// there), and what is wrong. Everything is text: the query is the
// user's, the message the host's.
export function queryProblem(text, err) {
  const p = err.problem || {};
  const at = byteOffsetToIndex(text, Number(p.position) || 0);
  let end = at;
  if (p.token && text.startsWith(p.token, at)) end = at + p.token.length;
  else if (p.token) end = Math.max(at + 1, text.slice(at).search(/\s|$/) + at);
  const msg = (err.errors[0] && err.errors[0].message) || err.detail;
  return h('div', {class: 'query-error', role: 'alert', 'data-test': 'query-error', 'data-position': String(p.position ?? '')},
    h('code', {class: 'query-text'}, text.slice(0, at),
      h('mark', {'data-test': 'query-token'}, end > at ? text.slice(at, end) : '\u00a0'), text.slice(end)),
    h('p', {class: 'error-inline'}, msg));
}

// batchQuery is the query a batch of "all matching" selects with: the
// list's query, with those of its other filters a query can say (the
// workflow, the status, the creation range; the list takes no id, event
// or key with a query), so that the batch matches what the list shows.
export function batchQuery(f) {
  const parts = [];
  if (f.workflow) parts.push(`workflow = ${JSON.stringify(f.workflow)}`);
  if (f.status) parts.push(`status = ${JSON.stringify(f.status)}`);
  if (f.created_after) parts.push(`created_at >= ${JSON.stringify(f.created_after)}`);
  if (f.created_before) parts.push(`created_at < ${JSON.stringify(f.created_before)}`);
  if (!parts.length) return f.q;
  return [`(${f.q})`, ...parts].join(' AND ');
}

// BATCH_OPS are the operations "Apply to all matching…" offers, with the
// role each needs and what it does to each instance.
const BATCH_OPS = [
  ['cancel', 'operator', 'cancel each unfinished instance'],
  ['retry', 'operator', 'retry each failed instance from its failed step'],
  ['pause', 'operator', 'pause each started, unfinished instance'],
  ['resume', 'operator', 'resume each paused instance'],
  ['signal', 'operator', 'send an event to each instance waiting for it'],
  ['reset', 'operator', 'run each instance again from a step'],
  ['delete', 'admin', 'delete each finished instance, with its history'],
];

// SELECT_POLL is how often, in ms, the dialog reads a batch that is
// selecting its instances.
const SELECT_POLL = 300;

// applyToAll opens the dialog of a batch over every instance the query
// matches: the operation, its arguments and a reason; then a held batch
// (hold: true) selects them and says how many; then Confirm applies it
// and goes to the batch's page, or Cancel (or closing the dialog)
// cancels it, having applied nothing.
function applyToAll(q) {
  let b = null; // the batch, once started
  let settled = false; // confirmed or cancelled: nothing to cancel on close
  const m = modal('Apply to all matching', {'data-test': 'apply-dialog', class: 'modal wide'}, () => {
    if (b && !settled) {
      api.post(`/v1/batches/${api.p(b.id)}/cancel`, {reason: 'not confirmed in the console'})
        .then(() => notify(`Batch ${b.id} cancelled: nothing was applied.`), (e) => notify(`Batch ${b.id} could not be cancelled: ${e.detail || e.message}`));
    }
  });
  const opSelect = h('select', {name: 'op', 'data-test': 'apply-op'},
    BATCH_OPS.filter(([, role]) => can(role)).map(([op, , what]) => h('option', {value: op}, `${op}: ${what}`)));
  const event = h('input', {type: 'text', name: 'event', autocomplete: 'off', spellcheck: 'false', placeholder: 'order.paid', 'data-test': 'apply-event'});
  const key = h('input', {type: 'text', name: 'key', autocomplete: 'off', spellcheck: 'false', placeholder: 'every key', 'data-test': 'apply-key'});
  const payload = h('textarea', {rows: 3, name: 'payload', spellcheck: 'false', placeholder: '{"paid": true}', 'data-test': 'apply-payload'});
  const step = h('input', {type: 'text', name: 'step', autocomplete: 'off', spellcheck: 'false', placeholder: 'a top-level step id', 'data-test': 'apply-step'});
  const reason = h('input', {type: 'text', name: 'reason', placeholder: 'why: in each instance\'s history', 'data-test': 'apply-reason'});
  const rate = h('input', {type: 'number', name: 'rate', min: 0, step: 'any', placeholder: '1000', 'data-test': 'apply-rate'});
  const signalFields = h('div', {}, field('Event', event), field('Correlation key', key, 'Only the waits with this key; empty: every wait for the event.'),
    field('Payload (JSON)', payload));
  const resetFields = h('div', {}, field('Step', step, 'Each instance runs again from this step, with the variables it had when the step began.'));
  const showArgs = () => {
    signalFields.hidden = opSelect.value !== 'signal';
    resetFields.hidden = opSelect.value !== 'reset';
  };
  opSelect.addEventListener('change', showArgs);
  showArgs();

  const form = actionForm({'data-test': 'apply'}, [
    h('p', {}, 'Every instance this query matches, among those created before the batch:'),
    h('code', {class: 'query-text', 'data-test': 'apply-query'}, q),
    field('Operation', opSelect), signalFields, resetFields, field('Reason', reason),
    field('Rate (instances per second)', rate, 'Empty: the host\'s default, 1000. 0: as fast as the host goes.'),
    h('p', {class: 'muted small-text'}, 'The host first selects the instances and says how many; nothing is applied until you confirm.'),
  ], 'Select the instances', async () => {
    const op = opSelect.value;
    const doc = {op, query: q, hold: true};
    if (reason.value.trim()) doc.reason = reason.value.trim();
    if (rate.value.trim() !== '') doc.rate = Number(rate.value);
    if (op === 'signal') {
      doc.args = {event: event.value.trim()};
      if (key.value.trim()) doc.args.key = key.value.trim();
      const v = parseJSONField(payload.value, 'the payload');
      if (v !== undefined) doc.args.payload = v;
    } else if (op === 'reset') {
      doc.args = {step: step.value.trim()};
    }
    b = await api.post('/v1/batches', doc);
    selecting().catch((e) => {
      if (!m.closed) m.body.append(errorBox(e));
    });
    return null;
  });
  replace(m.body, form);
  opSelect.focus();

  // selecting waits while the batch selects its instances, then asks for
  // the confirmation.
  async function selecting() {
    const status = h('p', {'aria-live': 'polite', 'data-test': 'apply-selecting'});
    replace(m.body, h('p', {}, 'Batch ', h('a', {href: links.batch(b.id), 'data-test': 'apply-batch-link'}, b.id), `: ${b.op} over `,
      h('code', {class: 'query-text'}, q)), status);
    while (b.phase === 'selecting') {
      replace(status, `Selecting the instances… ${b.matched || 0} so far.`);
      await sleep(SELECT_POLL);
      if (m.closed) return;
      b = await api.get(`/v1/batches/${api.p(b.id)}`);
    }
    if (m.closed) return;
    const n = b.matched || 0;
    const result = h('div', {class: 'form-result'});
    if (b.phase === 'selected' && n > 0) {
      const confirmButton = h('button', {type: 'button', class: 'danger', 'data-test': 'apply-confirm'}, `Confirm: ${b.op} ${n} instance${n === 1 ? '' : 's'}`);
      const cancelButton = h('button', {type: 'button', 'data-test': 'apply-cancel'}, 'Cancel');
      const act = async (path, body, then) => {
        confirmButton.disabled = true;
        cancelButton.disabled = true;
        try {
          b = await api.post(`/v1/batches/${api.p(b.id)}/${path}`, body);
          settled = true;
          then();
        } catch (e) {
          replace(result, errorBox(e));
        } finally {
          confirmButton.disabled = false;
          cancelButton.disabled = false;
        }
      };
      confirmButton.addEventListener('click', () => act('confirm', {}, () => {
        m.close();
        notify(`Batch ${b.id} confirmed: ${b.op} ${n} instance${n === 1 ? '' : 's'}.`);
        location.hash = links.batch(b.id);
      }));
      cancelButton.addEventListener('click', () => act('cancel', {reason: 'not confirmed in the console'}, () => {
        m.close();
        notify(`Batch ${b.id} cancelled: nothing was applied.`);
      }));
      replace(status, h('strong', {'data-test': 'apply-matched', 'data-count': String(n)}, `${n} instance${n === 1 ? '' : 's'} match${n === 1 ? 'es' : ''}`),
        ` the query now. Confirm to ${b.op} ${n === 1 ? 'it' : 'each'}; instances it does not apply to are skipped, with why.`);
      m.body.append(h('div', {class: 'buttons'}, confirmButton, cancelButton), result);
      confirmButton.focus();
    } else if (b.phase === 'selected' || (FINISHED.has(b.phase) && n === 0 && !b.error)) {
      replace(status, h('strong', {'data-test': 'apply-matched', 'data-count': '0'}, 'No instances match'), ' the query: there is nothing to apply.');
    } else if (b.phase === 'failed') {
      settled = true;
      replace(status, h('span', {class: 'error-inline', 'data-test': 'apply-failed'}, `The batch failed: ${b.error || 'no reason given'}`));
    } else {
      // Applying already (a host that does not hold it): its page follows it.
      settled = true;
      m.close();
      location.hash = links.batch(b.id);
    }
  }
}

export async function render({main, query}) {
  const f = {
    q: query.get('q') || '',
    workflow: query.get('workflow') || '',
    status: query.get('status') || '',
    created_after: query.get('created_after') || '',
    created_before: query.get('created_before') || '',
    id: query.get('id') || '',
    event: query.get('event') || '',
    key: query.get('key') || '',
    order: query.get('order') || 'newest',
  };
  const go = (changes) => {
    location.hash = links.instances({...f, ...changes, order: (changes.order ?? f.order) === 'newest' ? '' : (changes.order ?? f.order)});
  };

  // --- filters ---
  const wfInput = h('input', {type: 'text', name: 'workflow', value: f.workflow, list: 'wf-names', autocomplete: 'off', 'data-test': 'filter-workflow'});
  const wfList = h('datalist', {id: 'wf-names'});
  api.all('/v1/workflows', {}, 1000).then((ws) => replace(wfList, ws.map((w) => h('option', {value: w.name})))).catch(() => {});
  const stSelect = h('select', {name: 'status', 'data-test': 'filter-status'},
    h('option', {value: ''}, 'any'), STATUSES.map((s) => h('option', {value: s, selected: s === f.status}, s)));
  const after = h('input', {type: 'datetime-local', step: 1, name: 'created_after', value: toLocalInput(f.created_after), 'data-test': 'filter-created-after'});
  const before = h('input', {type: 'datetime-local', step: 1, name: 'created_before', value: toLocalInput(f.created_before), 'data-test': 'filter-created-before'});
  // The searches: one instance by its exact id (not paged), or the
  // instances waiting for an event with a correlation key (not paged,
  // at most the page size; an event without a key finds the waits that
  // name no key; a key alone is looked for under every event the saved
  // workflows wait for). The host refuses an id with either, and the list
  // shows why.
  const search = h('input', {type: 'search', name: 'id', value: f.id, placeholder: 'exact instance id', autocomplete: 'off', spellcheck: 'false',
    'data-search': true, 'data-test': 'filter-id', 'aria-keyshortcuts': '/'});
  const evInput = h('input', {type: 'text', name: 'event', value: f.event, placeholder: 'document.approved', autocomplete: 'off', spellcheck: 'false', 'data-test': 'filter-event'});
  const keyInput = h('input', {type: 'text', name: 'key', value: f.key, placeholder: 'doc-42', autocomplete: 'off', spellcheck: 'false', 'data-test': 'filter-key'});
  // The query of the instances' search attributes and built-in fields,
  // applied with the other filters (Enter applies them all).
  const queryInput = h('input', {type: 'text', name: 'q', value: f.q, autocomplete: 'off', spellcheck: 'false',
    placeholder: 'customer = "acme" AND amount > 1000', 'aria-describedby': 'query-help', 'data-test': 'filter-query'});
  const queryError = h('div', {'data-test': 'query-error-box'});
  const order = h('select', {name: 'order', 'data-test': 'filter-order'},
    h('option', {value: 'newest', selected: f.order === 'newest'}, 'newest first'),
    h('option', {value: 'oldest', selected: f.order === 'oldest'}, 'oldest first'));
  const filterForm = h('form', {class: 'filters', role: 'search', 'data-test': 'instance-filters'},
    h('div', {class: 'query-field'}, field('Query', queryInput,
      h('span', {id: 'query-help'}, 'Search attributes and id, workflow, version, status, created_at, updated_at, with = != < <= > >= IN STARTS_WITH, AND, OR, NOT. The counts by status leave the query out.')),
    queryError),
    field('Id (/)', search), field('Waiting for event', evInput), field('Correlation key', keyInput),
    field('Workflow', wfInput), wfList, field('Status', stSelect),
    field('Created after', after), field('Created before', before), field('Order', order),
    h('div', {class: 'buttons'},
      h('button', {type: 'submit', class: 'primary', 'data-test': 'filter-apply'}, 'Apply'),
      h('button', {type: 'button', 'data-test': 'filter-reset', onclick: () => {
        location.hash = '#/instances';
      }}, 'Reset')));
  filterForm.addEventListener('submit', (ev) => {
    ev.preventDefault();
    go({q: queryInput.value.trim(), workflow: wfInput.value.trim(), status: stSelect.value, created_after: toRFC3339(after.value),
      created_before: toRFC3339(before.value), id: search.value.trim(), event: evInput.value.trim(),
      key: keyInput.value.trim(), order: order.value});
  });

  // --- counts ---
  const chips = h('div', {class: 'chips', role: 'group', 'aria-label': 'Instances by status', 'data-test': 'status-chips'});
  async function loadCounts() {
    try {
      const c = await api.get('/v1/counts/instances', {workflow: f.workflow});
      const chip = (status, label, n) => h('button', {
        type: 'button', class: `chip${status ? ` st-${status}` : ''}`, 'aria-pressed': String(f.status === status),
        'data-test': `chip-${status || 'all'}`, 'data-count': n,
        onclick: () => go({status}),
      }, label, ' ', h('span', {class: 'count'}, String(n)));
      replace(chips, chip('', 'all', c.total ?? 0), STATUSES.map((s) => chip(s, s, (c.by_status || {})[s] ?? 0)));
    } catch (e) {
      replace(chips, errorBox(e, {'data-test': 'counts-error'}));
    }
  }

  // --- the table ---
  const selected = new Set();
  let items = [];
  let next = '';
  const tbody = h('tbody', {'data-test': 'instance-rows'});
  const listError = h('div');
  const more = h('button', {type: 'button', 'data-test': 'load-more', hidden: true, onclick: () => loadMore()}, 'Load more');
  const operator = can('operator');
  const selectAll = h('input', {type: 'checkbox', 'aria-label': 'Select every instance shown', 'data-test': 'select-all', onchange: () => {
    for (const it of items) {
      if (selectAll.checked && !TERMINAL.has(it.status)) selected.add(it.id);
      else selected.delete(it.id);
    }
    drawRows();
  }});
  const listQuery = () => ({q: f.q, workflow: f.workflow, status: f.status, created_after: f.created_after,
    created_before: f.created_before, id: f.id, event: f.event, key: f.key, order: f.order === 'newest' ? '' : f.order});

  function drawRows() {
    if (!items.length) {
      // A query's page may come back empty with a cursor: the host reads
      // a bounded number of instances a page.
      replace(tbody, h('tr', {}, h('td', {colspan: operator ? 7 : 6, class: 'muted'},
        next ? 'None found among the instances read so far; load more to read on.' : 'No instances match.')));
    } else {
      replace(tbody, items.map((it) => h('tr', {'data-test': 'instance-row', 'data-id': it.id, 'data-status': it.status},
        operator ? h('td', {}, h('input', {type: 'checkbox', 'aria-label': `Select ${it.id}`, 'data-test': 'select-instance',
          checked: selected.has(it.id), onchange: (ev) => {
            if (ev.target.checked) selected.add(it.id);
            else selected.delete(it.id);
            drawBulk();
          }})) : null,
        h('td', {class: 'id'}, h('a', {href: links.instance(it.id), 'data-test': 'instance-link'}, it.id)),
        h('td', {}, h('a', {href: links.workflow(it.workflow, it.version)}, it.workflow), h('span', {class: 'muted'}, ` v${it.version}`)),
        h('td', {}, statusBadge(it.status)),
        h('td', {}, timeEl(it.created_at)),
        h('td', {}, timeEl(it.updated_at)),
        h('td', {class: 'waiting'}, it.hold ? heldNote(it) : it.status === 'suspended' ? waitingSummary(it.waiting_on) : (it.error ? h('span', {class: 'muted'}, it.error.code) : '')))));
    }
    more.hidden = !next;
    drawBulk();
  }

  async function load() {
    try {
      const limit = Math.min(1000, Math.max(PAGE, items.length));
      const page = await api.get('/v1/instances', {...listQuery(), limit});
      items = page.items || [];
      next = page.next_cursor || '';
      for (const id of [...selected]) if (!items.some((it) => it.id === id)) selected.delete(id);
      listError.replaceChildren();
      queryError.replaceChildren();
      queryInput.removeAttribute('aria-invalid');
    } catch (e) {
      if (e.type === 'urn:weft:problem:invalid-query') {
        items = [];
        next = '';
        replace(queryError, queryProblem(f.q, e));
        queryInput.setAttribute('aria-invalid', 'true');
      } else {
        replace(listError, errorBox(e, {'data-test': 'list-error'}));
      }
    }
    drawRows();
  }

  async function loadMore() {
    more.disabled = true;
    try {
      const page = await api.get('/v1/instances', {...listQuery(), limit: PAGE, cursor: next});
      const seen = new Set(items.map((it) => it.id));
      items.push(...(page.items || []).filter((it) => !seen.has(it.id)));
      next = page.next_cursor || '';
      drawRows();
    } catch (e) {
      replace(listError, errorBox(e));
    } finally {
      more.disabled = false;
    }
  }

  // --- bulk cancel ---
  const bulkCount = h('span', {'data-test': 'selected-count'});
  const reason = h('input', {type: 'text', name: 'reason', placeholder: 'reason (optional)', 'data-test': 'bulk-reason'});
  const bulkResult = h('div', {'data-test': 'bulk-result'});
  const bulkButton = h('button', {type: 'submit', class: 'danger', 'data-test': 'bulk-cancel'}, 'Cancel selected');
  const bulk = h('form', {class: 'bulk', 'data-test': 'bulk-bar', hidden: true}, bulkCount, field('Reason', reason), bulkButton,
    h('button', {type: 'button', 'data-test': 'clear-selection', onclick: () => {
      selected.clear();
      selectAll.checked = false;
      drawRows();
    }}, 'Clear selection'));
  bulk.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const ids = [...selected];
    if (!ids.length || !confirm(`Cancel ${ids.length} instance(s)?`)) return;
    bulkButton.disabled = true;
    try {
      const res = await api.post('/v1/instances/cancel', {ids, reason: reason.value.trim()});
      const outs = res.items || [];
      replace(bulkResult, h('ul', {class: 'outcomes'}, outs.map((o) => h('li', {'data-test': 'cancel-outcome', 'data-id': o.id, 'data-outcome': o.outcome},
        h('a', {href: links.instance(o.id)}, o.id), ': ', h('strong', {}, o.outcome), o.detail ? ` — ${o.detail}` : ''))));
      const n = outs.filter((o) => o.outcome === 'cancelled').length;
      notify(`${n} of ${ids.length} instance(s) cancelled`);
      selected.clear();
      selectAll.checked = false;
      refresh();
    } catch (e) {
      replace(bulkResult, errorBox(e));
    } finally {
      bulkButton.disabled = false;
    }
  });
  function drawBulk() {
    bulk.hidden = !operator || selected.size === 0;
    replace(bulkCount, `${selected.size} selected`);
  }

  // --- apply to all matching ---
  // A batch job over every instance the query (with the other filters)
  // matches: offered for a query, to a token that may operate.
  const applyBar = operator && f.q ? h('div', {class: 'apply-all', 'data-test': 'apply-bar'},
    h('button', {type: 'button', 'data-test': 'apply-all', onclick: () => applyToAll(batchQuery(f))}, 'Apply to all matching…'),
    h('span', {class: 'muted small-text'}, 'A batch job on the host over every instance the query matches, not only those shown; ',
      h('a', {href: links.batches()}, 'the batches'), '.')) : null;

  // --- live updates ---
  // The list stream tells of each instance that changed ("instance"), of
  // each deleted ("deleted", {id}), and asks for the list to be read
  // again when more changed than it tells one by one ("resync"). The
  // page reads the list and the counts again for each (at most once a
  // second), rather than place a changed instance itself: whether it
  // still passes the filters and where it sorts is the host's to say.
  // Changes made while the stream was down are missed, so the list is
  // read again after every reconnection too; the stream reconnects
  // whenever it ends.
  const live = h('span', {class: 'live', 'data-test': 'live-state', 'aria-live': 'polite'}, 'connecting…');
  const refresh = throttle(() => {
    load();
    loadCounts();
  }, 1000);
  const showState = liveState(live);
  let opened = false;
  const sub = api.stream('/v1/streams/instances', {
    query: {workflow: f.workflow},
    onEvent: (type, v) => {
      if (type === 'deleted') {
        const id = v && v.id;
        if (items.some((it) => it.id === id)) {
          items = items.filter((it) => it.id !== id);
          selected.delete(id);
          drawRows();
        }
        refresh();
      } else if (type === 'instance' || type === 'resync') {
        refresh();
      }
    },
    onState: (state, err, delay) => {
      if (state === 'open') {
        if (opened) refresh();
        opened = true;
      }
      showState(state, err, delay);
    },
  });

  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Instances'), live,
      h('button', {type: 'button', 'data-test': 'refresh', onclick: () => refresh()}, 'Refresh')),
    filterForm, chips, applyBar, bulk, bulkResult, listError,
    h('div', {class: 'table-wrap'}, h('table', {class: 'list', 'data-test': 'instances-table'},
      h('thead', {}, h('tr', {},
        operator ? h('th', {scope: 'col'}, selectAll) : null,
        h('th', {scope: 'col'}, 'id'), h('th', {scope: 'col'}, 'workflow'), h('th', {scope: 'col'}, 'status'),
        h('th', {scope: 'col'}, 'created'), h('th', {scope: 'col'}, 'updated'), h('th', {scope: 'col'}, 'waiting on / error'))),
      tbody)),
    h('div', {class: 'buttons'}, more));
  await Promise.all([load(), loadCounts()]);
  return () => {
    sub.close();
    refresh.cancel();
  };
}
