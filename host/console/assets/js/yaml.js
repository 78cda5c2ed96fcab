// A reader for the YAML that workflow definitions are written in, enough
// to draw their graph: block mappings and sequences (compact ones
// included), flow mappings and sequences over several lines, plain,
// single- and double-quoted scalars, literal and folded block scalars,
// comments, anchors and aliases, and a leading "---". JSON is read by
// JSON.parse. The host validates definitions; this only has to read the
// ones it accepted, and says where it gave up on one it cannot.

export class YamlError extends Error {
  constructor(message, line) {
    super(line ? `line ${line}: ${message}` : message);
    this.line = line;
  }
}

// parse reads a definition's source, JSON or YAML, into plain values.
export function parse(src) {
  const t = src.trim();
  if (t.startsWith('{') || t.startsWith('[')) {
    try {
      return JSON.parse(t);
    } catch {
      // flow YAML that is not JSON: read on as YAML
    }
  }
  return new Reader(src).document();
}

// stripComment cuts a "#" comment (at the start, or after whitespace)
// that is outside quotes, and trailing spaces.
function stripComment(s) {
  let q = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (q === '"') {
      if (c === '\\') i++;
      else if (c === '"') q = '';
    } else if (q === "'") {
      if (c === "'") {
        if (s[i + 1] === "'") i++;
        else q = '';
      }
    } else if (c === '"' || c === "'") {
      // a quote opens a quoted scalar only at the start of a value
      const prev = s.slice(0, i).trimEnd();
      if (prev === '' || /[-:[{,?]$/.test(prev)) q = c;
    } else if (c === '#' && (i === 0 || s[i - 1] === ' ' || s[i - 1] === '\t')) {
      return s.slice(0, i).trimEnd();
    }
  }
  return s.trimEnd();
}

// keySplit finds a block mapping's "key: value" in a line's text: the
// index of the ":" that ends the key, or -1.
function keySplit(s) {
  let i = 0;
  if (s[0] === '"' || s[0] === "'") {
    const q = s[0];
    for (i = 1; i < s.length; i++) {
      if (q === '"' && s[i] === '\\') i++;
      else if (s[i] === q) {
        if (q === "'" && s[i + 1] === "'") i++;
        else break;
      }
    }
    i++;
    while (s[i] === ' ') i++;
    return s[i] === ':' && (i + 1 === s.length || s[i + 1] === ' ') ? i : -1;
  }
  if (s[0] === '[' || s[0] === '{' || s[0] === '-' && (s[1] === ' ' || s.length === 1)) return -1;
  for (; i < s.length; i++) {
    if (s[i] === ':' && (i + 1 === s.length || s[i + 1] === ' ' || s[i + 1] === '\t')) return i;
    if (s[i] === ' ' && s[i + 1] === '#') return -1;
  }
  return -1;
}

function isSeqItem(s) {
  return s === '-' || s.startsWith('- ');
}

// scalar types a plain scalar as YAML 1.2's core schema does.
function plainScalar(s) {
  if (/^(null|Null|NULL|~|)$/.test(s)) return null;
  if (/^(true|True|TRUE)$/.test(s)) return true;
  if (/^(false|False|FALSE)$/.test(s)) return false;
  if (/^[-+]?[0-9]+$/.test(s)) return Number(s);
  if (/^0x[0-9a-fA-F]+$/.test(s)) return parseInt(s.slice(2), 16);
  if (/^0o[0-7]+$/.test(s)) return parseInt(s.slice(2), 8);
  if (/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/.test(s)) return Number(s);
  if (/^[-+]?\.(inf|Inf|INF)$/.test(s)) return s.startsWith('-') ? -Infinity : Infinity;
  if (/^\.(nan|NaN|NAN)$/.test(s)) return NaN;
  return s;
}

const ESC = {0: '\0', a: '\x07', b: '\b', t: '\t', '\t': '\t', n: '\n', v: '\v', f: '\f', r: '\r', e: '\x1b', ' ': ' ', '"': '"', '/': '/', '\\': '\\', N: '\x85', _: '\xa0', L: '\u2028', P: '\u2029'};

class Reader {
  constructor(src) {
    this.lines = [];
    const raw = src.replace(/^\uFEFF/, '').split(/\r\n|\r|\n/);
    for (let i = 0; i < raw.length; i++) {
      const r = raw[i];
      if (/^\.\.\.\s*$/.test(r)) break;
      const m = r.match(/^( *)(.*)$/);
      this.lines.push({no: i + 1, indent: m[1].length, raw: r, text: stripComment(m[2])});
    }
    this.pos = 0;
    this.anchors = new Map();
  }

  // peek is the next line with content, skipping blank and comment lines.
  peek() {
    while (this.pos < this.lines.length && this.lines[this.pos].text === '') this.pos++;
    return this.lines[this.pos] || null;
  }

  document() {
    let l = this.peek();
    while (l && (l.text.startsWith('%') || /^---(\s|$)/.test(l.text))) {
      if (/^---(\s|$)/.test(l.text)) {
        const rest = l.text.slice(3).trim();
        if (rest) {
          l.text = rest;
          l.indent += 4;
          break;
        }
      }
      this.pos++;
      l = this.peek();
    }
    if (!l) return null;
    const v = this.block(0);
    const extra = this.peek();
    if (extra) {
      if (/^---(\s|$)/.test(extra.text)) throw new YamlError('more than one YAML document', extra.no);
      throw new YamlError(`unexpected content at indentation ${extra.indent}`, extra.no);
    }
    return v;
  }

  // block reads the node that starts at the next line, if it is indented
  // at least min.
  block(min) {
    const l = this.peek();
    if (!l || l.indent < min) return null;
    if (isSeqItem(l.text)) return this.seq(l.indent);
    if (keySplit(l.text) >= 0) return this.map(l.indent);
    this.pos++;
    return this.inline(l.text, l, min - 1);
  }

  map(indent) {
    const out = {};
    for (;;) {
      const l = this.peek();
      if (!l || l.indent !== indent || isSeqItem(l.text)) break;
      const i = keySplit(l.text);
      if (i < 0) throw new YamlError(`expected "key: value", got ${JSON.stringify(l.text)}`, l.no);
      const keyText = l.text.slice(0, i).trim();
      const key = keyText.startsWith('"') || keyText.startsWith("'") ? this.quoted(keyText, l).value : keyText;
      if (key === '<<') throw new YamlError('merge keys (<<) are not supported', l.no);
      this.pos++;
      out[key] = this.value(l.text.slice(i + 1).trim(), l, indent);
    }
    return out;
  }

  seq(indent) {
    const out = [];
    for (;;) {
      const l = this.peek();
      if (!l || l.indent !== indent || !isSeqItem(l.text)) break;
      const rest = l.text.slice(1);
      const trimmed = rest.trim();
      if (trimmed && (keySplit(trimmed) >= 0 || isSeqItem(trimmed))) {
        // A compact node: "- id: x" starts a mapping (or "- - a" a
        // sequence) whose indentation is where its first key is.
        const offset = 1 + (rest.length - rest.trimStart().length);
        l.indent += offset;
        l.text = trimmed;
        out.push(isSeqItem(trimmed) ? this.seq(l.indent) : this.map(l.indent));
      } else {
        this.pos++;
        out.push(this.value(trimmed, l, indent));
      }
    }
    return out;
  }

  // value reads what follows "key:" or "- " on line l (its text rest),
  // and the lines below it that belong to it.
  value(rest, l, indent) {
    let anchor = '';
    const am = rest.match(/^&([^\s,[\]{}]+)\s*/);
    if (am) {
      anchor = am[1];
      rest = rest.slice(am[0].length);
    }
    let tag = '';
    const tm = rest.match(/^!(\S*)\s*/);
    if (tm) {
      tag = tm[1];
      rest = rest.slice(tm[0].length);
    }
    let v;
    if (rest === '') {
      const n = this.peek();
      if (n && n.indent > indent) v = this.block(indent + 1);
      else if (n && n.indent === indent && isSeqItem(n.text) && !isSeqItem(l.text.trimStart())) v = this.seq(indent);
      else v = null;
    } else if (rest[0] === '|' || rest[0] === '>') {
      v = this.blockScalar(rest, l, indent);
    } else {
      v = this.inline(rest, l, indent);
    }
    if (tag === '!str' && v !== null && typeof v !== 'object') v = String(v);
    if (anchor) this.anchors.set(anchor, v);
    return v;
  }

  // inline reads a value written on the line: an alias, a flow
  // collection or quoted scalar (which may go on over the next lines), or
  // a plain scalar (continued on lines indented more than indent).
  inline(text, l, indent) {
    if (text[0] === '*') {
      const name = text.slice(1).trim();
      if (!this.anchors.has(name)) throw new YamlError(`unknown alias *${name}`, l.no);
      return this.anchors.get(name);
    }
    if (text[0] === '[' || text[0] === '{' || text[0] === '"' || text[0] === "'") {
      let src = text;
      for (;;) {
        try {
          const f = new Flow(src, l.no, this.anchors);
          const v = f.value();
          f.end();
          return v;
        } catch (e) {
          // An unterminated collection or string goes on on the next line.
          const n = this.lines[this.pos];
          if (!(e instanceof Unterminated) || !n) throw e instanceof Unterminated ? new YamlError(e.message, l.no) : e;
          this.pos++;
          src += text[0] === '"' || text[0] === "'" ? ` ${n.raw.trim()}` : ` ${n.text.trim()}`;
        }
      }
    }
    let s = text;
    for (;;) {
      const n = this.peek();
      if (!n || n.indent <= indent || isSeqItem(n.text) && n.indent <= indent + 1) break;
      if (keySplit(n.text) >= 0) break;
      s += ` ${n.text.trim()}`;
      this.pos++;
    }
    return plainScalar(s);
  }

  quoted(text, l) {
    const f = new Flow(text, l.no, this.anchors);
    return {value: f.value()};
  }

  blockScalar(header, l, indent) {
    const m = header.match(/^([|>])([-+]?)([1-9]?)([-+]?)\s*$/);
    if (!m) throw new YamlError(`bad block scalar header ${JSON.stringify(header)}`, l.no);
    const folded = m[1] === '>';
    const chomp = m[2] || m[4];
    let contentIndent = m[3] ? indent + Number(m[3]) : -1;
    const body = [];
    while (this.pos < this.lines.length) {
      const n = this.lines[this.pos];
      const blank = n.raw.trim() === '';
      if (!blank) {
        if (contentIndent < 0) contentIndent = n.indent;
        if (n.indent < contentIndent || n.indent <= indent) break;
      }
      body.push(blank ? '' : n.raw.slice(contentIndent));
      this.pos++;
    }
    let trailing = 0;
    while (body.length && body[body.length - 1] === '') {
      body.pop();
      trailing++;
    }
    let s;
    if (folded) {
      s = '';
      for (let i = 0; i < body.length; i++) {
        const line = body[i];
        if (i > 0) {
          const prev = body[i - 1];
          s += prev === '' || line === '' || /^\s/.test(line) || /^\s/.test(prev) ? '\n' : ' ';
        }
        s += line;
      }
      s = s.replace(/\n\n/g, '\n');
    } else {
      s = body.join('\n');
    }
    if (chomp === '-' || body.length === 0) return s;
    return chomp === '+' ? s + '\n'.repeat(trailing + 1) : `${s}\n`;
  }
}

class Unterminated extends Error {}

// Flow reads flow collections and quoted scalars from one string.
class Flow {
  constructor(s, line, anchors) {
    this.s = s;
    this.i = 0;
    this.line = line;
    this.anchors = anchors;
  }

  ws() {
    while (this.i < this.s.length && /\s/.test(this.s[this.i])) this.i++;
  }

  end() {
    this.ws();
    if (this.i < this.s.length) throw new YamlError(`unexpected ${JSON.stringify(this.s.slice(this.i, this.i + 10))} after a value`, this.line);
  }

  value(inFlow = false) {
    this.ws();
    const c = this.s[this.i];
    if (c === undefined) throw new Unterminated('the value ends early');
    if (c === '{') return this.mapping();
    if (c === '[') return this.sequence();
    if (c === '"') return this.double();
    if (c === "'") return this.single();
    if (c === '*') {
      const m = this.s.slice(this.i + 1).match(/^[^\s,[\]{}]+/);
      this.i += 1 + m[0].length;
      return this.anchors.get(m[0]) ?? null;
    }
    return this.plain(inFlow);
  }

  plain(inFlow) {
    const start = this.i;
    while (this.i < this.s.length) {
      const c = this.s[this.i];
      if (inFlow && (c === ',' || c === ']' || c === '}')) break;
      if (c === ':' && (this.i + 1 === this.s.length || /[\s,\]}]/.test(this.s[this.i + 1]))) break;
      this.i++;
    }
    return plainScalar(this.s.slice(start, this.i).trim());
  }

  mapping() {
    const out = {};
    this.i++;
    for (;;) {
      this.ws();
      if (this.i >= this.s.length) throw new Unterminated('a flow mapping is not closed with }');
      if (this.s[this.i] === '}') {
        this.i++;
        return out;
      }
      const k = this.value(true);
      this.ws();
      let v = null;
      if (this.s[this.i] === ':') {
        this.i++;
        this.ws();
        v = this.s[this.i] === ',' || this.s[this.i] === '}' ? null : this.value(true);
      }
      out[String(k)] = v;
      this.ws();
      if (this.s[this.i] === ',') this.i++;
      else if (this.s[this.i] !== '}' && this.i < this.s.length) throw new YamlError(`expected , or } in a flow mapping, got ${JSON.stringify(this.s[this.i])}`, this.line);
    }
  }

  sequence() {
    const out = [];
    this.i++;
    for (;;) {
      this.ws();
      if (this.i >= this.s.length) throw new Unterminated('a flow sequence is not closed with ]');
      if (this.s[this.i] === ']') {
        this.i++;
        return out;
      }
      let v = this.value(true);
      this.ws();
      if (this.s[this.i] === ':') {
        // a single-pair mapping inside a sequence: [a: 1]
        this.i++;
        v = {[String(v)]: this.value(true)};
        this.ws();
      }
      out.push(v);
      if (this.s[this.i] === ',') this.i++;
      else if (this.s[this.i] !== ']' && this.i < this.s.length) throw new YamlError(`expected , or ] in a flow sequence, got ${JSON.stringify(this.s[this.i])}`, this.line);
    }
  }

  double() {
    let out = '';
    this.i++;
    while (this.i < this.s.length) {
      const c = this.s[this.i++];
      if (c === '"') return out;
      if (c !== '\\') {
        out += c;
        continue;
      }
      const e = this.s[this.i++];
      if (e === 'x' || e === 'u' || e === 'U') {
        const n = {x: 2, u: 4, U: 8}[e];
        out += String.fromCodePoint(parseInt(this.s.slice(this.i, this.i + n), 16));
        this.i += n;
      } else if (e in ESC) {
        out += ESC[e];
      } else if (e === undefined) {
        break;
      } else {
        throw new YamlError(`unknown escape \\${e}`, this.line);
      }
    }
    throw new Unterminated('a double-quoted string is not closed');
  }

  single() {
    let out = '';
    this.i++;
    while (this.i < this.s.length) {
      const c = this.s[this.i++];
      if (c === "'") {
        if (this.s[this.i] === "'") {
          out += "'";
          this.i++;
        } else {
          return out;
        }
      } else {
        out += c;
      }
    }
    throw new Unterminated('a single-quoted string is not closed');
  }
}
