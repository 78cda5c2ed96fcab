// The graph of a workflow definition, drawn as SVG from top to bottom:
// activities, waits, delays, child workflows, sets and fails as boxes;
// an if as a condition with its then and else columns; a parallel as a
// fork and join around its branches; a foreach as a frame around its
// steps with an arrow back to the top. Each step is one
// <g data-step="<id>">, its nested steps inside it.
//
// Layout is recursive: every part measures itself (w, h) and draws at a
// given top-left corner, entering at its top centre and leaving at its
// bottom centre, so sequences stack and columns sit side by side.

import {s as svg, links} from './format.js';

const CHAR = 6.9; // average width of a 12px character, for sizing boxes
const BOX_H = 46;
const GAP = 26; // between steps of a sequence
const COL_GAP = 22; // between columns
const PAD = 14; // inside frames

let seq = 0;

function clip(text, n = 42) {
  text = String(text ?? '');
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

// kindOf names a step's kind from which of the kind fields it has.
export function kindOf(step) {
  for (const k of ['activity', 'wait', 'delay', 'if', 'foreach', 'parallel', 'workflow', 'set', 'fail']) {
    if (step && Object.prototype.hasOwnProperty.call(step, k)) return k;
  }
  return 'unknown';
}

function describe(step, kind) {
  const v = step[kind];
  switch (kind) {
    case 'activity': return String(v);
    case 'wait': return v && typeof v === 'object' ? `wait ${v.event || '?'}${v.timeout ? ` (≤ ${v.timeout})` : ''}` : 'wait';
    case 'delay': return `delay ${v}`;
    case 'workflow': return `child workflow ${v}`;
    case 'set': return `set ${v && typeof v === 'object' ? Object.keys(v).join(', ') : ''}`;
    case 'fail': return `fail ${v && typeof v === 'object' ? v.code || '' : ''}`;
    case 'if': return `if ${typeof v === 'string' ? v : JSON.stringify(v)}`;
    case 'foreach': return `foreach ${typeof v === 'string' ? v : JSON.stringify(v)} as ${step.as || '?'}${step.concurrency > 1 ? ` ×${step.concurrency}` : ''}`;
    case 'parallel': return `parallel, ${Array.isArray(v) ? v.length : 0} branches`;
    default: return 'unknown kind';
  }
}

// box is a leaf: the step's id and a line about what it does.
function box(step, kind, ctx, cls = '') {
  const title = step.id || '(no id)';
  const line = describe(step, kind);
  const w = Math.max(120, Math.min(330, Math.max(clip(title).length, clip(line).length) * CHAR + 24));
  return {
    w, h: BOX_H,
    draw(parent, x, y) {
      const g = svg('g', {class: `node k-${kind} ${cls}`, 'data-kind': kind});
      const link = kind === 'activity' && typeof step.activity === 'string' ? links.plugin(step.activity.split('.')[0])
        : kind === 'workflow' && typeof step.workflow === 'string' ? links.workflow(step.workflow) : null;
      const shape = kind === 'if'
        ? svg('polygon', {class: 'shape', points: `${x + 10},${y} ${x + w - 10},${y} ${x + w},${y + BOX_H / 2} ${x + w - 10},${y + BOX_H} ${x + 10},${y + BOX_H} ${x},${y + BOX_H / 2}`})
        : svg('rect', {class: 'shape', x, y, width: w, height: BOX_H, rx: kind === 'wait' || kind === 'delay' ? 18 : 6});
      const body = [shape,
        kind === 'workflow' ? svg('rect', {class: 'inner', x: x + 3, y: y + 3, width: w - 6, height: BOX_H - 6, rx: 4}) : null,
        svg('text', {class: 'id', x: x + w / 2, y: y + 19, 'text-anchor': 'middle'}, clip(title)),
        svg('text', {class: 'detail', x: x + w / 2, y: y + 35, 'text-anchor': 'middle'}, clip(line)),
        svg('title', {}, `${title}: ${line}`)];
      if (link) g.append(svg('a', {href: link}, body));
      else body.forEach((b) => b && g.append(b));
      parent.append(g);
      return g;
    },
  };
}

function arrow(parent, x1, y1, x2, y2, ctx, cls = '') {
  const d = x1 === x2 ? `M${x1},${y1} V${y2}` : `M${x1},${y1} V${(y1 + y2) / 2} H${x2} V${y2}`;
  parent.append(svg('path', {class: `edge ${cls}`, d, 'marker-end': `url(#${ctx.arrow})`}));
}

function line(parent, x1, y1, x2, y2, cls = '') {
  const d = x1 === x2 ? `M${x1},${y1} V${y2}` : `M${x1},${y1} V${(y1 + y2) / 2} H${x2} V${y2}`;
  parent.append(svg('path', {class: `edge ${cls}`, d}));
}

// sequence stacks steps with arrows between them.
function sequence(steps, ctx) {
  const parts = (Array.isArray(steps) ? steps : []).map((st) => step(st, ctx));
  if (!parts.length) parts.push(passThrough('nothing'));
  const w = Math.max(...parts.map((p) => p.w));
  const h = parts.reduce((a, p) => a + p.h, 0) + GAP * (parts.length - 1);
  return {
    w, h,
    draw(parent, x, y) {
      let cy = y;
      parts.forEach((p, i) => {
        if (i > 0) arrow(parent, x + w / 2, cy - GAP, x + w / 2, cy, ctx);
        p.draw(parent, x + (w - p.w) / 2, cy);
        cy += p.h + GAP;
      });
    },
  };
}

// passThrough is an empty column (an if without else): a line and a word.
function passThrough(label) {
  return {
    w: 70, h: 24,
    draw(parent, x, y) {
      line(parent, x + 35, y, x + 35, y + 24, 'empty');
      parent.append(svg('text', {class: 'label', x: x + 40, y: y + 15}, label));
    },
  };
}

// columns draws a header, its columns side by side with a label each, and
// a join below them; shared by if (then/else) and parallel (branches).
function columns(st, kind, cols, labels, ctx) {
  const head = box(st, kind, ctx);
  const parts = cols.map((c) => sequence(c, ctx));
  const inner = parts.reduce((a, p) => a + p.w, 0) + COL_GAP * (parts.length - 1);
  const w = Math.max(head.w, inner);
  const colH = Math.max(...parts.map((p) => p.h));
  const h = head.h + GAP + 14 + colH + GAP + 8;
  return {
    w, h,
    draw(parent, x, y) {
      const g = svg('g', {class: `step compound k-${kind}`, 'data-step': st.id || '', 'data-kind': kind});
      head.draw(g, x + (w - head.w) / 2, y);
      const top = y + head.h + GAP + 14;
      const joinY = top + colH + GAP;
      const cx = x + w / 2;
      let colX = x + (w - inner) / 2;
      if (kind === 'parallel') {
        g.append(svg('rect', {class: 'bar', x: colX, y: top - 18, width: inner, height: 4}));
        g.append(svg('rect', {class: 'bar', x: colX, y: joinY - 2, width: inner, height: 4}));
        line(g, cx, y + head.h, cx, top - 18);
      }
      parts.forEach((p, i) => {
        const pcx = colX + p.w / 2;
        if (kind === 'parallel') arrow(g, pcx, top - 14, pcx, top, ctx);
        else arrow(g, cx, y + head.h, pcx, top, ctx);
        g.append(svg('text', {class: 'label', x: pcx + 5, y: top - 4}, labels[i]));
        p.draw(g, colX, top);
        line(g, pcx, top + p.h, pcx, joinY);
        if (kind !== 'parallel' && pcx !== cx) line(g, pcx, joinY, cx, joinY);
        colX += p.w + COL_GAP;
      });
      if (kind !== 'parallel') g.append(svg('circle', {class: 'join', cx, cy: joinY + 4, r: 4}));
      else line(g, cx, joinY + 2, cx, joinY + 8);
      parent.append(g);
      return g;
    },
  };
}

function foreach(st, ctx) {
  const head = box(st, 'foreach', ctx);
  const body = sequence(st.do, ctx);
  const w = Math.max(head.w, body.w + 2 * PAD + 16);
  const h = head.h + GAP + body.h + 2 * PAD;
  return {
    w, h,
    draw(parent, x, y) {
      const g = svg('g', {class: 'step compound k-foreach', 'data-step': st.id || '', 'data-kind': 'foreach'});
      head.draw(g, x + (w - head.w) / 2, y);
      const fy = y + head.h + GAP / 2;
      g.append(svg('rect', {class: 'frame', x, y: fy, width: w, height: h - head.h - GAP / 2, rx: 8}));
      const by = fy + PAD + GAP / 2;
      arrow(g, x + w / 2, y + head.h, x + w / 2, by, ctx);
      body.draw(g, x + (w - body.w) / 2, by);
      // the loop: from the end of an iteration back to its start
      const rx = x + w - 8;
      g.append(svg('path', {class: 'edge loop', d: `M${x + w / 2},${by + body.h} V${by + body.h + 6} H${rx} V${by - 6} H${x + w / 2 + 8}`, 'marker-end': `url(#${ctx.arrow})`}));
      g.append(svg('text', {class: 'label', x: rx - 4, y: by + body.h + 2, 'text-anchor': 'end'}, 'next item'));
      parent.append(g);
      return g;
    },
  };
}

function step(st, ctx) {
  if (!st || typeof st !== 'object') return box({id: '?'}, 'unknown', ctx);
  const kind = kindOf(st);
  let part;
  if (kind === 'if') {
    const hasElse = Array.isArray(st.else) && st.else.length > 0;
    // Without else, the false column passes straight to the join.
    part = columns(st, 'if', [st.then, hasElse ? st.else : null], ['then', 'else'], ctx);
  } else if (kind === 'parallel') {
    const branches = Array.isArray(st.parallel) ? st.parallel : [];
    part = columns(st, 'parallel', branches.map((b) => (b && b.steps) || []), branches.map((_, i) => `branch ${i + 1}`), ctx);
  } else if (kind === 'foreach') {
    part = foreach(st, ctx);
  } else {
    const leaf = box(st, kind, ctx);
    part = {
      w: leaf.w, h: leaf.h,
      draw(parent, x, y) {
        const g = svg('g', {class: `step k-${kind}`, 'data-step': st.id || '', 'data-kind': kind});
        leaf.draw(g, x, y);
        parent.append(g);
        return g;
      },
    };
  }
  return withStatus(st, part, ctx);
}

// withStatus marks a drawn step with its state in an instance, when the
// graph is drawn for one (ctx.status: step id → completed, failed, running).
function withStatus(st, part, ctx) {
  return {
    w: part.w, h: part.h,
    draw(parent, x, y) {
      const g = part.draw(parent, x, y);
      const state = ctx.status && ctx.status.get(st.id);
      if (g && state) g.classList.add(`s-${state}`);
      return g;
    },
  };
}

// render draws the definition def (as parsed from its source). opts.status
// maps step ids to a state to colour them by.
export function render(def, opts = {}) {
  const ctx = {arrow: `arrow-${++seq}`, status: opts.status};
  const triggers = Array.isArray(def.triggers) ? def.triggers : [];
  const body = sequence(def.steps, ctx);
  const startH = 22;
  const trigH = triggers.length ? 30 : 0;
  const margin = 16;
  // Room for the labels beside the start and end circles too.
  const w = Math.max(body.w, triggers.length * 160, 240) + 2 * margin;
  const h = margin + trigH + startH + GAP + body.h + GAP + startH + margin;
  const root = svg('svg', {xmlns: 'http://www.w3.org/2000/svg', class: 'graph', width: w, height: h, viewBox: `0 0 ${w} ${h}`,
    role: 'img', 'aria-label': `Steps of workflow ${def.name || ''}`, 'data-test': 'workflow-graph'},
  svg('title', {}, `Steps of workflow ${def.name || ''}`),
  svg('defs', {}, svg('marker', {id: ctx.arrow, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse'},
    svg('path', {class: 'arrowhead', d: 'M0,0 L10,5 L0,10 z'}))));
  const cx = w / 2;
  let y = margin;
  if (triggers.length) {
    const tw = 150;
    let tx = cx - (triggers.length * (tw + 10) - 10) / 2;
    for (const t of triggers) {
      root.append(svg('g', {class: 'trigger', 'data-trigger': t.event || ''},
        svg('rect', {x: tx, y, width: tw, height: 22, rx: 11}),
        svg('text', {x: tx + tw / 2, y: y + 15, 'text-anchor': 'middle'}, clip(`on ${t.event}`, 22))));
      line(root, tx + tw / 2, y + 22, cx, y + trigH + 2);
      tx += tw + 10;
    }
    y += trigH;
  }
  root.append(svg('g', {class: 'terminal', 'data-test': 'graph-start'}, svg('circle', {cx, cy: y + startH / 2, r: 9}),
    svg('text', {x: cx + 14, y: y + startH / 2 + 4}, 'start')));
  arrow(root, cx, y + startH / 2 + 9, cx, y + startH + GAP, ctx);
  y += startH + GAP;
  body.draw(root, cx - body.w / 2, y);
  y += body.h;
  arrow(root, cx, y, cx, y + GAP, ctx);
  y += GAP;
  root.append(svg('g', {class: 'terminal end', 'data-test': 'graph-end'}, svg('circle', {cx, cy: y + startH / 2, r: 9}),
    svg('circle', {class: 'dot', cx, cy: y + startH / 2, r: 4}),
    svg('text', {x: cx + 14, y: y + startH / 2 + 4}, def.output !== undefined ? 'end, with output' : 'end')));
  return root;
}
