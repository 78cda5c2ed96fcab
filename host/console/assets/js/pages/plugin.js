// One plugin: its versions with their hashes and activities, what its
// manifest needs and what its name is granted, and what uses each
// version: the saved workflows that call it (their next instances pin
// the current version) and the instances pinned to each version. For
// admins, a shadow run (docs/replay.md): a candidate module replays the
// plugin's recorded attempts next to the versions that recorded them,
// and a Promote button uploads it, once confirmed, as the new version.
//
// It also draws what the instance page shows of a replay (replayView,
// outcomeBadge): a shadow run's attempt is a replay too.

import * as api from '../api.js';
import {h, replace, timeEl, links, fmtBytes, statusBadge, shortHash, jsonBlock, fmtDuration, toRFC3339} from '../format.js';
import {can, errorBox, section, kv, slot, field, actionForm, loading, modal, notify, showBanner} from '../ui.js';
import {rateTerms, shortPer} from './flow.js';

// SHOWN is how many instances pinned to a version the page lists.
const SHOWN = 20;

// hostRule shows a grant's host rule: its pattern, whether it reaches
// private networks, and its rate limit (docs/outbound-http.md, "Rate
// limits"): 10 per 1s, burst 20, waits ≤ 5s, key partner. A rule without
// a key of its own shares the budget named by its pattern.
function hostRule(x) {
  const rl = x.rate_limit;
  return h('li', {'data-test': 'grant-host', 'data-pattern': x.pattern}, h('code', {}, x.pattern),
    x.private_networks ? ' (private networks allowed)' : '',
    rl ? h('span', {class: 'muted', 'data-test': 'grant-rate',
      title: 'requests under this rule take turns from the key\'s budget, shared by every rule with that key, across plugins and nodes'},
    `: ${rateTerms(rl.limit, rl.per, rl.burst)}, `, rl.max_wait ? `waits ≤ ${shortPer(rl.max_wait)}` : 'never waits', ', key ',
    h('code', {'data-test': 'grant-rate-key'}, rl.key || x.pattern)) : '');
}

// activitiesIn walks a definition's steps (nested ones too) and answers
// the activity names it calls of the plugin.
export function activitiesIn(def, plugin) {
  const found = new Set();
  const walk = (steps) => {
    for (const st of Array.isArray(steps) ? steps : []) {
      if (!st || typeof st !== 'object') continue;
      if (typeof st.activity === 'string') {
        const [p, a] = st.activity.split('.');
        if (p === plugin) found.add(a);
      }
      walk(st.then);
      walk(st.else);
      walk(st.do);
      for (const b of Array.isArray(st.parallel) ? st.parallel : []) walk(b && b.steps);
    }
  };
  walk(def && def.steps);
  return [...found];
}

// pool runs fn over items, n at a time.
async function pool(items, n, fn) {
  const out = new Array(items.length);
  let i = 0;
  await Promise.all(Array.from({length: Math.min(n, items.length)}, async () => {
    while (i < items.length) {
      const k = i++;
      out[k] = await fn(items[k]);
    }
  }));
  return out;
}

function strList(xs) {
  return xs && xs.length ? h('ul', {class: 'inline'}, xs.map((x) => h('li', {}, h('code', {}, x)))) : h('span', {class: 'muted'}, 'none');
}

function mapList(m) {
  const e = Object.entries(m || {});
  return e.length ? h('ul', {class: 'plain'}, e.map(([k, v]) => h('li', {}, h('code', {}, k), ' = ', h('code', {}, v)))) : h('span', {class: 'muted'}, 'none');
}

