// Python syntax highlighting for workflow scripts: a small tokenizer, DOM nodes out (text only, never HTML).
// Scripts are short and top-level async Python; keywords, strings, comments, numbers, calls and decorators
// are enough to read them, so no grammar library is shipped.

const KEYWORDS = new Set(('False None True and as assert async await break class continue def del elif else ' +
  'except finally for from global if import in is lambda nonlocal not or pass raise return try while with ' +
  'yield match case').split(' '));
const BUILTINS = new Set(('print len range list dict set str int float bool sorted enumerate zip min max sum ' +
  'any all isinstance tuple map filter reversed abs round repr type asyncio gather settled settle_all first_of ' +
  'quorum within Exception RuntimeError PermissionError TimeoutError ValueError TypeError KeyError').split(' '));

// One alternative per token kind, tried in order at each position (sticky).
const TOKEN = new RegExp([
  '(#[^\\n]*)',                                                                                  // 1 comment
  '((?:[rRbBuUfF]{1,2})?(?:"""[\\s\\S]*?(?:"""|$)|\'\'\'[\\s\\S]*?(?:\'\'\'|$)|"(?:[^"\\\\\\n]|\\\\.)*"?|\'(?:[^\'\\\\\\n]|\\\\.)*\'?))', // 2 string
  '(0[xXoObB][0-9a-fA-F_]+|\\d[\\d_]*(?:\\.\\d*)?(?:[eE][+-]?\\d+)?j?|\\.\\d+)',                  // 3 number
  '(@[A-Za-z_][\\w.]*)',                                                                         // 4 decorator
  '([A-Za-z_]\\w*)',                                                                             // 5 name
  '(\\s+)',                                                                                      // 6 space
  '([^\\w\\s])',                                                                                 // 7 punctuation
].join('|'), 'y');

function classOf(match, code, end) {
  if (match[1] !== undefined) return 'tok-com';
  if (match[2] !== undefined) return 'tok-str';
  if (match[3] !== undefined) return 'tok-num';
  if (match[4] !== undefined) return 'tok-dec';
  if (match[5] !== undefined) {
    const word = match[5];
    if (KEYWORDS.has(word)) return 'tok-kw';
    if (code[end] === '(') return BUILTINS.has(word) ? 'tok-bi' : 'tok-fn';
    if (BUILTINS.has(word)) return 'tok-bi';
    return null;
  }
  if (match[7] !== undefined) return 'tok-op';
  return null;
}

// The tokens of `code` as [text, class | null] pairs.
export function tokens(code) {
  const out = [];
  TOKEN.lastIndex = 0;
  let match;
  while (TOKEN.lastIndex < code.length && (match = TOKEN.exec(code)) !== null) {
    if (match[0] === '') break;
    out.push([match[0], classOf(match, code, TOKEN.lastIndex)]);
  }
  if (TOKEN.lastIndex < code.length) out.push([code.slice(TOKEN.lastIndex), null]);
  return out;
}

// A highlighted block: one element per line (`data-line` = its number), so lines can be numbered and marked.
export function highlight(code, { numbers = true } = {}) {
  const pre = document.createElement('pre');
  pre.className = 'code python' + (numbers ? ' numbered' : '');
  const block = document.createElement('code');
  pre.append(block);
  let lineNo = 1;
  let line = newLine(lineNo);
  block.append(line);
  for (const [text, cls] of tokens(code.replace(/\n+$/, ''))) {
    const pieces = text.split('\n');
    pieces.forEach((piece, i) => {
      if (i > 0) {
        lineNo += 1;
        line = newLine(lineNo);
        block.append(line);
      }
      if (piece === '') return;
      if (cls) {
        const span = document.createElement('span');
        span.className = cls;
        span.textContent = piece;
        line.append(span);
      } else {
        line.append(piece);
      }
    });
  }
  return pre;
}

function newLine(n) {
  const line = document.createElement('span');
  line.className = 'line';
  line.dataset.line = String(n);
  return line;
}
