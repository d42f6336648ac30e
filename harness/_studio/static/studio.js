// The studio page: chat with the orchestrator, the runs, one page per run, and the actions on them.
// One module, no framework and no build step: it reads the JSON API `harness ui` serves (documented in the
// README) and builds the DOM with text nodes only; model and script text is never parsed as HTML.

import { renderGraph } from './graph.js';
import { renderMarkdown } from './markdown.js';
import { highlight } from './python.js';

const app = document.getElementById('app');
let info = { statuses: [], notice: '', demo: false, model: '' };
let poll = null;
let chatView = null; // the chat stays as it is while you look at a run, streaming or not

// -- small helpers -----------------------------------------------------------------------------------------

function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'text') node.textContent = value;
    else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key.startsWith('data-') || key.startsWith('aria-') || key === 'for') node.setAttribute(key, value);
    else node[key] = value;
  }
  append(node, children);
  return node;
}

// `replaceChildren` with our skipping of null and false (the DOM method would print them).
function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

class ApiError extends Error {
  constructor(message, data) {
    super(message);
    this.data = data;
  }
}

async function api(path, { method = 'GET', body } = {}) {
  const init = { method, headers: { accept: 'application/json' } };
  if (body !== undefined) {
    init.headers['content-type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    throw new ApiError(`the studio server does not answer (${error.message}); is \`harness ui\` still running?`, {});
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) throw new ApiError(data.message || `${response.status} ${response.statusText}`, data);
  return data;
}

function seconds(value) {
  if (value === null || value === undefined) return '';
  if (value < 0.01) return `${(value * 1000).toFixed(1)} ms`;
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  if (value < 60) return `${value.toFixed(2)} s`;
  const m = Math.floor(value / 60);
  return `${m} m ${String(Math.round(value - m * 60)).padStart(2, '0')} s`;
}

function when(timestamp) {
  if (!timestamp) return '';
  const d = new Date(timestamp * 1000);
  const today = new Date().toDateString() === d.toDateString();
  const pad = (n) => String(n).padStart(2, '0');
  const time = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return today ? time : `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${time}`;
}

function compact(n) {
  if (n === null || n === undefined) return '';
  if (n < 1000) return String(n);
  if (n < 1e6) return `${(n / 1000).toFixed(1)}k`;
  return `${(n / 1e6).toFixed(1)}M`;
}

function cost(usage) {
  if (!usage) return '';
  if (usage.cost === null || usage.cost === undefined) return usage.requests ? 'unpriced' : '';
  const text = usage.cost < 0.01 ? `$${usage.cost.toFixed(4)}` : `$${usage.cost.toFixed(2)}`;
  return usage.unpriced ? `≥${text}` : text;
}

// Dollars as the terminal writes them (`_check._estimate.usd`); null is 'unpriced' when a price is missing, else 'unbounded'.
function usd(value, unpriced = false) {
  if (value === null || value === undefined) return unpriced ? 'unpriced' : 'unbounded';
  return value < 1 ? `$${value.toFixed(4)}` : `$${value.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 })}`;
}

function usageText(usage) {
  if (!usage) return '';
  const parts = [`${usage.requests ?? 0} request(s)`, `tokens in ${compact(usage.input_tokens ?? 0)} out ${compact(usage.output_tokens ?? 0)}`];
  const c = cost(usage);
  if (c) parts.push(c);
  return parts.join(', ');
}

function json(value) {
  return JSON.stringify(value, null, 2) ?? 'null';
}

function status(value) {
  return h('span', { class: `status status-${value}`, text: value });
}

// A run's status badge that a later footer of the same turn brings up to date (`TurnView.footer`).
function runStatus(run) {
  return h('span', { class: `status status-${run.status}`, 'data-run-status': run.run_id, text: run.status });
}

function runLink(run, text) {
  return h('a', { href: `/runs/${run.run_id}`, 'data-nav': '', class: 'run-link', text: text ?? run.short_id });
}

function notice(text, kind = 'error') {
  return h('div', { class: `notice ${kind}`, role: kind === 'error' ? 'alert' : 'status', text });
}

function pre(text, className = 'code') {
  return h('pre', { class: className }, h('code', { text }));
}

function section(title, ...children) {
  return h('section', { class: 'panel', 'data-section': title.toLowerCase() }, h('h2', { text: title }), ...children);
}

function stopPolling() {
  if (poll) clearTimeout(poll);
  poll = null;
}

// -- routing -----------------------------------------------------------------------------------------------

function navigate(url, { replace = false } = {}) {
  history[replace ? 'replaceState' : 'pushState']({}, '', url);
  route();
}

document.addEventListener('click', (event) => {
  const link = event.target.closest('a[data-nav]');
  if (!link || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
  if (link.origin !== location.origin) return;
  event.preventDefault();
  navigate(link.pathname + link.search);
});
window.addEventListener('popstate', route);

async function route() {
  stopPolling();
  const path = location.pathname.replace(/\/+$/, '') || '/';
  for (const link of document.querySelectorAll('header nav a')) {
    link.classList.toggle('active', path.startsWith(`/${link.dataset.section}`) || (path === '/' && link.dataset.section === 'chat'));
  }
  refreshPending();
  try {
    let m;
    if (path === '/' || path === '/chat') await chatPage(null);
    else if ((m = path.match(/^\/chat\/([\w-]+)$/))) await chatPage(m[1]);
    else if (path === '/runs') await runsPage();
    else if ((m = path.match(/^\/runs\/([^/]+)$/))) await runPage(decodeURIComponent(m[1]));
    else app.replaceChildren(notice(`nothing at ${path}`));
  } catch (error) {
    app.replaceChildren(notice(error.message));
  }
}

async function refreshPending() {
  const badge = document.getElementById('pending-badge');
  try {
    const { pending, plans } = await api('/api/pending');
    const count = pending.length + (plans ? plans.length : 0);
    badge.textContent = count ? String(count) : '';
    badge.classList.toggle('hidden', !count);
  } catch {
    badge.classList.add('hidden');
  }
}

// -- runs --------------------------------------------------------------------------------------------------

async function runsPage() {
  const params = new URLSearchParams(location.search);
  const chosen = params.getAll('status');
  const data = await api(`/api/runs?${params}`);
  const chip = (label, count, href, active) =>
    h('a', { class: `chip${active ? ' active' : ''}`, href, 'data-nav': '', 'data-status': label }, label, ' ', h('span', { class: 'count', text: count }));
  const filters = h('div', { class: 'filters', role: 'toolbar', 'aria-label': 'filter by status' },
    chip('all', data.total, '/runs', !chosen.length),
    info.statuses.map((s) => chip(s, data.counts[s] ?? 0, `/runs?status=${s}`, chosen.includes(s))));
  const rows = data.runs.map((run) => {
    const lineage = run.parent_run_id ? h('span', { class: 'muted', text: ` (fork at #${run.fork_at})` }) : null;
    const row = h('tr', { 'data-run-id': run.run_id, 'data-status': run.status },
      h('td', {}, runLink(run)),
      h('td', { class: 'muted', text: when(run.created) }),
      h('td', {}, status(run.status)),
      h('td', { class: 'num', text: run.calls }),
      h('td', { class: 'num', text: seconds(run.duration) }),
      h('td', { class: 'num', text: run.usage ? compact(run.usage.tokens) : '' }),
      h('td', { class: 'num', text: cost(run.usage) }),
      h('td', { class: 'title' }, h('span', { text: run.title }), lineage));
    row.addEventListener('click', (event) => {
      if (!event.target.closest('a')) navigate(`/runs/${run.run_id}`);
    });
    return row;
  });
  const table = rows.length
    ? h('table', { id: 'runs-table', class: 'runs' },
      h('thead', {}, h('tr', {}, ['run', 'when', 'status', 'calls', 'duration', 'tokens', 'cost', 'prompt / script']
        .map((c) => h('th', { text: c, class: ['calls', 'duration', 'tokens', 'cost'].includes(c) ? 'num' : '' })))),
      h('tbody', {}, rows))
    : h('p', { class: 'muted empty', text: chosen.length ? 'No run has this status.' : 'No runs yet: ask something in Chat, or run `harness ask "..."`.' });
  app.replaceChildren(h('div', { class: 'page runs-page' },
    h('div', { class: 'page-head' }, h('h1', { text: 'Runs' }),
      h('button', { class: 'ghost', text: 'Refresh', onclick: () => route() })),
    filters, table));
}

// -- one run -----------------------------------------------------------------------------------------------

async function runPage(runId, flash) {
  const run = await api(`/api/runs/${encodeURIComponent(runId)}`);
  if (run.run_id !== runId && location.pathname !== `/runs/${run.run_id}`) history.replaceState({}, '', `/runs/${run.run_id}`);
  const page = h('div', { class: 'page run-page', 'data-run-id': run.run_id, 'data-status': run.status });
  refreshPending();
  const facts = [
    status(run.status),
    h('span', { text: when(run.created) }),
    h('span', { text: `${run.calls.filter((c) => !isProgress(c)).length} call(s)` }),
    run.duration !== null ? h('span', { text: seconds(run.duration) }) : null,
    run.usage ? h('span', { title: 'the sub-agents this run called', text: `sub-agents: ${usageText(run.usage)}` }) : null,
    run.cost_usd !== null && run.cost_usd !== undefined
      ? h('span', { class: 'run-dollars', title: 'what its calls cost as the dollar budgets settled them', text: `dollars: ${usd(run.cost_usd)} spent` }) : null,
  ];
  const lineage = [];
  if (run.parent_run_id) {
    lineage.push(h('span', {}, 'forked from ', runLink({ run_id: run.parent_run_id, short_id: run.parent_short_id || run.parent_run_id.slice(0, 10) }), ` at call #${run.fork_at}`));
  }
  if (run.forks.length) lineage.push(h('span', {}, 'forks: ', run.forks.map((f) => [runLink(f), ' ', status(f.status), ' '])));
  if (run.siblings.length) lineage.push(h('span', {}, 'other scripts of this turn: ', run.siblings.map((f) => [runLink(f), ' ', status(f.status), ' '])));
  page.append(h('div', { class: 'page-head' },
    h('h1', {}, 'run ', h('code', { class: 'run-id', text: run.run_id })),
    h('div', { class: 'facts' }, facts)));
  if (lineage.length) page.append(h('div', { class: 'lineage muted' }, lineage));
  if (flash) page.append(flash);
  const busy = h('div', { class: 'busy hidden', role: 'status' });
  page.append(busy);
  page.append(actionsBar(run, busy));
  if (run.plan) page.append(planCard(run, busy));
  if (run.pending.length) page.append(approvals(run, busy));
  if (run.status === 'running') {
    page.append(notice('This run is running: the page follows it.', 'info'));
    poll = setTimeout(() => { if (location.pathname === `/runs/${run.run_id}`) runPage(run.run_id); }, 1500);
  } else if (run.status === 'interrupted') {
    // Also what a followed run turns into when its process is killed: the server reads it so once nobody holds it.
    page.append(notice('This run stopped before it ended (cancelled, or its process is gone). Resume continues it from its last snapshot; journaled calls are not repeated.', 'info'));
  }
  if (run.error) page.append(section('Error', pre(run.error, 'code error-text')));
  if (run.status === 'completed') page.append(section('Value', pre(json(run.value))));
  if (run.turn) {
    page.append(section('Turn',
      h('div', { class: 'bubble user' }, h('div', { class: 'who', text: 'you' }), h('div', { text: run.turn.prompt })),
      run.turn.answer ? h('div', { class: 'bubble assistant' }, h('div', { class: 'who', text: 'orchestrator' }), renderMarkdown(run.turn.answer))
        : h('p', { class: 'muted', text: `the turn is ${run.turn.status}` }),
      h('p', {}, h('a', { href: `/chat/${run.turn.conversation_id}`, 'data-nav': '', text: 'open the conversation' }))));
  }
  const script = highlight(run.script);
  const called = new Set(run.calls.map((c) => c.line));
  for (const line of script.querySelectorAll('.line')) if (called.has(Number(line.dataset.line))) line.classList.add('called');
  page.append(section('Script', script));
  if (run.progress.length) page.append(progressSection(run));
  page.append(callsSection(run, script, busy));
  page.append(graphSection(run));
  if (run.estimate) page.append(estimateSection(run.estimate));
  page.append(section('Trace', run.spans.length ? spanTree(run.spans) : h('p', { class: 'muted', text: 'No spans stored (tracing was off for this run).' })));
  if (run.inputs) page.append(section('Inputs', pre(json(run.inputs))));
  app.replaceChildren(page);
}

function actionsBar(run, busy) {
  const bar = h('div', { class: 'actions', role: 'toolbar', 'aria-label': 'actions on this run' });
  const retry = h('input', { type: 'checkbox', id: 'retry-unknown' });
  if (run.actions.replay) {
    bar.append(h('button', { class: 'replay', text: 'Replay', title: 'Run the script again, every call answered from the journal; nothing is called and nothing is stored.',
      onclick: () => act(run, 'replay', {}, busy) }));
  }
  if (run.actions.resume) {
    bar.append(h('button', { class: 'resume primary', text: 'Resume', title: 'Continue the run from its last snapshot; journaled calls are not repeated.',
      onclick: () => act(run, 'resume', { retry_unknown: retry.checked }, busy) }));
    if (run.status === 'needs_decision') {
      bar.append(h('label', { class: 'check' }, retry, ' re-run calls whose outcome is unknown'));
    }
  }
  if (run.actions.fork) bar.append(h('span', { class: 'muted hint', text: 'Fork: pick a call below and give it another result.' }));
  return bar;
}

async function act(run, action, body, busy, { after } = {}) {
  for (const button of document.querySelectorAll('.run-page button')) button.disabled = true;
  busy.replaceChildren(h('span', { class: 'spinner' }), ` ${action === 'replay' ? 'replaying' : action === 'fork' ? 'forking' : 'resuming'} run ${run.short_id}…`);
  busy.classList.remove('hidden');
  try {
    const result = await api(`/api/runs/${run.run_id}/${action}`, { method: 'POST', body });
    if (action === 'replay') {
      await runPage(run.run_id, replayReport(result));
    } else {
      const message = `${action === 'fork' ? `forked run ${run.short_id} at #${body.at}` : `resumed run ${run.short_id}`}: it is ${result.status}`;
      if (result.run_id !== run.run_id) history.pushState({}, '', `/runs/${result.run_id}`);
      await runPage(result.run_id, notice(message, result.status === 'completed' ? 'ok' : 'info'));
    }
  } catch (error) {
    const target = error.data && error.data.run_id && error.data.run_id !== run.run_id ? error.data.run_id : run.run_id;
    if (target !== run.run_id) history.pushState({}, '', `/runs/${target}`);
    if (after) after(error);
    else await runPage(target, notice(`${action} failed: ${error.message}`));
  }
}

function replayReport(result) {
  const rows = result.calls.map((c) => h('tr', {}, h('td', { text: `#${c.seq}` }), h('td', { text: c.callee }),
    h('td', {}, status(c.status)), h('td', { text: c.source })));
  return h('div', { class: 'notice ok replay-report', role: 'status' },
    h('strong', { text: `Replayed from the journal: ${result.status}. ` }),
    `${result.calls.length} call(s) answered from the journal, none called; nothing was stored. Value: `,
    h('code', { text: JSON.stringify(result.value) ?? 'null' }),
    rows.length ? h('table', { class: 'mini' }, h('tbody', {}, rows)) : null);
}

function approvals(run, busy) {
  const box = section('Waiting for approval');
  box.classList.add('approvals');
  box.append(h('p', { class: 'muted', text: run.actions.decide
    ? 'Each call below runs only if you approve it; a rejected call raises PermissionError(reason) in the script. Once every call is decided the run resumes.'
    : 'The run is still running its other calls: decide once it has stopped to wait (the page follows it).' }));
  for (const call of run.pending) {
    const reason = h('input', { type: 'text', class: 'reason', placeholder: 'reason (for a rejection)', 'aria-label': `reason to reject #${call.seq}`, disabled: !run.actions.decide });
    const item = h('div', { class: 'pending-call', 'data-seq': call.seq },
      h('div', { class: 'pending-head' }, h('strong', { text: `#${call.seq} ${call.callee}` })),
      pre(json(call.arguments)),
      h('div', { class: 'decide' },
        h('button', { class: 'approve primary', text: 'Approve', disabled: !run.actions.decide, onclick: () => decide(run, call, true, '', busy) }),
        reason,
        h('button', { class: 'reject danger', text: 'Reject', disabled: !run.actions.decide, onclick: () => decide(run, call, false, reason.value, busy) })));
    box.append(item);
  }
  return box;
}

// A script held for plan review (`Harness(review=...)`): nothing of it ran. Approving lets it run within the
// plan's bounds (the page resumes it); rejecting ends the run. The graph below is the same script's.
function planCard(run, busy) {
  const box = section('Plan waiting for approval');
  box.classList.add('plan-card');
  box.append(h('p', { class: 'muted', text: 'Nothing of this script has run. Approve to run it: a call past the bounds below is refused. Reject to end the run.' }));
  box.append(pre(run.plan.text, 'code plan-text'));
  const reason = h('input', { type: 'text', class: 'reason', placeholder: 'reason (for a rejection)', 'aria-label': 'reason to reject the plan' });
  const decidePlan = async (approve) => {
    if (!approve && !reason.value.trim()) {
      busy.replaceChildren(notice('Say why you reject it: the run ends with the reason.'));
      busy.classList.remove('hidden');
      return;
    }
    for (const button of document.querySelectorAll('.run-page button')) button.disabled = true;
    try {
      await api(`/api/runs/${run.run_id}/${approve ? 'approve' : 'reject'}`, { method: 'POST', body: approve ? {} : { reason: reason.value } });
      if (approve) await act(run, 'resume', {}, busy);
      else await runPage(run.run_id, notice('rejected the plan: the run ended, nothing of it ran.', 'info'));
    } catch (error) {
      await runPage(run.run_id, notice(error.message));
    }
  };
  box.append(h('div', { class: 'decide' },
    h('button', { class: 'approve primary', text: 'Approve plan', onclick: () => decidePlan(true) }),
    reason,
    h('button', { class: 'reject danger', text: 'Reject plan', onclick: () => decidePlan(false) })));
  return box;
}

async function decide(run, call, approve, reason, busy) {
  if (!approve && !reason.trim()) {
    busy.replaceChildren(notice('Say why you reject it: the script gets the reason.'));
    busy.classList.remove('hidden');
    return;
  }
  // One decision at a time: a second click while this one is on its way would decide (and resume) twice.
  for (const button of document.querySelectorAll('.run-page button')) button.disabled = true;
  try {
    const result = await api(`/api/runs/${run.run_id}/${approve ? 'approve' : 'reject'}`, {
      method: 'POST', body: approve ? { seq: call.seq } : { seq: call.seq, reason },
    });
    if (result.pending.length) {
      await runPage(run.run_id, notice(`${approve ? 'approved' : 'rejected'} #${call.seq}; ${result.pending.length} call(s) still wait.`, 'info'));
    } else {
      await act(run, 'resume', {}, busy);
    }
  } catch (error) {
    await runPage(run.run_id, notice(error.message));
  }
}

// A row of the journal that is the script's own `log`/`phase` (or the count past the cap), not a call.
function isProgress(call) {
  return call.callee.startsWith('progress:');
}

// The script's `phase(name)` (▸ name) and `log(text)` (│ text) lines, in the order it reported them.
function progressLine(kind, text) {
  return kind === 'phase'
    ? [h('span', { class: 'mark phase', text: '▸' }), ' ', h('strong', { class: 'phase-text', text })]
    : [h('span', { class: 'mark', text: '│' }), ' ', h('span', { class: 'log-text', text })];
}

function progressSection(run) {
  const list = h('ol', { class: 'progress-list', id: 'progress-list' });
  for (const entry of run.progress) {
    list.append(h('li', { class: 'progress-entry', 'data-kind': entry.kind, 'data-seq': entry.seq },
      h('span', { class: 'muted', text: `#${entry.seq} ` }), progressLine(entry.kind, entry.text)));
  }
  const dropped = run.progress_dropped ? h('p', { class: 'muted', text: `… and ${run.progress_dropped} more entries past the cap (counted, not kept).` }) : null;
  return section('Progress', list, dropped);
}

function callsSection(run, script, busy) {
  const calls = run.calls.filter((c) => !isProgress(c));
  if (!calls.length) return section('Calls', h('p', { class: 'muted', text: 'This run made no call.' }));
  const table = h('table', { class: 'calls', id: 'calls-table' },
    h('thead', {}, h('tr', {}, ['#', 'callee', 'line', 'status', 'started', 'took', 'source', ''].map((c) => h('th', { text: c })))));
  const body = h('tbody');
  for (const call of calls) {
    const detail = h('tr', { class: 'call-detail hidden', 'data-seq': call.seq }, h('td', { colSpan: 8 }, callDetail(run, call, busy)));
    const row = h('tr', { class: 'call-row', 'data-seq': call.seq, 'data-status': call.status, tabIndex: 0, 'aria-expanded': 'false' },
      h('td', { text: `#${call.seq}` }),
      h('td', { class: 'callee', text: call.callee }),
      h('td', { text: call.line ?? '' }),
      h('td', {}, status(call.status), call.decision ? h('span', { class: 'muted', text: call.decision.approved ? ' approved' : ' rejected' }) : null),
      h('td', { class: 'num', text: `+${seconds(call.started)}` }),
      h('td', { class: 'num', text: seconds(call.duration) }),
      h('td', { text: call.source + (call.attempt > 1 ? ` (attempt ${call.attempt})` : '') }),
      h('td', { class: 'preview', text: call.status === 'ok' ? preview(call.result) : (call.error ?? '') }));
    const toggle = () => {
      const open = detail.classList.toggle('hidden') === false;
      row.setAttribute('aria-expanded', String(open));
      for (const line of script.querySelectorAll('.line.focus')) line.classList.remove('focus');
      if (open && call.line) script.querySelector(`.line[data-line="${call.line}"]`)?.classList.add('focus');
    };
    row.addEventListener('click', toggle);
    row.addEventListener('keydown', (event) => { if (event.key === 'Enter' || event.key === ' ') { event.preventDefault(); toggle(); } });
    body.append(row, detail);
  }
  table.append(body);
  return section('Calls', h('p', { class: 'muted', text: 'Click a call for its full arguments, result, timings and errors.' }), table);
}

function preview(value) {
  const text = JSON.stringify(value) ?? 'null';
  return text.length > 90 ? `${text.slice(0, 89)}…` : text;
}

function callDetail(run, call, busy) {
  const parts = [
    h('div', { class: 'kv' },
      h('span', { text: `started +${seconds(call.started)} after the run began` }),
      call.duration !== null ? h('span', { text: `took ${seconds(call.duration)}` }) : null,
      h('span', { text: `attempt ${call.attempt}` }),
      h('span', { text: `source: ${call.source}` }),
      call.side_effect ? h('span', { class: 'warn', text: 'side effect' }) : null,
      call.decision ? h('span', { text: `${call.decision.approved ? 'approved' : 'rejected'} by ${call.decision.decided_by ?? '?'}${call.decision.reason ? `: ${call.decision.reason}` : ''}` }) : null),
    h('h3', { text: 'arguments' }), pre(json(call.arguments)),
  ];
  if (call.status === 'ok') parts.push(h('h3', { text: 'result' }), pre(json(call.result)));
  else if (call.error) parts.push(h('h3', { text: 'the script saw' }), pre(call.error, 'code error-text'));
  for (const exc of call.exceptions || []) {
    parts.push(h('div', { class: 'exception' },
      h('h3', { text: 'raised (operator side; the script saw only the line above)' }),
      pre(`${exc.type}: ${exc.message}`, 'code error-text'),
      exc.stacktrace ? h('details', {}, h('summary', { text: 'stack trace' }), pre(exc.stacktrace, 'code stack')) : null));
  }
  if (run.actions.fork) parts.push(forkEditor(run, call, busy));
  return h('div', { class: 'call-body' }, parts);
}

function forkEditor(run, call, busy) {
  const area = h('textarea', { class: 'fork-result', rows: 6, spellcheck: false, 'aria-label': `the result call #${call.seq} returns in the fork`,
    value: call.status === 'ok' ? json(call.result) : '' });
  const state = h('span', { class: 'fork-state muted' });
  const button = h('button', { class: 'fork primary', text: `Fork at #${call.seq}` });
  const check = () => {
    if (!area.value.trim()) {
      state.textContent = `type the JSON value #${call.seq} returns in the fork`;
      state.className = 'fork-state muted';
      button.disabled = true;
      return false;
    }
    try {
      JSON.parse(area.value);
      state.textContent = 'valid JSON; the callee\'s return type is checked when you fork';
      state.className = 'fork-state muted';
      button.disabled = false;
      return true;
    } catch (error) {
      state.textContent = `not JSON: ${error.message}`;
      state.className = 'fork-state error-text';
      button.disabled = true;
      return false;
    }
  };
  area.addEventListener('input', check);
  const error = h('div', { class: 'fork-error' });
  button.addEventListener('click', async (event) => {
    event.stopPropagation();
    if (!check()) return;
    error.replaceChildren();
    await act(run, 'fork', { at: call.seq, result: JSON.parse(area.value) }, busy, {
      after: (failure) => {
        busy.classList.add('hidden');
        for (const b of document.querySelectorAll('.run-page button')) b.disabled = false;
        check();
        error.replaceChildren(notice(failure.message));
      },
    });
  });
  const box = h('div', { class: 'fork-box', onclick: (event) => event.stopPropagation() },
    h('h3', { text: `fork at #${call.seq}` }),
    h('p', { class: 'muted', text: `A new run: calls before #${call.seq} are answered from this run's journal, #${call.seq} returns the value below, later calls run live.` }),
    area, h('div', { class: 'fork-row' }, button, state), error);
  queueMicrotask(check);
  return box;
}

function graphSection(run) {
  const graph = run.graph;
  if (graph.error) return section('Graph', h('p', { class: 'muted', text: graph.error }));
  const legend = h('p', { class: 'muted legend' }, h('span', { class: 'swatch taken' }), ' the path this run took · ',
    h('span', { class: 'swatch' }), ' calls the script can make · dashed: back to a loop\'s start');
  const dynamic = graph.dynamic.length
    ? h('p', { class: 'warn', text: `used as values (called through them, not drawn): ${graph.dynamic.map((d) => `${d.callee} (line ${d.line})`).join(', ')}` })
    : null;
  return section('Graph', legend, h('div', { class: 'graph-box' }, renderGraph(graph)), dynamic,
    h('details', {}, h('summary', { text: 'as Mermaid' }), pre(graph.mermaid)));
}

// The script's worst case before anything runs (`harness check --estimate`): per callee the most calls and USD.
function estimateSection(estimate) {
  const table = h('table', { class: 'calls estimate', id: 'estimate-table' },
    h('thead', {}, h('tr', {}, ['callee', 'most calls', 'per call', 'worst case', 'price from'].map((c) => h('th', { text: c })))));
  const body = h('tbody');
  for (const part of estimate.callees) {
    body.append(h('tr', { 'data-callee': part.callee },
      h('td', { class: 'callee', text: part.callee }),
      h('td', { class: 'num', text: part.calls === null ? 'unbounded' : String(part.calls) }),
      h('td', { class: 'num', text: usd(part.per_call, part.unpriced) }),
      h('td', { class: 'num', text: usd(part.cost_usd, part.unpriced) }),
      h('td', { class: 'muted', text: part.source })));
  }
  table.append(body);
  const reasons = estimate.reasons.map((r) => h('p', { class: 'warn', text: r }));
  return section('Estimate',
    h('p', { class: 'worst-case' }, h('strong', { text: `worst case: ${estimate.worst_case}` }),
      h('span', { class: 'muted', text: ' (against today\'s catalog: the most this script can call and cost)' })),
    estimate.callees.length ? table : h('p', { class: 'muted', text: 'The script calls nothing.' }), reasons);
}

function spanTree(spans) {
  const list = h('ul', { class: 'spans' });
  for (const span of spans) list.append(spanItem(span));
  return list;
}

function spanItem(span) {
  const failed = span.status === 'error';
  const attributes = h('details', { class: 'attrs' }, h('summary', { text: 'attributes' }), pre(json(span.attributes)));
  const item = h('li', { class: `span${failed ? ' failed' : ''}`, 'data-name': span.name },
    h('div', { class: 'span-line' }, h('span', { class: 'span-label', text: span.label })), attributes);
  for (const exc of span.exceptions) {
    item.append(h('div', { class: 'exception' }, h('span', { class: 'error-text', text: `exception ${exc.type}: ${exc.message}` }),
      exc.stacktrace ? h('details', {}, h('summary', { text: 'stack trace' }), pre(exc.stacktrace, 'code stack')) : null));
  }
  if (span.children.length) item.append(spanTree(span.children));
  return item;
}

// -- chat --------------------------------------------------------------------------------------------------

function newId() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
}

async function chatPage(conversationId) {
  if (chatView && conversationId && chatView.id === conversationId) {
    app.replaceChildren(chatView.element);
    chatView.refreshList();
    return;
  }
  chatView = new ChatView(conversationId);
  app.replaceChildren(chatView.element);
  await chatView.load();
}

class ChatView {
  constructor(id) {
    this.id = id || newId();
    this.stored = Boolean(id);
    this.busy = false;
    this.list = h('ul', { class: 'conversations' });
    this.messages = h('div', { class: 'messages', id: 'messages', 'aria-live': 'polite' });
    this.input = h('textarea', { id: 'prompt', rows: 3, placeholder: 'Ask the orchestrator… (Enter sends, Shift+Enter adds a line)', 'aria-label': 'your message' });
    this.send = h('button', { type: 'submit', class: 'primary', id: 'send', text: 'Send' });
    this.input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.submit();
      }
    });
    const form = h('form', { class: 'composer', onsubmit: (event) => { event.preventDefault(); this.submit(); } }, this.input, this.send);
    const banner = info.notice ? notice(info.notice, 'info') : null;
    this.element = h('div', { class: 'page chat-page' },
      h('aside', { class: 'sidebar' },
        h('a', { class: 'button primary new-chat', href: '/chat', 'data-nav': '', text: 'New chat' }),
        h('h2', { text: 'Conversations' }), this.list),
      h('div', { class: 'chat' }, banner, this.messages, form));
  }

  async load() {
    this.refreshList();
    if (!this.stored) {
      this.messages.append(h('p', { class: 'muted intro', text: 'The orchestrator answers by writing a Python script that calls the sub-agents and tools; you see the script, each call as it runs, and then the answer. Every turn is stored: its runs are under Runs.' }));
      this.input.focus();
      return;
    }
    let data;
    try {
      data = await api(`/api/conversations/${this.id}`);
    } catch (error) {
      this.messages.append(notice(error.data?.error === 'not_found' ? 'A new conversation: nothing is stored under this id yet.' : error.message, 'info'));
      return;
    }
    for (const turn of data.turns) {
      const view = new TurnView(this, turn.prompt);
      view.replay(turn);
    }
    this.input.focus();
  }

  async refreshList() {
    try {
      const { conversations } = await api('/api/conversations');
      this.list.replaceChildren(...conversations.map((c) => h('li', { class: c.conversation_id === this.id ? 'active' : '' },
        h('a', { href: `/chat/${c.conversation_id}`, 'data-nav': '', 'data-conversation': c.conversation_id },
          h('span', { class: 'conv-title', text: c.title || '(untitled)' }),
          h('span', { class: 'muted conv-meta', text: `${c.turns} turn(s) · ${when(c.updated)}` })))));
    } catch {
      // the list is a convenience; the chat works without it
    }
  }

  setBusy(busy, reason) {
    this.busy = busy;
    this.input.disabled = busy;
    this.send.disabled = busy;
    this.input.placeholder = busy ? (reason || 'the orchestrator is answering…') : 'Ask the orchestrator… (Enter sends, Shift+Enter adds a line)';
  }

  async submit() {
    const text = this.input.value.trim();
    if (!text || this.busy) return;
    this.input.value = '';
    this.messages.querySelector('.intro')?.remove();
    if (location.pathname !== `/chat/${this.id}`) history.pushState({}, '', `/chat/${this.id}`);
    const view = new TurnView(this, text);
    await view.stream('/api/chat', { trigger: 'submit-message', id: this.id, messages: [{ id: newId(), role: 'user', parts: [{ type: 'text', text }] }] });
  }
}