export async function render({main, params}) {
  const name = params[0];
  // Where the page is: a promote redraws it only while the console is
  // still there.
  const here = location.hash;
  let pl;
  try {
    pl = await api.get(`/v1/plugins/${api.p(name)}`);
  } catch (e) {
    replace(main, h('h1', {}, 'Plugin ', h('code', {}, name)), errorBox(e));
    return;
  }
  const versions = pl.versions && pl.versions.length ? pl.versions : [pl];
  const usedBy = new Map(versions.map((v) => [v.version, h('div', {class: 'slot', 'data-test': 'version-instances'}, 'reading instances…')]));

  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Plugin ', h('code', {'data-test': 'plugin-name'}, pl.name))),
    section('Versions', {'data-test': 'plugin-versions'}, versions.map((v) => h('div', {class: 'version', 'data-test': 'plugin-version', 'data-version': v.version},
      h('h3', {}, v.version === pl.version ? 'current version ' : 'version ', h('code', {class: 'hash full'}, v.version)),
      kv([['uploaded', timeEl(v.created_at)], ['size', fmtBytes(v.size)], ['activities', strList(v.activities)],
        ['instances pinned to it', usedBy.get(v.version)]])))),
    can('admin') ? shadowPanel(pl, versions, async () => {
      if (location.hash !== here) return;
      await render({main, params});
      const title = main.querySelector('h1');
      if (title) {
        title.tabIndex = -1;
        title.focus({preventScroll: true});
      }
    }) : null,
    section('Needs and grants', {},
      kv([['manifest needs: hosts', strList(pl.needs && pl.needs.hosts)], ['config', strList(pl.needs && pl.needs.config)], ['secrets', strList(pl.needs && pl.needs.secrets)],
        ['not granted: hosts', strList(pl.missing && pl.missing.hosts)], ['config', strList(pl.missing && pl.missing.config)], ['secrets', strList(pl.missing && pl.missing.secrets)]]),
      h('h3', {}, 'Granted to the name'),
      slot(async () => {
        const g = await api.get(`/v1/plugins/${api.p(pl.name)}/grants`);
        return kv([
          ['revision', String(g.revision)],
          ['updated', g.updated_at ? timeEl(g.updated_at) : h('span', {class: 'muted'}, 'never granted')],
          ['hosts', g.hosts && g.hosts.length ? h('ul', {class: 'plain'}, g.hosts.map(hostRule)) : h('span', {class: 'muted'}, 'none')],
          ['config', mapList(g.config)],
          ['secrets (references, never values)', mapList(g.secrets)],
        ], {'data-test': 'plugin-grants'});
      })),
    section('Workflows that call it', {}, h('p', {class: 'muted'}, 'Their new instances pin the current version.'),
      slot(async () => {
        const wfs = await api.all('/v1/workflows');
        const rows = (await pool(wfs, 6, async (w) => {
          try {
            const full = await api.get(`/v1/workflows/${api.p(w.name)}`);
            if (!full.definition) return {w, error: new Error('the host answered no parsed definition for it')};
            const acts = activitiesIn(full.definition, pl.name);
            return acts.length ? {w, acts} : null;
          } catch (e) {
            return {w, error: e};
          }
        })).filter(Boolean);
        if (!rows.length) return h('p', {class: 'muted'}, 'No saved workflow calls it.');
        return h('ul', {class: 'plain', 'data-test': 'plugin-workflows'}, rows.map((r) => h('li', {},
          h('a', {href: links.workflow(r.w.name)}, r.w.name), ` v${r.w.version}`,
          r.error ? [': ', errorBox(r.error)] : [': ', r.acts.map((a) => h('code', {}, `${pl.name}.${a}`)).flatMap((x, i) => (i ? [', ', x] : [x]))])));
      })));

  // The instances pinned to each version, newest first: the host reads
  // its instances for those that pin it (a bounded number a page), and a
  // button goes on from its cursor.
  await Promise.all(versions.map((v) => pinnedList(usedBy.get(v.version), pl.name, v.version).load()));
}

