// One batch job (docs/operations.md, "Batch operations"): its document
// (the operation, the query or how many ids, the reason, the rate, the
// operation's arguments), its phase, a progress bar with the counts by
// outcome, the items skipped, failed (or, for a dry run, that can and
// cannot take it) with their reasons, each linked to its instance, and
// the actions the token's role allows: confirm a held batch, cancel one
// that has not finished. The host has no stream of a batch: the page
// reads it again every second until it has finished, and stops when it
// has or when the person leaves the page.

import * as api from '../api.js';
import {h, replace, timeEl, jsonBlock, links} from '../format.js';
import {can, errorBox, section, kv, notify, field, actionForm} from '../ui.js';

// POLL is how often, in ms, the page reads an unfinished batch again.
const POLL = 1000;
// PAGE is how many items a list of items reads at a time.
const PAGE = 50;

// FINISHED are the phases after which a batch changes no more.
export const FINISHED = new Set(['done', 'cancelled', 'failed']);

// OUTCOMES are an item's outcomes, in the order the counts show them.
export const OUTCOMES = ['done', 'skipped', 'failed', 'can', 'cannot', 'pending'];

// What each phase means, in a few words.
const PHASES = {
  selecting: 'reading the instances the query matches',
  selected: 'selected: waiting for a confirmation before anything is applied',
  applying: 'applying the operation, item by item, at the batch\'s rate',
  done: 'every item has its outcome',
  cancelled: 'cancelled: nothing more is applied; the items not reached stay pending',
  failed: 'failed before it applied anything',
};

// The colour of each phase, as the statuses of instances have theirs.
const PHASE_CLASS = {selecting: 'st-pending', selected: 'st-suspended', applying: 'st-running', done: 'st-completed',
  cancelled: 'st-cancelled', failed: 'st-failed'};

// phaseBadge shows a batch's phase, with what it means as its title.
export function phaseBadge(phase) {
  return h('span', {class: `badge ${PHASE_CLASS[phase] || ''}`, 'data-test': 'batch-phase', 'data-phase': phase, title: PHASES[phase] || ''}, phase || '?');
}

// count is how many items of a batch have outcome o.
function count(b, o) {
  return Number((b.counts || {})[o]) || 0;
}

// progressOf answers how many of a batch's items have an outcome (are
// no longer pending) and how many it selected.
export function progressOf(b) {
  const matched = Number(b.matched) || 0;
  const total = OUTCOMES.reduce((n, o) => n + count(b, o), 0);
  return {processed: Math.max(0, Math.max(total, matched) - count(b, 'pending')), matched: Math.max(matched, total)};
}

// progressBar draws a batch's progress: a bar in segments, one per
// outcome, and "processed/matched". A batch still selecting its
// instances has no total yet: the bar says how many so far.
export function progressBar(b, {compact = false} = {}) {
  const {processed, matched} = progressOf(b);
  const bar = h('div', {class: `progress${compact ? ' compact' : ''}`, role: 'progressbar', 'aria-label': 'Items with an outcome',
    'aria-valuemin': '0', 'aria-valuemax': String(matched), 'aria-valuenow': String(processed),
    'aria-valuetext': `${processed} of ${matched}`});
  if (b.phase === 'selecting') {
    bar.classList.add('indeterminate');
    bar.removeAttribute('aria-valuenow');
    bar.setAttribute('aria-valuetext', `selecting: ${matched} so far`);
  } else if (matched > 0) {
    for (const o of OUTCOMES) {
      if (o === 'pending' || !count(b, o)) continue;
      const seg = h('div', {class: `seg o-${o}`, title: `${count(b, o)} ${o}`});
      seg.style.width = `${(100 * count(b, o)) / matched}%`;
      bar.append(seg);
    }
  }
  const label = b.phase === 'selecting' ? `selecting… ${matched} so far` : `${processed}/${matched}`;
  return h('div', {class: 'progress-row', 'data-test': 'batch-progress', 'data-processed': String(processed), 'data-matched': String(matched)},
    bar, h('span', {class: 'progress-text', 'data-test': 'batch-progress-text'}, label));
}

// countsList shows a batch's items by outcome, those it has.
export function countsList(b) {
  const shown = OUTCOMES.filter((o) => count(b, o) > 0);
  if (!shown.length) return h('span', {class: 'muted', 'data-test': 'batch-counts'}, 'no items yet');
  return h('ul', {class: 'inline counts', 'data-test': 'batch-counts'}, shown.map((o) =>
    h('li', {'data-test': 'batch-count', 'data-outcome': o, 'data-count': String(count(b, o))},
      h('span', {class: `sw o-${o}`}), ` ${count(b, o)} ${o}`)));
}

// selectionOf says what a batch applies to: its query, linked to the
// instances it matches now, or how many ids it was given.
export function selectionOf(b) {
  if (b.query) {
    return [h('code', {class: 'query-text', 'data-test': 'batch-query'}, b.query), ' ',
      h('a', {href: links.instances({q: b.query}), class: 'small-text'}, 'the instances it matches now')];
  }
  return h('span', {'data-test': 'batch-ids'}, `${b.ids ?? 0} instance id${b.ids === 1 ? '' : 's'}`);
}