class TurnView {
  constructor(chat, prompt) {
    this.chat = chat;
    this.attempts = [];
    this.byToolCall = new Map();
    this.offsets = new Map();
    this.highest = 0;
    this.calls = new Map();
    this.answer = null;
    this.answerText = '';
    this.deltas = 0;
    this.pendingRender = false;
    this.body = h('div', { class: 'turn-body' });
    this.status = h('div', { class: 'thinking muted' }, h('span', { class: 'spinner' }), ' thinking…');
    this.element = h('div', { class: 'turn' },
      h('div', { class: 'bubble user' }, h('div', { class: 'who', text: 'you' }), h('div', { class: 'prompt-text', text: prompt })),
      h('div', { class: 'bubble assistant' }, h('div', { class: 'who', text: 'orchestrator' }), this.body));
    chat.messages.append(this.element);
  }

  scroll() {
    this.element.scrollIntoView({ block: 'end' });
  }

  async stream(url, body) {
    this.chat.setBusy(true);
    this.body.append(this.status);
    let ended = false;
    try {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: JSON.stringify(body) });
      if (!response.ok) {
        const data = await response.json().catch(() => ({}));
        throw new Error(data.message || `${response.status} ${response.statusText}`);
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf('\n\n')) >= 0) {
          const event = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          for (const line of event.split('\n')) {
            if (!line.startsWith('data: ')) continue;
            const data = line.slice(6);
            if (data === '[DONE]') continue;
            let chunk;
            try { chunk = JSON.parse(data); } catch { continue; }
            if (chunk.type === 'data-turn') ended = chunk.data.status !== 'waiting';
            this.onChunk(chunk);
          }
        }
      }
    } catch (error) {
      this.body.append(notice(error.message));
      ended = true;
    } finally {
      this.status.remove();
      this.renderAnswer();
      if (ended || !this.waiting) this.chat.setBusy(false);
      this.chat.stored = true;
      this.chat.refreshList();
      refreshPending();
      if (!this.waiting) this.chat.input.focus();
    }
  }

  onChunk(chunk) {
    const type = chunk.type;
    if (type === 'text-start') {
      this.status.remove();
      this.answerText = '';
      this.answer = h('div', { class: 'answer' });
      this.body.append(this.answer);
    } else if (type === 'text-delta') {
      if (!this.answer) this.onChunk({ type: 'text-start' });
      this.answerText += chunk.delta;
      this.deltas += 1;
      this.element.dataset.deltas = String(this.deltas);  // how the answer arrived: the tests read it
      if (!this.pendingRender) {
        this.pendingRender = true;
        requestAnimationFrame(() => this.renderAnswer());
      }
    } else if (type === 'tool-input-start' || type === 'tool-input-available') {
      this.status.remove();
      let attempt = this.byToolCall.get(chunk.toolCallId);
      if (!attempt || (type === 'tool-input-start' && attempt.done)) {
        attempt = this.newAttempt(chunk.toolName);
        this.byToolCall.set(chunk.toolCallId, attempt);
      }
      if (type === 'tool-input-available') {
        const code = chunk.input && typeof chunk.input.code === 'string' ? chunk.input.code : json(chunk.input);
        attempt.code.replaceChildren(highlight(code));
        this.body.append(this.status);
        this.status.lastChild.textContent = ' running the script…';
      }
    } else if (type === 'tool-output-available' || type === 'tool-output-error' || type === 'tool-input-error') {
      const attempt = this.byToolCall.get(chunk.toolCallId) || this.attempts.at(-1);
      if (!attempt) return;
      attempt.done = true;
      if (type === 'tool-output-available') {
        attempt.outcome.replaceChildren(h('span', { class: 'ok-text', text: `✓ attempt ${attempt.n} returned ` }), h('code', { text: preview(chunk.output) }));
      } else {
        const lines = String(chunk.errorText ?? '').trim().split('\n');
        const shown = lines.slice(0, 12).join('\n') + (lines.length > 12 ? `\n… ${lines.length - 12} more line(s)` : '');
        attempt.outcome.replaceChildren(h('div', { class: 'error-text', text: `✗ attempt ${attempt.n} failed; the model is told why:` }), pre(shown, 'code error-text'));
      }
      this.body.append(this.status);
      this.status.lastChild.textContent = ' thinking…';
    } else if (type === 'data-call') {
      this.call(chunk.data);
    } else if (type === 'data-turn') {
      this.footer(chunk.data);
    } else if (type === 'error') {
      this.body.append(notice(chunk.errorText));
    } else if (type === 'abort') {
      this.body.append(notice(chunk.reason || 'the turn was stopped', 'info'));
    }
    this.scroll();
  }

  newAttempt(toolName) {
    const n = this.attempts.length + 1;
    const attempt = { n, done: false, code: h('div', { class: 'script-code' }, h('p', { class: 'muted', text: 'writing the script…' })),
      list: h('ul', { class: 'live-calls' }), outcome: h('div', { class: 'outcome' }) };
    attempt.element = h('div', { class: 'attempt', 'data-attempt': n },
      h('div', { class: 'attempt-head', text: toolName === 'run_workflow' || !toolName ? `script · attempt ${n}` : `${toolName} · call ${n}` }),
      attempt.code, attempt.list, attempt.outcome);
    this.attempts.push(attempt);
    this.body.append(attempt.element);
    return attempt;
  }

  number(runId, seq) {
    if (!this.offsets.has(runId)) this.offsets.set(runId, this.highest);
    const n = this.offsets.get(runId) + seq;
    this.highest = Math.max(this.highest, n);
    return n;
  }

  call(data) {
    const attempt = this.attempts.at(-1) || this.newAttempt('run_workflow');
    if (data.dollars) this.dollars = data.dollars;  // the turn's dollars at its latest call (a dollar budget is on)
    if (data.progress) {  // the script's own log/phase line, among its calls: no number, it is not a call
      const tag = data.source && data.source !== 'live' ? h('span', { class: 'muted', text: ` (${data.source})` }) : null;
      attempt.list.append(h('li', { class: 'live-progress', 'data-kind': data.progress.kind }, progressLine(data.progress.kind, data.progress.text), tag));
      return;
    }
    // seq 0: a call a budget refused, with no place in the journal (and no number): a line of its own.
    const key = data.seq ? `${data.run_id}:${data.seq}` : `${data.run_id}:refused:${this.calls.size}`;
    let item = this.calls.get(key);
    const n = data.seq ? this.number(data.run_id, data.seq) : null;
    if (!item) {
      item = h('li', { class: 'live-call', 'data-key': key });
      this.calls.set(key, item);
      attempt.list.append(item);
    }
    const tag = h('span', { class: 'muted' }, data.source && data.source !== 'live' ? ` (${data.source})` : '');
    if (data.cost_usd !== null && data.cost_usd !== undefined) {  // what it settled to; the turn's while others run
      tag.append(h('span', { class: 'call-cost', text: ` · ${usd(data.cost_usd)}` }));
      if (data.reserved_usd) tag.append(h('span', { class: 'turn-dollars', text: ` · ${data.dollars}` }));
    }
    item.dataset.kind = data.kind;
    if (data.kind === 'refused') {
      fill(item, h('span', { class: 'mark fail', text: '⊘' }), n ? ` #${n} ` : ' ', h('code', { text: data.text }), ' refused: ',
        h('span', { class: 'error-text', text: data.error || '' }), tag);
    } else if (data.kind === 'skipped') {
      fill(item, h('span', { class: 'mark', text: '–' }), ` #${n} `, h('strong', { text: data.callee }), ' skipped: ',
        h('span', { class: 'muted', text: data.error || '' }), tag);
    } else if (data.kind === 'started') {
      fill(item, h('span', { class: 'mark run', text: '→' }), ` #${n} `, h('code', { text: data.text }), tag);
    } else if (data.kind === 'finished') {
      fill(item, h('span', { class: 'mark ok', text: '✓' }), ` #${n} `, h('strong', { text: data.callee }), ' ',
        h('span', { class: 'muted', text: seconds(data.elapsed) }), ' → ', h('code', { text: data.result ?? '' }), tag);
    } else {
      fill(item, h('span', { class: 'mark fail', text: '✗' }), ` #${n} `, h('strong', { text: data.callee }), ': ',
        h('span', { class: 'error-text', text: data.error || 'failed' }), tag);
    }
  }

  renderAnswer() {
    this.pendingRender = false;
    if (this.answer) this.answer.replaceChildren(renderMarkdown(this.answerText));
  }

  footer(data) {
    this.renderAnswer();
    this.element.dataset.status = data.status;
    for (const r of data.runs) {  // a badge shown before the turn went on (read back from the store) says it waits
      for (const badge of this.element.querySelectorAll(`[data-run-status="${r.run_id}"]`)) badge.replaceWith(runStatus(r));
    }
    const runs = data.runs.map((r) => [runLink(r), r.status === 'completed' ? '' : [' ', status(r.status)], ' ']);
    const calls = data.runs.reduce((sum, r) => sum + r.calls, 0);
    const lines = [h('div', {}, runs.length ? ['run ', runs, `· ${calls} call(s)`] : 'no script ran')];
    if (data.usage.orchestrator) lines.push(h('div', { text: `orchestrator: ${usageText(data.usage.orchestrator)}` }));
    if (data.usage.sub_agents) lines.push(h('div', { text: `sub-agents: ${usageText(data.usage.sub_agents)}` }));
    if (this.dollars) lines.push(h('div', { class: 'turn-dollars', text: `dollars: ${this.dollars}` }));
    if (data.store_error) lines.push(h('div', { class: 'warn', text: data.store_error }));
    if (data.status === 'failed' && data.error && !this.body.querySelector('.notice.error')) this.body.append(notice(data.error));
    this.body.append(h('div', { class: 'turn-footer muted' }, lines));
    if (data.status === 'waiting') this.waitingPanel(data.waiting);
  }

  waitingPanel(runs) {
    this.waiting = true;
    this.chat.setBusy(true, 'decide the calls above first');
    const panel = h('div', { class: 'approvals chat-approvals' });
    const left = new Set();
    for (const run of runs) {
      if (run.plan) panel.append(this.planItem(run, left, panel));
      for (const call of run.pending) {
        const key = `${run.run_id}:${call.seq}`;
        left.add(key);
        const reason = h('input', { type: 'text', class: 'reason', placeholder: 'reason (for a rejection)', 'aria-label': `reason to reject #${call.seq}` });
        const state = h('span', { class: 'muted decided' });
        const decide = async (approve) => {
          if (!approve && !reason.value.trim()) { state.textContent = 'say why you reject it'; return; }
          for (const b of item.querySelectorAll('button')) b.disabled = true;  // decided once, even if clicked twice
          try {
            await api(`/api/runs/${run.run_id}/${approve ? 'approve' : 'reject'}`, { method: 'POST', body: approve ? { seq: call.seq } : { seq: call.seq, reason: reason.value } });
          } catch (error) {
            for (const b of item.querySelectorAll('button')) b.disabled = false;
            state.textContent = error.message;
            return;
          }
          reason.disabled = true;
          state.textContent = approve ? 'approved' : 'rejected';
          left.delete(key);
          if (!left.size) this.goOn(panel);
        };
        const item = h('div', { class: 'pending-call', 'data-seq': call.seq, 'data-run-id': run.run_id },
          h('div', { class: 'pending-head' }, 'run ', runLink(run), ` waits for approval of `, h('strong', { text: `#${call.seq} ${call.callee}` })),
          pre(json(call.arguments)),
          h('div', { class: 'decide' },
            h('button', { class: 'approve primary', text: 'Approve', onclick: () => decide(true) }), reason,
            h('button', { class: 'reject danger', text: 'Reject', onclick: () => decide(false) }), state));
        panel.append(item);
      }
    }
    if (!left.size) {
      panel.append(h('button', { class: 'primary', text: 'Continue', onclick: () => this.goOn(panel) }));
    }
    this.body.append(panel);
  }

  // A script held for plan review: nothing of it ran; the turn goes on once the plan is approved or rejected.
  planItem(run, left, panel) {
    const key = `${run.run_id}:plan`;
    left.add(key);
    const reason = h('input', { type: 'text', class: 'reason', placeholder: 'reason (for a rejection)', 'aria-label': 'reason to reject the plan' });
    const state = h('span', { class: 'muted decided' });
    const decide = async (approve) => {
      if (!approve && !reason.value.trim()) { state.textContent = 'say why you reject it'; return; }
      for (const b of item.querySelectorAll('button')) b.disabled = true;
      try {
        await api(`/api/runs/${run.run_id}/${approve ? 'approve' : 'reject'}`, { method: 'POST', body: approve ? {} : { reason: reason.value } });
      } catch (error) {
        for (const b of item.querySelectorAll('button')) b.disabled = false;
        state.textContent = error.message;
        return;
      }
      reason.disabled = true;
      state.textContent = approve ? 'plan approved' : 'plan rejected';
      left.delete(key);
      if (!left.size) this.goOn(panel);
    };
    const item = h('div', { class: 'pending-call plan-card', 'data-run-id': run.run_id },
      h('div', { class: 'pending-head' }, 'run ', runLink(run), ' waits for approval of its plan (nothing of it ran)'),
      pre(run.plan.text, 'code plan-text'),
      h('div', { class: 'decide' },
        h('button', { class: 'approve primary', text: 'Approve plan', onclick: () => decide(true) }), reason,
        h('button', { class: 'reject danger', text: 'Reject plan', onclick: () => decide(false) }), state));
    return item;
  }

  async goOn(panel) {
    panel.classList.add('decided');
    this.waiting = false;
    // The footer said where the turn stopped (its runs waiting); the turn going on ends with a footer of its own.
    for (const footer of this.body.querySelectorAll('.turn-footer')) footer.remove();
    await this.stream('/api/chat?continue=1', { trigger: 'submit-message', id: this.chat.id, messages: [] });
  }

  // A stored turn, as it read live: its scripts with their calls, then the answer and the footer.
  replay(turn) {
    this.status.remove();
    for (const run of turn.runs) {
      const attempt = this.newAttempt('run_workflow');
      attempt.code.replaceChildren(highlight(run.script));
      for (const call of run.calls_made) {
        if (call.callee.startsWith('progress:') && !call.progress) continue;  // the count past the cap
        const kind = call.status === 'ok' ? 'finished' : call.status === 'running' || call.status === 'waiting' ? 'started' : 'failed';
        this.call({ kind, run_id: run.run_id, seq: call.seq, callee: call.callee, text: call.text, source: call.source,
          elapsed: call.duration, error: call.error || call.status, result: call.result, progress: call.progress, cost_usd: call.cost_usd });
      }
      attempt.outcome.replaceChildren(h('span', { class: 'muted' }, runLink(run), ' ', runStatus(run)));
    }
    if (turn.answer) {
      this.answerText = turn.answer;
      this.answer = h('div', { class: 'answer' });
      this.body.append(this.answer);
      this.renderAnswer();
    } else if (turn.status !== 'waiting') {
      // A failed turn's error is the footer's notice; said here too, it would read twice.
      const why = turn.error && turn.status !== 'failed' ? `: ${turn.error}` : '';
      this.body.append(h('p', { class: 'muted', text: `the turn ended ${turn.status}${why}` }));
    }
    const priced = turn.runs.filter((r) => r.usage);
    const sub = priced.length ? priced.reduce((total, r) => {
      for (const k of ['input_tokens', 'output_tokens', 'requests', 'unpriced']) total[k] = (total[k] ?? 0) + (r.usage[k] ?? 0);
      if (r.usage.cost !== null && r.usage.cost !== undefined) total.cost = (total.cost ?? 0) + r.usage.cost;
      return total;
    }, { cost: null }) : null;
    this.footer({ ...turn, waiting: turn.runs.filter((r) => r.status === 'waiting'), usage: { orchestrator: turn.usage, sub_agents: sub } });
  }
}

// -- start -------------------------------------------------------------------------------------------------

async function start() {
  try {
    info = await api('/api/info');
    document.getElementById('model').textContent = `model: ${info.model}`;
  } catch (error) {
    app.replaceChildren(notice(error.message));
    return;
  }
  await route();
}

start();
