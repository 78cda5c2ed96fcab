// The API client: requests to /v1 with the tab's bearer token, problem
// answers turned into ApiError, and server-sent event streams read with
// fetch (EventSource cannot send an Authorization header).
//
// The token lives in sessionStorage: it is gone when the tab closes, is
// never written to a cookie (so no other site's page can send it) and
// never into a URL (so it is in no history, log or Referer).

const TOKEN_KEY = 'weft.token';

export function token() {
  try {
    return sessionStorage.getItem(TOKEN_KEY) || '';
  } catch {
    return '';
  }
}

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// ApiError is a refused request: the problem's fields, or what could be
// said when the answer was not a problem.
export class ApiError extends Error {
  constructor(status, problem, path, method = 'GET') {
    const detail = problem.detail || problem.title || `HTTP ${status}`;
    super(detail);
    this.name = 'ApiError';
    this.status = status;
    this.type = problem.type || '';
    this.detail = detail;
    this.errors = Array.isArray(problem.errors) ? problem.errors : [];
    this.requestId = problem.request_id || '';
    this.problem = problem;
    this.path = path;
    this.method = method;
  }
}

// The page registers how to ask for a token; requests that get a 401 wait
// for it and try again. One prompt serves every request waiting at once.
let askToken = null;
let asking = null;

export function onUnauthorized(fn) {
  askToken = fn;
}

async function obtainToken(err) {
  if (!askToken) throw err;
  if (!asking) {
    asking = askToken(err).finally(() => {
      asking = null;
    });
  }
  const t = await asking; // rejects when the person gives up
  if (!t) throw err;
}

// url joins a path and query parameters, leaving out empty ones.
export function url(path, query) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== '' && v !== null && v !== undefined) q.set(k, String(v));
  }
  const qs = q.toString();
  return qs ? `${path}?${qs}` : path;
}

// p escapes one path segment, an instance id or a name (docs/http-api.md, Paths).
export const p = encodeURIComponent;

function headers(extra) {
  const hd = {Accept: 'application/json, application/problem+json', ...extra};
  const t = token();
  if (t) hd.Authorization = `Bearer ${t}`;
  return hd;
}

// problemOf reads a refused answer into an ApiError.
async function problemOf(res, path, method = 'GET') {
  let problem = {};
  const text = await res.text().catch(() => '');
  try {
    problem = JSON.parse(text);
  } catch {
    problem = {detail: text.trim() ? `HTTP ${res.status}: ${text.trim().slice(0, 300)}` : `HTTP ${res.status} ${res.statusText}`};
  }
  if (typeof problem !== 'object' || problem === null) problem = {detail: String(problem)};
  return new ApiError(res.status, problem, path, method);
}

// request sends one request. opts: query, json (a body sent as JSON),
// body and contentType (a raw body), blob (answer as a Blob), signal.
// It answers the decoded JSON (null for 204), or throws ApiError. A 401
// asks for a token and tries again until the person gives up.
export async function request(method, path, opts = {}) {
  for (;;) {
    const extra = {};
    let body;
    if (opts.json !== undefined) {
      extra['Content-Type'] = 'application/json';
      body = JSON.stringify(opts.json);
    } else if (opts.body !== undefined) {
      extra['Content-Type'] = opts.contentType || 'application/octet-stream';
      body = opts.body;
    }
    let res;
    try {
      res = await fetch(url(path, opts.query), {
        method, headers: headers(extra), body, signal: opts.signal,
        cache: 'no-store', credentials: 'omit',
      });
    } catch (e) {
      if (e.name === 'AbortError') throw e;
      throw new ApiError(0, {detail: `cannot reach the host: ${e.message}`}, path, method);
    }
    if (res.status === 401) {
      const err = await problemOf(res, path, method);
      await obtainToken(err);
      continue;
    }
    if (!res.ok) throw await problemOf(res, path, method);
    if (opts.blob) return res.blob();
    if (res.status === 204) return null;
    const text = await res.text();
    return text ? JSON.parse(text) : null;
  }
}

export const get = (path, query, opts = {}) => request('GET', path, {...opts, query});
export const post = (path, json, opts = {}) => request('POST', path, {...opts, json});

// all reads every page of a list, following next_cursor, up to max items.
export async function all(path, query = {}, max = 10000) {
  const items = [];
  let cursor = '';
  do {
    const page = await get(path, {...query, limit: query.limit || 1000, cursor});
    items.push(...(page.items || []));
    cursor = page.next_cursor || '';
  } while (cursor && items.length < max);
  return items;
}

