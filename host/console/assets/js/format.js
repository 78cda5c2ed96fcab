// DOM building and formatting helpers shared by every page.
//
// Everything the API answers is put into the page as text (textContent,
// setAttribute), never parsed as HTML, so a workflow or an event payload
// cannot inject markup. The CSP forbids inline scripts and style
// attributes anyway; h() refuses a "style" attribute for that reason.

const SVG_NS = 'http://www.w3.org/2000/svg';

// h builds an element: h('a', {href: '#/x', class: 'y', onclick: fn}, 'text', child).
// Attribute values of false, null or undefined are left out; true sets an
// empty attribute. "on..." keys with a function add event listeners.
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s builds an SVG element the same way.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === false || v === null || v === undefined) continue;
    if (k.startsWith('on') && typeof v === 'function') {
      el.addEventListener(k.slice(2), v);
    } else if (k === 'style') {
      throw new Error('inline styles are not allowed by the CSP; set el.style from code');
    } else if (k === 'value' && 'value' in el) {
      el.value = v;
    } else if (k === 'checked' || k === 'selected' || k === 'disabled' || k === 'hidden') {
      el[k] = Boolean(v);
    } else {
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

// append adds children (nodes, strings, numbers, arrays of them; null and
// false are skipped) to el.
export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// clear empties el and appends children.
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// --- times ---

function pad(n, w = 2) {
  return String(Math.abs(Math.trunc(n))).padStart(w, '0');
}

// zoneOffset is the browser's offset from UTC at date d, as UTC+01:00.
export function zoneOffset(d = new Date()) {
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  return `UTC${sign}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
}

// zoneName is the browser's IANA time zone, when it says.
export function zoneName() {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone || '';
  } catch {
    return '';
  }
}

// isZeroTime: Go's zero time.Time as JSON, what an unset time reads as.
function isZeroTime(iso) {
  return !iso || iso.startsWith('0001-01-01');
}

// fmtTime shows an RFC 3339 time in the browser's zone, labelled with its
// offset: 2026-11-25 04:10:03 UTC+01:00. Seconds are enough to read; the
// element from timeEl carries the full value in its title.
export function fmtTime(iso) {
  if (isZeroTime(iso)) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zoneOffset(d)}`;
}

// timeEl is a <time> showing fmtTime, with the exact value as its datetime
// and title.
export function timeEl(iso) {
  if (isZeroTime(iso)) return h('span', {class: 'muted'}, '—');
  return h('time', {datetime: iso, title: `${iso} (UTC)`}, fmtTime(iso));
}

// fmtUTC shows an RFC 3339 time in UTC, to the second: 2026-03-31
// 00:00:00 UTC, as a schedule's fires are named.
export function fmtUTC(iso) {
  if (isZeroTime(iso)) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ` +
    `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} UTC`;
}

// fmtInZone shows an RFC 3339 time in an IANA time zone (a schedule's),
// labelled with the zone's offset then: 2026-03-31 02:00:00 UTC+02:00.
// It answers '' when the browser does not know the zone.
export function fmtInZone(iso, zone) {
  if (isZeroTime(iso)) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  let parts;
  try {
    parts = new Intl.DateTimeFormat('en-US', {timeZone: zone, hourCycle: 'h23', year: 'numeric', month: '2-digit',
      day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit'}).formatToParts(d);
  } catch {
    return '';
  }
  const v = Object.fromEntries(parts.map((x) => [x.type, x.value]));
  const hour = v.hour === '24' ? '00' : v.hour;
  // The offset is the wall clock's distance from UTC at that instant.
  const wall = Date.UTC(Number(v.year), Number(v.month) - 1, Number(v.day), Number(hour), Number(v.minute), Number(v.second));
  const off = Math.round((wall - Math.floor(d.getTime() / 1000) * 1000) / 60000);
  const sign = off >= 0 ? '+' : '-';
  return `${v.year}-${v.month}-${v.day} ${hour}:${v.minute}:${v.second} UTC${sign}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
}

// compareTimes orders two RFC 3339 times to the nanosecond, where a Date
// keeps milliseconds: negative when a is before b, 0 when they are the
// same instant (or either does not parse), positive after.
export function compareTimes(a, b) {
  const split = (iso) => {
    const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(.*)$/.exec(String(iso || ''));
    if (!m) return null;
    const secs = Date.parse(m[1] + m[3]);
    return Number.isNaN(secs) ? null : [secs, Number((m[2] || '').padEnd(9, '0').slice(0, 9))];
  };
  const x = split(a);
  const y = split(b);
  if (!x || !y) return 0;
  return x[0] - y[0] || x[1] - y[1];
}

