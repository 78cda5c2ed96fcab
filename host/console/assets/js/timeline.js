// The timeline of an instance: its history turned into rows, one per
// step path, with the step's span, each activity attempt as a bar on a
// shared time axis, the waits between attempts (retry backoff), timers,
// event waits and children as spans, and the events worth a glance
// (abandoned attempts, refused late completions, refused events) as
// marks; an operator's pauses are spans of the time axis, with a mark
// where each began and ended, and the inputs held meanwhile marks; a
// reset (which begins a new round of attempts, as a retry does) and a
// migration, done or refused, are marks of the instance.
//
// Bars are HTML buttons positioned with el.style (allowed by the CSP,
// unlike style attributes), so they are focusable, take Enter, and the
// layout follows the page's width.

import {h, fmtDuration, fmtTime, TERMINAL} from './format.js';

const ms = (iso) => (iso ? new Date(iso).getTime() : NaN);

// HELD names what a paused instance held (event_held's data.event).
const HELD = {timer_fired: 'a timer\'s fire', stimulus_delivered: 'an event', child_completed: 'a child\'s end', child_failed: 'a child\'s end'};

// byWhom says who asked for an operator's action, and why: "by alice:
// carrier outage" ('' for an entry without an actor).
function byWhom(e) {
  const reason = e.data && typeof e.data.reason === 'string' ? e.data.reason : '';
  return e.actor ? `by ${e.actor}${reason ? `: ${reason}` : ''}` : reason;
}

// timeoutLike tells an attempt that failed by a timeout (start-to-close,
// schedule-to-close or a heartbeat) from other failures.
function timeoutLike(f) {
  const s = `${f.code || ''} ${f.kind || ''}`.toLowerCase();
  return s.includes('timeout') || s.includes('heartbeat');
}