// opLabel names a batch's operation, with its step or event.
export function opLabel(b) {
  const a = b.args || {};
  if (b.op === 'signal' && a.event) return ['signal ', h('code', {}, a.event), a.key ? [' key ', h('code', {}, a.key)] : ''];
  if (b.op === 'reset' && a.step) return ['reset to ', h('code', {}, a.step)];
  if (b.op === 'migrate') return `migrate${b.dry_run ? ' (dry run)' : ''}${a.to_version ? ` to version ${a.to_version}` : ''}`;
  return b.op || '?';
}

// itemList is a list of a batch's items with one outcome ('' for every
// item), a page at a time (after the last item's seq). It answers the
// element and load(): a first load, or a read again from the start (of
// as many items as are shown) when the counts changed.
function itemList(id, outcome) {
  const rows = h('tbody');
  const err = h('div');
  let items = [];
  let next = '';
  const more = h('button', {type: 'button', class: 'small', hidden: true, 'data-test': 'batch-items-more', onclick: () => page(false)}, 'Load more');
  const el = h('div', {class: 'batch-items', 'data-test': 'batch-items', 'data-outcome': outcome || 'all'},
    err, h('div', {class: 'table-wrap'}, h('table', {class: 'list'},
      h('thead', {}, h('tr', {}, ['#', 'instance', 'outcome', 'reason', 'when'].map((c) => h('th', {scope: 'col'}, c)))), rows)),
    h('div', {class: 'buttons'}, more));

  function draw() {
    replace(rows, items.length ? items.map((it) => h('tr', {'data-test': 'batch-item', 'data-id': it.instance_id, 'data-outcome': it.outcome},
      h('td', {}, String(it.seq)),
      h('td', {class: 'id'}, h('a', {href: links.instance(it.instance_id), 'data-test': 'batch-item-link'}, it.instance_id)),
      h('td', {}, h('span', {class: `badge o-${it.outcome}`}, it.outcome)),
      h('td', {'data-test': 'batch-item-reason'}, it.reason || ''),
      h('td', {}, timeEl(it.time)))) : h('tr', {}, h('td', {colspan: 5, class: 'muted'}, 'None.')));
    more.hidden = !next;
  }

  // page reads the first page again (of as many items as are shown, up
  // to 1000), or the next one.
  async function page(fromStart) {
    more.disabled = true;
    try {
      const limit = fromStart ? Math.min(1000, Math.max(PAGE, items.length)) : PAGE;
      const res = await api.get(`/v1/batches/${api.p(id)}/items`, {outcome, limit, after: fromStart ? '' : next});
      items = fromStart ? (res.items || []) : items.concat(res.items || []);
      next = res.next_cursor ? String(res.next_cursor) : '';
      err.replaceChildren();
      draw();
    } catch (e) {
      replace(err, errorBox(e, {'data-test': 'batch-items-error'}));
    } finally {
      more.disabled = false;
    }
  }
  return {el, load: () => page(true)};
}