// pinnedList fills el with the instances pinned to version of plugin, a
// page at a time. A page may hold fewer than asked, even none, and still
// have a cursor: the host stops reading after a bounded number of
// instances, so the button says "look further" rather than "more".
function pinnedList(el, plugin, version) {
  const rows = h('ul', {class: 'plain', 'data-test': 'pinned-instances'});
  const note = h('p', {class: 'muted'});
  const more = h('button', {type: 'button', hidden: true, 'data-test': 'pinned-more'}, 'more');
  const listError = h('div', {});
  let cursor = '';
  let count = 0;
  async function load() {
    more.disabled = true;
    try {
      const page = await api.get('/v1/instances', {plugin, plugin_version: version, limit: SHOWN, cursor});
      for (const it of page.items || []) {
        count++;
        rows.append(h('li', {'data-id': it.id},
          h('a', {href: links.instance(it.id)}, it.id), ' ', statusBadge(it.status), h('span', {class: 'muted'}, ` ${it.workflow} v${it.version}`)));
      }
      cursor = page.next_cursor || '';
      more.hidden = !cursor;
      more.textContent = (page.items || []).length ? 'more' : 'look further';
      note.textContent = cursor
        ? (count ? `${count} listed, newest first; there may be more` : 'none among the newest instances read; there may be older ones')
        : (count ? '' : 'none');
      listError.replaceChildren();
      if (el.firstChild !== rows) replace(el, rows, note, listError, h('div', {class: 'buttons'}, more));
    } catch (e) {
      replace(listError, errorBox(e));
      if (!el.contains(listError)) replace(el, listError);
    } finally {
      more.disabled = false;
    }
  }
  more.addEventListener('click', load);
  return {load};
}

// --- replays and shadow runs (docs/replay.md) ---

// OUTCOMES are a replay's outcomes, from the most alike, each with the
// status colour its badge takes and what it means.
export const OUTCOMES = {
  same: ['st-completed', 'the same output (or failure code), every recorded call asked'],
  ended_early: ['st-paused', 'the same output, with recorded calls left unasked'],
  different_output: ['st-pending', 'asked what the tape holds, and returned another output'],
  diverged: ['st-suspended', 'asked the host something the tape does not hold'],
  failed: ['st-failed', 'failed where the recording completed, or with another code'],
  truncated: ['st-cancelled', 'went past the end of a tape cut at its cap'],
  not_run: ['st-cancelled', 'could not be replayed'],
};

// outcomeBadge shows a replay's outcome, coloured as the statuses are.
export function outcomeBadge(outcome) {
  const [cls, title] = OUTCOMES[outcome] || ['st-cancelled', ''];
  return h('span', {class: `badge ${cls}`, 'data-test': 'replay-outcome', 'data-outcome': outcome || '', title: title || null},
    String(outcome || 'unknown').replaceAll('_', ' '));
}

// fmtFuel shows an amount of guest work (fuel: one unit is about 64
// bytes of guest code run) with its thousands grouped.
function fmtFuel(n) {
  return typeof n === 'number' && n > 0 ? n.toLocaleString('en-US') : '—';
}

// fuelRatio shows a candidate's fuel over the recorded version's on the
// same tape: 1.25× spent a quarter more. It does not move with the
// machine's load, as a duration does.
function fuelRatio(fuel, baseline) {
  if (!(fuel > 0) || !(baseline > 0)) return h('span', {class: 'muted'}, '—');
  const r = fuel / baseline;
  return h('span', {'data-test': 'fuel-ratio', 'data-ratio': String(r),
    title: `${fmtFuel(fuel)} fuel against ${fmtFuel(baseline)} (one unit is about 64 bytes of guest code run)`},
  r < 0.01 ? '< 0.01×' : r >= 100 ? `${Math.round(r)}×` : `${r.toFixed(2)}×`);
}

// speedLabel shows how a candidate's guest work compares with the
// recorded version's: slower or faster by more than 10%, or alike.
function speedLabel(speed) {
  if (!speed) return h('span', {class: 'muted', 'data-speed': ''}, '—');
  return h('span', {class: `speed-${speed}`, 'data-test': 'speed', 'data-speed': speed}, speed);
}

function failureText(f) {
  return `${f.code || ''}${f.message ? `: ${f.message}` : ''}`;
}

