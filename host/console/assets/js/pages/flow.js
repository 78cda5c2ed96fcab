// Flow: the keys of the workflows' and the activity steps' concurrency
// limits (docs/flow-control.md) that have running or waiting instances,
// each with its running instances against its limit, how many wait and
// since when the first does, and its policy, linked to the key's page; a
// page at a time, for every workflow or one. Below them, the rate limit
// keys (the steps' and the grants' host rules') with turns granted ahead
// of now: their terms, the turns ahead, when the next would come. The host
// has no stream of them: while only the first page of keys is shown, the
// page reads both again every few seconds.

import * as api from '../api.js';
import {h, replace, timeEl, links, route, fmtDuration, fmtTime} from '../format.js';
import {errorBox, field, section} from '../ui.js';

const PAGE = 100;
// REFRESH is how often, in ms, the first page is read again.
const REFRESH = 3000;

// STEPS stands for the workflow in the route of a step key's page,
// #/flow/(steps)?key=<key>: no workflow can be named so (a name starts
// with a letter), and the list shows step keys' workflow so.
export const STEPS = '(steps)';

// stepKeyLink is the route of a key of the activity steps' concurrency
// limits.
export function stepKeyLink(key) {
  return route(['flow', STEPS], {key});
}

// shortPer drops the zero units a Go duration ends with: 1h0m0s is 1h.
export function shortPer(per) {
  return String(per).replace(/([hm])0s$/, '$1').replace(/h0m$/, 'h');
}

// rateTerms says a rate limit's terms: 10 per 1s, burst 20.
export function rateTerms(limit, per, burst) {
  return `${limit} per ${shortPer(per)}, burst ${burst || 1}`;
}

// What each kind of rate limit key is.
const RATE_KINDS = {
  step: 'an activity step\'s rate_limit, shared by the steps of any workflow that name the key',
  host: 'a grant\'s host rule, shared by the plugins whose rules name the key',
};

// What each policy does with an instance that finds every slot taken.
export const POLICIES = {
  queue: 'it waits in the line, first come, first served',
  cancel_newest: 'it is cancelled',
  cancel_oldest: 'the oldest beyond the limit are cancelled',
};

// keyLabel shows a key as code, and the workflow-wide key "" in words.
export function keyLabel(key, attrs = {}) {
  if (key === '') return h('span', {class: 'muted', ...attrs}, '"" (workflow-wide)');
  return h('code', attrs, key);
}

// waitedFor says how long ago an RFC 3339 time was: 2m 03s.
export function waitedFor(iso) {
  return fmtDuration(Date.now() - new Date(iso));
}

// runningCell is a key's running instances against its limit, with those
// being cancelled.
export function runningCell(k) {
  return [h('span', {'data-test': 'flow-running'}, `${k.running}/${k.limit}`),
    k.cancelling ? h('span', {class: 'muted'}, ` (${k.cancelling} cancelling)`) : null];
}

