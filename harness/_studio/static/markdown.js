// Markdown for the orchestrator's answers, rendered into DOM nodes: every piece of model text becomes a text
// node (textContent), never markup, so an answer cannot inject HTML or script into the page. It covers what
// models write: headings, paragraphs, lists (nested), fenced code (Python highlighted), quotes, tables, rules,
// and inline code, bold, italic, strikethrough and http(s) links. An unclosed fence (an answer still streaming)
// runs to the end.

import { highlight } from './python.js';

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)/;
const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
const RULE = /^ {0,3}([-*_])(\s*\1){2,}\s*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])\s+(.*)$/;
const TABLE_SEP = /^\s*\|?\s*:?-{1,}:?\s*(\|\s*:?-{1,}:?\s*)*\|?\s*$/;

function el(tag, className) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  return node;
}

export function renderMarkdown(text) {
  const root = el('div', 'markdown');
  blocks(String(text ?? '').replace(/\r\n?/g, '\n').split('\n'), root);
  return root;
}

function blocks(lines, parent) {
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i += 1; continue; }
    let m;
    if ((m = FENCE.exec(line))) {
      const close = new RegExp('^ {0,3}' + m[1][0] + '{' + m[1].length + ',}\\s*$');
      const body = [];
      i += 1;
      while (i < lines.length && !close.test(lines[i])) body.push(lines[i++]);
      i += 1;
      const code = body.join('\n');
      if (/^(py|python|python3)$/i.test(m[2])) {
        parent.append(highlight(code, { numbers: false }));
      } else {
        const pre = el('pre', 'code');
        const inner = el('code');
        inner.textContent = code;
        pre.append(inner);
        parent.append(pre);
      }
      continue;
    }
    if ((m = HEADING.exec(line))) {
      const h = el('h' + Math.min(m[1].length + 2, 6));
      inline(m[2], h);
      parent.append(h);
      i += 1;
      continue;
    }
    if (RULE.test(line)) { parent.append(el('hr')); i += 1; continue; }
    if (QUOTE.test(line)) {
      const body = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) { body.push(m[1]); i += 1; }
      const quote = el('blockquote');
      blocks(body, quote);
      parent.append(quote);
      continue;
    }
    if (ITEM.test(line)) { i = list(lines, i, parent); continue; }
    if (line.includes('|') && i + 1 < lines.length && TABLE_SEP.test(lines[i + 1]) && lines[i + 1].includes('-')) {
      i = table(lines, i, parent);
      continue;
    }
    const body = [];
    while (i < lines.length && lines[i].trim() && !FENCE.test(lines[i]) && !HEADING.test(lines[i]) &&
           !QUOTE.test(lines[i]) && !(body.length && ITEM.test(lines[i])) && !RULE.test(lines[i])) {
      body.push(lines[i].trim());
      i += 1;
    }
    const p = el('p');
    body.forEach((part, k) => {
      if (k) p.append(part.endsWith('\\') || body[k - 1].endsWith('  ') ? el('br') : ' ');
      inline(part.replace(/\\$/, ''), p);
    });
    parent.append(p);
  }
}

function list(lines, i, parent) {
  const first = ITEM.exec(lines[i]);
  const ordered = /\d/.test(first[2]);
  const node = el(ordered ? 'ol' : 'ul');
  if (ordered && parseInt(first[2], 10) !== 1) node.start = parseInt(first[2], 10);
  const indent = first[1].length;
  while (i < lines.length) {
    const m = ITEM.exec(lines[i]);
    if (!m || m[1].length !== indent || /\d/.test(m[2]) !== ordered) break;
    const body = [m[3]];
    const width = m[1].length + m[2].length + 1;
    i += 1;
    while (i < lines.length) {
      const next = lines[i];
      if (!next.trim()) {
        if (i + 1 < lines.length && /^\s+\S/.test(lines[i + 1]) && lines[i + 1].search(/\S/) > indent) {
          body.push(''); i += 1; continue;
        }
        break;
      }
      const lead = next.search(/\S/);
      if (lead > indent) { body.push(next.slice(Math.min(lead, width))); i += 1; continue; }
      if (ITEM.test(next) || lead <= indent) break;
    }
    const li = el('li');
    const rest = body.slice(1);
    if (body.includes('')) blocks(body, li);
    else if (rest.some((b) => ITEM.test(b) || FENCE.test(b))) { inline(body[0], li); blocks(rest, li); }
    else inline(body.join(' '), li);
    node.append(li);
  }
  parent.append(node);
  return i;
}

