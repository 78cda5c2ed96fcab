// One plugin: its versions with their hashes and activities, what its
// manifest needs and what its name is granted, and what uses each
// version: the saved workflows that call it (their next instances pin
// the current version) and the instances pinned to each version.

import * as api from '../api.js';
import {h, replace, timeEl, links, fmtBytes, statusBadge} from '../format.js';
import {errorBox, section, kv, slot} from '../ui.js';
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
