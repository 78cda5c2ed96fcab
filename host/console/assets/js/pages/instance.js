// One instance: what it is and waits on, its search attributes, its
// trace id (with a button that copies it), its data, its history as a
// timeline of steps and attempts with each attempt's input, output,
// failure and log lines, its parent and children, and the actions the
// token's role allows (cancel, retry, pause and resume, send the event a
// wait expects, reset to an earlier step, migrate to another version,
// export), and a banner while an operator has it paused, and its
// recorded attempts (docs/replay.md), which an admin may replay. It
// follows the instance's stream while it runs.

import * as api from '../api.js';
import {h, replace, timeEl, statusBadge, jsonBlock, links, shortHash, TERMINAL, throttle, fmtDuration, fmtTime, fmtBytes, download, pretty, compareTimes} from '../format.js';
import {can, session, errorBox, section, kv, notify, field, actionForm, parseJSONField, liveState, modal, slot, loading} from '../ui.js';
import * as timeline from '../timeline.js';
import {graphOf} from './workflow.js';
import {keyLabel} from './flow.js';
import {replayView} from './plugin.js';

// queryValue writes a search attribute's value as a query does: a
// string (a time too) as a JSON string, a number as JSON writes it, a
// bool.
function queryValue(v) {
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

// searchTable shows an instance's search attributes, by name, each value
// (each keyword) linked to the instances that have it; null for none.
export function searchTable(search) {
  const names = Object.keys(search || {}).sort();
  if (!names.length) return null;
  const find = (name, v) => h('a', {href: links.instances({q: `${name} = ${queryValue(v)}`}), title: 'the instances with this value',
    'data-test': 'search-value'}, typeof v === 'string' ? v : String(v));
  return h('table', {class: 'list search-attrs', 'data-test': 'instance-search'},
    h('thead', {}, h('tr', {}, h('th', {scope: 'col'}, 'name'), h('th', {scope: 'col'}, 'value'))),
    h('tbody', {}, names.map((name) => {
      const v = search[name];
      return h('tr', {'data-test': 'search-attribute', 'data-name': name},
        h('td', {}, h('code', {}, name)),
        h('td', {}, Array.isArray(v) ? v.map((kw, i) => [i ? ', ' : '', find(name, kw)]) : find(name, v)));
    })));
}

// traceURL is the host's trace viewer's link to the trace traceID
// (session.traceURL with the id in place of {trace_id}), or '' when the
// host names no viewer.
function traceURL(traceID) {
  return session.traceURL ? session.traceURL.replace('{trace_id}', () => encodeURIComponent(traceID)) : '';
}

// traceCell shows an instance's trace id (only a sampled trace's: the
// API answers no other) with a button that copies it, to look it up in
// the trace viewer of the collector the host sends its spans to; when
// the host names its viewer (tracing.viewer_url), the id is a link to
// the trace there, in a new tab. Where the page may not write the
// clipboard (served over plain HTTP from another machine, it is not a
// secure context), the button selects the id, for the operator to copy.
export function traceCell(traceID) {
  const code = h('code', {class: 'id', 'data-test': 'instance-trace-id'}, traceID);
  const url = traceURL(traceID);
  const shown = url ? h('a', {href: url, target: '_blank', rel: 'noopener', 'data-test': 'instance-trace-link',
    title: 'Open the trace in your trace viewer'}, code) : code;
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(traceID);
      notify('Trace id copied.');
    } catch {
      window.getSelection().selectAllChildren(code);
      notify('Trace id selected: copy it with Ctrl+C (⌘C).');
    }
  };
  return [shown, ' ', h('button', {type: 'button', class: 'small', 'data-test': 'copy-trace-id',
    title: 'Copy the trace id, to look it up in your trace viewer', onclick: copy}, 'copy')];
}

