// A workflow: its versions, its source, the graph of its steps, a form
// to start an instance, its pause (a banner while it is paused, and
// for operators Pause and Resume, docs/operations.md#pause-a-workflow),
// and (for admins) an editor that saves a new version and, when the
// host refuses it, marks each problem on its line.

import * as api from '../api.js';
import {h, replace, timeEl, links, shortHash} from '../format.js';
import {can, errorBox, section, kv, notify, field, actionForm, parseJSONField, prioritySelect} from '../ui.js';
import * as graph from '../graph.js';

// sourceView shows a definition's text with line numbers; errors (a
// problem's errors, with line and column) are marked on their lines,
// each message under its line, and those without a line listed first.
export function sourceView(text, errors = []) {
  const byLine = new Map();
  const loose = [];
  for (const e of errors) {
    if (e.line) {
      if (!byLine.has(e.line)) byLine.set(e.line, []);
      byLine.get(e.line).push(e);
    } else {
      loose.push(e);
    }
  }
  const lines = text.split(/\r\n|\r|\n/);
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  return h('div', {class: 'source-wrap'},
    loose.length ? h('ul', {class: 'error-list', 'data-test': 'source-errors-unplaced'}, loose.map((e) => h('li', {}, e.path ? [h('code', {}, e.path), ': '] : '', e.message))) : null,
    h('div', {class: 'source', role: 'region', 'aria-label': 'Source', tabindex: 0, 'data-test': 'workflow-source'},
      lines.map((l, i) => {
        const errs = byLine.get(i + 1);
        return [
          h('div', {class: `src-line${errs ? ' has-error' : ''}`, 'data-line': i + 1, 'data-test': errs ? 'source-error-line' : null},
            h('span', {class: 'ln', 'aria-hidden': 'true'}, String(i + 1)), h('code', {}, l || ' ')),
          errs ? errs.map((e) => h('div', {class: 'src-error', role: 'note', 'data-line': i + 1},
            h('span', {class: 'ln', 'aria-hidden': 'true'}, ''), h('span', {},
              e.column ? h('span', {class: 'caret', 'aria-hidden': 'true'}, `${' '.repeat(Math.max(0, e.column - 1))}^ `) : '',
              `line ${e.line}${e.column ? `, column ${e.column}` : ''}: `, e.path ? [h('code', {}, e.path), ' '] : '', e.message))) : null,
        ];
      })));
}

// contentTypeOf tells JSON from YAML for a PUT.
export function contentTypeOf(text) {
  const t = text.trim();
  return t.startsWith('{') ? 'application/json' : 'application/yaml';
}

// graphOf draws a workflow as GET /v1/workflows/{name} answers it, from
// its definition (the source as the host parsed it, canonical JSON), or
// says why it cannot: the host leaves definition out when it cannot
// parse a saved source any more.
export function graphOf(wf, opts) {
  const def = wf && wf.definition;
  if (!def || typeof def !== 'object' || !Array.isArray(def.steps)) {
    return h('div', {class: 'error-box', 'data-test': 'graph-error'},
      h('p', {}, 'The graph cannot be drawn: the host answered no parsed definition for this version.'));
  }
  try {
    return h('div', {class: 'graph-wrap'}, graph.render(def, opts));
  } catch (e) {
    return h('div', {class: 'error-box', 'data-test': 'graph-error'}, h('p', {}, `The graph cannot be drawn: ${e.message}`));
  }
}

// nameOf reads the name of a definition about to be saved, to PUT it
// under: a JSON document's "name", or a YAML document's top-level
// "name:" line. It need not be exact: the host checks that the name in
// the URL is the definition's own (422 otherwise), and parses the rest.
export function nameOf(text) {
  return topField(text, 'name');
}

// topField reads a top-level string field (key, a plain word) of a
// document about to be saved, as nameOf reads "name"; '' when it has none.
export function topField(text, key) {
  if (contentTypeOf(text) === 'application/json') {
    try {
      const v = JSON.parse(text);
      return v && typeof v[key] === 'string' ? v[key] : '';
    } catch {
      return ''; // the host says what is wrong with it
    }
  }
  const m = text.match(new RegExp(`^${key}[ \\t]*:[ \\t]*(?:"([^"]*)"|'([^']*)'|([^\\s#"'][^#\\r\\n]*?))[ \\t]*(?:#.*)?$`, 'm'));
  return m ? (m[1] ?? m[2] ?? m[3] ?? '').trim() : '';
}