// buildModel reads the history (oldest first) into rows and attempts.
// now closes what is still open in an unfinished instance.
//
// An attempt is known by its step path and number, "steps[0]#2" (attr,
// the bar's data-attempt). A retry of the failed instance
// (instance_retried) starts the failed activity again from attempt 1, so
// each retry begins a new round: an attempt's key, which the model's
// attempts map and the selection go by, is attr in round 0 and
// "attr@round" after, and its bar carries data-round.
export function buildModel(history, instance, now = Date.now()) {
  const rows = new Map();
  const attempts = new Map();
  const instanceMarks = [];
  const pauses = []; // {start, end, open, label}: the time axis's spans
  const row = (path) => {
    if (!rows.has(path)) rows.set(path, {path, step: '', kind: '', start: NaN, end: NaN, outcome: '', attempts: [], spans: [], marks: []});
    return rows.get(path);
  };
  const open = new Map(); // spans awaiting their end, by kind and path
  let t0 = ms(instance && instance.created_at);
  let tEnd = NaN;
  let round = 0;
  for (const e of history) {
    const t = ms(e.time);
    const d = e.data || {};
    if (!(t0 <= t)) t0 = Number.isNaN(t0) ? t : Math.min(t0, t);
    const path = e.step_path || '';
    const attr = `${path}#${e.attempt || 0}`;
    const key = round ? `${attr}@${round}` : attr;
    switch (e.type) {
      case 'instance_created': case 'instance_imported': case 'instance_started':
        instanceMarks.push({t, kind: e.type, label: e.type.replace('instance_', '')});
        break;
      case 'instance_completed': case 'instance_failed': case 'instance_cancelled':
        tEnd = t;
        instanceMarks.push({t, kind: e.type, label: e.type.replace('instance_', ''), detail: d.message || d.reason || d.code || ''});
        break;
      case 'instance_paused': {
        const why = byWhom(e);
        instanceMarks.push({t, kind: e.type, label: 'paused', detail: why});
        pauses.push({start: t, end: NaN, open: true, label: `paused${why ? ` ${why}` : ''}`});
        break;
      }
      case 'instance_resumed': {
        const p = pauses.find((x) => x.open);
        if (p) {
          p.end = t;
          p.open = false;
        }
        const held = typeof d.held === 'number' ? ` (${d.held} held)` : '';
        instanceMarks.push({t, kind: e.type, label: 'resumed', detail: `${byWhom(e)}${held}`.trim()});
        break;
      }
      case 'event_held':
        (path ? row(path).marks : instanceMarks).push({t, kind: 'held', label: `held ${HELD[d.event] || 'an input'}`,
          detail: d.token ? `token ${d.token}, applied on resume` : 'applied on resume'});
        break;
      case 'instance_retried':
        tEnd = NaN;
        round++;
        instanceMarks.push({t, kind: e.type, label: 'retried', detail: `${d.reason || ''}${d.code ? ` (after ${d.code}${d.step ? ` at ${d.step}` : ''})` : ''}`.trim()});
        break;
      case 'instance_reset':
        // A new execution from the step: its attempts count from 1 again.
        tEnd = NaN;
        round++;
        instanceMarks.push({t, kind: e.type, label: `reset to ${d.step || '?'}`, detail: `${byWhom(e)}${d.from_status ? ` (was ${d.from_status})` : ''}`.trim()});
        break;
      case 'instance_migrated':
        instanceMarks.push({t, kind: e.type, label: `migrated from version ${d.from_version ?? '?'} to ${d.to_version ?? '?'}`, detail: byWhom(e)});
        break;
      case 'migration_refused':
        instanceMarks.push({t, kind: 'refused', label: 'migration refused',
          detail: (Array.isArray(d.problems) ? d.problems : []).map((x) => (x && x.message) || '').filter(Boolean).join('; ')});
        break;
      case 'step_started': {
        const r = row(path);
        r.step = d.step || r.step;
        r.kind = d.kind || r.kind;
        if (Number.isNaN(r.start)) r.start = t;
        if (r.outcome) {
          // started again, by a retry or a loop: open until it ends again
          r.end = NaN;
          r.outcome = '';
          delete r.code;
        }
        break;
      }
      case 'step_completed': case 'step_failed': {
        const r = row(path);
        r.step = d.step || r.step;
        r.end = t;
        r.outcome = e.type === 'step_completed' ? 'completed' : 'failed';
        if (d.code) r.code = d.code;
        break;
      }
      case 'activity_scheduled': {
        const r = row(path);
        const wait = open.get(`retry ${path}`);
        if (wait) {
          wait.end = Math.min(wait.end, t);
          wait.open = false;
          open.delete(`retry ${path}`);
        }
        if (!r.kind) r.kind = 'activity';
        const a = {key, attr, round, path, n: e.attempt || 0, start: t, end: NaN, node: e.node || '', plugin: d.plugin || '', activity: d.activity || '',
          input: d.input, hasInput: 'input' in d, inputOmitted: d.input_omitted_bytes, outcome: '', events: [e], seqs: new Set([e.seq])};
        if (Number.isNaN(r.start)) r.start = t;
        r.attempts.push(a);
        attempts.set(key, a);
        break;
      }
      case 'activity_completed': case 'activity_failed': {
        const a = attempts.get(key);
        if (!a) break;
        a.events.push(e);
        a.seqs.add(e.seq);
        a.end = t;
        a.endNode = e.node || '';
        a.outcome = e.type === 'activity_completed' ? 'completed' : 'failed';
        if ('output' in d) {
          a.output = d.output;
          a.hasOutput = true;
        }
        if (d.output_omitted_bytes !== undefined) a.outputOmitted = d.output_omitted_bytes;
        if (d.logs) a.historyLogs = d.logs;
        if (d.logs_dropped) a.logsDropped = d.logs_dropped;
        if (d.requests) a.requests = d.requests;
        if (a.outcome === 'failed') {
          a.failure = {code: d.code, kind: d.kind, message: d.message, details: d.details};
          a.timeout = timeoutLike(d);
          a.heartbeatTimeout = d.kind === 'heartbeat_timeout';
        }
        // The host records no entry per heartbeat (they cost no I/O):
        // the last details an attempt reported come with its end.
        if ('last_heartbeat' in d) a.lastHeartbeat = d.last_heartbeat;
        break;
      }
      case 'retry_scheduled': {
        // The wait runs to its due time unless the next attempt starts
        // first or the instance ends first (a cancel during the backoff):
        // it is drawn to whichever comes first.
        const due = ms(d.due);
        const s = {kind: 'retry', start: t, end: Number.isNaN(due) ? t : due, label: `retry in ${d.delay || fmtDuration(due - t)}`, open: true, due: true};
        row(path).spans.push(s);
        open.set(`retry ${path}`, s);
        break;
      }
      case 'attempt_abandoned': {
        const a = attempts.get(key);
        row(path).marks.push({t, kind: 'abandoned', label: 'attempt abandoned', detail: d.reason || ''});
        if (a) {
          a.events.push(e);
          a.abandoned = d;
          if ('last_heartbeat' in d) a.lastHeartbeat = d.last_heartbeat;
          if (Number.isNaN(a.end)) {
            a.end = t;
            a.outcome = 'abandoned';
          }
        }
        break;
      }
      case 'late_completion_refused': {
        const a = attempts.get(key);
        row(path).marks.push({t, kind: 'late', label: `late ${d.outcome || 'completion'} refused`, detail: `${d.node || ''} ${d.reason || ''}`.trim()});
        if (a) {
          a.events.push(e);
          a.seqs.add(e.seq);
          a.late = d;
          if (!a.historyLogs && d.logs) a.historyLogs = d.logs;
          if (!a.logsDropped && d.logs_dropped) a.logsDropped = d.logs_dropped;
        }
        break;
      }
      case 'timer_armed': {
        const s = {kind: 'timer', start: t, end: ms(d.due), label: `timer due ${fmtTime(d.due)}`, open: true};
        row(path).spans.push(s);
        open.set(`timer ${path}`, s);
        break;
      }
      case 'timer_fired': {
        const s = open.get(`timer ${path}`);
        if (s) {
          s.end = t;
          s.open = false;
        }
        break;
      }
      case 'bookmark_created': {
        const r = row(path);
        if (!r.kind) r.kind = 'wait';
        const s = {kind: 'wait', start: t, end: NaN, label: `waits for ${d.event || 'an event'}${d.key ? ` key ${d.key}` : ''}`, open: true};
        r.spans.push(s);
        open.set(`wait ${path}`, s);
        break;
      }
      case 'bookmark_resumed': case 'wait_timed_out': {
        const s = open.get(`wait ${path}`);
        if (s) {
          s.end = t;
          s.open = false;
          s.outcome = e.type === 'wait_timed_out' ? 'timed out' : 'resumed';
        }
        if (e.type === 'wait_timed_out') row(path).marks.push({t, kind: 'timeout', label: 'wait timed out'});
        break;
      }
      case 'child_started': {
        const s = {kind: 'child', start: t, end: NaN, label: `child ${d.workflow || ''}${d.instance ? ` ${d.instance}` : ''}`, workflow: d.workflow, child: d.instance || '', open: true};
        row(path).spans.push(s);
        open.set(`child ${path}`, s);
        break;
      }
      case 'child_completed': {
        const s = open.get(`child ${path}`);
        if (s) {
          s.end = t;
          s.open = false;
        }
        break;
      }
      case 'branch_taken':
        row(path).marks.push({t, kind: 'branch', label: `took ${d.branch}`});
        break;
      case 'event_refused': case 'event_ignored':
        (path ? row(path).marks : instanceMarks).push({t, kind: 'refused', label: e.type.replace('_', ' '), detail: `${d.event || ''} ${d.reason || ''}`.trim()});
        break;
      default:
        break;
    }
  }
  // What is still open ends now in a live instance, at its last update
  // in a finished one.
  const finished = instance && TERMINAL.has(instance.status);
  const last = Math.max(...history.map((e) => ms(e.time)).filter((x) => !Number.isNaN(x)), t0 || 0);
  const close = finished ? (Number.isNaN(tEnd) ? Math.max(last, ms(instance.updated_at) || 0) : tEnd) : Math.max(now, last);
  for (const r of rows.values()) {
    if (Number.isNaN(r.end)) {
      r.end = close;
      r.running = !finished;
    }
    for (const a of r.attempts) {
      if (Number.isNaN(a.end)) {
        a.end = close;
        a.running = !finished;
        if (finished) a.outcome = a.outcome || 'unknown';
      }
    }
    for (const s of r.spans) {
      // A retry wait of a live instance is drawn to its due time, what
      // the engine plans; in a finished one it ended with the instance.
      if (s.due && s.open && !finished) continue;
      if (Number.isNaN(s.end) || (s.open && s.end > close)) {
        if (s.open && s.due) s.outcome = `ended by the instance's ${instance.status === 'cancelled' ? 'cancel' : 'end'}`;
        s.end = s.open ? close : s.end;
      }
    }
  }
  // A pause not resumed lasts until now, or until the instance ended.
  for (const p of pauses) {
    if (Number.isNaN(p.end)) p.end = close;
  }
  const t1 = Math.max(close, ...[...rows.values()].flatMap((r) => r.spans.map((s) => s.end)).filter((x) => !Number.isNaN(x)));
  if (Number.isNaN(t0)) t0 = close;
  return {rows: [...rows.values()], attempts, instanceMarks, pauses, t0, t1: Math.max(t1, t0 + 1), finished};
}

