// One schedule (docs/schedules.md): what it is and whether it is paused
// and why, its next fires in UTC and in its time zone, its running and
// recent runs linked to their instances, the last events of its record,
// its document, and the actions the token's role allows: pause or
// unpause with a note, trigger a run now and backfill a past range
// (operators), save a new document (admins). The host has no stream of a
// schedule's changes: the page reads it again every few seconds while it
// is open, and soon after each action.

import * as api from '../api.js';
import {h, replace, timeEl, statusBadge, jsonBlock, links, pretty, TERMINAL, fmtUTC, fmtInZone, fmtDuration, fmtTime, toRFC3339, zoneOffset} from '../format.js';
import {can, errorBox, section, kv, notify, field, actionForm} from '../ui.js';
import {sourceView, contentTypeOf, topField} from './workflow.js';

// REFRESH is how often, in ms, the page reads the schedule again.
const REFRESH = 2000;
// SOON is how long after an action the page reads it again: the
// schedules sweep takes a trigger at its next turn, about every 100ms.
const SOON = 300;
// EVENTS_SHOWN is how many of the record's last events the page lists.
const EVENTS_SHOWN = 50;
// RUNS_READ is how many running runs' instances each refresh reads.
const RUNS_READ = 20;

export const OVERLAPS = ['skip', 'buffer_one', 'buffer_all', 'cancel_other', 'allow_all'];

// What a skipped fire's reason means, in a few words.
const REASONS = {
  overlap: 'a run was still going',
  buffer_full: 'a fire was waiting already',
  replaced: 'a later fire took its place',
  missed: 'later than the catch-up window',
  paused: 'the schedule was paused',
  duplicate: 'its run was going already',
};

// runBadge shows a run's status as the schedule last saw it, or that its
// instance was deleted before the schedule saw it end.
export function runBadge(r) {
  if (r.gone) return h('span', {class: 'badge st-cancelled', 'data-status': 'gone', title: 'deleted before the schedule saw it end'}, 'deleted');
  return statusBadge(r.status);
}

// zoneOf is the time zone of a schedule's document, '' for none or UTC.
export function zoneOf(doc) {
  const z = doc && doc.spec && doc.spec.time_zone;
  return typeof z === 'string' && z && z !== 'UTC' ? z : '';
}

// nominalEl shows a fire's time in the schedule's zone (UTC when it has
// none, or the browser does not know it), with UTC as its title.
export function nominalEl(iso, zone) {
  if (!iso) return h('span', {class: 'muted'}, '—');
  const inZone = zone ? fmtInZone(iso, zone) : '';
  return h('time', {datetime: iso, title: fmtUTC(iso)}, inZone || fmtUTC(iso));
}

// skippedLine says what one item of a skipped event's list skipped.
function skippedLine(k, zone) {
  const n = k.count ?? 1;
  return [`${k.more ? 'more than ' : ''}${n} ${k.kind ? `${k.kind} ` : ''}fire${n === 1 && !k.more ? '' : 's'} skipped (`,
    h('code', {}, k.reason || '?'), REASONS[k.reason] ? `: ${REASONS[k.reason]}` : '', '), ',
    nominalEl(k.nominal, zone), k.last && (n > 1 || k.more) ? [' to ', nominalEl(k.last, zone)] : ''];
}