// saveForm edits text and PUTs it as the next version of a workflow;
// name() answers the name to save under.
export function saveForm(name, initial, onSaved) {
  const ta = h('textarea', {class: 'code', rows: Math.min(30, Math.max(8, initial.split('\n').length + 2)), spellcheck: 'false', 'data-test': 'source-editor'}, initial);
  ta.value = initial;
  return actionForm({'data-test': 'save-workflow'}, field('Definition (YAML or JSON)', ta), 'Save as a new version', async () => {
    const n = typeof name === 'function' ? name(ta.value) : name;
    if (!n) throw new Error('the definition needs a name');
    try {
      const res = await api.request('PUT', `/v1/workflows/${api.p(n)}`, {body: ta.value, contentType: contentTypeOf(ta.value)});
      notify(`Saved ${res.name} version ${res.version}.`);
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

// PAUSE_POLL is how often, in ms, the page reads a paused workflow's
// pause again, for its count of held starts.
const PAUSE_POLL = 2000;

// heldText says how many starts a paused workflow holds: "3 held
// starts", "at least 10000 held starts" when the host stopped counting.
export function heldText(p) {
  const n = p.held || 0;
  return `${p.held_more ? 'at least ' : ''}${n} held start${n === 1 ? '' : 's'}`;
}

// pauseBanner shows a workflow's pause: "Paused by alice since …: the
// reason — 3 held starts", the held starts linked to the list of them.
// Text nodes: a token's name or a reason is never markup.
export function pauseBanner(p) {
  return h('section', {class: 'paused-banner', role: 'status', 'data-test': 'workflow-paused-banner'},
    h('p', {}, h('strong', {}, 'Paused'), p.actor ? ` by ${p.actor}` : '', ' since ', timeEl(p.since),
      p.reason ? `: ${p.reason}` : '', ' — ',
      h('a', {href: links.instances({workflow: p.workflow, status: 'pending'}), 'data-test': 'held-starts'}, heldText(p))),
    h('p', {class: 'muted'}, 'Its new starts are accepted and held, pending, without a concurrency slot; a resume releases them, oldest first. Its instances already started go on.'));
}

export async function render({main, params, query}) {
  const name = params[0];
  const version = query.get('version') || '';
  let wf;
  try {
    wf = await api.get(`/v1/workflows/${api.p(name)}`, {version});
  } catch (e) {
    replace(main, h('h1', {}, 'Workflow ', h('code', {}, name)), errorBox(e));
    return;
  }
  // The host lists the versions kept, latest first, with when each was
  // saved: a deletion leaves a gap in the numbers, so they are not
  // counted down from the latest.
  const versions = wf.versions && wf.versions.length ? wf.versions : [{version: wf.version, created_at: wf.created_at}];
  const latest = versions[0].version;
  const shown = versions.slice(0, 50);
  if (!shown.some((v) => v.version === wf.version)) shown.push({version: wf.version, created_at: wf.created_at});

  const source = wf.source || '';
  const startInput = h('textarea', {class: 'code', rows: 6, spellcheck: 'false', 'data-test': 'start-input'}, '{}');
  startInput.value = '{}';
  const startID = h('input', {type: 'text', placeholder: 'made by the host', 'data-test': 'start-id'});
  const startPriority = prioritySelect({'data-test': 'start-priority'});

  // The pause: a banner while paused, and the operator's Pause or
  // Resume, redrawn from what the host answers; read again every
  // PAUSE_POLL while paused, for the count of held starts.
  const pauseBox = h('div');
  const pauseActions = h('div');
  const pauseResult = h('div', {'data-test': 'pause-result'});
  let paused = wf.paused || null;
  let pauseSig = '';
  function drawPause() {
    replace(pauseBox, paused ? pauseBanner(paused) : '');
    const sig = JSON.stringify([Boolean(paused), can('operator')]);
    if (sig === pauseSig) return;
    pauseSig = sig;
    if (!can('operator')) {
      replace(pauseActions, '');
      return;
    }
    const base = `/v1/workflows/${api.p(wf.name)}`;
    if (!paused) {
      const reason = h('input', {type: 'text', name: 'reason', placeholder: 'paused through the API', 'data-test': 'workflow-pause-reason'});
      replace(pauseActions, section('Pause', {'data-test': 'workflow-pause-section'},
        h('p', {class: 'muted'}, 'Hold its new starts (the API\'s, its triggers\', its schedules\' fires, its parents\' child steps) until it is resumed. Its instances already started go on.'),
        actionForm({'data-test': 'workflow-pause'}, field('Reason', reason), 'Pause workflow', async () => {
          if (!confirm(`Pause workflow ${wf.name}? Its new starts are held until it is resumed.`)) return null;
          const body = reason.value.trim() ? {reason: reason.value.trim()} : {};
          await api.post(`${base}/pause`, body);
          notify(`Workflow ${wf.name} paused; its new starts are held.`);
          replace(pauseResult, '');
          await refreshPause();
          return null;
        })));
      return;
    }
    const reason = h('input', {type: 'text', name: 'reason', placeholder: 'resumed through the API', 'data-test': 'workflow-resume-reason'});
    const rate = h('input', {type: 'number', name: 'rate', min: '0', step: 'any', placeholder: '1000', 'data-test': 'workflow-resume-rate'});
    replace(pauseActions, section('Resume', {'data-test': 'workflow-resume-section'},
      h('p', {class: 'muted'}, 'Start its new starts again, and release the held ones, oldest first, through a batch job at the rate given.'),
      actionForm({'data-test': 'workflow-resume'}, [field('Reason', reason),
        field('Rate', rate, 'Held starts released a second: 1000 when empty, 0 for no limit.')], 'Resume workflow', async () => {
        const body = {};
        if (reason.value.trim()) body.reason = reason.value.trim();
        if (rate.value.trim() !== '') body.rate = Number(rate.value);
        const res = await api.post(`${base}/resume`, body);
        notify(`Workflow ${wf.name} resumed.`);
        replace(pauseResult, res.release
          ? h('p', {role: 'status'}, 'Resumed; its held starts are released by ',
            h('a', {href: links.batch(res.release.id), 'data-test': 'release-link'}, `batch ${res.release.id}`), '.')
          : h('p', {class: 'error-inline', role: 'alert'}, `Resumed, but its release batch did not start (${res.release_error || 'no reason given'}): the host's recovery sweep releases its held starts.`));
        await refreshPause();
        return null;
      })));
  }
  async function refreshPause() {
    try {
      const now = await api.get(`/v1/workflows/${api.p(wf.name)}`, {version});
      paused = now.paused || null;
    } catch {
      return; // the next look tries again
    }
    drawPause();
  }
  drawPause();
  const poll = setInterval(() => {
    if (paused) refreshPause();
  }, PAUSE_POLL);

  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Workflow ', h('code', {'data-test': 'workflow-name'}, wf.name)),
      h('a', {href: links.instances({workflow: wf.name})}, 'Its instances')),
    pauseBox,
    section(null, {}, kv([
      ['version', [String(wf.version), wf.version !== latest ? h('span', {class: 'muted'}, ` (latest is ${latest})`) : '']],
      ['hash', shortHash(wf.hash)],
      ['saved', timeEl(wf.created_at)],
      ['versions', h('ul', {class: 'inline', 'data-test': 'workflow-versions'}, shown.map((v) => h('li', {title: `saved ${v.created_at}`},
        v.version === wf.version ? h('strong', {'aria-current': 'page'}, `v${v.version}`) : h('a', {href: links.workflow(wf.name, v.version)}, `v${v.version}`))))],
    ])),
    can('operator') ? section('Start an instance', {'data-test': 'start-section'},
      h('p', {class: 'muted'}, `Starts the latest version (${latest}).`),
      actionForm({'data-test': 'start-instance'}, [field('Input (JSON)', startInput), field('Instance id (optional)', startID, 'A start with an id used before answers that instance instead of starting another.'),
        field('Priority', startPriority, 'Where the instance goes in the ready queue when there is more work than workers: 1 is served first, 5 last. The workflow\'s own is its definition\'s priority (3 unless it says).')],
        'Start', async () => {
          const body = {};
          const input = parseJSONField(startInput.value, 'the input');
          if (input !== undefined) body.input = input;
          if (startID.value.trim()) body.id = startID.value.trim();
          if (startPriority.value) body.priority = Number(startPriority.value);
          const inst = await api.post(`/v1/workflows/${api.p(wf.name)}/instances`, body);
          location.hash = links.instance(inst.id);
          return null;
        })) : null,
    pauseActions,
    pauseResult,
    section('Steps', {'data-test': 'graph-section'}, graphOf(wf)),
    section('Source', {}, sourceView(source)),
    can('admin') ? h('details', {class: 'card', 'data-test': 'edit-section'}, h('summary', {}, 'Edit and save a new version'),
      saveForm(wf.name, source, (res) => {
        location.hash = links.workflow(res.name, res.version);
      })) : null);
  return () => clearInterval(poll);
}