// side shows one side of a replay: its failure, or its output.
function side(title, output, failure, test) {
  return h('div', {class: 'replay-side', 'data-test': test},
    h('h4', {}, title),
    failure ? h('p', {class: 'error-inline', 'data-test': `${test}-failure`}, 'failed: ', h('code', {}, failureText(failure)))
      : output !== undefined ? jsonBlock(output) : h('p', {class: 'muted'}, 'no output'));
}

// divergenceView shows the first host call a replay asked that the tape
// does not hold: its place, the tape's call there and what was asked.
function divergenceView(d) {
  if (!d) return null;
  const call = (c) => (c && c.kind ? [h('code', {}, c.kind), c.ask ? [' ', h('code', {class: 'ask'}, c.ask)] : ''] : h('span', {class: 'muted'}, 'nothing: the tape ends there'));
  return h('div', {class: 'divergence', 'data-test': 'divergence'},
    h('h4', {}, `Diverged at call ${(d.index ?? 0) + 1} of the tape`),
    kv([['the tape holds', call(d.want)], ['it asked', call(d.got)]]),
    d.note ? h('p', {class: 'warn', 'data-test': 'divergence-note'}, d.note) : null);
}

// replayView shows a replay's report (POST .../tapes/{attempt}/replay):
// its outcome, the version it ran, the recording and the replay side by
// side (their outputs or failures), where it diverged, its guest work
// and how long it took.
export function replayView(r) {
  const same = r.replayed_version === r.recorded_version;
  return h('div', {class: 'replay-report', 'data-test': 'replay-report', 'data-outcome': r.outcome || ''},
    h('p', {}, outcomeBadge(r.outcome), ' replayed on ', shortHash(r.replayed_version),
      same ? h('span', {class: 'muted'}, ' (the version that recorded it)') : [h('span', {class: 'muted'}, ', recorded on '), shortHash(r.recorded_version)]),
    kv([
      // A host from before fuel was counted answers none.
      r.fuel !== undefined ? ['guest work', h('span', {'data-test': 'replay-fuel', title: 'one unit of fuel is about 64 bytes of guest code run'}, `${fmtFuel(r.fuel)} fuel`)] : null,
      ['took', h('span', {'data-test': 'replay-duration'}, fmtDuration(r.duration_ms))],
      r.left ? ['calls left unasked', String(r.left)] : null,
    ]),
    h('div', {class: 'grid2 sides'},
      side('Recorded', r.recorded_output, r.recorded_failure, 'recorded-side'),
      side('Replayed', r.output, r.failure, 'replayed-side')),
    divergenceView(r.divergence));
}

// patchList shows a JSON Patch (RFC 6902) as a list of its operations:
// op, path (a JSON Pointer; empty is the whole document) and value.
function patchList(ops) {
  if (!Array.isArray(ops) || !ops.length) return null;
  return h('ul', {class: 'plain patch', 'data-test': 'shadow-diff'}, ops.map((op) => h('li', {'data-test': 'patch-op', 'data-op': op.op || ''},
    h('span', {class: `patch-op op-${op.op}`}, op.op || '?'), ' ',
    op.path ? h('code', {'data-test': 'patch-path'}, op.path) : h('span', {class: 'muted'}, 'the whole output'),
    op.from !== undefined ? [' from ', h('code', {}, op.from)] : '',
    'value' in op ? [' ', h('code', {class: 'patch-value', 'data-test': 'patch-value'}, JSON.stringify(op.value))] : '')));
}

// differing counts a shadow run's attempts that did not end as the
// recording did: every outcome but same and ended_early.
function differing(sum) {
  const o = sum.outcomes || {};
  return Object.entries(o).filter(([k]) => k !== 'same' && k !== 'ended_early').reduce((n, [, v]) => n + (Number(v) || 0), 0);
}

