// The batch jobs (docs/operations.md, "Batch operations"), newest first:
// each one's id, operation, who started it, its phase, its progress and
// when it was created, a page at a time. While one shown has not
// finished, the page reads them again every few seconds. A batch is
// started from the instances page ("Apply to all matching…"), the
// command line (weft batch start) or the API.

import * as api from '../api.js';
import {h, replace, timeEl, links} from '../format.js';
import {errorBox} from '../ui.js';
import {FINISHED, phaseBadge, progressBar, opLabel} from './batch.js';

const PAGE = 50;
// REFRESH is how often, in ms, the list is read again while a batch on
// it has not finished.
const REFRESH = 2000;

export async function render({main}) {
  const rows = h('tbody', {'data-test': 'batch-rows'});
  const listError = h('div');
  const more = h('button', {type: 'button', hidden: true, 'data-test': 'batches-more', onclick: () => load(false)}, 'Load more');
  const cols = ['id', 'operation', 'actor', 'phase', 'progress', 'created'];
  let items = [];
  let cursor = '';

  function draw() {
    replace(rows, items.length ? items.map((b) => h('tr', {'data-test': 'batch-row', 'data-id': b.id, 'data-phase': b.phase},
      h('td', {class: 'id'}, h('a', {href: links.batch(b.id), 'data-test': 'batch-link'}, b.id)),
      h('td', {}, opLabel(b)),
      h('td', {}, b.actor || h('span', {class: 'muted'}, '—')),
      h('td', {}, phaseBadge(b.phase)),
      h('td', {}, progressBar(b, {compact: true})),
      h('td', {}, timeEl(b.created_at))))
      : h('tr', {}, h('td', {colspan: cols.length, class: 'muted'},
        'No batch jobs yet. Query the instances, then "Apply to all matching…" starts one.')));
    more.hidden = !cursor;
  }

  // load reads the first page again (as many batches as are shown, up
  // to 1000), or the next one.
  async function load(fromStart) {
    more.disabled = true;
    try {
      const limit = fromStart ? Math.min(1000, Math.max(PAGE, items.length)) : PAGE;
      const page = await api.get('/v1/batches', {limit, cursor: fromStart ? '' : cursor});
      if (fromStart) {
        items = page.items || [];
      } else {
        const seen = new Set(items.map((b) => b.id));
        items.push(...(page.items || []).filter((b) => !seen.has(b.id)));
      }
      cursor = page.next_cursor || '';
      listError.replaceChildren();
      draw();
    } catch (e) {
      replace(listError, errorBox(e, {'data-test': 'batches-error'}));
    } finally {
      more.disabled = false;
    }
  }

  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Batches'),
      h('button', {type: 'button', 'data-test': 'refresh', onclick: () => load(true)}, 'Refresh')),
    h('p', {class: 'muted'}, 'Operations applied by the host to many instances, kept a week after they end. '
      + 'Query the instances, then "Apply to all matching…" starts one.'),
    listError,
    h('div', {class: 'table-wrap'}, h('table', {class: 'list', 'data-test': 'batches-table'},
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col'}, c)))),
      rows)),
    h('div', {class: 'buttons'}, more));
  await load(true);

  let stopped = false;
  let timer = null;
  const again = () => {
    if (stopped) return;
    timer = setTimeout(async () => {
      if (items.some((b) => !FINISHED.has(b.phase))) await load(true);
      again();
    }, REFRESH);
  };
  again();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
