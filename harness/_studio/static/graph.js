// The graph of a script's possible calls (`Analysis` nodes and edges, from GET /api/runs/{id}) drawn as SVG,
// with the path the run took in green. Laid out here in layers (the longest chain of `next` edges from the
// start decides a node's row; `loop` edges run back up on the right), which is enough for the shapes
// scripts have, so no Mermaid or graph-layout library is shipped; the Mermaid text is offered beside it.

const SVG = 'http://www.w3.org/2000/svg';
const NODE_H = 42;
const ROW = 78;
const GAP = 28;
const CHAR = 7.4;
const PAD = 16;
const LANE = 12;

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

export function layout(graph) {
  const nodes = new Map();
  nodes.set('start', { id: 'start', label: 'start', sub: '', terminal: true, taken: false });
  for (const n of graph.nodes) {
    const tags = [n.in_loop && 'loop', n.in_gather && 'gather', n.in_except && 'except'].filter(Boolean);
    nodes.set(n.id, { id: n.id, label: n.callee, sub: `line ${n.line}` + (tags.length ? ` · ${tags.join(', ')}` : ''),
                      line: n.line, taken: n.taken });
  }
  nodes.set('end', { id: 'end', label: 'end', sub: '', terminal: true, taken: false });
  const forward = graph.edges.filter((e) => e.kind !== 'loop' && nodes.has(e.from) && nodes.has(e.to));
  // Longest path from the start over forward edges (Kahn's order; a cycle among them, which the analysis
  // does not make, would leave its nodes at row 1 rather than hang).
  const indegree = new Map([...nodes.keys()].map((id) => [id, 0]));
  for (const e of forward) indegree.set(e.to, indegree.get(e.to) + 1);
  const row = new Map([...nodes.keys()].map((id) => [id, 0]));
  const queue = [...nodes.keys()].filter((id) => indegree.get(id) === 0);
  while (queue.length) {
    const id = queue.shift();
    for (const e of forward.filter((f) => f.from === id)) {
      row.set(e.to, Math.max(row.get(e.to), row.get(id) + 1));
      indegree.set(e.to, indegree.get(e.to) - 1);
      if (indegree.get(e.to) === 0) queue.push(e.to);
    }
  }
  for (const [id, n] of indegree) if (n > 0) row.set(id, Math.max(row.get(id), 1));
  const last = Math.max(...[...nodes.keys()].filter((id) => id !== 'end').map((id) => row.get(id)));
  row.set('end', Math.max(row.get('end'), last + 1));
  const rows = [];
  for (const [id, r] of row) (rows[r] ||= []).push(id);
  for (let r = 0; r < rows.length; r += 1) rows[r] ||= [];
  const x = new Map();
  for (const ids of rows) {
    // Order a row by where its predecessors sit (fewer crossings), then by line.
    const centre = (id) => {
      const xs = forward.filter((e) => e.to === id && x.has(e.from)).map((e) => x.get(e.from));
      return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
    };
    ids.sort((a, b) => centre(a) - centre(b) || (nodes.get(a).line ?? 0) - (nodes.get(b).line ?? 0));
    ids.forEach((id, i) => x.set(id, i));
  }
  for (const n of nodes.values()) {
    n.w = Math.max(70, Math.ceil(Math.max(n.label.length, n.sub.length) * CHAR) + 2 * PAD);
    n.h = n.terminal ? 30 : NODE_H;
  }
  const widths = rows.map((ids) => ids.reduce((sum, id) => sum + nodes.get(id).w, 0) + GAP * Math.max(ids.length - 1, 0));
  // Edges that skip rows run down the left, loops back up the right: room for a lane per such edge.
  const long = graph.edges.filter((e) => e.kind !== 'loop' && row.get(e.to) - row.get(e.from) > 1).length;
  const back = graph.edges.filter((e) => e.kind === 'loop' || row.get(e.to) <= row.get(e.from)).length;
  const left = 24 + LANE * long;
  const right = 24 + LANE * back;
  const inner = Math.max(...widths, 120);
  const width = inner + 2 * PAD + left + right;
  rows.forEach((ids, r) => {
    let x = PAD + left + (inner - widths[r]) / 2;
    for (const id of ids) {
      const n = nodes.get(id);
      n.row = r;
      n.x = x;
      n.y = PAD + r * ROW + (NODE_H - n.h) / 2;
      x += n.w + GAP;
    }
  });
  return { nodes, width, height: PAD * 2 + (rows.length - 1) * ROW + NODE_H };
}