// history reads an instance's whole history; its pages go by seq (after).
export async function history(id) {
  const items = [];
  let after = '';
  for (;;) {
    const page = await get(`/v1/instances/${p(id)}/history`, {limit: 1000, after});
    items.push(...(page.items || []));
    if (!page.next_cursor) return items;
    after = page.next_cursor;
  }
}

// stream reads a server-sent event stream at path for as long as it is
// not closed: onEvent(type, data) for each event whose data is JSON,
// onState(state, error, delay) as it connects ('open'), fails ('error',
// with the ApiError) or waits delay ms to reconnect ('retry', with the
// error that ended the last try, if one did). When the stream ends, it
// reconnects with a doubling backoff (1s to 30s, back to 1s once an event
// arrived) unless reconnect(error) says no; error is the ApiError that
// ended the last try, or null when the host ended the stream (a list
// stream at a shutdown, an instance's stream once it finished). It
// answers {close()}.
export function stream(path, {query, onEvent, onState = () => {}, reconnect = () => true}) {
  const ctl = new AbortController();
  let closed = false;
  let backoff = 1000;
  const sleep = (ms) => new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    ctl.signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    }, {once: true});
  });

  async function once() {
    const res = await fetch(url(path, query), {
      headers: {...headers(), Accept: 'text/event-stream'},
      signal: ctl.signal, cache: 'no-store', credentials: 'omit',
    });
    if (res.status === 401) {
      const err = await problemOf(res, path);
      try {
        await obtainToken(err);
      } catch {
        // The person gave up on a token: say so once, and stop asking.
        closed = true;
        onState('error', err);
      }
      return;
    }
    if (!res.ok) throw await problemOf(res, path);
    if (!res.body) throw new ApiError(0, {detail: 'this browser cannot read streamed answers'}, path);
    onState('open');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    let type = 'message';
    let data = [];
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buf += value;
      let nl;
      while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (data.length) {
            backoff = 1000;
            const text = data.join('\n');
            let v;
            try {
              v = JSON.parse(text);
            } catch {
              v = text;
            }
            onEvent(type, v);
          }
          type = 'message';
          data = [];
        } else if (line.startsWith(':')) {
          // a keep-alive
        } else {
          const i = line.indexOf(':');
          const field = i < 0 ? line : line.slice(0, i);
          let val = i < 0 ? '' : line.slice(i + 1);
          if (val.startsWith(' ')) val = val.slice(1);
          if (field === 'event') type = val;
          else if (field === 'data') data.push(val);
        }
      }
    }
  }

  (async () => {
    while (!closed) {
      let failed = null;
      try {
        await once();
      } catch (e) {
        if (closed || e.name === 'AbortError') return;
        failed = e instanceof ApiError ? e : new ApiError(0, {detail: `the live stream failed: ${e.message}`}, path);
        onState('error', failed);
      }
      if (closed || !reconnect(failed)) return;
      onState('retry', failed, backoff);
      await sleep(backoff);
      backoff = Math.min(backoff * 2, 30000);
    }
  })();

  return {
    close() {
      closed = true;
      ctl.abort();
    },
  };
}

// --- plugins, recorded attempts and shadow runs (docs/replay.md) ---

// putPlugin uploads a module as a new version of plugin name (admin):
// the version it becomes is the module's hash, so uploading the same
// bytes twice makes one version.
export function putPlugin(name, wasm) {
  return request('PUT', `/v1/plugins/${p(name)}`, {body: wasm, contentType: 'application/wasm'});
}

// tapes answers the summaries of an instance's recorded attempts, in the
// order of its definition and executions (one page: the host answers
// them all).
export async function tapes(id) {
  const page = await get(`/v1/instances/${p(id)}/tapes`);
  return (page && page.items) || [];
}

// replayTape replays the recorded attempt key (a tape summary's key)
// against the version that recorded it, or against candidate (a
// module's bytes) when given (admin), and answers the report.
export function replayTape(key, candidate) {
  const opts = {query: {step: key.step_path, exec: key.exec}};
  if (candidate) Object.assign(opts, {body: candidate, contentType: 'application/wasm'});
  return request('POST', `/v1/instances/${p(key.instance_id)}/tapes/${encodeURIComponent(String(key.attempt))}/replay`, opts);
}

// shadowRun replays plugin's recorded attempts, newest first, against
// candidate (a module's bytes) and the versions that recorded them, and
// answers the report (admin). query: last (how many, 1 to 1000; the
// host's default when empty), workflow, since (RFC 3339).
export function shadowRun(plugin, candidate, query = {}) {
  return request('POST', `/v1/plugins/${p(plugin)}/shadow`, {query, body: candidate, contentType: 'application/wasm'});
}