// fmtDuration shows milliseconds for people: 350ms, 1.2s, 2m 03s, 1h 02m, 3d 4h.
export function fmtDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  const neg = ms < 0;
  ms = Math.abs(ms);
  let out;
  if (ms < 1000) out = `${Math.round(ms)}ms`;
  else if (ms < 60e3) out = `${(ms / 1000).toFixed(ms < 10e3 ? 2 : 1)}s`;
  else if (ms < 3600e3) out = `${Math.floor(ms / 60e3)}m ${pad(Math.floor(ms / 1000) % 60)}s`;
  else if (ms < 86400e3) out = `${Math.floor(ms / 3600e3)}h ${pad(Math.floor(ms / 60e3) % 60)}m`;
  else out = `${Math.floor(ms / 86400e3)}d ${Math.floor(ms / 3600e3) % 24}h`;
  return neg ? `-${out}` : out;
}

// toRFC3339 turns a datetime-local input's value (the browser's zone) into
// an RFC 3339 time with the zone's offset, as the API's filters take it.
export function toRFC3339(local) {
  if (!local) return '';
  const d = new Date(local);
  if (Number.isNaN(d.getTime())) return '';
  const off = -d.getTimezoneOffset();
  const sign = off >= 0 ? '+' : '-';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}` +
    `${sign}${pad(Math.floor(Math.abs(off) / 60))}:${pad(Math.abs(off) % 60)}`;
}

// toLocalInput is toRFC3339's inverse, for filling a datetime-local input:
// with the seconds when there are any, so that applying the filters again
// does not move a bound to the start of its minute.
export function toLocalInput(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return '';
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}${d.getSeconds() ? `:${pad(d.getSeconds())}` : ''}`;
}

// --- values ---

// pretty is JSON indented for reading; undefined shows as nothing.
export function pretty(v) {
  if (v === undefined) return '';
  return JSON.stringify(v, null, 2);
}

// jsonBlock is a <pre> with the value as indented JSON, or a muted
// placeholder for null.
export function jsonBlock(v, attrs = {}) {
  if (v === null || v === undefined) return h('p', {class: 'muted', ...attrs}, 'null');
  return h('pre', {class: 'json', ...attrs}, pretty(v));
}

// shortHash shows the first 12 hex digits of a hash, with the whole as its title.
export function shortHash(hash) {
  if (!hash) return h('span', {class: 'muted'}, '—');
  return h('code', {class: 'hash', title: hash}, hash.slice(0, 12));
}

export const STATUSES = ['pending', 'running', 'suspended', 'paused', 'completed', 'failed', 'cancelled'];
export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

// statusBadge shows an instance status; colour comes from its class.
export function statusBadge(status) {
  return h('span', {class: `badge st-${status}`, 'data-status': status}, status);
}

// fmtBytes shows a size: 3.4 MiB.
export function fmtBytes(n) {
  if (typeof n !== 'number') return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : n.toFixed(1)} ${units[i]}`;
}

// --- links (hash routes) ---

// route builds a hash route from path segments and query parameters;
// segments are escaped, so an id with "/" or "?" stays one segment.
export function route(segments, query = {}) {
  const path = '#/' + segments.map(encodeURIComponent).join('/');
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) {
    if (v !== '' && v !== null && v !== undefined) q.set(k, v);
  }
  const qs = q.toString();
  return qs ? `${path}?${qs}` : path;
}

export const links = {
  instance: (id) => route(['instances', id]),
  workflow: (name, version) => route(['workflows', name], {version}),
  plugin: (name) => route(['plugins', name]),
  instances: (query) => route(['instances'], query),
  schedule: (id) => route(['schedules', id]),
  // A concurrency key's page; no key is the workflow-wide key "".
  flowKey: (workflow, key) => route(['flow', workflow], {key}),
  flows: (query) => route(['flow'], query),
  batch: (id) => route(['batches', id]),
  batches: () => route(['batches']),
};

// --- timing ---

// throttle calls fn at most once per wait ms; calls within the window are
// folded into one call at its end, so the last change is never lost.
export function throttle(fn, wait) {
  let timer = null;
  let last = 0;
  const run = () => {
    timer = null;
    last = Date.now();
    fn();
  };
  const t = () => {
    if (timer) return; // a call is due already; it will see this change
    const d = last + wait - Date.now();
    if (d <= 0) run();
    else timer = setTimeout(run, d);
  };
  t.cancel = () => {
    clearTimeout(timer);
    timer = null;
  };
  return t;
}

// download saves a Blob under a file name, through a temporary link.
export function download(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = h('a', {href: url, download: filename, hidden: true});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}