const TICKS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 10e3, 15e3, 30e3, 60e3, 120e3, 300e3, 600e3, 900e3, 1800e3,
  3600e3, 7200e3, 10800e3, 21600e3, 43200e3, 86400e3, 172800e3, 604800e3];

// render draws the model; onSelect(attempt) is called when a bar is
// chosen. The returned element is the whole timeline.
export function render(model, {onSelect, selected} = {}) {
  const {t0, t1} = model;
  const span = t1 - t0;
  const pct = (t) => `${Math.max(0, Math.min(100, ((t - t0) / span) * 100))}%`;
  const place = (el, a, b) => {
    el.style.left = pct(a);
    el.style.width = `${Math.max(0, Math.min(100, ((Math.max(b, a) - a) / span) * 100))}%`;
    return el;
  };
  // Fewer ticks on a narrow screen, so their labels do not overlap.
  const most = typeof matchMedia === 'function' && matchMedia('(max-width: 700px)').matches ? 3 : 6;
  const step = TICKS.find((s) => span / s <= most) || TICKS[TICKS.length - 1];
  const ticks = [];
  for (let x = 0; x <= span; x += step) {
    // A tick near the right edge has its label on its left, so the
    // label does not stick out of the page on a narrow screen.
    const tick = h('span', {class: `tl-tick${x / span > 0.8 ? ' tl-tick-end' : ''}`}, `+${fmtDuration(x)}`);
    tick.style.left = pct(t0 + x);
    ticks.push(tick);
  }
  const mark = (m) => {
    const el = h('span', {class: `tl-mark mk-${m.kind}`, title: `${m.label}${m.detail ? `: ${m.detail}` : ''} at ${fmtTime(new Date(m.t).toISOString())}`,
      'data-mark': m.kind, role: 'img', 'aria-label': m.label});
    el.style.left = pct(m.t);
    return el;
  };
  const rows = model.rows.map((r) => h('div', {class: 'tl-row', 'data-step-path': r.path},
    h('div', {class: 'tl-label', title: r.path}, h('span', {class: 'tl-step'}, r.step || r.path), ' ', h('span', {class: 'muted tl-path'}, r.path),
      r.kind ? h('span', {class: 'muted tl-kind'}, ` ${r.kind}`) : null),
    h('div', {class: 'tl-track'},
      Number.isNaN(r.start) ? null : place(h('span', {class: `tl-stepbar ${r.outcome || (r.running ? 'running' : '')}`, title: `step ${r.step || r.path}: ${r.outcome || 'running'}`}), r.start, r.end),
      r.spans.map((s) => place(h('span', {class: `tl-span sp-${s.kind}`, title: `${s.label}${s.outcome ? ` (${s.outcome})` : ''}`, 'data-span': s.kind}), s.start, s.end)),
      r.attempts.map((a) => {
        const b = place(h('button', {type: 'button', class: `tl-bar ${a.outcome || 'running'}${a.timeout ? ' timeout' : ''}${a.abandoned ? ' abandoned' : ''}${a.late ? ' late' : ''}`,
          'data-attempt': a.attr, 'data-round': a.round || null, 'aria-pressed': String(selected === a.key),
          title: `${a.path} attempt ${a.n}${a.node ? ` on ${a.node}` : ''}: ${a.heartbeatTimeout ? 'heartbeat timed out' : a.outcome || 'running'}, ${fmtDuration(a.end - a.start)}`,
          'data-heartbeat-timeout': a.heartbeatTimeout ? 'true' : null,
          onclick: () => onSelect && onSelect(a)}, h('span', {class: 'tl-bar-text'}, `#${a.n}${a.node ? ` ${a.node}` : ''}${a.heartbeatTimeout ? ' heartbeat timeout' : ''}`)), a.start, a.end);
        return b;
      }),
      r.marks.map(mark))));
  return h('div', {class: 'timeline', 'data-test': 'timeline'},
    h('p', {class: 'muted tl-origin'}, `Times from ${fmtTime(new Date(t0).toISOString())}; each row is a step, each bar an attempt.`),
    h('div', {class: 'tl-row tl-axis'}, h('div', {class: 'tl-label muted'}, 'time'),
      h('div', {class: 'tl-track'}, ticks,
        (model.pauses || []).map((p) => place(h('span', {class: 'tl-span sp-paused', 'data-span': 'paused',
          title: `${p.label}${p.open ? ' (still paused)' : ''}`}), p.start, p.end)),
        model.instanceMarks.map(mark))),
    rows.length ? rows : h('p', {class: 'muted'}, 'No steps have run yet.'),
    h('ul', {class: 'tl-legend muted', 'aria-label': 'Legend'},
      h('li', {}, h('span', {class: 'sw completed'}), 'attempt completed'), h('li', {}, h('span', {class: 'sw failed'}), 'failed'),
      h('li', {}, h('span', {class: 'sw timeout'}), 'timed out'), h('li', {}, h('span', {class: 'sw running'}), 'running'),
      h('li', {}, h('span', {class: 'sw abandoned'}), 'abandoned'), h('li', {}, h('span', {class: 'sw sp-retry'}), 'retry wait'),
      h('li', {}, h('span', {class: 'sw sp-timer'}), 'timer'), h('li', {}, h('span', {class: 'sw sp-wait'}), 'event wait'),
      h('li', {}, h('span', {class: 'sw sp-child'}), 'child'), h('li', {}, h('span', {class: 'sw sp-paused'}), 'paused')));
}
