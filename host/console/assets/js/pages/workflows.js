// The workflows: each one's latest version, marked paused while it is
// (docs/operations.md#pause-a-workflow), and (for admins) a form to save
// a new definition.

import * as api from '../api.js';
import {h, replace, timeEl, fmtTime, links, shortHash} from '../format.js';
import {can, errorBox} from '../ui.js';
import {saveForm, nameOf} from './workflow.js';

export async function render({main}) {
  let list;
  let err = null;
  try {
    list = await api.all('/v1/workflows');
  } catch (e) {
    err = e;
  }
  const example = 'name: my-workflow\nsteps:\n  - id: first\n    activity: kit.echo\n    input: { text: "${ input.text }" }\n';
  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Workflows')),
    err ? errorBox(err) : h('div', {class: 'table-wrap'}, h('table', {class: 'list', 'data-test': 'workflows-table'},
      h('thead', {}, h('tr', {}, ['name', 'latest version', 'hash', 'saved', ''].map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, list.length ? list.map((w) => h('tr', {'data-test': 'workflow-row', 'data-name': w.name},
        h('td', {}, h('a', {href: links.workflow(w.name)}, w.name), w.paused ? [' ', h('span', {class: 'badge st-paused', 'data-test': 'workflow-paused',
          title: `paused${w.paused.actor ? ` by ${w.paused.actor}` : ''} since ${fmtTime(w.paused.since)}${w.paused.reason ? `: ${w.paused.reason}` : ''}; its new starts are held`}, 'paused')] : null),
        h('td', {}, `v${w.version}`), h('td', {}, shortHash(w.hash)),
        h('td', {}, timeEl(w.created_at)), h('td', {}, h('a', {href: links.instances({workflow: w.name})}, 'instances'))))
        : h('tr', {}, h('td', {colspan: 5, class: 'muted'}, 'No workflows saved yet.'))))),
    can('admin') ? h('details', {class: 'card', 'data-test': 'new-workflow'}, h('summary', {}, 'Save a new workflow'),
      // The name is the definition's own; the host checks they agree.
      saveForm(nameOf, example, (res) => {
        location.hash = links.workflow(res.name, res.version);
      })) : null);
}