export async function render({main, query}) {
  const workflow = query.get('workflow') || '';
  const rows = h('tbody', {'data-test': 'flow-rows'});
  const listError = h('div');
  const live = h('span', {class: 'live', 'data-test': 'refresh-state', 'aria-live': 'polite'});
  const more = h('button', {type: 'button', hidden: true, 'data-test': 'flow-more', onclick: () => load(false)}, 'Load more');
  const cols = ['workflow', 'key', 'running / limit', 'waiting', 'oldest wait', 'policy'];
  let cursor = '';
  // pagedOn is set once a page beyond the first is shown: the refresh
  // would drop it, so it stops.
  let pagedOn = false;
  let stopped = false;
  let timer = null;

  function row(k) {
    // A key of activity steps' limits is shared by steps of any workflow:
    // its page shows the attempts that hold its slots and its line.
    if (k.step) {
      return h('tr', {'data-test': 'flow-row', 'data-step': 'true', 'data-key': k.key, 'data-waiting': String(k.waiting)},
        h('td', {class: 'muted', title: 'a key of activity steps\' concurrency limits, shared by steps of any workflow'}, STEPS),
        h('td', {class: 'id'}, h('a', {href: stepKeyLink(k.key), 'data-test': 'flow-key-link'}, keyLabel(k.key))),
        h('td', {}, runningCell(k)),
        h('td', {'data-test': 'flow-waiting'}, String(k.waiting)),
        h('td', {}, k.waiting && k.oldest_wait ? [timeEl(k.oldest_wait), h('span', {class: 'muted'}, ` (${waitedFor(k.oldest_wait)})`)]
          : h('span', {class: 'muted'}, 'none waits')),
        h('td', {}, h('code', {}, k.policy)));
    }
    return h('tr', {'data-test': 'flow-row', 'data-workflow': k.workflow, 'data-key': k.key, 'data-waiting': String(k.waiting)},
      h('td', {}, h('a', {href: links.workflow(k.workflow)}, k.workflow)),
      h('td', {class: 'id'}, h('a', {href: links.flowKey(k.workflow, k.key), 'data-test': 'flow-key-link'}, keyLabel(k.key))),
      h('td', {}, runningCell(k)),
      h('td', {'data-test': 'flow-waiting'}, String(k.waiting)),
      h('td', {}, k.waiting && k.oldest_wait ? [timeEl(k.oldest_wait), h('span', {class: 'muted'}, ` (${waitedFor(k.oldest_wait)})`)]
        : h('span', {class: 'muted'}, 'none waits')),
      h('td', {}, h('code', {title: POLICIES[k.policy] || ''}, k.policy)));
  }

  // load reads the first page again (first) or the next one.
  async function load(first) {
    more.disabled = true;
    try {
      const page = await api.get('/v1/concurrency', {workflow, limit: PAGE, cursor: first ? '' : cursor});
      if (stopped) return;
      const items = page.items || [];
      if (first) rows.replaceChildren();
      else pagedOn = true;
      rows.append(...items.map(row));
      if (!rows.children.length) {
        rows.append(h('tr', {'data-test': 'flow-empty'}, h('td', {colspan: cols.length, class: 'muted'},
          workflow ? `No key of ${workflow} has running or waiting instances.` : 'No concurrency key has running or waiting instances.')));
      }
      cursor = page.next_cursor || '';
      more.hidden = !cursor;
      listError.replaceChildren();
      live.dataset.state = 'open';
      replace(live, h('span', {class: 'dot'}), pagedOn ? `read ${fmtTime(new Date().toISOString())}; no longer read again` : `read ${fmtTime(new Date().toISOString())}`);
    } catch (e) {
      if (stopped) return;
      replace(listError, errorBox(e, {'data-test': 'flow-error'}));
    } finally {
      more.disabled = false;
    }
  }

  const rateRows = h('tbody', {'data-test': 'rate-rows'});
  const rateNote = h('p', {class: 'muted', hidden: true, 'data-test': 'rate-truncated'},
    `Only the first ${PAGE} keys, by kind and key, are shown: weft flow rates --prefix narrows them.`);
  const rateError = h('div');
  const rateCols = ['kind', 'key', 'terms', 'ahead', 'next turn'];

  function rateRow(k) {
    const next = new Date(k.next_turn) - Date.now();
    return h('tr', {'data-test': 'rate-row', 'data-kind': k.kind, 'data-key': k.key},
      h('td', {}, h('span', {title: RATE_KINDS[k.kind] || ''}, k.kind)),
      h('td', {class: 'id'}, h('code', {}, k.key)),
      h('td', {'data-test': 'rate-terms'}, rateTerms(k.limit, k.per, k.burst)),
      h('td', {'data-test': 'rate-ahead', title: 'turns granted that have not come yet: deferred step attempts, requests waiting for their turn'}, String(k.ahead)),
      h('td', {'data-test': 'rate-next'}, next > 0 ? [timeEl(k.next_turn), h('span', {class: 'muted'}, ` (in ${fmtDuration(next)})`)] : 'now'));
  }

  // loadRates reads the rate limit keys again.
  async function loadRates() {
    try {
      const res = await api.get('/v1/rate-limits', {limit: PAGE});
      if (stopped) return;
      const items = res.items || [];
      rateRows.replaceChildren(...items.map(rateRow));
      if (!items.length) {
        rateRows.append(h('tr', {'data-test': 'rate-empty'}, h('td', {colspan: rateCols.length, class: 'muted'},
          'No rate limit key has turns granted ahead of now.')));
      }
      rateNote.hidden = !res.truncated;
      rateError.replaceChildren();
    } catch (e) {
      if (!stopped) replace(rateError, errorBox(e, {'data-test': 'rate-error'}));
    }
  }

  async function refresh() {
    if (stopped || pagedOn) return;
    await Promise.all([load(true), loadRates()]);
    if (!stopped && !pagedOn) timer = setTimeout(refresh, REFRESH);
  }

  const filter = h('input', {type: 'search', name: 'workflow', value: workflow, placeholder: 'every workflow', list: 'flow-wf-names',
    autocomplete: 'off', spellcheck: 'false', 'data-search': true, 'data-test': 'flow-workflow', 'aria-keyshortcuts': '/'});
  const names = h('datalist', {id: 'flow-wf-names'});
  api.all('/v1/workflows', {}, 1000).then((ws) => replace(names, ws.map((w) => h('option', {value: w.name})))).catch(() => {});
  const form = h('form', {class: 'filters', role: 'search', 'data-test': 'flow-filter'}, field('Workflow (/)', filter), names,
    h('div', {class: 'buttons'}, h('button', {type: 'submit', class: 'primary', 'data-test': 'flow-filter-submit'}, 'Show')));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    location.hash = links.flows({workflow: filter.value.trim()});
  });

  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Flow'), live),
    h('p', {class: 'muted'}, 'The keys of the workflows\' and the activity steps\' concurrency limits that have running or waiting instances: a key is listed while an instance (or a step\'s attempt) holds one of its slots or waits in its line.'),
    form,
    listError,
    h('div', {class: 'table-wrap'}, h('table', {class: 'list', 'data-test': 'flow-table'},
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col'}, c)))),
      rows)),
    h('div', {class: 'buttons'}, more),
    section('Rate limits', {'data-test': 'rate-section'},
      h('p', {class: 'muted'}, 'The keys of the activity steps\' rate limits and of the grants\' host rules with turns granted ahead of now: a key is listed from its first turn until its last granted turn has come. Its terms are those of its last turn granted.'),
      rateError,
      h('div', {class: 'table-wrap'}, h('table', {class: 'list', 'data-test': 'rate-table'},
        h('thead', {}, h('tr', {}, rateCols.map((c) => h('th', {scope: 'col'}, c)))),
        rateRows)),
      rateNote));
  await refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
