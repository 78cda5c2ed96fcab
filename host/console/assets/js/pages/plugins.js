// The plugins: each one's current version, size and activities.

import * as api from '../api.js';
import {h, replace, timeEl, links, shortHash, fmtBytes} from '../format.js';
import {errorBox} from '../ui.js';

export async function render({main}) {
  let list;
  try {
    list = await api.all('/v1/plugins');
  } catch (e) {
    replace(main, h('h1', {}, 'Plugins'), errorBox(e));
    return;
  }
  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Plugins')),
    h('div', {class: 'table-wrap'}, h('table', {class: 'list', 'data-test': 'plugins-table'},
      h('thead', {}, h('tr', {}, ['name', 'current version', 'size', 'activities', 'uploaded'].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, list.length ? list.map((p) => h('tr', {'data-test': 'plugin-row', 'data-name': p.name},
        h('td', {}, h('a', {href: links.plugin(p.name)}, p.name)), h('td', {}, shortHash(p.version)), h('td', {}, fmtBytes(p.size)),
        h('td', {}, (p.activities || []).join(', ')), h('td', {}, timeEl(p.created_at))))
        : h('tr', {}, h('td', {colspan: 5, class: 'muted'}, 'No plugins uploaded yet.'))))));
}
