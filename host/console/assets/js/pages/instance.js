// One instance: what it is and waits on, its data, its history as a
// timeline of steps and attempts with each attempt's input, output,
// failure and log lines, its parent and children, and the actions the
// token's role allows (cancel, retry, send the event a wait expects,
// export). It follows the instance's stream while it runs.

import * as api from '../api.js';
import {h, replace, timeEl, statusBadge, jsonBlock, links, shortHash, TERMINAL, throttle, fmtDuration, fmtTime, download, pretty} from '../format.js';
import {can, errorBox, section, kv, notify, field, actionForm, parseJSONField, liveState} from '../ui.js';
import * as timeline from '../timeline.js';
import {graphOf} from './workflow.js';

export async function render({main, params}) {
  const id = params[0];
  const base = `/v1/instances/${api.p(id)}`;
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

  const live = h('span', {class: 'live', 'data-test': 'live-state', 'aria-live': 'polite'});
  const head = h('div', {class: 'page-head'});
  const summary = h('div');
  const actions = h('div', {class: 'actions', 'data-test': 'instance-actions'});
  const waiting = h('div');
  const data = h('div', {class: 'grid2'});
  const tl = h('div');
  const detail = h('div', {'data-test': 'attempt-detail'});
  const histBox = h('div');
  const logBox = h('div');
  const raw = h('pre', {class: 'json', 'data-test': 'raw-json'});
  const children = h('div', {'data-test': 'children'});
  const steps = h('details', {class: 'card', 'data-test': 'instance-graph'}, h('summary', {}, 'Steps, coloured by how far it got'));
  let def = null; // the instance's workflow version as the host parsed it, once read

  // --- drawing ---
  function drawHead() {
    replace(head, h('h1', {}, 'Instance ', h('code', {class: 'id', 'data-test': 'instance-id'}, inst.id)), statusBadge(inst.status), live);
  }

  function drawSummary() {
    replace(summary, section(null, {}, kv([
      ['workflow', [h('a', {href: links.workflow(inst.workflow, inst.version), 'data-test': 'workflow-link'}, inst.workflow), ` version ${inst.version}`]],
      ['status', statusBadge(inst.status)],
      ['created', timeEl(inst.created_at)],
      ['updated', timeEl(inst.updated_at)],
      inst.delete_after ? ['deleted after', timeEl(inst.delete_after)] : null,
      inst.parent ? ['parent', [h('a', {href: links.instance(inst.parent.instance_id), 'data-test': 'parent-link'}, inst.parent.instance_id),
        inst.parent.step_id ? h('span', {class: 'muted'}, ` step ${inst.parent.step_id}`) : '']] : null,
      ['plugins', Object.keys(inst.plugins || {}).length ? h('ul', {class: 'inline'}, Object.entries(inst.plugins).map(([name, v]) =>
        h('li', {}, h('a', {href: links.plugin(name)}, name), ' ', shortHash(v)))) : h('span', {class: 'muted'}, 'none')],
      ['children', children],
    ])));
  }

  // Actions and the send-event forms are redrawn only when what they
  // depend on changed, so that a live update does not wipe a payload
  // being typed.
  let actionsSig = '';
  function drawActions() {
    const w = inst.waiting_on || {bookmarks: [], timers: []};
    const sig = JSON.stringify([inst.status, w.bookmarks, can('operator')]);
    if (sig === actionsSig) return;
    actionsSig = sig;
    const list = [];
    if (can('operator') && !TERMINAL.has(inst.status)) {
      const reason = h('input', {type: 'text', name: 'reason', placeholder: 'cancelled through the API', 'data-test': 'cancel-reason'});
      list.push(actionForm({'data-test': 'cancel', danger: true}, field('Reason', reason), 'Cancel instance', async () => {
        if (!confirm(`Cancel instance ${inst.id}?`)) return null;
        const body = reason.value.trim() ? {reason: reason.value.trim()} : {};
        inst = await api.post(`${base}/cancel`, body);
        notify('Cancellation requested; it applies when the instance next runs.');
        update();
        settle('3s');
        return null;
      }));
    }
    if (can('operator') && inst.status === 'failed') {
      list.push(actionForm({'data-test': 'retry'}, [], 'Retry', async () => {
        inst = await api.request('POST', `${base}/retry`);
        notify('Retry started.');
        update();
        settle('');
        return null;
      }));
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
      replace(waiting, TERMINAL.has(inst.status) ? '' : section('Waiting on', {'data-test': 'waiting-on'}, h('p', {class: 'muted'}, 'Nothing: it has work to do, or is being run.')));
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
      h('thead', {}, h('tr', {}, ['time', 'step', 'attempt', 'node', 'level', 'message'].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, lines.map((l) => h('tr', {class: `lv-${String(l.level || '').toLowerCase()}`},
        h('td', {}, l.time ? timeEl(l.time) : ''), h('td', {}, h('code', {}, l.step_path || '')), h('td', {}, l.attempt ?? ''),
        h('td', {}, l.node || ''), h('td', {}, l.level || ''), h('td', {class: 'msg'}, l.message ?? (typeof l === 'string' ? l : pretty(l))))))));
  }

  // historyLogs reads the logs field of an attempt's end, whatever its
  // form: strings, or objects with message, level and time.
  function historyLogs(a) {
    const raw = a.historyLogs;
    if (!Array.isArray(raw)) return [];
    return raw.map((l) => (typeof l === 'string' ? {message: l, step_path: a.path, attempt: a.n}
      : {...l, step_path: l.step_path || a.path, attempt: l.attempt ?? a.n, message: l.message ?? l.msg ?? pretty(l)}));
  }

  function attemptDetail(a) {
    const fromEndpoint = logs ? logs.filter((l) => l.step_path === a.path && Number(l.attempt) === a.n) : [];
    const lines = fromEndpoint.length ? fromEndpoint : historyLogs(a);
    const notRecorded = (what) => h('p', {class: 'muted'}, `${what} is not in this instance's history (hosts before it was recorded, or none).`);
    return h('div', {class: 'attempt', 'data-test': 'attempt', 'data-attempt': a.key},
      h('h3', {}, `${a.path} attempt ${a.n}`),
      kv([
        ['activity', a.plugin ? [h('a', {href: links.plugin(a.plugin)}, a.plugin), `.${a.activity}`] : a.activity],
        ['node', a.node || '—'],
        a.endNode && a.endNode !== a.node ? ['ended on', a.endNode] : null,
        ['started', timeEl(new Date(a.start).toISOString())],
        ['ended', a.running ? h('span', {class: 'muted'}, 'running') : timeEl(new Date(a.end).toISOString())],
        ['took', fmtDuration(a.end - a.start)],
        ['outcome', h('span', {class: `badge st-${a.outcome === 'completed' ? 'completed' : a.outcome === 'failed' ? 'failed' : 'running'}`}, a.outcome || 'running')],
      ]),
      h('h4', {}, 'Input'), a.hasInput ? jsonBlock(a.input) : notRecorded('The input'),
      a.outcome === 'completed' ? [h('h4', {}, 'Output'), a.hasOutput ? jsonBlock(a.output) : notRecorded('The output')] : null,
      a.failure ? [h('h4', {}, 'Failure'), kv([['code', h('code', {}, a.failure.code || '')], ['kind', a.failure.kind || ''], ['message', a.failure.message || '']]),
        a.failure.details !== undefined ? jsonBlock(a.failure.details) : null] : null,
      a.requests ? [h('h4', {}, 'Outbound requests'), jsonBlock(a.requests)] : null,
      a.abandoned ? [h('h4', {}, 'Abandoned'), jsonBlock(a.abandoned)] : null,
      a.late ? [h('h4', {}, 'Late completion refused'), jsonBlock(a.late)] : null,
      h('h4', {}, 'Log lines'),
      logsError && !lines.length ? errorBox(logsError) : logLines(lines));
  }

  // Children: the child_started entries say a child began; its id is the
  // parent's id, a dot and a token, so the children are the instances
  // whose id starts with "<id>." and whose parent is this instance.
  let childrenLoaded = false;
  function drawChildren() {
    const started = hist.filter((e) => e.type === 'child_started');
    if (!started.length) {
      replace(children, h('span', {class: 'muted'}, 'none'));
      return;
    }
    if (childrenLoaded) return;
    childrenLoaded = true;
    replace(children, 'loading…');
    api.get('/v1/instances', {q: `${inst.id}.`, limit: 1000}).then((page) => {
      const kids = (page.items || []).filter((c) => c.parent && c.parent.instance_id === inst.id);
      replace(children, kids.length ? h('ul', {class: 'inline'}, kids.map((c) => h('li', {}, h('a', {href: links.instance(c.id), 'data-test': 'child-link'}, c.id), ' ', statusBadge(c.status))))
        : h('span', {class: 'muted'}, `${started.length} started (${started.map((e) => (e.data || {}).workflow).join(', ')}); none found by id`));
    }, (e) => {
      childrenLoaded = false;
      replace(children, errorBox(e));
    });
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
          h('td', {}, e.attempt || ''), h('td', {}, e.node || ''), h('td', {}, e.data ? h('code', {class: 'data'}, JSON.stringify(e.data)) : ''))))))));
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

  // settle re-reads the instance after an action, waiting a little for
  // it to take effect (a cancel or an event applies when the instance
  // next runs), so the page does not depend on the stream to show it.
  async function settle(wait) {
    try {
      inst = await api.get(base, wait ? {wait} : {});
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

  replace(main, head, summary, actions, waiting, tl, logBox, steps, data, histBox,
    h('details', {class: 'card'}, h('summary', {}, 'Raw JSON'), raw));
  update();
  await reload();

  // Follow the instance while it can change; its stream ends once it has
  // finished, and then there is nothing to reconnect for.
  const refresh = throttle(reload, 1000);
  const sub = api.stream(`${base}/stream`, {
    onEvent: (type, v) => {
      if (type !== 'instance' || typeof v !== 'object') return;
      inst = v;
      update();
      refresh();
    },
    onState: liveState(live),
    reconnect: () => {
      if (TERMINAL.has(inst.status)) {
        replace(live, h('span', {class: 'muted'}, `finished ${fmtTime(inst.updated_at)}`));
        return false;
      }
      return true;
    },
  });
  return () => {
    sub.close();
    refresh.cancel();
  };
}