// eventData renders an event's data briefly, by its type (docs/schedules.md,
// "The record"); a type it does not know shows as compact JSON.
export function eventData(e, zone) {
  const d = e.data && typeof e.data === 'object' ? e.data : {};
  const run = (id) => (id ? h('a', {href: links.instance(id), 'data-test': 'event-run-link', 'data-id': id}, id) : h('span', {class: 'muted'}, '?'));
  switch (e.type) {
    case 'created':
    case 'updated':
      return '';
    case 'paused':
    case 'unpaused':
      return d.note ? ['note: ', h('span', {class: 'note', 'data-test': 'event-note'}, d.note)] : h('span', {class: 'muted'}, 'no note');
    case 'triggered':
      return ['for ', nominalEl(d.nominal, zone), d.overlap ? [', overlap ', h('code', {}, d.overlap)] : ''];
    case 'backfill':
      return [nominalEl(d.from, zone), ' to ', nominalEl(d.to, zone), `: ${d.fires ?? '?'} fire(s)`, d.overlap ? [', overlap ', h('code', {}, d.overlap)] : ''];
    case 'run_started':
      return [run(d.instance_id), d.kind ? ` (${d.kind})` : ''];
    case 'run_ended':
      return [run(d.instance_id), ' ', d.status === 'gone' ? runBadge({gone: true}) : statusBadge(d.status || '?')];
    case 'run_cancelled':
      return [run(d.instance_id), ' (by the overlap policy cancel_other)'];
    case 'skipped':
      return h('ul', {class: 'plain'}, (Array.isArray(d.skipped) ? d.skipped : []).map((k) =>
        h('li', {'data-reason': k && k.reason}, skippedLine(k || {}, zone))));
    case 'start_failed':
      return [h('code', {}, d.instance_id || '?'), d.kind ? ` (${d.kind})` : '', ': ', h('span', {class: 'error-inline'}, d.error || 'no error recorded')];
    default:
      return Object.keys(d).length ? h('code', {class: 'data'}, JSON.stringify(d)) : '';
  }
}

// calendarOf lists a spec's cron expressions and intervals.
function calendarOf(spec) {
  const list = (v) => (v === undefined || v === null ? [] : Array.isArray(v) ? v : [v]);
  const items = [
    ...list(spec.cron).map((c) => h('code', {}, String(c))),
    ...list(spec.every).map((e) => h('code', {}, e && typeof e === 'object'
      ? `every ${e.every}${e.offset && e.offset !== '0s' ? ` offset ${e.offset}` : ''}` : `every ${e}`)),
  ];
  return items.length ? h('ul', {class: 'inline'}, items.map((x) => h('li', {}, x))) : h('span', {class: 'muted'}, 'none');
}

// overlapSelect chooses an overlap policy for a trigger or a backfill;
// its first choice, empty, is the schedule's own.
function overlapSelect(own, test) {
  return h('select', {name: 'overlap', 'data-test': test},
    h('option', {value: ''}, `the schedule's (${own})`), OVERLAPS.map((o) => h('option', {value: o}, o)));
}

// scheduleForm edits a schedule document and PUTs it under its id;
// when the host refuses it, each problem is marked on its line.
export function scheduleForm(initial, onSaved) {
  const ta = h('textarea', {class: 'code', rows: Math.min(30, Math.max(8, initial.split('\n').length + 2)), spellcheck: 'false', 'data-test': 'schedule-editor'}, initial);
  ta.value = initial;
  return actionForm({'data-test': 'save-schedule'}, field('Document (YAML or JSON)', ta), 'Save', async () => {
    const id = topField(ta.value, 'id');
    if (!id) throw new Error('the document needs an id');
    try {
      const res = await api.request('PUT', `/v1/schedules/${api.p(id)}`, {body: ta.value, contentType: contentTypeOf(ta.value)});
      notify(`Saved schedule ${res.id}.`);
      onSaved(res);
      return null;
    } catch (e) {
      if (e.errors && e.errors.some((x) => x.line)) {
        return h('div', {}, errorBox(e), sourceView(ta.value, e.errors));
      }
      throw e;
    }
  });
}