function cells(line) {
  let text = line.trim();
  if (text.startsWith('|')) text = text.slice(1);
  if (text.endsWith('|')) text = text.slice(0, -1);
  return text.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, '|'));
}

function table(lines, i, parent) {
  const node = el('table', 'md-table');
  const head = el('thead');
  const row = el('tr');
  for (const cell of cells(lines[i])) { const th = el('th'); inline(cell, th); row.append(th); }
  head.append(row);
  node.append(head);
  const body = el('tbody');
  i += 2;
  while (i < lines.length && lines[i].includes('|') && lines[i].trim()) {
    const tr = el('tr');
    for (const cell of cells(lines[i])) { const td = el('td'); inline(cell, td); tr.append(td); }
    body.append(tr);
    i += 1;
  }
  node.append(body);
  parent.append(node);
  return i;
}

const INLINE = new RegExp([
  '(`+)([\\s\\S]*?[^`])\\1(?!`)',                         // 1,2 code
  '\\*\\*(?=\\S)([\\s\\S]*?\\S)\\*\\*',                   // 3 strong
  '__(?=\\S)([\\s\\S]*?\\S)__(?!\\w)',                    // 4 strong
  '\\*(?=[^\\s*])([\\s\\S]*?[^\\s*])\\*',                 // 5 emphasis
  '(?<![\\w])_(?=[^\\s_])([\\s\\S]*?[^\\s_])_(?!\\w)',    // 6 emphasis
  '~~(?=\\S)([\\s\\S]*?\\S)~~',                           // 7 strikethrough
  '\\[([^\\]\\n]+)\\]\\(\\s*<?([^)\\s>]+)>?(?:\\s+"[^"]*")?\\s*\\)', // 8,9 link
  '<(https?://[^>\\s]+)>',                                 // 10 autolink
  '(https?://[^\\s<>()]*[^\\s<>().,;:!?\'"*_])',           // 11 bare url
  '\\\\([\\\\`*_{}\\[\\]()#+\\-.!~|>])',                   // 12 escape
].join('|'), 'g');

function safeUrl(url) {
  return /^(https?:|mailto:)/i.test(url) ? url : null;
}

function link(text, url, parent) {
  const href = safeUrl(url);
  if (!href) { inline(text, parent); return; }
  const a = el('a');
  a.href = href;
  a.target = '_blank';
  a.rel = 'noopener noreferrer';
  if (text === url) a.textContent = text;  // an autolink: its text is the URL, not more Markdown
  else inline(text, a);
  parent.append(a);
}

export function inline(text, parent) {
  const re = new RegExp(INLINE.source, 'g');
  let last = 0;
  let m;
  while ((m = re.exec(text)) !== null) {
    if (m.index > last) parent.append(text.slice(last, m.index));
    if (m[1] !== undefined) {
      const code = el('code');
      let body = m[2];
      if (/^ .* $/.test(body) && body.trim()) body = body.slice(1, -1);
      code.textContent = body;
      parent.append(code);
    } else if (m[3] !== undefined || m[4] !== undefined) {
      const strong = el('strong');
      inline(m[3] ?? m[4], strong);
      parent.append(strong);
    } else if (m[5] !== undefined || m[6] !== undefined) {
      const em = el('em');
      inline(m[5] ?? m[6], em);
      parent.append(em);
    } else if (m[7] !== undefined) {
      const del = el('del');
      inline(m[7], del);
      parent.append(del);
    } else if (m[8] !== undefined) {
      link(m[8], m[9], parent);
    } else if (m[10] !== undefined || m[11] !== undefined) {
      const url = m[10] ?? m[11];
      link(url, url, parent);
    } else if (m[12] !== undefined) {
      parent.append(m[12]);
    }
    last = re.lastIndex;
  }
  if (last < text.length) parent.append(text.slice(last));
}
