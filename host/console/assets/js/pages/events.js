// Events: the dead letters (events no instance took before their time ran
// out), and a form to send an event. Queued events, waiting for an
// instance to wait for them, are not listed: the API has no endpoint for
// them (docs/http-api.md).

import * as api from '../api.js';
import {h, replace, timeEl, pretty} from '../format.js';
import {can, errorBox, section, field, actionForm, parseJSONField, notify} from '../ui.js';

export async function render({main}) {
  const rows = h('tbody', {'data-test': 'dead-rows'});
  const listError = h('div');
  const more = h('button', {type: 'button', hidden: true, 'data-test': 'dead-more', onclick: () => load()}, 'Load more');
  let cursor = '';
  let count = 0;

  async function load(first = false) {
    more.disabled = true;
    try {
      const page = await api.get('/v1/events/dead', {limit: 100, cursor: first ? '' : cursor});
      if (first) rows.replaceChildren();
      for (const d of page.items || []) {
        count++;
        rows.append(h('tr', {'data-test': 'dead-row', 'data-id': d.id},
          h('td', {}, h('code', {}, d.id)), h('td', {}, h('code', {}, d.name)), h('td', {}, d.key ? h('code', {}, d.key) : h('span', {class: 'muted'}, '—')),
          h('td', {}, d.payload === undefined || d.payload === null ? h('span', {class: 'muted'}, 'null')
            : h('details', {}, h('summary', {}, 'payload'), h('pre', {class: 'json'}, pretty(d.payload)))),
          h('td', {}, timeEl(d.created_at)), h('td', {}, timeEl(d.expires_at)), h('td', {}, d.state || ''), h('td', {}, timeEl(d.settled_at))));
      }
      if (!count) rows.append(h('tr', {}, h('td', {colspan: 8, class: 'muted'}, 'No dead letters.')));
      cursor = page.next_cursor || '';
      more.hidden = !cursor;
      listError.replaceChildren();
    } catch (e) {
      replace(listError, errorBox(e));
    } finally {
      more.disabled = false;
    }
  }

  const name = h('input', {type: 'text', required: true, placeholder: 'document.approved', 'data-test': 'event-name', autocomplete: 'off'});
  const key = h('input', {type: 'text', placeholder: 'doc-42', 'data-test': 'event-key', autocomplete: 'off'});
  const payload = h('textarea', {class: 'code', rows: 4, spellcheck: 'false', placeholder: '{"approved": true}', 'data-test': 'event-payload'});
  const eventID = h('input', {type: 'text', placeholder: 'made by the host', 'data-test': 'event-id', autocomplete: 'off'});

  replace(main,
    h('div', {class: 'page-head'}, h('h1', {}, 'Events')),
    can('operator') ? section('Send an event', {'data-test': 'send-event-section'},
      actionForm({'data-test': 'send-event'}, [field('Name', name), field('Key', key, 'The correlation key a wait names; empty for none.'),
        field('Payload (JSON)', payload), field('Id (optional)', eventID, 'Makes the event idempotent: one seen before does nothing again.')], 'Send', async () => {
        const body = {name: name.value.trim()};
        if (key.value.trim()) body.key = key.value.trim();
        const v = parseJSONField(payload.value, 'the payload');
        if (v !== undefined) body.payload = v;
        if (eventID.value.trim()) body.id = eventID.value.trim();
        const res = await api.post('/v1/events', body);
        notify(`Event ${res.id} sent.`);
        return h('div', {'data-test': 'event-result'}, h('p', {}, `event ${res.id}: resumed ${(res.resumed || []).join(', ') || 'none'}; started ${(res.started || []).join(', ') || 'none'}${res.queued ? '; queued until an instance waits for it' : ''}`),
          res.warning ? h('p', {class: 'warn'}, res.warning) : null);
      })) : null,
    section('Dead letters', {'data-test': 'dead-letters'},
      h('p', {class: 'muted'}, 'Events that no instance took before their time ran out, kept 7 days. To deliver one after all, send it again, with another id, once something waits for it.'),
      listError,
      h('div', {class: 'table-wrap'}, h('table', {class: 'list'},
        h('thead', {}, h('tr', {}, ['id', 'name', 'key', 'payload', 'sent', 'expired', 'state', 'settled'].map((c) => h('th', {scope: 'col'}, c)))),
        rows)),
      h('div', {class: 'buttons'}, more)),
    section('Queued events', {'data-test': 'queued-events'},
      h('p', {class: 'muted'}, 'Events waiting for an instance to wait for them are kept for the host\'s engine.stimulus_ttl (24 hours by default), then moved to the dead letters. The API does not list them, so the console cannot show them.')));
  await load(true);
}