export async function render({main, params}) {
  const id = params[0];
  const base = `/v1/schedules/${api.p(id)}`;
  let s;
  try {
    s = await api.get(base);
  } catch (e) {
    replace(main, h('h1', {}, 'Schedule ', h('code', {}, id)), errorBox(e, {'data-test': 'schedule-error'}));
    return null;
  }
  // The schedule says what its runs' statuses were when its sweep last
  // looked, which may be a while ago (it looks again when something
  // waits for a run's end, or at its next fire): the running runs'
  // instances are read at each refresh, and their status shown.
  const instStatus = new Map(); // instance id -> status, 'deleted', or an ApiError
  let events = []; // the last EVENTS_SHOWN, oldest first
  let lastSeq = 0;
  let eventsError = null;

  const doc = () => (s.document && typeof s.document === 'object' ? s.document : {});
  const zone = () => zoneOf(doc());

  // The heading is drawn once and kept: the console moves the focus to
  // it, and a refresh must not take the focus away.
  const live = h('span', {class: 'live', 'data-test': 'refresh-state', 'aria-live': 'polite'});
  const badge = h('span');
  const head = h('div', {class: 'page-head'}, h('h1', {}, 'Schedule ', h('code', {class: 'id', 'data-test': 'schedule-id'}, s.id)), badge, live);
  const summary = h('div');
  const actions = h('div', {'data-test': 'schedule-actions'});
  const fires = h('div');
  const runs = h('div');
  const record = h('div');
  const docBox = h('div');
  const editor = h('div');

  function drawHead() {
    replace(badge, s.paused ? h('span', {class: 'badge st-pending', 'data-test': 'schedule-state', 'data-state': 'paused'}, 'paused')
      : h('span', {class: 'badge st-completed', 'data-test': 'schedule-state', 'data-state': 'active'}, 'active'));
  }

  // The summary (as the runs and the record) is redrawn only when it
  // changed, so that a refresh does not take the focus from its link.
  let summarySig = '';
  function drawSummary() {
    const sig = JSON.stringify(s);
    if (sig === summarySig) return;
    summarySig = sig;
    const d = doc();
    const spec = d.spec || {};
    const policy = d.policy || {};
    const pending = [s.waiting ? `${s.waiting} buffered fire(s)` : '', s.triggers ? `${s.triggers} trigger(s)` : '',
      s.backfills ? `${s.backfills} backfill(s)` : ''].filter(Boolean);
    replace(summary, section(null, {}, kv([
      ['workflow', h('a', {href: links.workflow(s.workflow), 'data-test': 'workflow-link'}, s.workflow)],
      s.paused ? ['state', 'paused: no scheduled fire runs; triggers and backfills do'] : null,
      s.note ? ['note', h('span', {class: 'note', 'data-test': 'schedule-note'}, s.note)] : null,
      ['calendar', calendarOf(spec)],
      ['time zone', h('span', {'data-test': 'schedule-zone'}, spec.time_zone || 'UTC')],
      spec.start ? ['from', timeEl(spec.start)] : null,
      spec.end ? ['until', timeEl(spec.end)] : null,
      spec.jitter ? ['jitter', h('code', {}, spec.jitter)] : null,
      ['overlap', h('code', {}, policy.overlap || 'skip')],
      ['scheduled runs started', h('span', {'data-test': 'schedule-runs'}, `${s.runs ?? 0}${policy.max_runs ? ` of at most ${policy.max_runs}` : ''}`)],
      pending.length ? ['not yet taken', pending.join(', ')] : null,
      s.wake ? ['next look', timeEl(s.wake)] : null,
      ['created', timeEl(s.created_at)],
      ['updated', [timeEl(s.updated_at), h('span', {class: 'muted'}, ` (revision ${s.revision})`)]],
    ])));
  }

  // The actions are redrawn only when what they depend on changed, so
  // that a refresh does not wipe a note or a range being typed.
  let actionsSig = '';
  function drawActions() {
    const sig = JSON.stringify([s.paused, can('operator')]);
    if (sig === actionsSig) return;
    actionsSig = sig;
    if (!can('operator')) {
      actions.replaceChildren();
      return;
    }
    const own = doc().policy?.overlap || 'skip';
    const pausing = !s.paused;
    const verb = pausing ? 'pause' : 'unpause';
    const note = h('input', {type: 'text', name: 'note', autocomplete: 'off', 'data-test': `${verb}-note`,
      placeholder: pausing ? 'why it stops' : 'why it goes on'});
    const pauseForm = actionForm({'data-test': verb}, field('Note', note, 'Kept as the schedule\'s note and in its record.'),
      pausing ? 'Pause' : 'Unpause', async () => {
        const body = note.value.trim() ? {note: note.value.trim()} : {};
        s = await api.post(`${base}/${verb}`, body);
        notify(pausing ? `Schedule ${s.id} paused.` : `Schedule ${s.id} unpaused.`);
        update();
        soon();
        return null;
      });

    const trigOverlap = overlapSelect(own, 'trigger-overlap');
    const triggerForm = actionForm({'data-test': 'trigger'}, field('Overlap', trigOverlap), 'Trigger now', async () => {
      const body = trigOverlap.value ? {overlap: trigOverlap.value} : {};
      s = await api.post(`${base}/trigger`, body);
      notify('Triggered: the run starts at the schedules sweep\'s next turn.');
      update();
      soon();
      return null;
    });

    const from = h('input', {type: 'datetime-local', step: 1, name: 'from', 'data-test': 'backfill-from'});
    const to = h('input', {type: 'datetime-local', step: 1, name: 'to', 'data-test': 'backfill-to'});
    const bfOverlap = overlapSelect(own, 'backfill-overlap');
    const backfillForm = actionForm({'data-test': 'backfill'}, [
      field('From', from, `In your browser's zone (${zoneOffset()}); both ends are included.`), field('To', to, 'In the past.'),
      field('Overlap', bfOverlap)], 'Backfill', async () => {
      const body = {from: toRFC3339(from.value), to: toRFC3339(to.value)};
      if (bfOverlap.value) body.overlap = bfOverlap.value;
      if (body.from && body.to && !confirm(`Run every fire of ${s.id} from ${fmtTime(body.from)} to ${fmtTime(body.to)}?`)) return null;
      const res = await api.post(`${base}/backfill`, body);
      s = res.schedule;
      notify(`Backfill of ${res.fires} fire(s) asked for.`);
      update();
      soon();
      return h('p', {class: 'muted', 'data-test': 'backfill-result'}, `${res.fires} fire(s) in the range; the schedules sweep starts their runs.`);
    });

    replace(actions, section('Actions', {}, h('div', {class: 'action-row'},
      h('div', {}, h('h3', {}, pausing ? 'Pause' : 'Unpause'), pauseForm),
      h('div', {}, h('h3', {}, 'Run now'), triggerForm),
      h('div', {}, h('h3', {}, 'Backfill a past range'), backfillForm))));
  }

  // The next fires are drawn at every refresh, for their "in …".
  function drawFires() {
    const z = zone();
    const next = s.next_fires || [];
    const cols = ['#', 'UTC', z ? `${z}` : null, 'in'].filter(Boolean);
    replace(fires, section('Next fires', {'data-test': 'next-fires-section'},
      next.length ? h('div', {class: 'table-wrap'}, h('table', {class: 'list'},
        h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col'}, c)))),
        h('tbody', {'data-test': 'next-fires'}, next.map((f, i) => h('tr', {'data-test': 'next-fire', 'data-time': f},
          h('td', {}, String(i + 1)),
          h('td', {}, h('time', {datetime: f, 'data-test': 'fire-utc'}, fmtUTC(f))),
          z ? h('td', {}, h('time', {datetime: f, 'data-test': 'fire-zone'}, fmtInZone(f, z) || h('span', {class: 'muted'}, 'zone unknown to this browser'))) : null,
          h('td', {class: 'muted'}, fmtDuration(new Date(f) - Date.now())))))))
        : h('p', {class: 'muted', 'data-test': 'no-next-fires'}, s.paused ? 'None while it is paused.' : 'None: it is past its end or at its run limit.')));
  }

  // runStatus is a run's status cell: its instance's status when it was
  // read (a running run's), else the one the schedule saw.
  function runStatus(r) {
    const st = instStatus.get(r.instance_id);
    if (st === undefined || r.gone) return {status: r.gone ? 'gone' : r.status, cell: runBadge(r)};
    if (st === 'deleted') return {status: 'gone', cell: runBadge({gone: true})};
    if (st instanceof Error) return {status: r.status, cell: [runBadge(r), ' ', h('span', {class: 'error-inline'}, `(its instance cannot be read: ${st.detail || st.message})`)]};
    return {status: st, cell: [statusBadge(st), TERMINAL.has(st) ? h('span', {class: 'muted'}, ' (the schedule notes the end at its next look)') : '']};
  }

  function runTable(list, test, empty) {
    const z = zone();
    if (!list.length) return h('p', {class: 'muted', 'data-test': test}, empty);
    return h('div', {class: 'table-wrap'}, h('table', {class: 'list'},
      h('thead', {}, h('tr', {}, ['instance', 'fire', 'kind', 'status', 'started', 'ended'].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {'data-test': test}, list.map((r) => {
        const st = runStatus(r);
        return h('tr', {'data-test': 'run-row', 'data-id': r.instance_id, 'data-status': st.status},
          h('td', {class: 'id'}, r.gone ? h('code', {}, r.instance_id) : h('a', {href: links.instance(r.instance_id), 'data-test': 'run-link'}, r.instance_id)),
          h('td', {}, nominalEl(r.nominal, z)), h('td', {}, r.kind || ''), h('td', {}, st.cell),
          h('td', {}, timeEl(r.started_at)), h('td', {}, r.ended_at ? timeEl(r.ended_at) : h('span', {class: 'muted'}, '—')));
      }))));
  }

  let runsSig = '';
  function drawRuns() {
    const sig = JSON.stringify([s.running, s.recent, zone(), [...instStatus].map(([k, v]) => [k, v instanceof Error ? v.detail : v])]);
    if (sig === runsSig) return;
    runsSig = sig;
    replace(runs, section('Runs', {'data-test': 'runs-section'},
      h('h3', {}, 'Running'), runTable(s.running || [], 'running-runs', 'None.'),
      h('h3', {}, 'Recent'), runTable(s.recent || [], 'recent-runs', 'None yet.'),
      h('p', {class: 'muted small-text'}, 'A run is the instance ', h('code', {}, `${s.id}@<fire in UTC>`),
        '. A running run\'s status is its instance\'s; a recent run\'s, the one the schedule saw it end with.')));
  }

  let recordSig = '';
  function drawRecord() {
    const sig = `${lastSeq}/${eventsError ? eventsError.detail : ''}`;
    if (sig === recordSig) return;
    recordSig = sig;
    const z = zone();
    const shown = [...events].reverse();
    replace(record, section('Record', {'data-test': 'record-section'},
      h('p', {class: 'muted'}, `The last ${EVENTS_SHOWN} events at most, newest first.`),
      eventsError ? errorBox(eventsError, {'data-test': 'events-error'}) : null,
      shown.length ? h('div', {class: 'table-wrap'}, h('table', {class: 'list history'},
        h('thead', {}, h('tr', {}, ['seq', 'time', 'type', 'by', 'what'].map((c) => h('th', {scope: 'col'}, c)))),
        h('tbody', {'data-test': 'schedule-events'}, shown.map((e) => h('tr', {'data-test': 'schedule-event', 'data-type': e.type, 'data-seq': e.seq},
          h('td', {}, String(e.seq)), h('td', {}, timeEl(e.time)), h('td', {}, h('code', {}, e.type)),
          h('td', {}, e.actor || ''), h('td', {'data-test': 'event-data'}, eventData(e, z)))))))
        : eventsError ? null : h('p', {class: 'muted'}, 'No events.')));
  }

  let docRevision = -1;
  function drawDocument() {
    if (s.revision === docRevision) return;
    docRevision = s.revision;
    replace(docBox, section('Document', {}, jsonBlock(s.document, {'data-test': 'schedule-document'})));
    if (can('admin')) {
      replace(editor, h('details', {class: 'card', 'data-test': 'edit-schedule'}, h('summary', {}, 'Edit and save the document'),
        scheduleForm(pretty(s.document), (res) => {
          if (res.id !== s.id) {
            location.hash = links.schedule(res.id);
            return;
          }
          s = res;
          update();
          soon();
        })));
    }
  }

  function update() {
    drawHead();
    drawSummary();
    drawActions();
    drawFires();
    drawRuns();
    drawRecord();
    drawDocument();
  }

  // readRuns reads the instances of the running runs (the first
  // RUNS_READ), for their status now.
  async function readRuns() {
    const ids = (s.running || []).filter((r) => !r.gone).slice(0, RUNS_READ).map((r) => r.instance_id);
    for (const k of [...instStatus.keys()]) if (!ids.includes(k)) instStatus.delete(k);
    await Promise.all(ids.map((rid) => api.get(`/v1/instances/${api.p(rid)}`).then((inst) => instStatus.set(rid, inst.status),
      (e) => instStatus.set(rid, e.status === 404 ? 'deleted' : e))));
  }

  // readEvents reads the events after the last one read; the record
  // only grows at its end, so each refresh reads what is new.
  async function readEvents() {
    try {
      for (let i = 0; i < 5; i++) {
        const page = await api.get(`${base}/events`, {after: lastSeq || '', limit: 1000});
        const items = page.items || [];
        for (const e of items) {
          if (e.seq > lastSeq) {
            events.push(e);
            lastSeq = e.seq;
          }
        }
        if (events.length > EVENTS_SHOWN) events = events.slice(-EVENTS_SHOWN);
        if (!page.next_cursor || !items.length) break;
      }
      eventsError = null;
    } catch (e) {
      eventsError = e;
    }
  }

  // --- refreshing ---
  // One read at a time: a refresh asked for while one runs happens
  // right after it. stopped ends it when the page is left or the
  // schedule is gone.
  let timer = null;
  let busy = false;
  let again = false;
  let stopped = false;
  function next(ms) {
    clearTimeout(timer);
    timer = stopped ? null : setTimeout(refresh, ms);
  }
  function soon() {
    if (busy) again = true;
    else next(SOON);
  }
  async function refresh() {
    if (stopped) return;
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      s = await api.get(base);
      await Promise.all([readEvents(), readRuns()]);
      if (stopped) return;
      update();
      live.dataset.state = 'open';
      replace(live, h('span', {class: 'dot'}), `read ${fmtTime(new Date().toISOString())}`);
    } catch (e) {
      if (stopped || e.name === 'AbortError') return;
      live.dataset.state = 'error';
      if (e.status === 404) {
        stopped = true;
        replace(live, h('span', {class: 'error-inline', 'data-test': 'schedule-deleted'}, 'this schedule no longer exists'));
        return;
      }
      replace(live, h('span', {class: 'error-inline', title: `${e.method || 'GET'} ${e.path || base}`},
        `cannot read it again (${e.status ? `${e.status} ` : ''}${e.detail || e.message}); retrying`));
    } finally {
      busy = false;
    }
    next(again ? 0 : REFRESH);
    again = false;
  }

  replace(main, head, h('div', {class: 'grid2'}, summary, fires), runs, actions, record, docBox, editor);
  await Promise.all([readEvents(), readRuns()]);
  update();
  live.dataset.state = 'open';
  replace(live, h('span', {class: 'dot'}), `read ${fmtTime(new Date().toISOString())}`);
  next(REFRESH);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