// planView shows a migration's plan: whether the instance can move, from
// which version to which, where it is in both, the problems (each with
// its step and path), the notes and the plugin pins that change.
export function planView(p) {
  const pins = Object.entries(p.plugins || {});
  return h('div', {class: 'plan', 'data-test': 'plan', 'data-can-move': String(Boolean(p.can_move))},
    h('p', {'data-test': 'plan-verdict'}, h('strong', {class: p.can_move ? 'st-completed' : 'st-failed'}, p.can_move ? 'It can move' : 'It cannot move'),
      ` from version ${p.from_version ?? '?'} to version ${p.to_version ?? '?'}.`),
    (p.at || []).length ? h('table', {class: 'list'}, h('thead', {}, h('tr', {}, ['step', 'kind', 'at (now)', 'at (after)'].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, p.at.map((a) => h('tr', {}, h('td', {}, h('code', {}, a.step)), h('td', {}, a.kind || ''),
        h('td', {}, h('code', {}, a.from || '')), h('td', {}, h('code', {}, a.to || '')))))) : null,
    (p.problems || []).length ? [h('h3', {}, 'Problems'), h('ul', {class: 'plain', 'data-test': 'plan-problems'}, p.problems.map((x) => h('li', {'data-test': 'plan-problem'},
      x.step ? [h('code', {}, x.step), x.path ? [' (', h('code', {}, x.path), ')'] : '', ': '] : x.path ? [h('code', {}, x.path), ': '] : '', x.message || '')))] : null,
    (p.notes || []).length ? [h('h3', {}, 'Notes'), h('ul', {class: 'plain', 'data-test': 'plan-notes'}, p.notes.map((n) => h('li', {}, n)))] : null,
    pins.length ? [h('h3', {}, 'Plugin pins that change'), h('ul', {class: 'plain', 'data-test': 'plan-pins'}, pins.map(([name, c]) =>
      h('li', {}, h('code', {}, name), ': ', c.from ? shortHash(c.from) : h('span', {class: 'muted'}, 'not pinned'), ' → ', shortHash(c.to))))] : null);
}

// TAPE_OUTCOMES colour how a recorded attempt ended as the statuses are.
const TAPE_OUTCOMES = {completed: 'st-completed', failed: 'st-failed', timed_out: 'st-failed', cancelled: 'st-cancelled'};

// tapesView shows an instance's recorded attempts (their summaries, as
// any reader sees them): step, attempt, activity and version, how it
// ended, the tape's size and whether its cap cut it, when it was
// recorded. With replay (an admin's), each has a Replay button that
// replays it against the version that recorded it and shows the report
// below its row.
export function tapesView(list, replay) {
  // A step's attempt recorded in more than one execution (a loop) says
  // which execution each tape is of.
  const seen = new Map();
  for (const t of list) {
    const k = `${t.key.step_path}#${t.key.attempt}`;
    seen.set(k, (seen.get(k) || 0) + 1);
  }
  const cols = ['step', 'attempt', 'activity', 'version', 'outcome', 'size', 'recorded'];
  if (replay) cols.push('');
  const rows = list.map((t) => {
    const k = t.key || {};
    const report = h('td', {colspan: cols.length});
    const reportRow = h('tr', {class: 'detail-row', 'data-test': 'tape-report', hidden: true}, report);
    let button = null;
    if (replay) {
      button = h('button', {type: 'button', class: 'small', 'data-test': 'tape-replay',
        title: 'Replay the attempt against the version that recorded it, answered from its tape'}, 'Replay');
      button.addEventListener('click', async () => {
        button.disabled = true;
        reportRow.hidden = false;
        replace(report, loading('Replaying…'));
        try {
          replace(report, replayView(await replay(k)));
          button.textContent = 'Replay again';
        } catch (e) {
          replace(report, errorBox(e));
        } finally {
          button.disabled = false;
        }
      });
    }
    return [h('tr', {'data-test': 'tape-row', 'data-step': k.step_path || '', 'data-attempt': String(k.attempt ?? ''), 'data-exec': k.exec || '',
      'data-outcome': t.outcome || ''},
    h('td', {}, h('code', {}, k.step_path || ''), seen.get(`${k.step_path}#${k.attempt}`) > 1 ? h('span', {class: 'muted'}, ` exec ${k.exec}`) : ''),
    h('td', {}, String(k.attempt ?? '')),
    h('td', {'data-test': 'tape-activity'}, t.plugin ? [h('a', {href: links.plugin(t.plugin)}, t.plugin), `.${t.activity || ''}`] : t.activity || ''),
    h('td', {}, shortHash(t.plugin_version)),
    h('td', {}, h('span', {class: `badge ${TAPE_OUTCOMES[t.outcome] || 'st-cancelled'}`, 'data-test': 'tape-outcome'}, String(t.outcome || '').replaceAll('_', ' ')),
      t.failure_code ? [' ', h('code', {}, t.failure_code)] : ''),
    h('td', {}, fmtBytes(t.size), t.truncated ? [' ', h('span', {class: 'badge st-pending', 'data-test': 'tape-truncated',
      title: 'the tape reached its size cap (tapes.max_bytes) and the recording stopped: a replay stops where it ends'}, 'truncated')] : ''),
    h('td', {}, timeEl(t.recorded_at)),
    replay ? h('td', {}, button) : null), reportRow];
  });
  return h('div', {class: 'table-wrap'}, h('table', {class: 'list tapes', 'data-test': 'tapes-table'},
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col'}, c)))), h('tbody', {}, rows)));
}

export async function render({main, params}) {
  const id = params[0];
  const base = `/v1/instances/${api.p(id)}`;
  // The recorded attempts are read once, with the instance (and once
  // more when the page sees it finish: its last tapes are written then).
  let tapesRead = api.tapes(id).then((items) => ({items}), (error) => ({error}));
  let inst;
  try {
    inst = await api.get(base);
  } catch (e) {
    replace(main, h('h1', {}, 'Instance ', h('code', {}, id)), errorBox(e, {'data-test': 'instance-error'}));
    return null;
  }
  let hist = [];
  let histError = null;
  let logs = null; // null: not (yet) read; else the lines
  let logsError = null;
  let selectedKey = '';
  // retrying is set by a retry or a reset while the instance is still as
  // the action's answer showed it: {at, status, updated} (when, and its
  // status and updated_at then). Its stream, which ends while it is
  // finished, is opened again until it has run since.
  let retrying = null;

  const live = h('span', {class: 'live', 'data-test': 'live-state', 'aria-live': 'polite'});
  const head = h('div', {class: 'page-head'});
  const summary = h('div');
  const pausedBox = h('div');
  const actions = h('div', {class: 'actions', 'data-test': 'instance-actions'});
  const waiting = h('div');
  const data = h('div', {class: 'grid2'});
  const tl = h('div');
  const detail = h('div', {'data-test': 'attempt-detail'});
  const histBox = h('div');
  const logBox = h('div');
  const raw = h('pre', {class: 'json', 'data-test': 'raw-json'});
  const children = h('div', {'data-test': 'children'});
  // Its data-state says what it shows: loading, none, shown or error.
  const tapesBox = h('div', {'data-test': 'tapes-box', 'data-state': 'loading'});
  const steps = h('details', {class: 'card', 'data-test': 'instance-graph'}, h('summary', {}, 'Steps, coloured by how far it got'));
  let def = null; // the instance's workflow version as the host parsed it, once read

  // adopt takes a view of the instance, unless it is older than the one
  // shown: an action's answer (the instance as it was), or a read sent
  // before a change that the stream has shown already, may arrive after
  // it, and must not undo it (nothing would redraw it again).
  function adopt(v) {
    if (compareTimes(v.updated_at, inst.updated_at) < 0) return false;
    inst = v;
    return true;
  }

  // --- drawing ---
  // The heading is drawn once and kept: the console moves the focus to
  // it, and a live update must not take the focus away.
  const title = h('h1', {}, 'Instance ', h('code', {class: 'id', 'data-test': 'instance-id'}, inst.id));
  const badge = h('span');
  replace(head, title, badge, live);
  function drawHead() {
    replace(badge, statusBadge(inst.status));
    drawPaused();
  }

  // drawPaused shows the instance's pause, while it has one: "Paused by
  // alice since …: the reason — 2 held events/timers" (docs/operations.md,
  // "Pause and resume"). Text nodes: a token's name or a reason is never
  // markup.
  function drawPaused() {
    const p = inst.paused;
    if (inst.hold) {
      // Held: created while its workflow was paused
      // (docs/operations.md#pause-a-workflow).
      replace(pausedBox, h('section', {class: 'paused-banner', role: 'status', 'data-test': 'held-banner'},
        h('p', {}, h('strong', {}, 'Held'), ' since ', timeEl(inst.hold.since), ': its workflow ',
          h('a', {href: links.workflow(inst.workflow)}, inst.workflow), ' is paused.'),
        h('p', {class: 'muted'}, 'It starts when the workflow is resumed, oldest first; until then it takes no concurrency slot. It can be cancelled.')));
      return;
    }
    if (!p) {
      replace(pausedBox, '');
      return;
    }
    const held = p.held || 0;
    replace(pausedBox, h('section', {class: 'paused-banner', role: 'status', 'data-test': 'paused-banner'},
      h('p', {}, h('strong', {}, 'Paused'), p.actor ? ` by ${p.actor}` : '', ' since ', timeEl(p.since),
        p.reason ? `: ${p.reason}` : '', ` — ${held} held event${held === 1 ? '' : 's'}/timer${held === 1 ? '' : 's'}`,
        p.batch ? h('span', {class: 'muted'}, ` (batch ${p.batch})`) : ''),
      h('p', {class: 'muted'}, inst.status === 'paused'
        ? 'It begins no step until resumed; what comes for it meanwhile is kept, and applied in order on resume.'
        : 'An attempt in flight runs to its end first; then it begins no step until resumed.')));
  }

  function drawSummary() {
    replace(summary, section(null, {}, kv([
      ['workflow', [h('a', {href: links.workflow(inst.workflow, inst.version), 'data-test': 'workflow-link'}, inst.workflow), ` version ${inst.version}`]],
      ['status', statusBadge(inst.status)],
      // Where it goes in the ready queue: 1 is served first. A host from
      // before priorities answers none.
      inst.priority ? ['priority', h('span', {'data-test': 'instance-priority', title: '1 is served first, 5 last'}, String(inst.priority))] : null,
      inst.hold ? ['held', h('span', {'data-test': 'instance-held'}, 'since ', timeEl(inst.hold.since), ': its workflow is paused')] : null,
      inst.fairness_key ? ['fairness key', [h('code', {'data-test': 'instance-fairness-key'}, inst.fairness_key),
        h('span', {class: 'muted'}, ` weight ${inst.fairness_weight || 1}`)]] : null,
      // Its key under its workflow's concurrency limit, linked to the
      // key's page, and since when it waits for a slot.
      inst.concurrency ? ['concurrency key', [
        h('a', {href: links.flowKey(inst.workflow, inst.concurrency.key), 'data-test': 'instance-concurrency-key'}, keyLabel(inst.concurrency.key)),
        inst.concurrency.waiting_since ? h('span', {'data-test': 'instance-slot-wait'}, ' — waiting for a slot since ', timeEl(inst.concurrency.waiting_since)) : null]] : null,
      ['created', timeEl(inst.created_at)],
      ['updated', timeEl(inst.updated_at)],
      inst.delete_after ? ['deleted after', timeEl(inst.delete_after)] : null,
      // Its trace, when the host traced it and sampled it.
      inst.trace_id ? ['trace', traceCell(inst.trace_id)] : null,
      inst.parent ? ['parent', [h('a', {href: links.instance(inst.parent.instance_id), 'data-test': 'parent-link'}, inst.parent.instance_id),
        inst.parent.step_id ? h('span', {class: 'muted'}, ` step ${inst.parent.step_id}`) : '']] : null,
      ['plugins', Object.keys(inst.plugins || {}).length ? h('ul', {class: 'inline'}, Object.entries(inst.plugins).map(([name, v]) =>
        h('li', {}, h('a', {href: links.plugin(name)}, name), ' ', shortHash(v)))) : h('span', {class: 'muted'}, 'none')],
      ['children', children],
      // What operators search it by (docs/operations.md#search).
      ['search attributes', searchTable(inst.search)],
    ])));
  }

  // Actions and the send-event forms are redrawn only when what they
  // depend on changed, so that a live update does not wipe a payload
  // being typed.
  let actionsSig = '';
  function drawActions() {
    const w = inst.waiting_on || {bookmarks: [], timers: []};
    const sig = JSON.stringify([inst.status, Boolean(inst.paused), Boolean(inst.hold), w.bookmarks, w.timers, can('operator')]);
    if (sig === actionsSig) return;
    actionsSig = sig;
    const list = [];
    if (can('operator') && !TERMINAL.has(inst.status)) {
      const reason = h('input', {type: 'text', name: 'reason', placeholder: 'cancelled through the API', 'data-test': 'cancel-reason'});
      list.push(actionForm({'data-test': 'cancel', danger: true}, field('Reason', reason), 'Cancel instance', async () => {
        if (!confirm(`Cancel instance ${inst.id}?`)) return null;
        const body = reason.value.trim() ? {reason: reason.value.trim()} : {};
        adopt(await api.post(`${base}/cancel`, body));
        notify('Cancellation requested; it applies when the instance next runs.');
        update();
        settle('3s');
        return null;
      }));
    }
    // Pause what may begin a step; resume what is paused, or has a pause
    // (an attempt of it still running).
    const paused = inst.status === 'paused' || Boolean(inst.paused);
    if (can('operator') && !paused && ['pending', 'running', 'suspended'].includes(inst.status)) {
      const pauseReason = h('input', {type: 'text', name: 'reason', placeholder: 'paused through the API', 'data-test': 'pause-reason'});
      list.push(actionForm({'data-test': 'pause'}, field('Reason', pauseReason), 'Pause', async () => {
        if (!confirm(`Pause instance ${inst.id}? It begins no step until resumed.`)) return null;
        const body = pauseReason.value.trim() ? {reason: pauseReason.value.trim()} : {};
        // 202 with the instance as it was: the pause applies when it
        // next runs, and its stream shows it.
        adopt(await api.post(`${base}/pause`, body));
        notify('Pause requested; it applies when the instance next runs.');
        update();
        settle();
        return null;
      }));
    }
    if (can('operator') && paused && !TERMINAL.has(inst.status)) {
      const resumeReason = h('input', {type: 'text', name: 'reason', placeholder: 'resumed through the API', 'data-test': 'resume-reason'});
      list.push(actionForm({'data-test': 'resume'}, field('Reason', resumeReason), 'Resume', async () => {
        const body = resumeReason.value.trim() ? {reason: resumeReason.value.trim()} : {};
        adopt(await api.post(`${base}/resume`, body));
        notify('Resume requested; it applies when the instance next runs.');
        update();
        settle();
        return null;
      }));
    }
    if (can('operator') && inst.status === 'failed') {
      const retryReason = h('input', {type: 'text', name: 'reason', placeholder: 'retried through the API', 'data-test': 'retry-reason'});
      list.push(actionForm({'data-test': 'retry'}, field('Reason', retryReason), 'Retry', async () => {
        const body = retryReason.value.trim() ? {reason: retryReason.value.trim()} : {};
        // 202 with the instance, still failed: the retry applies when it
        // next runs. Follow its stream again until it has left failed.
        adopt(await api.post(`${base}/retry`, body));
        notify('Retry requested; it applies when the instance next runs.');
        retrying = {at: Date.now(), status: inst.status, updated: inst.updated_at};
        update();
        follow();
        return null;
      }));
    }
    // Reset: what has begun a step; migrate: what is at rest.
    if (can('operator') && inst.status !== 'pending') {
      list.push(h('button', {type: 'button', 'data-test': 'reset-open', onclick: openReset}, 'Reset…'));
    }
    if (can('admin') && ['suspended', 'paused', 'failed'].includes(inst.status)) {
      list.push(h('button', {type: 'button', 'data-test': 'migrate-open', onclick: openMigrate}, 'Migrate…'));
    }
    list.push(h('button', {type: 'button', 'data-test': 'export', onclick: async (ev) => {
      ev.target.disabled = true;
      try {
        const blob = await api.request('GET', `${base}/state`, {blob: true});
        download(blob, `${inst.id.replace(/[^A-Za-z0-9._-]/g, '_')}.state.json`);
      } catch (e) {
        replace(actions.querySelector('.export-error') || actions.appendChild(h('div', {class: 'export-error'})), errorBox(e));
      } finally {
        ev.target.disabled = false;
      }
    }}, 'Export state'));
    replace(actions, section('Actions', {}, h('div', {class: 'action-row'}, list)));

    // What it waits on, with a form for each wait's event.
    const bms = w.bookmarks || [];
    const tms = w.timers || [];
    if (!bms.length && !tms.length) {
      replace(waiting, TERMINAL.has(inst.status) ? '' : section('Waiting on', {'data-test': 'waiting-on'}, h('p', {class: 'muted'},
        inst.status === 'paused' ? 'Nothing: it is paused, and begins its next step when resumed.'
          : inst.hold ? 'Its workflow\'s resume: it is held while the workflow is paused.' : 'Nothing: it has work to do, or is being run.')));
      return;
    }
    replace(waiting, section('Waiting on', {'data-test': 'waiting-on'},
      bms.map((b) => h('div', {class: 'bookmark', 'data-test': 'bookmark'},
        kv([['event', h('code', {}, b.event)], ['key', b.key ? h('code', {}, b.key) : h('span', {class: 'muted'}, '(empty)')], ['step', h('code', {}, b.step_path)]]),
        can('operator') ? sendEventForm(b) : null)),
      tms.length ? h('table', {class: 'list'}, h('thead', {}, h('tr', {}, h('th', {}, 'timer'), h('th', {}, 'kind'), h('th', {}, 'due'))),
        h('tbody', {}, tms.map((t) => h('tr', {'data-test': 'timer'}, h('td', {}, h('code', {}, t.id)), h('td', {}, t.kind || 'timer'),
          h('td', {}, timeEl(t.due), h('span', {class: 'muted'}, ` (in ${fmtDuration(new Date(t.due) - Date.now())})`)))))) : null));
  }

  // openReset asks for a reset (docs/operations.md, "Reset"): the reset
  // points, the top-level steps the instance began, each at its last
  // beginning (those whose variables were not recorded cannot be chosen,
  // and say why), and a reason.
  function openReset() {
    const m = modal(`Reset instance ${inst.id}`, {'data-test': 'reset-dialog', class: 'modal wide'});
    replace(m.body, slot(async () => {
      const res = await api.get(`${base}/reset-points`);
      const points = res.items || [];
      if (!points.length) return h('p', {class: 'muted', 'data-test': 'no-reset-points'}, 'It has begun no top-level step: there is nothing to reset to.');
      const reason = h('input', {type: 'text', name: 'reason', placeholder: 'reset through the API', 'data-test': 'reset-reason'});
      const choices = h('fieldset', {class: 'choices', 'data-test': 'reset-points'}, h('legend', {}, 'Run it again from'),
        points.map((pt) => h('label', {class: `choice${pt.vars ? '' : ' disabled'}`, 'data-test': 'reset-point', 'data-step': pt.step, 'data-vars': String(Boolean(pt.vars))},
          h('input', {type: 'radio', name: 'reset-step', value: pt.step, disabled: !pt.vars, 'data-test': 'reset-point-choice'}),
          h('code', {}, pt.step), h('span', {class: 'muted'}, ` step ${(pt.index ?? 0) + 1}, last began `, timeEl(pt.time)),
          pt.vars ? '' : h('span', {class: 'warn', 'data-test': 'reset-point-reason'}, ` — ${pt.reason || 'its variables were not recorded'}`))));
      return actionForm({'data-test': 'reset', danger: true}, [choices, field('Reason', reason),
        h('p', {class: 'muted small-text'}, 'What it waits on is cancelled, its error and output are forgotten, and the step begins anew with the variables it had then: '
          + 'a new execution, whose activities run again.')], 'Reset', async (form) => {
        const chosen = form.querySelector('input[name=reset-step]:checked');
        if (!chosen) throw new Error('Choose the step to run it again from.');
        const body = {step: chosen.value};
        if (reason.value.trim()) body.reason = reason.value.trim();
        // 202 with the instance as it was: the reset applies when it
        // next runs. Follow its stream again until it has run.
        adopt(await api.post(`${base}/reset`, body));
        m.close();
        notify(`Reset to ${body.step} requested; it applies when the instance next runs.`);
        retrying = {at: Date.now(), status: inst.status, updated: inst.updated_at};
        update();
        follow();
        return null;
      });
    }, {'data-test': 'reset-body'}));
  }

  // openMigrate asks for a migration (docs/operations.md, "Migrate"): a
  // workflow version (empty: the latest) and plugin versions, a dry run
  // that shows the plan (whether it can move, and why not; the notes; the
  // pins that change), then the move of that plan, with a retry or a
  // resume after it.
  function openMigrate() {
    const m = modal(`Migrate instance ${inst.id}`, {'data-test': 'migrate-dialog', class: 'modal wide'});
    const version = h('input', {type: 'number', name: 'version', min: 1, step: 1, placeholder: `latest (now version ${inst.version})`, 'data-test': 'migrate-version'});
    const pins = Object.keys(inst.plugins || {}).sort().map((name) => {
      const pinned = inst.plugins[name];
      const sel = h('select', {name: `pin-${name}`, 'data-test': 'migrate-pin', 'data-plugin': name},
        h('option', {value: ''}, `keep ${pinned.slice(0, 12)}`));
      const box = h('div', {}, field(`Plugin ${name}`, sel));
      api.get(`/v1/plugins/${api.p(name)}`).then((pl) => {
        const versions = pl.versions && pl.versions.length ? pl.versions : [pl];
        for (const v of versions) {
          if (v.version === pinned) continue;
          sel.append(h('option', {value: v.version}, `${v.version.slice(0, 12)}${v.version === pl.version ? ' (current)' : ''}, uploaded ${fmtTime(v.created_at)}`));
        }
      }, (e) => box.append(errorBox(e)));
      return {name, sel, box};
    });
    const plan = h('div', {'data-test': 'migrate-plan'});
    const move = h('div');
    // planned is the target of the dry run whose plan is shown: a move
    // sends that, and a change of the fields forgets it.
    let planned = null;
    const target = () => {
      const t = {};
      if (version.value.trim()) t.version = Number(version.value);
      const pl = {};
      for (const {name, sel} of pins) if (sel.value) pl[name] = sel.value;
      if (Object.keys(pl).length) t.plugins = pl;
      return t;
    };
    const forget = () => {
      if (!planned) return;
      planned = null;
      replace(plan, h('p', {class: 'muted'}, 'The target changed: run the dry run again.'));
      replace(move, '');
    };
    version.addEventListener('input', forget);
    for (const {sel} of pins) sel.addEventListener('change', forget);

    const dry = actionForm({'data-test': 'migrate-dry'}, [field('Workflow version', version, 'Empty: the workflow\'s latest version.'),
      pins.length ? pins.map((x) => x.box) : h('p', {class: 'muted small-text'}, 'It pins no plugin.'),
      h('p', {class: 'muted small-text'}, 'A plugin not named keeps its pin; one only the target calls gets its current version.')], 'Dry run', async () => {
      const t = target();
      let res;
      try {
        res = await api.post(`${base}/migrate`, {...t, dry_run: true});
      } catch (e) {
        if (e.status !== 409 || !e.problem || !e.problem.migration) throw e;
        res = e.problem.migration;
      }
      planned = t;
      replace(plan, planView(res));
      drawMove(res);
      return null;
    });

    function drawMove(p) {
      if (!p.can_move) {
        replace(move, '');
        return;
      }
      // A failed instance may be retried, a paused one resumed, with the move.
      const next = inst.status === 'failed' ? ['retry', 'retry it from its failed step'] : inst.status === 'paused' ? ['resume', 'resume it'] : null;
      const then = h('select', {name: 'then', 'data-test': 'migrate-then'}, h('option', {value: ''}, `nothing: it stays ${inst.status}`),
        next ? h('option', {value: next[0]}, next[1]) : null);
      const reason = h('input', {type: 'text', name: 'reason', placeholder: 'migrated through the API', 'data-test': 'migrate-reason'});
      replace(move, actionForm({'data-test': 'migrate-move', danger: true}, [next ? field('Then', then) : null, field('Reason', reason)],
        `Move to version ${p.to_version}`, async () => {
          const body = {...planned};
          if (then.value) body.then = then.value;
          if (reason.value.trim()) body.reason = reason.value.trim();
          let res;
          try {
            res = await api.post(`${base}/migrate`, body);
          } catch (e) {
            if (e.status !== 409 || !e.problem || !e.problem.migration) throw e;
            // It no longer fits: the plan says why.
            replace(plan, planView(e.problem.migration));
            replace(move, '');
            throw e;
          }
          m.close();
          notify(`Migration to version ${res.to_version} sent; it applies when the instance is at rest.`);
          retrying = {at: Date.now(), status: inst.status, updated: inst.updated_at};
          follow();
          settle();
          return null;
        }));
    }
    replace(m.body, dry, plan, move);
    version.focus();
  }

  function sendEventForm(b) {
    const payload = h('textarea', {rows: 4, name: 'payload', spellcheck: 'false', placeholder: '{"approved": true}', 'data-test': 'event-payload'});
    return actionForm({'data-test': 'send-event'}, field(`Payload of ${b.event} (JSON)`, payload), `Send ${b.event}`, async () => {
      const body = {name: b.event, key: b.key};
      const v = parseJSONField(payload.value, 'the payload');
      if (v !== undefined) body.payload = v;
      const res = await api.post('/v1/events', body);
      notify(`Event sent: resumed ${(res.resumed || []).length}, started ${(res.started || []).length}${res.queued ? ', queued' : ''}.`);
      settle('3s');
      return h('p', {class: 'muted', 'data-test': 'event-result'}, `event ${res.id}: resumed ${(res.resumed || []).join(', ') || 'none'}; started ${(res.started || []).join(', ') || 'none'}${res.queued ? '; queued' : ''}`, res.warning ? h('span', {class: 'warn'}, ` — ${res.warning}`) : '');
    });
  }

  function drawData() {
    replace(data,
      inst.error ? section('Error', {'data-test': 'instance-failure'}, kv([['code', h('code', {}, inst.error.code)], ['message', inst.error.message || ''],
        inst.error.step ? ['step', h('code', {}, inst.error.step)] : null]), inst.error.details !== undefined ? jsonBlock(inst.error.details) : null) : null,
      section('Input', {}, jsonBlock(inst.input, {'data-test': 'instance-input'})),
      section('Output', {}, jsonBlock(inst.output, {'data-test': 'instance-output'})),
      section('Variables', {}, jsonBlock(inst.vars, {'data-test': 'instance-vars'})));
    raw.textContent = pretty(inst);
  }

  function drawTimeline() {
    if (histError) {
      replace(tl, section('Timeline', {}, errorBox(histError)));
      return;
    }
    const model = timeline.buildModel(hist, inst);
    replace(tl, section('Timeline', {'data-test': 'timeline-section'},
      timeline.render(model, {selected: selectedKey, onSelect: (a) => {
        selectedKey = a.key;
        drawTimeline();
      }}), detail));
    const a = model.attempts.get(selectedKey);
    replace(detail, a ? attemptDetail(a) : h('p', {class: 'muted'}, 'Choose an attempt to see its input, output, failure and log lines.'));
    drawChildren();
  }

  function logLines(lines) {
    if (!lines.length) return h('p', {class: 'muted'}, 'No log lines.');
    return h('div', {class: 'table-wrap'}, h('table', {class: 'list logs', 'data-test': 'log-lines'},
      h('thead', {}, h('tr', {}, ['time', 'step', 'attempt', 'node', 'level', 'source', 'message'].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, lines.map((l) => h('tr', {class: `lv-${String(l.level || '').toLowerCase()}`},
        h('td', {}, l.time ? timeEl(l.time) : ''), h('td', {}, h('code', {}, l.step_path || '')), h('td', {}, l.attempt ?? ''),
        h('td', {}, l.node || ''), h('td', {}, l.level || ''), h('td', {}, l.source || ''),
        h('td', {class: 'msg'}, l.message ?? (typeof l === 'string' ? l : pretty(l))))))));
  }

  // historyLogs reads the logs of an attempt's end in the history
  // ({time, level, source, message} each), for when the logs endpoint
  // could not be read: as its lines, with the attempt's step, number and
  // node.
  function historyLogs(a) {
    const raw = a.historyLogs;
    if (!Array.isArray(raw)) return [];
    return raw.map((l) => ({...l, step_path: a.path, attempt: a.n, node: a.endNode || a.node}));
  }

  function attemptDetail(a) {
    // The logs endpoint names the history entry that keeps each line
    // (seq): the attempt's end, or its refused late completion. Matching
    // by seq keeps apart the attempts of the same number before and
    // after a retry.
    const fromEndpoint = logs ? logs.filter((l) => a.seqs.has(l.seq)) : [];
    const lines = fromEndpoint.length ? fromEndpoint : historyLogs(a);
    const notRecorded = (what, omitted) => h('p', {class: 'muted', 'data-test': omitted !== undefined ? 'omitted' : null}, omitted !== undefined
      ? `${what} was ${fmtBytes(omitted)} of JSON, more than the host records (history.attempt_data_limit).`
      : `${what} is not in this instance's history (the host did not record it, or it had none).`);
    const dropped = a.logsDropped;
    return h('div', {class: 'attempt', 'data-test': 'attempt', 'data-attempt': a.attr, 'data-round': a.round || null},
      h('h3', {}, `${a.path} attempt ${a.n}`, a.round ? h('span', {class: 'muted'}, ` (after retry ${a.round})`) : ''),
      kv([
        ['activity', a.plugin ? [h('a', {href: links.plugin(a.plugin)}, a.plugin), `.${a.activity}`] : a.activity],
        ['node', h('span', {'data-test': 'attempt-node'}, a.node || '—')],
        a.endNode && a.endNode !== a.node ? ['ended on', a.endNode] : null,
        ['started', timeEl(new Date(a.start).toISOString())],
        ['ended', a.running ? h('span', {class: 'muted'}, 'running') : timeEl(new Date(a.end).toISOString())],
        ['took', fmtDuration(a.end - a.start)],
        ['outcome', [h('span', {class: `badge st-${a.outcome === 'completed' ? 'completed' : a.outcome === 'failed' ? 'failed' : 'running'}`}, a.outcome || 'running'),
          a.heartbeatTimeout ? [' ', h('span', {class: 'badge st-failed hb-timeout', 'data-test': 'heartbeat-timeout'}, 'heartbeat timeout')] : null]],
      ]),
      a.heartbeatTimeout ? h('p', {class: 'warn'}, 'The attempt stopped reporting heartbeats for longer than its step\'s heartbeat_timeout, so the host gave up on it.') : null,
      h('h4', {}, 'Input'), a.hasInput ? jsonBlock(a.input) : notRecorded('The input', a.inputOmitted),
      a.outcome === 'completed' ? [h('h4', {}, 'Output'), a.hasOutput ? jsonBlock(a.output) : notRecorded('The output', a.outputOmitted)] : null,
      a.failure ? [h('h4', {}, 'Failure'), kv([['code', h('code', {}, a.failure.code || '')], ['kind', a.failure.kind || ''], ['message', a.failure.message || '']]),
        a.failure.details !== undefined ? jsonBlock(a.failure.details) : null] : null,
      'lastHeartbeat' in a ? [h('h4', {}, 'Last heartbeat'),
        // Heartbeats are kept in memory, not written to the history, so
        // only the last details (not when they came) are recorded.
        h('p', {class: 'muted small-text'}, 'The details the attempt last reported with a heartbeat, recorded when it ended; the next attempt resumes from them. '
          + 'The host keeps no history entry per heartbeat, nor its time.'),
        jsonBlock(a.lastHeartbeat, {'data-test': 'last-heartbeat'})] : null,
      a.requests ? [h('h4', {}, 'Outbound requests'), jsonBlock(a.requests)] : null,
      a.abandoned ? [h('h4', {}, 'Abandoned'), jsonBlock(a.abandoned)] : null,
      a.late ? [h('h4', {}, 'Late completion refused'), jsonBlock(a.late)] : null,
      h('h4', {}, 'Log lines'),
      dropped ? h('p', {class: 'warn', 'data-test': 'logs-dropped'}, `The plugin runtime dropped ${dropped.records || 0} line(s), ${fmtBytes(dropped.bytes || 0)}, `
        + `past its ${dropped.limit === 'bytes' ? 'plugins.max_log_bytes' : dropped.limit === 'records' ? 'plugins.max_log_records' : 'per-call'} limit.`) : null,
      logsError && !lines.length ? errorBox(logsError) : logLines(lines));
  }

  // Children: each child_started entry names the child's id (instance)
  // and workflow. The statuses of the first CHILD_STATUSES are read once
  // each and again when the history grows; a child since deleted says so.
  const CHILD_STATUSES = 50;
  const childStatus = new Map(); // id -> status, 'deleted', or an Error
  let childSig = '';
  function drawChildren() {
    const started = hist.filter((e) => e.type === 'child_started');
    if (!started.length) {
      replace(children, h('span', {class: 'muted'}, 'none'));
      return;
    }
    const draw = () => replace(children, h('ul', {class: 'plain', 'data-test': 'children-list'}, started.map((e) => {
      const d = e.data || {};
      const st = childStatus.get(d.instance);
      return h('li', {},
        d.instance ? h('a', {href: links.instance(d.instance), 'data-test': 'child-link', 'data-id': d.instance}, d.instance)
          : h('span', {class: 'muted'}, '(id not recorded by the host that started it)'),
        ' ', st === undefined ? '' : st instanceof Error ? h('span', {class: 'error-inline'}, st.message)
          : st === 'deleted' ? h('span', {class: 'muted'}, 'deleted') : statusBadge(st),
        h('span', {class: 'muted'}, ` ${d.workflow || ''} at ${e.step_path || '?'}`));
    })));
    draw();
    const ids = [...new Set(started.map((e) => (e.data || {}).instance).filter(Boolean))].slice(0, CHILD_STATUSES)
      .filter((cid) => !TERMINAL.has(childStatus.get(cid)) && childStatus.get(cid) !== 'deleted');
    const sig = `${hist.length}`;
    if (sig === childSig) return;
    childSig = sig;
    Promise.all(ids.map((cid) => api.get(`/v1/instances/${api.p(cid)}`).then((c) => childStatus.set(cid, c.status),
      (e) => childStatus.set(cid, e.status === 404 ? 'deleted' : e)))).then(draw);
  }

  function drawHistory() {
    if (histError) {
      replace(histBox, '');
      return;
    }
    replace(histBox, h('details', {class: 'card'}, h('summary', {}, `History (${hist.length} events)`),
      h('div', {class: 'table-wrap'}, h('table', {class: 'list history', 'data-test': 'history'},
        h('thead', {}, h('tr', {}, ['seq', 'time', 'type', 'step', 'attempt', 'node', 'data'].map((c) => h('th', {scope: 'col'}, c)))),
        h('tbody', {}, hist.map((e) => h('tr', {'data-type': e.type},
          h('td', {}, e.seq), h('td', {}, timeEl(e.time)), h('td', {}, h('code', {}, e.type)), h('td', {}, h('code', {}, e.step_path || '')),
          h('td', {}, e.attempt || ''), h('td', {}, e.node || ''),
          h('td', {}, byActor(e), e.data ? h('code', {class: 'data'}, JSON.stringify(e.data)) : ''))))))));
  }

  // byActor says who asked for an operator's action, and why: "by alice:
  // the reason" (docs/operations.md, "Audit"); null for an entry without
  // an actor. Text nodes, so a token's name or a reason is never markup.
  function byActor(e) {
    if (!e.actor) return null;
    const reason = e.data && typeof e.data.reason === 'string' ? e.data.reason : '';
    return h('div', {class: 'actor', 'data-test': 'history-actor'}, `by ${e.actor}${reason ? `: ${reason}` : ''}`);
  }

  // drawSteps draws the graph of the instance's workflow version with each
  // step coloured by what the history says of it.
  function drawSteps() {
    if (!steps.open) return;
    if (def === null) {
      def = false;
      api.get(`/v1/workflows/${api.p(inst.workflow)}`, {version: inst.version}).then((wf) => {
        def = wf;
        drawSteps();
      }, (e) => {
        def = null;
        replace(steps, steps.firstChild, errorBox(e));
      });
      return;
    }
    if (!def) return;
    const status = new Map();
    for (const e of hist) {
      const id = e.data && e.data.step;
      if (!id) continue;
      if (e.type === 'step_started') status.set(id, 'running');
      else if (e.type === 'step_completed') status.set(id, 'completed');
      else if (e.type === 'step_failed') status.set(id, 'failed');
    }
    replace(steps, steps.firstChild, graphOf(def, {status}));
  }
  steps.addEventListener('toggle', drawSteps);

  function drawLogs() {
    replace(logBox, h('details', {class: 'card', 'data-test': 'logs'}, h('summary', {}, logs ? `Log lines (${logs.length})`
      : logsError ? h('span', {}, 'Log lines ', h('span', {class: 'error-inline'}, `(unavailable: ${logsError.status ? `${logsError.status} ` : ''}${logsError.detail})`)) : 'Log lines'),
      logsError ? errorBox(logsError, {'data-test': 'logs-error'}) : logs ? logLines(logs) : 'loading…'));
  }

  // drawTapes shows the recorded attempts, once read: nothing when it
  // has none (or the host keeps none: an older host answers 404).
  let tapesAgain = !TERMINAL.has(inst.status);
  async function drawTapes() {
    const read = tapesRead;
    const {items, error} = await read;
    if (read !== tapesRead) return; // a newer read draws
    if (error && error.status !== 404) {
      tapesBox.dataset.state = 'error';
      replace(tapesBox, section('Recorded attempts', {'data-test': 'tapes'}, errorBox(error)));
      return;
    }
    if (error || !items.length) {
      tapesBox.dataset.state = 'none';
      replace(tapesBox, '');
      return;
    }
    tapesBox.dataset.state = 'shown';
    replace(tapesBox, section('Recorded attempts', {'data-test': 'tapes'},
      h('p', {class: 'muted'}, 'What the host answered each of these attempts, kept by the workflow\'s record policy. ',
        can('admin') ? 'A replay runs the attempt again from its tape, on the version that recorded it: no request leaves the host.'
          : 'An admin may replay them.'),
      tapesView(items, can('admin') ? (key) => api.replayTape(key) : null)));
  }

  // settle re-reads the instance after an action, waiting a little for
  // it to take effect (a cancel or an event applies when the instance
  // next runs), so the page does not depend on the stream to show it.
  async function settle(wait) {
    try {
      adopt(await api.get(base, wait ? {wait} : {}));
      update();
      await reload();
    } catch (e) {
      replace(actions.appendChild(h('div')), errorBox(e));
    }
  }

  function update() {
    drawHead();
    drawSummary();
    drawActions();
    drawData();
    drawTimeline();
  }

  async function readLogs() {
    const lines = [];
    let after = '';
    for (let i = 0; i < 20; i++) {
      const page = await api.get(`${base}/logs`, {limit: 1000, after});
      lines.push(...(page.items || []));
      if (!page.next_cursor) break;
      after = page.next_cursor;
    }
    return lines;
  }

  async function reload() {
    await Promise.all([
      api.history(inst.id).then((x) => {
        hist = x;
        histError = null;
      }, (e) => {
        histError = e;
      }),
      readLogs().then((x) => {
        logs = x;
        logsError = null;
      }, (e) => {
        logsError = e;
      }),
    ]);
    drawTimeline();
    drawHistory();
    drawLogs();
    drawSteps();
  }

  replace(main, head, pausedBox, summary, actions, waiting, tl, tapesBox, logBox, steps, data, histBox,
    h('details', {class: 'card'}, h('summary', {}, 'Raw JSON'), raw));
  update();
  drawTapes();
  await reload();

  // Follow the instance while it can change. Its stream sends the
  // instance at once and after each change, and ends once it has
  // finished (nothing to reconnect for then) or after "deleted". A
  // stream that ends otherwise (a shutdown, a network error) is opened
  // again. After a retry the instance stays failed until it next runs,
  // and its stream ends at once while it is: it is opened again, for up
  // to RETRY_FOLLOW, until the instance has run again (left failed, or
  // failed anew with another updated_at).
  const RETRY_FOLLOW = 60000;
  const refresh = throttle(reload, 1000);
  let sub = null;
  let gone = false;
  const showState = liveState(live);
  function follow() {
    if (sub || gone) return;
    sub = api.stream(`${base}/stream`, {
      onEvent: (type, v) => {
        if (type === 'deleted') {
          gone = true;
          replace(live, h('span', {class: 'error-inline', 'data-test': 'instance-deleted'}, 'this instance was deleted'));
          notify(`Instance ${inst.id} was deleted.`);
          return;
        }
        if (type !== 'instance' || !v || typeof v !== 'object') return;
        if (!adopt(v)) return;
        if (tapesAgain && TERMINAL.has(v.status)) {
          tapesAgain = false;
          tapesRead = api.tapes(id).then((items) => ({items}), (error) => ({error}));
          drawTapes();
        }
        // It ran since the retry or the reset (and may have failed again).
        if (retrying && (v.status !== retrying.status || v.updated_at !== retrying.updated)) retrying = null;
        update();
        refresh();
      },
      onState: (state, err, delay) => {
        if (!gone) showState(state, err, delay);
      },
      reconnect: (err) => {
        if (gone) return false;
        if (err && err.status === 404) {
          gone = true;
          replace(live, h('span', {class: 'error-inline', 'data-test': 'instance-deleted'}, 'this instance no longer exists'));
          return false;
        }
        if (retrying && Date.now() - retrying.at > RETRY_FOLLOW) retrying = null;
        if (TERMINAL.has(inst.status) && !retrying) {
          replace(live, h('span', {class: 'muted', 'data-test': 'finished'}, `finished ${fmtTime(inst.updated_at)}`));
          sub = null;
          refresh();
          return false;
        }
        return true;
      },
    });
  }
  follow();
  return () => {
    gone = true;
    if (sub) sub.close();
    refresh.cancel();
  };
}
