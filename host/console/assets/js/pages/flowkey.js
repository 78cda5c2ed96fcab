// One key of a workflow's concurrency limit (docs/flow-control.md), or of
// the activity steps': its limit and policy, the instances that hold its
// slots, and its line, first in line first, each linked to its instance's
// page; the line a page at a time. The route is
// #/flow/<workflow>?key=<key>, where no key is the workflow-wide key "";
// a step key's is #/flow/(steps)?key=<key>, whose holders and waiters are
// attempts, each shown as its instance (one instance may be there more
// than once: a foreach's iterations). The page reads the key again every
// few seconds while it is open (while only the line's first page is
// shown): its holders end and its line moves up. A key nobody holds or
// waits for is said so, not shown as an error: it comes back when an
// instance asks for a slot.

import * as api from '../api.js';
import {h, replace, timeEl, links, fmtTime} from '../format.js';
import {errorBox, section, kv} from '../ui.js';
import {keyLabel, waitedFor, runningCell, POLICIES, STEPS} from './flow.js';

const PAGE = 100;
// REFRESH is how often, in ms, the page reads the key again.
const REFRESH = 2000;

export async function render({main, params, query}) {
  const workflow = params[0];
  const key = query.get('key') || '';
  // A step key has no workflow: the steps of any workflow share it.
  const step = workflow === STEPS;
  const base = step ? '/v1/step-concurrency' : `/v1/concurrency/${api.p(workflow)}`;

  const live = h('span', {class: 'live', 'data-test': 'refresh-state', 'aria-live': 'polite'});
  // The heading is drawn once and kept: the console moves the focus to it.
  const head = h('div', {class: 'page-head'},
    h('h1', {}, step ? 'Step concurrency key ' : 'Concurrency key ', step ? h('code', {class: 'id', 'data-test': 'flow-key'}, key)
      : keyLabel(key, {class: 'id', 'data-test': 'flow-key'})), live);
  const summary = h('div');
  const holders = h('div');
  const lineBox = h('div');
  const lineRows = h('tbody', {'data-test': 'line-rows'});
  const more = h('button', {type: 'button', hidden: true, 'data-test': 'line-more', onclick: () => loadMore()}, 'Load more');
  let cursor = '';
  let waiters = 0; // rows of the line shown
  let pagedOn = false;
  let stopped = false;
  let timer = null;

  function drawKey(k) {
    replace(summary, section(null, {'data-test': 'flow-summary'}, kv([
      step ? ['shared by', h('span', {'data-test': 'flow-steps'}, 'the activity steps of any workflow whose concurrency names this key; each holder and waiter is an attempt of its instance')]
        : ['workflow', h('a', {href: links.workflow(k.workflow), 'data-test': 'workflow-link'}, k.workflow)],
      ['key', step ? h('code', {}, k.key) : keyLabel(k.key)],
      ['limit', h('span', {'data-test': 'flow-limit'}, String(k.limit))],
      ['policy', [h('code', {'data-test': 'flow-policy'}, k.policy), POLICIES[k.policy] ? h('span', {class: 'muted'}, `: at the limit, ${POLICIES[k.policy]}`) : '']],
      ['running', runningCell(k)],
      ['waiting', [h('span', {'data-test': 'flow-waiting'}, String(k.waiting)),
        k.waiting && k.oldest_wait ? [h('span', {class: 'muted'}, ', the first since '), timeEl(k.oldest_wait),
          h('span', {class: 'muted'}, ` (${waitedFor(k.oldest_wait)})`)] : '']],
      step ? null : ['instances', h('a', {href: links.instances({workflow: k.workflow})}, `the instances of ${k.workflow}`)],
    ])));
    const list = k.holders || [];
    replace(holders, section('Holding a slot', {'data-test': 'holders-section'},
      list.length ? h('div', {class: 'table-wrap'}, h('table', {class: 'list'},
        h('thead', {}, h('tr', {}, ['instance', 'since', 'held for', ''].map((c) => h('th', {scope: 'col'}, c)))),
        h('tbody', {'data-test': 'holder-rows'}, list.map(holderRow))))
        : h('p', {class: 'muted', 'data-test': 'no-holders'}, step ? 'None: the attempts in the line get the slots as they are handed out.'
          : 'None: the instances in the line get the slots as they are handed out.')));
  }

  function holderRow(hd) {
    const cancelling = 'a newer instance\'s cancel_oldest is cancelling it; it keeps its slot until it ends';
    return h('tr', {'data-test': 'holder-row', 'data-id': hd.instance_id},
      h('td', {class: 'id'}, h('a', {href: links.instance(hd.instance_id), 'data-test': 'holder-link'}, hd.instance_id)),
      h('td', {}, timeEl(hd.since)),
      h('td', {class: 'muted'}, waitedFor(hd.since)),
      h('td', {}, hd.cancelling ? h('span', {class: 'badge st-cancelled', title: cancelling}, 'cancelling') : ''));
  }

  function waiterRow(w) {
    waiters++;
    return h('tr', {'data-test': 'line-row', 'data-id': w.instance_id},
      h('td', {}, String(waiters)),
      h('td', {class: 'id'}, h('a', {href: links.instance(w.instance_id), 'data-test': 'line-link'}, w.instance_id)),
      h('td', {}, timeEl(w.since)),
      h('td', {class: 'muted'}, waitedFor(w.since)));
  }

  function drawLine(items) {
    lineRows.replaceChildren();
    waiters = 0;
    lineRows.append(...items.map(waiterRow));
    replace(lineBox, section('The line, first in line first', {'data-test': 'line-section'},
      items.length ? [h('div', {class: 'table-wrap'}, h('table', {class: 'list'},
        h('thead', {}, h('tr', {}, ['#', 'instance', 'waiting since', 'waited'].map((c) => h('th', {scope: 'col'}, c)))),
        lineRows)), h('div', {class: 'buttons'}, more)]
        : h('p', {class: 'muted', 'data-test': 'line-empty'}, 'Nobody waits.')));
  }

  function gone() {
    replace(summary, section(null, {'data-test': 'flow-gone'}, h('p', {class: 'muted'},
      'Nothing runs or waits under this key now. It is shown again as soon as an instance asks for one of its slots. ',
      step ? h('a', {href: links.flows({})}, 'The keys') : h('a', {href: links.flows({workflow})}, `The keys of ${workflow}`), '.')));
    holders.replaceChildren();
    lineBox.replaceChildren();
    more.hidden = true;
  }

  function readAt() {
    live.dataset.state = 'open';
    replace(live, h('span', {class: 'dot'}), pagedOn ? `read ${fmtTime(new Date().toISOString())}; no longer read again` : `read ${fmtTime(new Date().toISOString())}`);
  }

  // load reads the key with the line's first page again.
  async function load() {
    try {
      const res = await api.get(base, {key, limit: PAGE});
      if (stopped || pagedOn) return;
      drawKey(res.key);
      drawLine(res.waiting || []);
      cursor = res.next_cursor || '';
      more.hidden = !cursor;
      readAt();
    } catch (e) {
      if (stopped || e.name === 'AbortError') return;
      if (e.status === 404) {
        gone();
        readAt();
        return;
      }
      if (!summary.children.length || e.status === 400) {
        // Nothing to show, or a request that will not do better.
        if (e.status === 400) stopped = true;
        replace(summary, errorBox(e, {'data-test': 'flow-error'}));
        return;
      }
      live.dataset.state = 'error';
      replace(live, h('span', {class: 'error-inline', title: `${e.method || 'GET'} ${e.path || base}`},
        `cannot read it again (${e.status ? `${e.status} ` : ''}${e.detail || e.message}); retrying`));
    }
  }

  // loadMore appends the line's next page; the refresh stops, which
  // would take it away.
  async function loadMore() {
    more.disabled = true;
    try {
      const res = await api.get(base, {key, limit: PAGE, cursor});
      if (stopped) return;
      pagedOn = true;
      clearTimeout(timer);
      lineRows.append(...(res.waiting || []).map(waiterRow));
      cursor = res.next_cursor || '';
      more.hidden = !cursor;
      readAt();
    } catch (e) {
      if (!stopped) replace(lineBox.appendChild(h('div')), errorBox(e));
    } finally {
      more.disabled = false;
    }
  }

  async function refresh() {
    if (stopped || pagedOn) return;
    await load();
    if (!stopped && !pagedOn) timer = setTimeout(refresh, REFRESH);
  }

  replace(main, head, summary, holders, lineBox);
  await refresh();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
