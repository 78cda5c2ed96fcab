// The schedules (docs/schedules.md): each one's workflow, whether it is
// paused and why, its next fire, its last run and how many it started,
// a page at a time; and (for admins) a form to save a new one.

import * as api from '../api.js';
import {h, replace, timeEl, links} from '../format.js';
import {can, errorBox} from '../ui.js';
import {scheduleForm, runBadge} from './schedule.js';

const PAGE = 100;

// lastRun is the run a schedule started last, running or ended, or null.
export function lastRun(s) {
  let last = null;
  for (const r of [...(s.running || []), ...(s.recent || [])]) {
    if (!last || new Date(r.started_at) > new Date(last.started_at)) last = r;
  }
  return last;
}

// stateCell says whether a schedule is paused, with its note as text.
export function stateCell(s) {
  if (!s.paused) return h('span', {class: 'badge st-completed', 'data-state': 'active'}, 'active');
  return [h('span', {class: 'badge st-pending', 'data-state': 'paused'}, 'paused'),
    s.note ? [' ', h('span', {class: 'note', 'data-test': 'schedule-note'}, s.note)] : null];
}

export async function render({main}) {
  const rows = h('tbody', {'data-test': 'schedule-rows'});
  const listError = h('div');
  const more = h('button', {type: 'button', hidden: true, 'data-test': 'schedules-more', onclick: () => load()}, 'Load more');
  const cols = ['id', 'workflow', 'state', 'next fire', 'last run', 'runs'];
  let cursor = '';
  let count = 0;

  async function load() {
    more.disabled = true;
    try {
      const page = await api.get('/v1/schedules', {limit: PAGE, cursor});
      for (const s of page.items || []) {
        count++;
        const run = lastRun(s);
        const next = (s.next_fires || [])[0];
        rows.append(h('tr', {'data-test': 'schedule-row', 'data-id': s.id, 'data-paused': String(Boolean(s.paused))},
          h('td', {class: 'id'}, h('a', {href: links.schedule(s.id), 'data-test': 'schedule-link'}, s.id)),
          h('td', {}, h('a', {href: links.workflow(s.workflow)}, s.workflow)),
          h('td', {}, stateCell(s)),
          h('td', {'data-test': 'next-fire'}, next ? timeEl(next) : h('span', {class: 'muted'}, 'none')),
          h('td', {class: 'id'}, run ? [h('a', {href: links.instance(run.instance_id), 'data-test': 'last-run-link', 'data-id': run.instance_id}, run.instance_id),
            ' ', runBadge(run)] : h('span', {class: 'muted'}, 'none yet')),
          h('td', {}, String(s.runs ?? 0))));
      }
      if (!count) rows.append(h('tr', {}, h('td', {colspan: cols.length, class: 'muted'}, 'No schedules saved yet.')));
      cursor = page.next_cursor || '';
      more.hidden = !cursor;
      listError.replaceChildren();
    } catch (e) {
      replace(listError, errorBox(e, {'data-test': 'schedules-error'}));
    } finally {
      more.disabled = false;
    }
  }

  const example = 'id: my-schedule\nworkflow: my-workflow\ninput:\n  at: "${ schedule.time }"\nspec:\n  cron: "0 2 * * *"\n  time_zone: UTC\npolicy:\n  overlap: skip\n';
  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Schedules')),
    h('p', {class: 'muted'}, 'Next fires are shown in your browser\'s zone; a schedule\'s page shows them in UTC and in its own zone.'),
    listError,
    h('div', {class: 'table-wrap'}, h('table', {class: 'list', 'data-test': 'schedules-table'},
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col'}, c)))),
      rows)),
    h('div', {class: 'buttons'}, more),
    can('admin') ? h('details', {class: 'card', 'data-test': 'new-schedule'}, h('summary', {}, 'Save a new schedule'),
      scheduleForm(example, (res) => {
        location.hash = links.schedule(res.id);
      })) : null);
  await load();
}