// sumsText says a shadow run's sums in words: 3 of 100 differ
// (2 different output, 1 diverged); 4 slower, 1 faster, 95 alike.
function sumsText(rep) {
  const sum = rep.summary || {};
  const n = sum.attempts || 0;
  const o = sum.outcomes || {};
  const parts = Object.keys(OUTCOMES).filter((k) => k !== 'same' && k !== 'ended_early' && o[k]).map((k) => `${o[k]} ${k.replaceAll('_', ' ')}`);
  return `${differing(sum)} of ${n} differ${parts.length ? ` (${parts.join(', ')})` : ''}; `
    + `${sum.slower || 0} slower, ${sum.faster || 0} faster, ${sum.alike || 0} alike`;
}

// shadowDetail is what a shadow run's attempt shows when opened: why it
// did not run, how the recorded version itself replayed the tape when
// not the same, the JSON Patch from the recorded output to the
// candidate's, the outputs or failures, where it diverged, the guest
// work and durations of both replays.
function shadowDetail(a) {
  return h('div', {class: 'shadow-detail', 'data-test': 'shadow-detail'},
    a.error ? h('p', {class: 'error-inline', 'data-test': 'shadow-error'}, a.error) : null,
    a.baseline && a.baseline !== 'same' ? h('p', {class: 'warn', 'data-test': 'shadow-baseline'}, 'The version that recorded it replays this tape as ',
      outcomeBadge(a.baseline), ' itself: the candidate\'s outcome says less.') : null,
    Array.isArray(a.diff) && a.diff.length ? [h('h4', {}, 'What changed in the output (JSON Patch, from the recorded output)'), patchList(a.diff)] : null,
    a.outputs_omitted ? h('p', {class: 'muted', 'data-test': 'shadow-omitted'}, 'An output or the difference is over 16 KiB and left out of the report: replay this attempt from its instance\'s page to see it whole.') : null,
    a.outcome !== 'not_run' ? h('div', {class: 'grid2 sides'},
      side('Recorded', a.recorded_output, a.recorded_failure, 'recorded-side'),
      side('Candidate', a.output, a.failure, 'replayed-side')) : null,
    divergenceView(a.divergence),
    kv([
      ['recorded by', [shortHash(a.recorded_version), ' at ', timeEl(a.recorded_at)]],
      ['fuel', `${fmtFuel(a.fuel)} (the recorded version: ${fmtFuel(a.baseline_fuel)})`],
      ['took', `${fmtDuration(a.duration_ms)} (the recorded version: ${fmtDuration(a.baseline_duration_ms)}; wall time, which moves with the load)`],
    ]));
}

