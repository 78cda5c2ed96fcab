// Events: a form to send an event, the queued events (waiting for an
// instance to wait for them: GET /v1/events/queued) and the dead letters
// (events no instance took before their time ran out: GET
// /v1/events/dead), both paged by next_cursor.

import * as api from '../api.js';
import {h, replace, timeEl, pretty} from '../format.js';
import {can, errorBox, section, field, actionForm, parseJSONField, notify, prioritySelect} from '../ui.js';

// stimulusList is a table of the stimuli at path, a page at a time with
// a "Load more" button; prefix names its data-test attributes
// (<prefix>-rows, <prefix>-row, <prefix>-more). settled says whether
// the list has the settled column (the dead letters do; queued events
// are not settled yet).
function stimulusList(path, prefix, {empty, settled}) {
  const rows = h('tbody', {'data-test': `${prefix}-rows`});
  const listError = h('div');
  const more = h('button', {type: 'button', hidden: true, 'data-test': `${prefix}-more`, onclick: () => load()}, 'Load more');
  const cols = ['id', 'name', 'key', 'payload', 'sent', settled ? 'expired' : 'expires', 'state'].concat(settled ? ['settled'] : []);
  let cursor = '';
  let count = 0;

  async function load(first = false) {
    more.disabled = true;
    try {
      const page = await api.get(path, {limit: 100, cursor: first ? '' : cursor});
      if (first) {
        rows.replaceChildren();
        count = 0;
      }
      for (const d of page.items || []) {
        count++;
        rows.append(h('tr', {'data-test': `${prefix}-row`, 'data-id': d.id},
          h('td', {}, h('code', {}, d.id)), h('td', {}, h('code', {}, d.name)), h('td', {}, d.key ? h('code', {}, d.key) : h('span', {class: 'muted'}, '—')),
          h('td', {}, d.payload === undefined || d.payload === null ? h('span', {class: 'muted'}, 'null')
            : h('details', {}, h('summary', {}, 'payload'), h('pre', {class: 'json'}, pretty(d.payload)))),
          h('td', {}, timeEl(d.created_at)), h('td', {}, timeEl(d.expires_at)), h('td', {}, d.state || ''),
          settled ? h('td', {}, timeEl(d.settled_at)) : null));
      }
      if (!count) rows.append(h('tr', {}, h('td', {colspan: cols.length, class: 'muted'}, empty)));
      cursor = page.next_cursor || '';
      more.hidden = !cursor;
      listError.replaceChildren();
    } catch (e) {
      replace(listError, errorBox(e, {'data-test': `${prefix}-error`}));
    } finally {
      more.disabled = false;
    }
  }

  const el = [listError,
    h('div', {class: 'table-wrap'}, h('table', {class: 'list'},
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col'}, c)))),
      rows)),
    h('div', {class: 'buttons'}, more)];
  return {el, load};
}

export async function render({main}) {
  const dead = stimulusList('/v1/events/dead', 'dead', {empty: 'No dead letters.', settled: true});
  const queued = stimulusList('/v1/events/queued', 'queued', {empty: 'No queued events.', settled: false});

  const name = h('input', {type: 'text', required: true, placeholder: 'document.approved', 'data-test': 'event-name', autocomplete: 'off'});
  const key = h('input', {type: 'text', placeholder: 'doc-42', 'data-test': 'event-key', autocomplete: 'off'});
  const payload = h('textarea', {class: 'code', rows: 4, spellcheck: 'false', placeholder: '{"approved": true}', 'data-test': 'event-payload'});
  const eventID = h('input', {type: 'text', placeholder: 'made by the host', 'data-test': 'event-id', autocomplete: 'off'});
  const priority = prioritySelect({'data-test': 'event-priority'});

  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Events')),
    can('operator') ? section('Send an event', {'data-test': 'send-event-section'},
      actionForm({'data-test': 'send-event'}, [field('Name', name), field('Key', key, 'The correlation key a wait names; empty for none.'),
        field('Payload (JSON)', payload), field('Id (optional)', eventID, 'Makes the event idempotent: one seen before does nothing again.'),
        field('Priority', priority, 'Of the instances its triggers start: 1 is served first, 5 last. An instance it resumes keeps its own.')], 'Send', async () => {
        const body = {name: name.value.trim()};
        if (key.value.trim()) body.key = key.value.trim();
        const v = parseJSONField(payload.value, 'the payload');
        if (v !== undefined) body.payload = v;
        if (eventID.value.trim()) body.id = eventID.value.trim();
        if (priority.value) body.priority = Number(priority.value);
        const res = await api.post('/v1/events', body);
        notify(`Event ${res.id} sent.`);
        if (res.queued) queued.load(true);
        return h('div', {'data-test': 'event-result'}, h('p', {}, `event ${res.id}: resumed ${(res.resumed || []).join(', ') || 'none'}; started ${(res.started || []).join(', ') || 'none'}${res.queued ? '; queued until an instance waits for it' : ''}`),
          res.warning ? h('p', {class: 'warn'}, res.warning) : null);
      })) : null,
    section('Queued events', {'data-test': 'queued-events'},
      h('p', {class: 'muted'}, 'Events that found nothing waiting for them and started nothing, soonest to expire first. Each is kept for the host\'s engine.stimulus_ttl (24 hours by default) in case an instance waits for its name and key, then moved to the dead letters.'),
      queued.el),
    section('Dead letters', {'data-test': 'dead-letters'},
      h('p', {class: 'muted'}, 'Events that no instance took before their time ran out, kept 7 days. To deliver one after all, send it again, with another id, once something waits for it.'),
      dead.el));
  await Promise.all([queued.load(true), dead.load(true)]);
}