export async function render({main, params}) {
  const id = params[0];
  const base = `/v1/batches/${api.p(id)}`;
  let b;
  try {
    b = await api.get(base);
  } catch (e) {
    replace(main, h('h1', {}, 'Batch ', h('code', {}, id)), errorBox(e, {'data-test': 'batch-error'}));
    return null;
  }

  const badge = h('span');
  const live = h('span', {class: 'live', 'data-test': 'batch-live', 'aria-live': 'polite'});
  const progress = h('div');
  const counts = h('div');
  const pollError = h('div');
  const actions = h('div', {'data-test': 'batch-actions'});
  const doc = h('div');
  const lists = h('div');
  const title = h('h1', {}, 'Batch ', h('code', {class: 'id', 'data-test': 'batch-id'}, b.id));

  // The lists of items, one per outcome worth a look, made as the
  // outcome first appears, and read again when its count changes.
  const listed = new Map(); // outcome -> {el, load, seen}
  const LISTED = ['failed', 'cannot', 'skipped', 'can'];
  const all = itemList(id, '');
  const allBox = h('details', {class: 'card', 'data-test': 'batch-all-items'}, h('summary', {}, 'Every item, in the order selected'), all.el);
  allBox.addEventListener('toggle', () => {
    if (allBox.open) all.load();
  });

  function drawLists() {
    for (const o of LISTED) {
      const n = count(b, o);
      if (!n) continue;
      let l = listed.get(o);
      if (!l) {
        l = {...itemList(id, o), seen: -1, head: h('h2', {})};
        l.box = section(null, {'data-test': `batch-${o}`}, l.head, l.el);
        listed.set(o, l);
        replace(lists, LISTED.filter((x) => listed.has(x)).map((x) => listed.get(x).box));
      }
      replace(l.head, `${o[0].toUpperCase()}${o.slice(1)} (${n})`);
      if (l.seen !== n) {
        l.seen = n;
        l.load();
      }
    }
  }

  // The actions are redrawn only when what they depend on changed, so
  // that a poll does not wipe a reason being typed.
  let actionsSig = '';
  function drawActions() {
    const sig = JSON.stringify([b.phase, can('operator'), can('admin')]);
    if (sig === actionsSig) return;
    actionsSig = sig;
    const list = [];
    // Confirming applies the batch: it needs the role its start needed.
    if (can(b.op === 'delete' || b.op === 'migrate' ? 'admin' : 'operator') && b.phase === 'selected') {
      list.push(actionForm({'data-test': 'batch-confirm'}, h('p', {class: 'muted'},
        `${b.matched ?? 0} instance${b.matched === 1 ? '' : 's'} selected; nothing is applied until confirmed.`), `Confirm: ${b.op} ${b.matched ?? 0}`, async () => {
        b = await api.post(`${base}/confirm`, {});
        notify(`Batch ${b.id} confirmed.`);
        update();
        poll();
        return null;
      }));
    }
    if (can('operator') && !FINISHED.has(b.phase)) {
      const reason = h('input', {type: 'text', name: 'reason', placeholder: 'why it stops', 'data-test': 'batch-cancel-reason'});
      list.push(actionForm({'data-test': 'batch-cancel', danger: true}, field('Reason', reason), 'Cancel batch', async () => {
        if (!confirm(`Cancel batch ${b.id}? Nothing more is applied.`)) return null;
        b = await api.post(`${base}/cancel`, reason.value.trim() ? {reason: reason.value.trim()} : {});
        notify(`Batch ${b.id} cancelled.`);
        update();
        return null;
      }));
    }
    replace(actions, list.length ? section('Actions', {}, h('div', {class: 'action-row'}, list)) : '');
  }

  function drawDoc() {
    const c = b.cancelled;
    replace(doc, section('Document', {'data-test': 'batch-document'}, kv([
      ['operation', h('span', {'data-test': 'batch-op'}, opLabel(b))],
      ['selection', selectionOf(b)],
      ['reason', b.reason ? h('span', {class: 'note', 'data-test': 'batch-reason'}, b.reason) : h('span', {class: 'muted'}, 'none given')],
      ['rate', b.rate === 0 ? 'no limit (as fast as the host goes)' : `${b.rate ?? 1000} instances/s`],
      ['hold', b.hold ? 'waits for a confirmation once selected' : 'no'],
      b.dry_run ? ['dry run', 'yes: answers per instance whether it can, changes nothing'] : null,
      b.args && Object.keys(b.args).length ? ['arguments', jsonBlock(b.args, {'data-test': 'batch-args'})] : null,
      ['started by', b.actor || h('span', {class: 'muted'}, 'unknown')],
      ['created', timeEl(b.created_at)],
      b.started_at ? ['started', timeEl(b.started_at)] : null,
      b.finished_at ? ['finished', timeEl(b.finished_at)] : null,
      b.next_step_at && !FINISHED.has(b.phase) ? ['next step', timeEl(b.next_step_at)] : null,
      ['updated', timeEl(b.updated_at)],
      b.error ? ['error', h('span', {class: 'error-inline', 'data-test': 'batch-failure'}, b.error)] : null,
      c ? ['cancelled', h('span', {'data-test': 'batch-cancelled'}, `by ${c.actor || 'unknown'}`, c.at ? [' at ', timeEl(c.at)] : '', c.reason ? `: ${c.reason}` : '')] : null,
    ])));
  }

  function update() {
    replace(badge, phaseBadge(b.phase));
    replace(progress, progressBar(b));
    replace(counts, countsList(b), h('p', {class: 'muted small-text'}, PHASES[b.phase] || ''));
    replace(live, FINISHED.has(b.phase) ? h('span', {'data-test': 'batch-finished'}, 'finished') : [h('span', {class: 'dot'}), 'updating every second']);
    drawActions();
    drawDoc();
    drawLists();
    if (allBox.open && FINISHED.has(b.phase)) all.load();
  }

  replace(main,
    h('div', {class: 'page-head'}, title, badge, live, h('a', {href: links.batches(), class: 'small-text'}, 'all batches')),
    section('Progress', {'data-test': 'batch-progress-section'}, progress, counts), pollError,
    actions, lists, doc, allBox);
  update();

  // Read the batch every POLL ms until it has finished; a failed read is
  // shown and tried again. One read at a time.
  let stopped = false;
  let timer = null;
  let reading = false;
  async function tick() {
    timer = null;
    if (stopped || reading) return;
    reading = true;
    try {
      b = await api.get(base);
      pollError.replaceChildren();
      update();
    } catch (e) {
      replace(pollError, errorBox(e, {'data-test': 'batch-poll-error'}));
    } finally {
      reading = false;
    }
    poll();
  }
  function poll() {
    if (stopped || timer || reading || FINISHED.has(b.phase)) return;
    timer = setTimeout(tick, POLL);
  }
  poll();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