// shadowReport shows a shadow run's report: the sums (the attempts by
// outcome, by speed, and the candidate's fuel over the recorded
// versions'), then a row per attempt, newest first, each opening on its
// detail.
function shadowReport(rep) {
  const sum = rep.summary || {};
  const attempts = rep.attempts || [];
  const o = sum.outcomes || {};
  const summary = h('div', {class: 'shadow-summary', 'data-test': 'shadow-summary', 'data-attempts': String(sum.attempts || 0), 'data-differ': String(differing(sum))},
    h('p', {}, 'Candidate ', shortHash(rep.candidate_version), ` on ${sum.attempts || 0} recorded attempt${sum.attempts === 1 ? '' : 's'} of `,
      h('code', {}, rep.plugin), rep.query && rep.query.workflow ? [' in workflow ', h('code', {}, rep.query.workflow)] : '',
      rep.query && rep.query.since && !String(rep.query.since).startsWith('0001') ? [' recorded since ', timeEl(rep.query.since)] : '',
      h('span', {class: 'muted'}, ` (took ${fmtDuration(rep.duration_ms)})`)),
    h('p', {'data-test': 'shadow-sums'}, sumsText(rep)),
    h('ul', {class: 'inline counts', 'data-test': 'shadow-counts'}, Object.keys(OUTCOMES).filter((k) => o[k]).map((k) =>
      h('li', {'data-test': 'shadow-count', 'data-outcome': k, 'data-count': String(o[k])}, outcomeBadge(k), ` ${o[k]}`))),
    kv([
      ['speed', h('span', {'data-test': 'shadow-speed', 'data-slower': String(sum.slower || 0), 'data-faster': String(sum.faster || 0), 'data-alike': String(sum.alike || 0)},
        `${sum.slower || 0} slower, ${sum.faster || 0} faster, ${sum.alike || 0} alike`,
        h('span', {class: 'muted'}, ' (guest work, counted in fuel: more than 10% apart is slower or faster)'))],
      ['fuel, candidate over recorded', fuelRatio(sum.fuel, sum.baseline_fuel)],
    ]));
  if (!attempts.length) {
    return [summary, h('p', {class: 'muted', 'data-test': 'shadow-none'}, 'No recorded attempt matched: a workflow or a step with record (all, or a share) keeps them.')];
  }
  const cols = ['', 'instance', 'step', 'attempt', 'activity', 'outcome', 'speed', 'fuel ratio'];
  const rows = attempts.map((a, i) => {
    const id = `shadow-detail-${i}`;
    const detail = h('tr', {class: 'detail-row', id, hidden: true}, h('td', {colspan: cols.length}, shadowDetail(a)));
    const toggle = h('button', {type: 'button', class: 'small', 'aria-expanded': 'false', 'aria-controls': id, 'data-test': 'shadow-toggle',
      title: 'Show the differences, the outputs and the guest work'}, 'details');
    toggle.addEventListener('click', () => {
      detail.hidden = !detail.hidden;
      toggle.setAttribute('aria-expanded', String(!detail.hidden));
    });
    const k = a.key || {};
    return [h('tr', {'data-test': 'shadow-row', 'data-outcome': a.outcome || '', 'data-instance': k.instance_id || '', 'data-step': k.step_path || '', 'data-attempt': String(k.attempt || '')},
      h('td', {}, toggle),
      h('td', {class: 'id'}, h('a', {href: links.instance(k.instance_id || '')}, k.instance_id || ''), a.workflow ? h('span', {class: 'muted'}, ` ${a.workflow}`) : ''),
      h('td', {}, h('code', {}, k.step_path || '')),
      h('td', {}, String(k.attempt ?? '')),
      h('td', {}, h('code', {}, a.activity || '')),
      h('td', {}, outcomeBadge(a.outcome), a.baseline && a.baseline !== 'same' ? h('span', {class: 'warn', title: `the recorded version replays it as ${a.baseline}`}, ' *') : ''),
      h('td', {}, speedLabel(a.speed)),
      h('td', {}, fuelRatio(a.fuel, a.baseline_fuel))), detail];
  });
  return [summary, h('div', {class: 'table-wrap'}, h('table', {class: 'list shadow-attempts', 'data-test': 'shadow-attempts'},
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col'}, c)))), h('tbody', {}, rows)))];
}

// promoteButton offers to upload the candidate the report is of as the
// plugin's new version: a dialog names the plugin, the candidate's
// version and the report's sums, and only its Promote uploads (the same
// bytes that ran); then the page is drawn again, with the new version.
function promoteButton(pl, versions, rep, bytes, fileName, reload) {
  const known = versions.some((v) => v.version === rep.candidate_version);
  const open = () => {
    const m = modal(`Promote a new version of ${pl.name}?`, {'data-test': 'promote-dialog'});
    const result = h('div');
    const cancel = h('button', {type: 'button', 'data-test': 'promote-cancel', onclick: () => m.close()}, 'Cancel');
    const confirm = h('button', {type: 'button', class: 'primary', 'data-test': 'promote-confirm'}, `Promote to ${pl.name}`);
    confirm.addEventListener('click', async () => {
      confirm.disabled = true;
      cancel.disabled = true;
      replace(result, loading('Uploading…'));
      try {
        const v = await api.putPlugin(pl.name, bytes);
        m.close();
        notify(`Version ${String(v && v.version || rep.candidate_version).slice(0, 12)} of ${pl.name} uploaded: it is the current version.`);
        await reload();
      } catch (e) {
        if (m.closed) {
          showBanner(e);
          return;
        }
        replace(result, errorBox(e));
        confirm.disabled = false;
        cancel.disabled = false;
      }
    });
    const differ = differing(rep.summary || {});
    replace(m.body,
      h('p', {'data-test': 'promote-what'}, 'Upload ', h('code', {}, fileName), ' as plugin ', h('strong', {}, pl.name), ', version ',
        h('code', {class: 'hash full', 'data-test': 'promote-version'}, rep.candidate_version || '?'), '.'),
      h('p', {'data-test': 'promote-sums', class: differ ? 'warn' : ''}, `In the shadow run: ${sumsText(rep)}.`),
      h('p', {class: 'muted small-text'}, 'It becomes the current version: the new instances of the workflows that call it pin it; the instances running now keep the version they pin.'),
      known ? h('p', {class: 'muted small-text'}, 'This module is a version of the plugin already: uploading it makes it the current one again.') : null,
      h('div', {class: 'buttons'}, cancel, confirm), result);
    cancel.focus();
  };
  return h('div', {class: 'buttons promote'},
    h('button', {type: 'button', class: 'primary', 'data-test': 'promote', onclick: open}, 'Promote…'),
    h('span', {class: 'muted'}, ' uploads this candidate as the plugin\'s new version, once you confirm.'));
}

// shadowPanel is the shadow run's form (admins): the candidate module,
// and which recorded attempts of the plugin to replay it on (the newest
// N, of one workflow, recorded since a time). Run shows the report, and
// the button that promotes the candidate.
function shadowPanel(pl, versions, reload) {
  const file = h('input', {type: 'file', name: 'candidate', accept: '.wasm,application/wasm', 'data-test': 'shadow-file'});
  const last = h('input', {type: 'number', name: 'last', min: 1, max: 1000, step: 1, value: '100', 'data-test': 'shadow-last'});
  const workflow = h('input', {type: 'text', name: 'workflow', placeholder: 'every workflow', 'data-test': 'shadow-workflow'});
  const since = h('input', {type: 'datetime-local', name: 'since', step: 1, 'data-test': 'shadow-since'});
  const out = h('div', {'data-test': 'shadow-result', 'aria-live': 'polite'});
  let runs = 0; // the latest run: an older one's answer is not shown
  const form = actionForm({'data-test': 'shadow'}, h('div', {class: 'shadow-fields'},
    field('Candidate module (.wasm)', file),
    field('Last N attempts', last, 'The newest, 1 to 1000.'),
    field('Workflow', workflow, 'Empty: every workflow.'),
    field('Recorded since', since, 'Empty: any time.')), 'Run', async () => {
    const f = file.files && file.files[0];
    if (!f) throw new Error('Choose the candidate module (a .wasm file) first.');
    const n = last.value.trim();
    if (n && !/^[1-9][0-9]*$/.test(n)) throw new Error('Last N is a whole number from 1 to 1000.');
    const bytes = await f.arrayBuffer();
    const run = ++runs;
    replace(out, loading(`Replaying the recorded attempts of ${pl.name} against ${f.name} and against the versions that recorded them…`));
    let rep;
    try {
      rep = await api.shadowRun(pl.name, bytes, {last: n, workflow: workflow.value.trim(), since: toRFC3339(since.value)});
    } catch (e) {
      if (run === runs) replace(out, '');
      throw e;
    }
    if (run === runs) replace(out, shadowReport(rep), promoteButton(pl, versions, rep, bytes, f.name, reload));
    return null;
  });
  return section('Shadow run', {'data-test': 'shadow-panel'},
    h('p', {class: 'muted'}, 'Replay the recorded attempts of this plugin\'s activities against a candidate module, and against the versions that recorded them: '
      + 'the same output, another one, a divergence (it asked the host something else), a failure; and its guest work, slower or faster. '
      + 'Nothing leaves the host and nothing is stored: the candidate becomes a version only when you promote it.'),
    form, out);
}