export function renderGraph(graph) {
  const { nodes, width, height } = layout(graph);
  const root = svg('svg', { class: 'graph', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img',
                            'aria-label': 'the calls this script can make; the path this run took is green' });
  const defs = svg('defs');
  for (const [id, cls] of [['arrow', 'edge-head'], ['arrow-taken', 'edge-head taken']]) {
    // Sized in the drawing's units: a thick (taken) edge keeps an arrowhead of the same size.
    const marker = svg('marker', { id, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 9, markerHeight: 9,
                                   markerUnits: 'userSpaceOnUse', orient: 'auto-start-reverse' });
    marker.append(svg('path', { d: 'M0,0 L10,5 L0,10 z', class: cls }));
    defs.append(marker);
  }
  root.append(defs);
  const edges = svg('g', { class: 'edges' });
  const span = (a, b, side) => {
    // The outermost edge of the nodes in the rows from a to b, on one side.
    const lo = Math.min(a.row, b.row);
    const hi = Math.max(a.row, b.row);
    const inRows = [...nodes.values()].filter((n) => n.row >= lo && n.row <= hi);
    return side === 'left' ? Math.min(...inRows.map((n) => n.x)) : Math.max(...inRows.map((n) => n.x + n.w));
  };
  // Lanes from the inside out, the shortest edges innermost, so lanes cross as little as they can.
  const lanes = new Map();
  for (const side of ['left', 'right']) {
    const edgesOf = graph.edges.filter((e) => {
      const a = nodes.get(e.from);
      const b = nodes.get(e.to);
      if (!a || !b || a === b) return false;
      const backward = e.kind === 'loop' || b.row <= a.row;
      return side === 'right' ? backward : !backward && b.row - a.row > 1;
    });
    edgesOf.sort((p, q) => Math.abs(nodes.get(p.to).row - nodes.get(p.from).row) - Math.abs(nodes.get(q.to).row - nodes.get(q.from).row));
    edgesOf.forEach((e, i) => lanes.set(e, i));
  }
  // Edges not taken first, so the path taken is drawn over them.
  for (const e of [...graph.edges].sort((p, q) => Number(p.taken) - Number(q.taken))) {
    const a = nodes.get(e.from);
    const b = nodes.get(e.to);
    if (!a || !b) continue;
    let d;
    if (a === b) {
      // A call site that loops onto itself: a small loop on its right.
      const x = a.x + a.w;
      d = `M${x},${a.y + 8} C${x + 44},${a.y - 10} ${x + 44},${a.y + a.h + 10} ${x + 2},${a.y + a.h - 8}`;
    } else if (e.kind === 'loop' || b.row <= a.row) {
      // Back up to a loop's start, in a lane right of everything between.
      const lane = span(a, b, 'right') + 14 + LANE * lanes.get(e);
      const y1 = a.y + a.h / 2;
      const y2 = b.y + b.h / 2;
      d = `M${a.x + a.w},${y1} L${lane},${y1} L${lane},${y2} L${b.x + b.w + 2},${y2}`;
    } else if (b.row - a.row > 1) {
      // Past the rows between (a loop or branch that may not run), in a lane left of them.
      const lane = span(a, b, 'left') - 14 - LANE * lanes.get(e);
      const y1 = a.y + a.h / 2;
      const y2 = b.y + b.h / 2;
      d = `M${a.x},${y1} L${lane},${y1} L${lane},${y2} L${b.x - 2},${y2}`;
    } else {
      const x1 = a.x + a.w / 2;
      const y1 = a.y + a.h;
      const x2 = b.x + b.w / 2;
      const y2 = b.y - 2;
      const mid = (y1 + y2) / 2;
      d = `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2}`;
    }
    const path = svg('path', { d, class: `edge ${e.kind}${e.taken ? ' taken' : ''}`,
                               'marker-end': `url(#${e.taken ? 'arrow-taken' : 'arrow'})` });
    path.dataset.from = e.from;
    path.dataset.to = e.to;
    edges.append(path);
  }
  root.append(edges);
  for (const n of nodes.values()) {
    const g = svg('g', { class: `node${n.terminal ? ' terminal' : ''}${n.taken ? ' taken' : ''}`,
                         transform: `translate(${n.x},${n.y})` });
    g.dataset.node = n.id;
    if (n.line) g.dataset.line = String(n.line);
    g.append(svg('rect', { width: n.w, height: n.h, rx: n.terminal ? 15 : 6 }));
    if (n.terminal) {
      g.append(svg('text', { x: n.w / 2, y: n.h / 2 + 4, 'text-anchor': 'middle' }, n.label));
    } else {
      g.append(svg('text', { x: n.w / 2, y: 18, 'text-anchor': 'middle', class: 'callee' }, n.label));
      g.append(svg('text', { x: n.w / 2, y: 33, 'text-anchor': 'middle', class: 'sub' }, n.sub));
    }
    const title = svg('title', {}, n.terminal ? n.label : `${n.label}, ${n.sub}${n.taken ? ' (taken)' : ''}`);
    g.append(title);
    root.append(g);
  }
  return root;
}
