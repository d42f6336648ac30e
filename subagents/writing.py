"""Rule-based text work: the offline behaviour of `summarizer`, `critic`, `drafter` and `editor`.

Everything here is deterministic: the same input always gives the same output, so offline demo
runs can be replayed and compared. The rules are simple but real: an extractive summarizer that
recognises review data, a heuristic grader, template drafting, and feedback-driven edits.
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .models import Score

_STOPWORD_TEXT = """
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having
he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
nor not now of off on once only or other our ours ourselves out over own same she should so some such than
that the their theirs them themselves then there these they this those through to too under until up very
was we were what when where which while who whom why will with would you your yours yourself yourselves
please write draft give make tell explain describe summarize summarise show provide get
one two need needs want wants should shall may might must thing things way ways etc
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())

SEVERITY_ORDER = {'error': 0, 'warning': 1, 'info': 2}
SENTENCE = re.compile(r'(?<=[.!?])\s+(?=[A-Z0-9"\'`(\[])')
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'-]*")
INSTRUCTION = re.compile(
    r'^\s*(please\s+)?(summari[sz]e|condense|recap|give( me)?( a)? (short |brief )?summary|tl;?dr|digest)'
    r'\b[^\n:]*:?\s*',
    re.I,
)


# -- shared text helpers -----------------------------------------------------------------------------


def words(text: str) -> list[str]:
    return [w.lower().strip("'-") for w in WORD.findall(text)]


def stem(word: str) -> str:
    """A light stemmer: enough to match `reviews`/`review`/`reviewed`/`reviewing`."""
    for suffix in ('ations', 'ation', 'ings', 'ing', 'edly', 'ed', 'es', 's', 'ly'):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith('e') and len(word) > 3 else word  # reverse/reversed -> revers


def keywords(text: str) -> list[str]:
    """Content words of `text`, stemmed, in first-seen order, without duplicates."""
    return list(key_terms(text))


def key_terms(text: str) -> dict[str, str]:
    """Content words of `text`: stem -> the word as first written, in first-seen order."""
    seen: dict[str, str] = {}
    for w in words(text):
        if len(w) >= 3 and w not in STOPWORDS and not w.isdigit():
            seen.setdefault(stem(w), w)
    return seen


_INSTRUCTION_TEXT = '''
short shorter brief quick concise detailed note email message letter memo mention mentioning include
including cover covering team draft report plan paragraph sentence sentences words answer reply
'''
INSTRUCTION_TERMS = frozenset(stem(w) for w in _INSTRUCTION_TEXT.split())
"""Words of a writing task that say what form to write, not what to write about."""


def sentences(text: str) -> list[str]:
    """Sentences of prose; list items and headings count as one sentence each."""
    out: list[str] = []
    for block in re.split(r'\n\s*\n', text.strip()):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        if lines and all(_is_list_line(ln) or ln.startswith('#') for ln in lines):
            out.extend(lines)
            continue
        joined = ' '.join(lines)
        out.extend(s.strip() for s in SENTENCE.split(joined) if s.strip())
    return out


def _is_list_line(line: str) -> bool:
    return bool(re.match(r'^([-*•]|\d+[.)])\s+', line))


def _strip_marker(line: str) -> str:
    return re.sub(r'^([-*•]|\d+[.)])\s+', '', line.strip())


def clip(text: str, limit: int) -> str:
    text = ' '.join(text.split())
    return text if len(text) <= limit else text[: limit - 3].rstrip() + '...'


def capitalize_first(text: str) -> str:
    for i, ch in enumerate(text):
        if ch.isalpha():
            return text[:i] + ch.upper() + text[i + 1 :]
    return text


# -- structured data in free text ----------------------------------------------------------------------


def extract_data(text: str) -> Any:
    """The JSON or Python-literal data embedded in `text` (e.g. `str(reviews)` or `json.dumps(...)`), or None.

    Tries the largest bracketed span first, then one literal per line (for newline-joined records).
    """
    for opener, closer in (('[', ']'), ('{', '}')):
        start, end = text.find(opener), text.rfind(closer)
        if start != -1 and end > start:
            value = _parse_literal(text[start : end + 1])
            if value is not None:
                return value
    records = [
        v for ln in text.splitlines() if (v := _parse_literal(ln.strip())) is not None and isinstance(v, dict)
    ]
    return records or None


def _parse_literal(chunk: str) -> Any:
    if not chunk or chunk[0] not in '[{' or len(chunk) > 2_000_000:
        return None
    try:
        return json.loads(chunk)
    except ValueError:
        pass
    try:
        return ast.literal_eval(chunk)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def review_records(data: Any) -> list[Mapping[str, Any]] | None:
    """`data` as a list of review-like dicts (with `findings` or `verdict`), else None."""
    items: list[Any]
    if isinstance(data, Mapping):
        if 'findings' in data or 'verdict' in data:
            items = [data]
        else:  # {"a.py": review, ...}
            items = [dict(v, path=v.get('path', k)) for k, v in data.items() if isinstance(v, Mapping)]
    elif isinstance(data, list):
        items = list(data)
    else:
        return None
    found = []
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get('value'), Mapping) and 'ok' in item:
            item = item['value']  # a `Settled` from settle_all
        if isinstance(item, Mapping) and ('findings' in item or 'verdict' in item):
            found.append(item)
    return found or None


def finding_records(data: Any) -> list[Mapping[str, Any]] | None:
    """`data` as a flat list of finding-like dicts (`message` plus `line` or `severity`), else None."""
    if not isinstance(data, list):
        return None
    found = [
        d for d in data if isinstance(d, Mapping) and 'message' in d and ('line' in d or 'severity' in d)
    ]
    return found or None


# -- summarizer --------------------------------------------------------------------------------------------


def summarize(task: str, *, max_sentences: int = 4, max_chars: int = 900) -> str:
    """A concise summary of `task`: a digest for review data, otherwise the key sentences in order."""
    body = INSTRUCTION.sub('', task, count=1).strip() or task.strip()
    if not body:
        return 'Nothing to summarize: the input is empty.'
    data = extract_data(body)
    if data is not None:
        reviews = review_records(data)
        if reviews:
            return summarize_reviews(reviews)
        findings = finding_records(data)
        if findings:
            return summarize_findings_list(findings)
        return summarize_data(data)
    findings = finding_lines(body)
    if findings:
        return summarize_findings_list(findings)
    return summarize_prose(body, max_sentences=max_sentences, max_chars=max_chars)


FINDING_LINE = re.compile(
    r'^\s*(?:[-*]\s+)?(?P<path>[^\s:]+?):(?P<line>\d+)(?::\d+)?:?\s*[\[(]?(?P<severity>error|warning|info)[\])]?:?\s+'
    r'(?P<message>.+)$',
    re.I,
)


def finding_lines(text: str) -> list[dict[str, Any]] | None:
    """Findings written one per line as `path:line [severity] message`, when most lines look like that."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    found = []
    for line in lines:
        if m := FINDING_LINE.match(line):
            found.append(
                {
                    'path': m['path'],
                    'line': int(m['line']),
                    'severity': m['severity'].lower(),
                    'message': m['message'],
                }
            )
    return found if found and len(found) * 2 >= len(lines) else None


def summarize_reviews(reviews: Sequence[Mapping[str, Any]], *, top: int = 6) -> str:
    """A digest of code reviews: the tally, the most serious findings, which files need work."""
    counts: Counter[str] = Counter()
    ranked: list[tuple[int, str, int, str]] = []
    needs_work: list[str] = []
    clean: list[str] = []
    for index, review in enumerate(reviews, start=1):
        path = str(review.get('path') or f'file {index}')
        findings = [f for f in review.get('findings') or [] if isinstance(f, Mapping)]
        serious = [f for f in findings if f.get('severity') in ('error', 'warning')]
        verdict = review.get('verdict') or ('needs_work' if serious else 'ok')
        (needs_work if verdict == 'needs_work' else clean).append(
            f'{path} ({len(findings)} {"finding" if len(findings) == 1 else "findings"})'
            if verdict == 'needs_work'
            else path
        )
        for f in findings:
            severity = str(f.get('severity', 'info'))
            counts[severity] += 1
            line = f.get('line')
            ranked.append(
                (
                    SEVERITY_ORDER.get(severity, 3),
                    path,
                    line if isinstance(line, int) else 0,
                    f'{path}:{line} ({severity}) {clip(str(f.get("message", "")).split("; ")[0], 110)}',
                )
            )
    n = len(reviews)
    head = (
        f'Reviewed {n} {"file" if n == 1 else "files"}: {len(needs_work)} need work, {len(clean)} look fine.'
    )
    tally = ', '.join(
        f'{counts[s]} {s}{"s" if counts[s] != 1 and s != "info" else ""}'
        for s in ('error', 'warning', 'info')
        if counts[s]
    )
    lines = [head + (f' Findings: {tally}.' if tally else ' No findings.')]
    ranked.sort()
    serious = [r for r in ranked if r[0] <= 1] or ranked
    if serious:
        lines.append('Most important:')
        lines.extend(f'- {r[3]}' for r in serious[:top])
        if len(serious) > top:
            lines.append(f'- ... and {len(serious) - top} more')
    if needs_work:
        lines.append('Needs work: ' + ', '.join(needs_work) + '.')
    if clean:
        lines.append('Clean: ' + ', '.join(clean) + '.')
    return '\n'.join(lines)


def summarize_findings_list(findings: Sequence[Mapping[str, Any]], *, top: int = 6) -> str:
    """A digest of a flat list of findings: the tally, the files they are in, and the most severe ones."""
    counts = Counter(str(f.get('severity', 'info')) for f in findings)
    ordered = sorted(
        findings, key=lambda f: (SEVERITY_ORDER.get(str(f.get('severity')), 3), f.get('line') or 0)
    )
    tally = ', '.join(
        f'{n} {s}' for s, n in sorted(counts.items(), key=lambda kv: SEVERITY_ORDER.get(kv[0], 3))
    )
    per_file = Counter(str(f['path']) for f in findings if f.get('path'))
    where = f' in {len(per_file)} {"file" if len(per_file) == 1 else "files"}' if per_file else ''
    lines = [f'{len(findings)} {"finding" if len(findings) == 1 else "findings"}{where} ({tally}).']
    lines.append('Most important:')
    for f in ordered[:top]:
        at = f'{f["path"]}:' if f.get('path') else 'line '
        lines.append(
            f'- {at}{f.get("line", "?")} ({f.get("severity", "info")}) '
            f'{clip(str(f.get("message", "")).split("; ")[0], 110)}'
        )
    if len(findings) > top:
        lines.append(f'- ... and {len(findings) - top} more')
    if per_file:
        lines.append('By file: ' + ', '.join(f'{p} ({n})' for p, n in per_file.most_common()) + '.')
    return '\n'.join(lines)


def summarize_data(data: Any, *, top: int = 5) -> str:
    """A short description of arbitrary structured data."""
    if isinstance(data, Mapping):
        keys = list(data)
        noun = 'field' if len(keys) == 1 else 'fields'
        lines = [f'A record with {len(keys)} {noun}: {", ".join(map(str, keys[:12]))}.']
        for key in keys[:top]:
            lines.append(f'- {key}: {clip(_brief(data[key]), 100)}')
        return '\n'.join(lines)
    if isinstance(data, list):
        if not data:
            return 'An empty list.'
        if all(isinstance(d, Mapping) for d in data):
            fields = Counter(k for d in data for k in d)
            common = ', '.join(str(k) for k, _ in fields.most_common(8))
            lines = [f'{len(data)} records with fields {common}.']
            lines.extend(f'- {clip(_brief(d), 110)}' for d in data[:top])
        else:
            lines = [f'{len(data)} items.']
            lines.extend(f'- {clip(_brief(d), 110)}' for d in data[:top])
        if len(data) > top:
            lines.append(f'- ... and {len(data) - top} more')
        return '\n'.join(lines)
    return clip(_brief(data), 300)


def _brief(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        return ', '.join(
            f'{k}={_brief(v) if not isinstance(v, Mapping | list) else "..."}'
            for k, v in list(value.items())[:6]
        )
    if isinstance(value, list):
        return f'[{len(value)} items]'
    return str(value)


def summarize_prose(text: str, *, max_sentences: int = 4, max_chars: int = 900) -> str:
    """Extractive summary: the lead and the highest-scoring sentences (content-word frequency), in order.

    Repeated sentences count once. When the text opens with a question, the summary restates it once
    and then summarises what follows it.
    """
    parts = _unique_sentences(sentences(text))
    question = parts[0] if parts and parts[0].endswith('?') else None
    if question is not None:
        parts = [p for p in parts[1:] if _normal(p) != _normal(question)]
    if not parts:
        return question or clip(text, max_chars)
    prefix = f'{question}\n' if question else ''
    if len(parts) <= 2 and len(text) <= max_chars:
        return prefix + ' '.join(_strip_marker(p) for p in parts)
    freq = Counter(stem(w) for w in words(text) if len(w) >= 3 and w not in STOPWORDS)
    scored: list[tuple[float, int]] = []
    for index, sentence in enumerate(parts):
        terms = [stem(w) for w in words(sentence) if len(w) >= 3 and w not in STOPWORDS]
        if not terms or sentence.startswith('#'):
            continue
        score = sum(freq[t] for t in set(terms)) / (len(set(terms)) ** 0.5)
        if re.search(r'\d', sentence):
            score *= 1.2  # numbers, dates and names of things are usually the facts
        scored.append((score, index))
    if not scored:
        return prefix + clip(' '.join(parts), max_chars)
    keep = min(max_sentences, max(2, round(len(parts) * 0.4)))
    # The lead usually states the point: keep it, then the best-scoring of the rest.
    lead = [i for _, i in scored[:1]]
    rest = [i for _, i in sorted(scored[1:], key=lambda s: (-s[0], s[1]))]
    chosen = sorted((lead + rest)[:keep])
    picked = [_strip_marker(parts[i]) for i in chosen]
    as_list = any(_is_list_line(parts[i]) for i in chosen)
    summary = '\n'.join(f'- {p}' for p in picked) if as_list else ' '.join(picked)
    return prefix + (clip(summary, max_chars) if '\n' not in summary else summary[:max_chars])


def _normal(sentence: str) -> str:
    """A sentence reduced for comparison: no list marker, no `Q:`/`A:` label, lowercase words only."""
    bare = re.sub(r'^(q|a|question|answer)\s*:\s*', '', _strip_marker(sentence), flags=re.I)
    return ' '.join(words(bare))


def _unique_sentences(parts: list[str]) -> list[str]:
    seen: set[str] = set()
    unique = []
    for part in parts:
        key = _normal(part)
        if key and key in seen:
            continue
        seen.add(key)
        unique.append(part)
    return unique


# -- critic ---------------------------------------------------------------------------------------------

HEDGES = (
    "i don't know",
    'i do not know',
    'not sure',
    'cannot answer',
    "can't answer",
    'no idea',
    'as an ai',
    'unable to',
    'i think',
    'maybe',
    'perhaps',
    'possibly',
    'it depends',
)
REFUSALS = ("i don't know", 'i do not know', 'cannot answer', "can't answer", 'no idea', 'as an ai')


def critique(question: str, answer: str) -> Score:
    """A deterministic 0-10 grade of `answer` against `question`, with one reason per criterion."""
    text = answer.strip()
    if not text:
        return Score(score=0, reasons=['The answer is empty.'])
    reasons: list[str] = []
    lower = text.lower()
    answer_terms = {stem(w) for w in words(text)}
    asked_terms = key_terms(question)
    if LEAD_VERBS.match(question):  # a writing task: its form words are not what the text is about
        asked_terms = {k: w for k, w in asked_terms.items() if k not in INSTRUCTION_TERMS}
    asked = list(asked_terms)

    # Coverage of the question's key terms: up to 5 points.
    if asked:
        covered = [k for k in asked if k in answer_terms]
        coverage = len(covered) / len(asked)
        points = round(5 * coverage)
        missing = [asked_terms[k] for k in asked if k not in answer_terms][:5]
        reasons.append(
            f'Covers {len(covered)} of {len(asked)} key terms of the question ({coverage:.0%})'
            + (f'; missing: {", ".join(missing)}.' if missing else '.')
        )
    else:
        points = 3
        reasons.append(
            'The question has no distinctive key terms; coverage cannot be judged (3 of 5 points).'
        )
    score = float(points)

    # Length: up to 2 points.
    n_words = len(words(text))
    if n_words < 5:
        reasons.append(f'Far too short ({n_words} words) to be a complete answer.')
    elif n_words < 15:
        score += 1
        reasons.append(f'Short ({n_words} words); it likely leaves things out.')
    elif n_words <= 400:
        score += 2
        reasons.append(f'Reasonable length ({n_words} words).')
    elif n_words <= 800:
        score += 1
        reasons.append(f'Long ({n_words} words); it could be more concise.')
    else:
        reasons.append(f'Very long ({n_words} words); the point is hard to find.')

    # Specificity: up to 2 points.
    specifics = []
    if re.search(r'\d', text):
        specifics.append('numbers')
    if re.search(r'`[^`]+`|\w+\(\)|\b\w+\.\w{1,4}\b|line \d+', text):
        specifics.append('concrete identifiers')
    if re.search(r'\b(for example|e\.g\.|such as|for instance)\b', lower):
        specifics.append('examples')
    if re.search(r'\b(because|so that|therefore|since|which means)\b', lower):
        specifics.append('reasoning')
    gained = min(2, len(specifics))
    score += gained
    reasons.append(
        f'Specific: gives {", ".join(specifics)}.'
        if specifics
        else 'Vague: no numbers, names, examples or reasoning.'
    )

    # Structure: 1 point.
    parts = [p for p in re.split(r'(?<=[.!?])\s+|\n+', text) if len(words(p)) >= 2]
    if len(parts) >= 2 or any(_is_list_line(ln) for ln in text.splitlines()):
        score += 1
        reasons.append(f'Organised into {len(parts)} sentences or items.')
    else:
        reasons.append('A single sentence; no structure.')

    # Penalties.
    if any(r in lower for r in REFUSALS):
        score -= 4
        reasons.append('Declines or admits not knowing, which does not answer the question (-4).')
    elif sum(lower.count(h) for h in HEDGES) >= 2:
        score -= 1
        reasons.append('Hedges repeatedly (-1).')
    q_terms = {stem(w) for w in words(question)}
    if q_terms and answer_terms <= q_terms | STOPWORDS and n_words <= len(words(question)) + 3:
        score -= 3
        reasons.append('Mostly restates the question without answering it (-3).')
    if re.match(r'^\s*(is|are|does|do|can|should|will|was|were|has|have)\b', question.lower()) and re.match(
        r'^\s*(yes|no)\b', lower
    ):
        reasons.append('Answers the yes/no question directly.')

    final = max(0, min(10, round(score)))
    return Score(score=final, reasons=reasons)


# -- drafter -----------------------------------------------------------------------------------------------

LEAD_VERBS = re.compile(
    r'^\s*(please\s+)?(write|draft|compose|create|prepare|produce|make|put together|generate)\s+'
    r'(me\s+)?((a|an|the|some)\s+)?',
    re.I,
)
FORMS: list[tuple[str, tuple[str, ...]]] = [
    ('email', ('email', 'e-mail', 'letter', 'message', 'memo', 'note to', 'reply')),
    ('plan', ('plan', 'steps', 'checklist', 'roadmap', 'how to', 'todo', 'to-do', 'migration')),
    ('doc', ('readme', 'documentation', 'docs', 'guide', 'tutorial', 'docstring', 'manual')),
    (
        'announcement',
        ('announcement', 'announce', 'release notes', 'changelog', 'blog', 'post', 'newsletter'),
    ),
    ('report', ('report', 'summary', 'review', 'findings', 'assessment', 'analysis', 'overview', 'status')),
]


def _is_question(task: str) -> bool:
    first = re.split(r'(?<=[?.!])\s', task.strip(), maxsplit=1)[0]
    return first.endswith('?') or bool(QUESTION.match(first) and '?' in task)


FORM_WORDS = re.compile(
    r'^(short|brief|quick|concise|detailed|formal|friendly|polite|professional)?\s*'
    r'(e-?mail|letter|message|memo|note|reply|plan|checklist|roadmap|readme|documentation|docs|guide|'
    r'tutorial|announcement|release notes|changelog|blog post|post|newsletter|report|summary|review|'
    r'assessment|analysis|overview|status update|paragraph|description|draft)\b\s*',
    re.I,
)
RECIPIENT = re.compile(
    r'^to\s+(?:the\s+|our\s+|my\s+)?(?P<who>[A-Z][\w-]*|[\w-]+\s+team|team|client|customer|manager|users?|'
    r'everyone|stakeholders)\s*(?:(?:about|regarding|on|explaining|describing|announcing)\s+|,\s*|$)',
)
TOPIC_JOINERS = re.compile(
    r'^(about|on|for|to|regarding|explaining|describing|covering|that explains|of)\s+', re.I
)
POINT_SPLIT = re.compile(
    r'\s*(?:;|,\s*(?:and\s+)?|\band also\b|\bincluding\b|\bcovering\b|\bmention(?:ing)?\b|'
    r'\bwith\b(?= (?:a|an|the|some|\w+ing)\b))\s*',
    re.I,
)


def classify_form(task: str) -> str:
    """`email`, `plan`, `doc`, `announcement`, `report`, `question` or `text`."""
    if _is_question(task) and not LEAD_VERBS.match(task):
        return 'question'
    lower = task.lower()
    head = lower[:160]
    for form, cues in FORMS:
        if any(re.search(rf'\b{re.escape(c)}\b', head) for c in cues):
            return form
    return 'text'


def split_task(task: str) -> tuple[str, list[str], str | None]:
    """The topic of a drafting task, the points it asks to cover, and who it is addressed to."""
    first = task.strip().split('\n', 1)[0]
    body = LEAD_VERBS.sub('', first, count=1)
    body = FORM_WORDS.sub('', body, count=1)
    recipient = None
    if m := RECIPIENT.match(body):
        recipient = m.group('who')
        body = body[m.end() :]
    body = TOPIC_JOINERS.sub('', body, count=1).strip().rstrip('.:')
    topic_part, colon, listed = body.partition(': ')
    pieces = [p.strip(' .') for p in POINT_SPLIT.split(topic_part) if p and p.strip(' .')]
    if colon:
        pieces += [p.strip(' .') for p in POINT_SPLIT.split(listed) if p and p.strip(' .')]
    if not pieces:
        return 'the requested topic', [], recipient
    topic, points = pieces[0], []
    in_list = len(pieces) > 2
    for piece in pieces[1:]:
        halves = [h.strip() for h in re.split(r'\s+and\s+', piece)]
        if len(halves) > 1 and (in_list or all(len(h.split()) >= 2 for h in halves)):
            points.extend(halves)
        else:
            points.append(piece)
    # Bulleted lines after the first line are points too.
    for line in task.strip().splitlines()[1:]:
        if _is_list_line(line) or (
            line.strip() and len(line.split()) <= 16 and not line.strip().startswith(('[', '{'))
        ):
            points.append(_strip_marker(line))
    return topic, [p for p in points if p], recipient


def draft(task: str) -> str:
    """A first draft for `task`, shaped by the form it asks for (email, plan, doc, report, ...)."""
    task = task.strip()
    if not task:
        return 'Nothing to draft: the task is empty. Say what the text is for and what it should cover.'
    tone = None
    if m := TONE.search(task):
        tone = m.group(1).strip().lower()
        task = (task[: m.start()] + task[m.end() :]).strip()
    data = extract_data(task)
    reviews = review_records(data) if data is not None else None
    text_part = task[: task.find('[')] if data is not None and '[' in task else task
    topic, points, recipient = split_task(text_part if data is not None else task)
    form = classify_form(task)
    title = capitalize_first(topic)
    if reviews:
        return _draft_review_report(title, reviews, form)
    if form == 'email':
        return _draft_email(topic, points, recipient, tone)
    if form == 'question':
        return _draft_answer(task, tone)
    if form == 'plan':
        return _draft_plan(title, points)
    if form == 'doc':
        return _draft_doc(title, points)
    if form == 'announcement':
        return _draft_announcement(title, points)
    if form == 'report':
        return _draft_report(title, points)
    return _draft_text(topic, points, tone)


TONE = re.compile(r'\s*\((?:tone|style|voice):\s*([\w -]+)\)', re.I)
QUESTION = re.compile(r'^\s*(what|why|how|when|which|who|where|is|are|does|do|can|should|explain)\b', re.I)
QUESTION_WORDS = frozenset({'what', 'why', 'how', 'when', 'which', 'who', 'where', 'difference', 'explain'})


def content_words(text: str, limit: int = 4) -> list[str]:
    """The first distinct content words of `text`, as written (not stemmed)."""
    seen: dict[str, str] = {}
    for w in WORD.findall(text):
        low = w.lower()
        if len(low) >= 3 and low not in STOPWORDS and low not in QUESTION_WORDS:
            seen.setdefault(stem(low), w)
    return list(seen.values())[:limit]


def _draft_answer(task: str, tone: str | None) -> str:
    """An answer-shaped draft for a question, with [placeholders] where the facts go."""
    question, _, rest = task.partition('?')
    question = question.strip() + '?'
    focus = re.search(r'\bfocus(?:ing)? on ([^.]+)', rest, re.I)
    terms = content_words(question) or ['the topic']
    lines = [f'Q: {question}', '']
    lines.append(f'A (focusing on {focus.group(1).strip()}):' if focus else 'A:')
    lines.append(f'In short: [one-sentence answer about {_join(terms[:3])}].')
    if tone != 'concise':
        lines += [
            '',
            *(f'- {capitalize_first(t)}: [what the reader needs to know about {t}].' for t in terms[:3]),
        ]
    if tone == 'thorough':
        lines += ['', 'Example: [a small, concrete example].', 'Caveats: [when this does not apply].']
    lines += ['', 'Next step: [one thing to try or read next].']
    return '\n'.join(lines)


def _join(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return ''.join(items)
    return ', '.join(items[:-1]) + ' and ' + items[-1]


def _bullets(points: Iterable[str]) -> str:
    return '\n'.join(f'- {capitalize_first(p.rstrip("."))}.' for p in points)


def _draft_email(topic: str, points: list[str], recipient: str | None, tone: str | None = None) -> str:
    subject = capitalize_first(topic or 'update')
    greeting = f'Hi {recipient or "team"}!' if tone == 'friendly' else f'Hi {recipient or "team"},'
    parts = [f'Subject: {subject}', '', greeting, '', f'I am writing about {topic or "a quick update"}.']
    if points:
        parts += ['', 'The main points:', _bullets(points)]
    if tone == 'thorough':
        parts += ['', 'Background: [why this matters now].', 'Impact: [who is affected and how].']
    if tone != 'concise':
        parts += ['', 'Please let me know if you have questions or if anything here needs to change.']
    parts += ['', 'Thanks so much,' if tone == 'friendly' else 'Best regards,', '[Your name]']
    return '\n'.join(parts)


def _draft_plan(title: str, points: list[str]) -> str:
    steps = points or [
        f'Clarify the goal and the constraints of {title.lower()}',
        'List the work in small, checkable steps',
        'Do the steps in order, verifying each one',
        'Review the result and note follow-ups',
    ]
    numbered = '\n'.join(f'{i}. {capitalize_first(s.rstrip("."))}.' for i, s in enumerate(steps, start=1))
    return (
        f'# Plan: {title}\n\n## Goal\n{title}.\n\n## Steps\n{numbered}\n\n'
        '## Done when\nEvery step is complete and checked, and open questions are written down.'
    )


def _draft_doc(title: str, points: list[str]) -> str:
    sections = points or ['Overview', 'Usage', 'Configuration']
    body = '\n\n'.join(f'## {capitalize_first(s)}\n\nDescribe {s.lower()} here.' for s in sections)
    return f'# {title}\n\nThis document explains {title[:1].lower() + title[1:]}.\n\n{body}'


def _draft_announcement(title: str, points: list[str]) -> str:
    lines = [f'# {title}', '', f'We are pleased to announce {title[:1].lower() + title[1:]}.']
    if points:
        lines += ['', "What's new:", _bullets(points)]
    lines += ['', 'Thank you to everyone who contributed. Feedback is welcome.']
    return '\n'.join(lines)


def _draft_report(title: str, points: list[str]) -> str:
    lines = [f'# {title}', '', '## Summary', f'This report covers {title[:1].lower() + title[1:]}.', '']
    lines += ['## Details', _bullets(points) if points else '- (add the details here)', '']
    lines += ['## Next steps', '- Confirm the findings with the owners.', '- Schedule the follow-up work.']
    return '\n'.join(lines)


def _draft_text(topic: str, points: list[str], tone: str | None = None) -> str:
    opening = f'{capitalize_first(topic.rstrip("."))}.' if topic else 'Draft.'
    middle = ' '.join(f'{capitalize_first(p.rstrip("."))}.' for p in points)
    if not middle:
        middle = '[Why it matters, in one or two sentences.]'
    closing = {
        'concise': '',
        'friendly': 'Happy to talk it through if anything is unclear!',
        'thorough': '[Background and details.] [What happens next, and who does it.]',
    }.get(tone or '', '[What happens next.]')
    return ' '.join(p for p in (opening, middle, closing) if p)


def _draft_review_report(title: str, reviews: Sequence[Mapping[str, Any]], form: str) -> str:
    digest = summarize_reviews(reviews, top=10)
    head = digest.split('\n', 1)[0]
    lines = [
        f'# {title if title and title != "The requested topic" else "Code review report"}',
        '',
        '## Summary',
        head,
        '',
    ]
    for review in reviews:
        path = str(review.get('path', 'file'))
        findings = [f for f in review.get('findings') or [] if isinstance(f, Mapping)]
        lines.append(f'## {path}: {"needs work" if review.get("verdict") == "needs_work" else "ok"}')
        if not findings:
            lines.append('No findings.')
        for f in sorted(
            findings, key=lambda f: (SEVERITY_ORDER.get(str(f.get('severity')), 3), f.get('line') or 0)
        ):
            lines.append(f'- line {f.get("line", "?")} ({f.get("severity", "info")}): {f.get("message", "")}')
        lines.append('')
    lines += [
        '## Next steps',
        '- Fix the errors first, then the warnings.',
        '- Re-run the review after the fixes.',
    ]
    if form == 'email':
        lines = [
            'Subject: Code review results',
            '',
            'Hi team,',
            '',
            *lines[2:],
            '',
            'Best regards,',
            '[Your name]',
        ]
    return '\n'.join(lines).rstrip()


# -- editor -----------------------------------------------------------------------------------------------

FILLERS = [
    (r'\bin order to\b', 'to'),
    (r'\bdue to the fact that\b', 'because'),
    (r'\bat this point in time\b', 'now'),
    (r'\bit is important to note that\s*', ''),
    (r'\bplease note that\s*', ''),
    (r'\bneedless to say,?\s*', ''),
    (r'\bin the event that\b', 'if'),
    (r'\ba large number of\b', 'many'),
    (r'\bhas the ability to\b', 'can'),
    (r'\b(very|really|basically|actually|just|quite|simply|totally|literally)\s+', ''),
]
CONTRACTIONS = {
    "don't": 'do not',
    "doesn't": 'does not',
    "didn't": 'did not',
    "can't": 'cannot',
    "won't": 'will not',
    "isn't": 'is not',
    "aren't": 'are not',
    "wasn't": 'was not',
    "weren't": 'were not',
    "it's": 'it is',
    "that's": 'that is',
    "there's": 'there is',
    "we're": 'we are',
    "they're": 'they are',
    "you're": 'you are',
    "i'm": 'I am',
    "we've": 'we have',
    "i've": 'I have',
    "let's": 'let us',
    "shouldn't": 'should not',
    "couldn't": 'could not',
    "wouldn't": 'would not',
    "haven't": 'have not',
    "hasn't": 'has not',
    "we'll": 'we will',
    "i'll": 'I will',
    "you'll": 'you will',
}
CASUAL = [
    (r'\bhey\b', 'Hello'),
    (r'\bhi\b', 'Hello'),
    (r'\bthanks\b', 'thank you'),
    (r'\bgonna\b', 'going to'),
    (r'\bwanna\b', 'want to'),
    (r'\bkinda\b', 'somewhat'),
    (r'\bstuff\b', 'material'),
    (r'\bok\b', 'acceptable'),
    (r'\bguys\b', 'everyone'),
    (r'\bawesome\b', 'excellent'),
]
MISSPELLINGS = {
    'teh': 'the',
    'recieve': 'receive',
    'recieved': 'received',
    'seperate': 'separate',
    'definately': 'definitely',
    'occured': 'occurred',
    'untill': 'until',
    'wich': 'which',
    'becuase': 'because',
    'adress': 'address',
    'accomodate': 'accommodate',
    'acheive': 'achieve',
    'begining': 'beginning',
    'beleive': 'believe',
    'calender': 'calendar',
    'commited': 'committed',
    'enviroment': 'environment',
    'existance': 'existence',
    'goverment': 'government',
    'independant': 'independent',
    'occurence': 'occurrence',
    'publically': 'publicly',
    'refered': 'referred',
    'succesful': 'successful',
    'tommorow': 'tomorrow',
    'truely': 'truly',
    'thier': 'their',
    'alot': 'a lot',
    'wierd': 'weird',
    'arguement': 'argument',
    'dependancy': 'dependency',
    'paramter': 'parameter',
    'retreive': 'retrieve',
    'funtion': 'function',
    'lenght': 'length',
    'reponse': 'response',
    'sucess': 'success',
}


def edit(draft_text: str, feedback: str) -> str:
    """Revise `draft_text` by the instructions found in `feedback`; always tidies whitespace and capitals."""
    text = draft_text.replace('\r\n', '\n').strip()
    if not text:
        return 'Nothing to edit: the draft is empty.'
    fb = feedback.lower()

    for old, new in _replacements(feedback):
        text = re.sub(re.escape(old), new, text, flags=re.I)
    for phrase in _removals(feedback):
        text = _remove_phrase(text, phrase)
    text = _fix_spelling(text)  # always safe: only words that are never right
    if re.search(r'\b(typos?|spell|spelling|grammar|proofread|mistakes?)\b', fb):
        text = _fix_grammar(text)
    if re.search(r'\b(formal|professional|polite)\b', fb):
        text = _formalize(text)
    elif re.search(r'\b(casual|informal|friendly|conversational)\b', fb):
        text = _casualize(text)
    if re.search(
        r'\b(shorter|shorten|concise|brief|briefer|tighten|trim|wordy|verbose|succinct|too long|very long|'
        r'make it short|keep it short|cut (it|down|the))\b',
        fb,
    ):
        text = _tighten(text)
    if re.search(r'\bhedg', fb):
        text = _dehedge(text)
    if re.search(
        r'\b(bullets?|bullet points|bulleted|as a list|into a list|itemi[sz]e)\b', fb
    ) and not re.search(r'\b(no|without) bullets?\b', fb):
        text = _to_bullets(text)
    elif re.search(r'\b(prose|paragraphs?|no bullets|without bullets)\b', fb):
        text = _to_prose(text)
    if re.search(r'\b(title|heading|headline)\b', fb):
        text = _add_title(text)
    if re.search(r'\b(conclusion|conclude|wrap[- ]?up|closing|call to action|next steps?)\b', fb):
        text = _add_conclusion(text, fb)
    for addition in _additions(feedback):
        if addition.lower() not in text.lower():
            text = _append_point(text, addition)
    missing = _missing_terms(feedback, text)
    if missing:
        text = _append_point(text, f'This also covers {_join(missing)}')
    return _tidy(text)


def _missing_terms(feedback: str, text: str) -> list[str]:
    """Terms the feedback says are missing (`missing: a, b`, as the critic writes) and `text` lacks."""
    m = re.search(r'\bmissing:\s*([^.;\n]+)', feedback, re.I)
    if not m:
        return []
    present = {stem(w) for w in words(text)}
    terms = [t.strip() for t in m.group(1).split(',') if t.strip()]
    return [t for t in terms if stem(t.lower()) not in present][:5]


HEDGE_WORDS = re.compile(
    r'\b(i think|i believe|maybe|perhaps|possibly|probably|sort of|kind of)\s*,?\s*', re.I
)


def _dehedge(text: str) -> str:
    return _sentence_case(HEDGE_WORDS.sub('', text))


def _replacements(feedback: str) -> list[tuple[str, str]]:
    pairs = []
    for m in re.finditer(
        r'\b(?:replace|change|rename|swap)\s+("[^"]+"|\'[^\']+\'|\S+)\s+(?:with|to|by|for)\s+'
        r'("[^"]+"|\'[^\']+\'|\S+)',
        feedback,
        re.I,
    ):
        old, new = (s.strip('"\'').rstrip('.,;') for s in m.groups())
        if old and old.lower() not in ('it', 'this', 'that', 'tone', 'the'):
            pairs.append((old, new))
    return pairs


def _removals(feedback: str) -> list[str]:
    found = []
    for m in re.finditer(
        r"\b(?:remove|drop|delete|cut|omit|don't mention|do not mention|leave out)\s+"
        r'(?:the\s+)?(?:(?:part|paragraph|section|sentence|line|mention|bit)s?\s+'
        r'(?:about|on|of|mentioning)\s+(?:the\s+)?)?'
        r'("[^"]+"|\'[^\']+\'|[\w.-]+)',
        feedback,
        re.I,
    ):
        phrase = m.group(1).strip('"\'').rstrip('.,;')
        if (
            phrase.lower()
            not in (
                'it',
                'this',
                'that',
                'fluff',
                'filler',
                'jargon',
                'repetition',
                'redundancy',
                'words',
                'some',
                'the',
                'a',
                'an',
            )
            and len(phrase) > 2
        ):
            found.append(phrase)
    return found


def _additions(feedback: str) -> list[str]:
    found = []
    for m in re.finditer(
        r'\b(?:add|mention|include|note)\s+(?:that\s+)?("[^"]+"|\'[^\']+\'|[^.;\n]+)', feedback, re.I
    ):
        phrase = m.group(1).strip().strip('"\'').rstrip('.,;')
        if re.match(
            r'^(a |an |the |some )?(title|heading|headline|conclusion|summary|closing|bullets?|'
            r'call to action|next steps?|more|less|examples?|details?)\b',
            phrase,
            re.I,
        ):
            continue
        if len(phrase.split()) >= 2:
            found.append(phrase)
    return found


def _remove_phrase(text: str, phrase: str) -> str:
    out_lines = []
    pattern = re.compile(re.escape(phrase), re.I)
    for line in text.split('\n'):
        if not pattern.search(line):
            out_lines.append(line)
            continue
        if _is_list_line(line) or line.lstrip().startswith('#'):
            continue  # drop the whole item
        kept = [s for s in SENTENCE.split(line) if not pattern.search(s)]
        if kept:
            out_lines.append(' '.join(kept))
    return '\n'.join(out_lines)


def _fix_spelling(text: str) -> str:
    def fix(m: re.Match[str]) -> str:
        word = m.group(0)
        right = MISSPELLINGS.get(word.lower())
        if right is None:
            return word
        return capitalize_first(right) if word[0].isupper() else right

    return re.sub(r'\b[A-Za-z]+\b', fix, text)


def _fix_grammar(text: str) -> str:
    """Doubled words ("the the") and a lowercase pronoun "i"."""
    text = re.sub(r'\b(?!(?:that|had)\b)([A-Za-z]+)\s+\1\b', r'\1', text, flags=re.I)
    return re.sub(r'(?<![\w/.-])i(?=\s|\'|[,.;:!?]|$)', 'I', text)


def _formalize(text: str) -> str:
    for short, long in CONTRACTIONS.items():
        text = re.sub(
            rf'\b{re.escape(short)}\b', lambda m, long=long: _match_case(m.group(0), long), text, flags=re.I
        )
    for pattern, repl in CASUAL:
        text = re.sub(pattern, lambda m, repl=repl: _match_case(m.group(0), repl), text, flags=re.I)
    text = re.sub(r'!+', '.', text)
    return re.sub(r'\s*:\)|\s*;\)|\s*:D', '', text)


def _casualize(text: str) -> str:
    for short, long in CONTRACTIONS.items():
        if short in ("let's",):
            continue
        text = re.sub(
            rf'\b{re.escape(long)}\b', lambda m, short=short: _match_case(m.group(0), short), text, flags=re.I
        )
    return text


def _match_case(original: str, replacement: str) -> str:
    return capitalize_first(replacement) if original[:1].isupper() else replacement


def _tighten(text: str) -> str:
    for pattern, repl in FILLERS:
        text = re.sub(pattern, repl, text, flags=re.I)
    text = _sentence_case(text)
    paragraphs = re.split(r'\n\s*\n', text)
    seen: set[str] = set()
    out = []
    for para in paragraphs:
        lines = para.split('\n')
        if any(_is_list_line(ln) or ln.lstrip().startswith('#') for ln in lines):
            out.append('\n'.join(_first_time(lines, seen)))
            continue
        parts = [s for s in SENTENCE.split(' '.join(ln.strip() for ln in lines)) if s.strip()]
        unique = _first_time(parts, seen)
        if len(unique) > 3:
            unique = _top_sentences(unique, 3)
        if unique:
            out.append(' '.join(unique))
    return '\n\n'.join(out)


def _first_time(items: Iterable[str], seen: set[str]) -> list[str]:
    """The items not seen before (case-insensitive); records them in `seen`."""
    kept = []
    for item in items:
        key = ' '.join(item.lower().split())
        if key and key in seen:
            continue
        seen.add(key)
        kept.append(item)
    return kept


def _top_sentences(parts: list[str], keep: int) -> list[str]:
    """The lead sentence and the `keep - 1` best-scoring others (content-word frequency), in order."""
    freq = Counter(stem(w) for s in parts for w in words(s) if len(w) >= 3 and w not in STOPWORDS)
    scored = []
    for i, s in enumerate(parts[1:], start=1):
        terms = {stem(w) for w in words(s) if len(w) >= 3 and w not in STOPWORDS}
        scored.append((sum(freq[t] for t in terms) / (len(terms) ** 0.5 if terms else 1), i))
    chosen = sorted([0] + [i for _, i in sorted(scored, key=lambda s: (-s[0], s[1]))[: keep - 1]])
    return [parts[i] for i in chosen]


def _to_bullets(text: str) -> str:
    out = []
    for para in re.split(r'\n\s*\n', text):
        lines = [ln for ln in para.split('\n') if ln.strip()]
        if not lines:
            continue
        if all(_is_list_line(ln) or ln.lstrip().startswith('#') for ln in lines) or _looks_like_header(lines):
            out.append('\n'.join(lines))
            continue
        parts = [s.strip() for s in SENTENCE.split(' '.join(ln.strip() for ln in lines)) if s.strip()]
        out.append('\n'.join(f'- {s}' for s in parts))
    return '\n\n'.join(out)


def _looks_like_header(lines: list[str]) -> bool:
    return len(lines) == 1 and (
        lines[0].rstrip().endswith(':') or lines[0].lower().startswith(('subject:', 'hi ', 'hello', 'dear'))
    )


def _to_prose(text: str) -> str:
    out = []
    for para in re.split(r'\n\s*\n', text):
        lines = [ln for ln in para.split('\n') if ln.strip()]
        items = [_strip_marker(ln) for ln in lines if _is_list_line(ln)]
        others = [ln for ln in lines if not _is_list_line(ln)]
        pieces = others + [capitalize_first(i.rstrip('.')) + '.' for i in items]
        if pieces:
            out.append(' '.join(pieces))
    return '\n\n'.join(out)


SUBJECT_LINE = re.compile(r'^subject:[ \t]*(.*)$', re.I | re.M)
LEAD_INS = re.compile(
    r'^(i am writing (about|to tell you about|regarding)|this (document|report|draft|email|note) '
    r'(explains|covers|describes|is about)|we are (pleased|happy) to announce|here is|here are|'
    r'(i|we) (think|believe|feel)( that)?|in my (opinion|view),?)\s+',
    re.I,
)


def _add_title(text: str) -> str:
    """A `# Title` line for prose; for an email, a proper `Subject:` line instead."""
    if text.lstrip().startswith('#'):
        return text
    subject = SUBJECT_LINE.search(text)
    if subject:
        title = _title_case(subject.group(1).strip() or _title_for(text))
        return text[: subject.start()] + f'Subject: {title}' + text[subject.end() :]
    return f'# {_title_for(text)}\n\n{text}'


def _title_for(text: str) -> str:
    first = next(
        (s for s in sentences(text) if not s.lower().startswith(('subject:', 'hi ', 'hello', 'dear'))), text
    )
    first = LEAD_INS.sub('', _strip_marker(first))
    terms = [w for w in WORD.findall(first) if w.lower() not in STOPWORDS][:5]
    return _title_case(' '.join(terms)) if terms else 'Draft'


def _title_case(text: str) -> str:
    small = {'a', 'an', 'and', 'as', 'at', 'but', 'by', 'for', 'in', 'of', 'on', 'or', 'the', 'to', 'with'}
    out = []
    for i, word in enumerate(text.split()):
        keep = word.lower() in small and i > 0
        out.append(word if keep or not word[:1].islower() else word[:1].upper() + word[1:])
    return ' '.join(out)


def _add_conclusion(text: str, fb: str) -> str:
    if re.search(r'\b(call to action|next steps?)\b', fb):
        closing = 'Next step: please review this and reply with any changes by the end of the week.'
    else:
        topics = content_words(text, 3)
        about = _join(topics) if topics else 'the points above'
        closing = f'In conclusion, this covers {about}; the points above are the ones to act on.'
    return _before_signoff(text, closing)


SIGNOFF = re.compile(
    r'\n\n(Best regards|Kind regards|Best wishes|Regards|Thanks so much|Thanks|Thank you|Sincerely|Cheers)'
    r',?\n'
)


def _before_signoff(text: str, paragraph: str) -> str:
    """`paragraph` added at the end of the body: before an email's sign-off, if it has one."""
    signoff = SIGNOFF.search(text)
    if signoff:
        return text[: signoff.start()] + '\n\n' + paragraph + text[signoff.start() :]
    return text.rstrip() + '\n\n' + paragraph


def _append_point(text: str, addition: str) -> str:
    lines = text.rstrip().split('\n')
    item = capitalize_first(addition.rstrip('.')) + '.'
    if lines and _is_list_line(lines[-1]):
        marker = re.match(r'^\s*([-*•]|\d+[.)])', lines[-1])
        bullet = marker.group(1) if marker else '-'
        if bullet[0].isdigit():
            bullet = f'{int(re.sub(r"[^0-9]", "", bullet)) + 1}{bullet[-1]}'
        return text.rstrip() + f'\n{bullet} {item}'
    if SIGNOFF.search(text) or text.count('\n\n'):
        return _before_signoff(text, item)
    return text.rstrip() + ' ' + item


def _tidy(text: str) -> str:
    text = re.sub(r'[ \t]+\n', '\n', text)
    text = re.sub(r'\n{3,}', '\n\n', text)
    text = re.sub(r'(?<=\S)[ \t]{2,}', ' ', text)
    text = re.sub(r'\s+([,.;:!?])(?=\s|$)', r'\1', text)
    text = _sentence_case(text)
    return '\n'.join(_capitalize_line(ln) for ln in text.split('\n')).strip()


def _sentence_case(text: str) -> str:
    """Capitalize a plain word that starts a sentence (after `.`, `!` or `?`; not after `e.g.`)."""
    return re.sub(r'(?<=[.!?])([ \t]+)([a-z]+)(?=[\s,;:!?])', _capitalize_after_stop, text)


ABBREVIATIONS = ('e.g.', 'i.e.', 'etc.', 'vs.', 'cf.', 'approx.', 'no.')


def _capitalize_after_stop(m: re.Match[str]) -> str:
    before = m.string[max(0, m.start() - 8) : m.start()].lower()
    if before.endswith(ABBREVIATIONS):
        return m.group(0)
    return m.group(1) + capitalize_first(m.group(2))


def _capitalize_line(line: str) -> str:
    """Capitalize a line's first word when it is a plain lowercase word (not code, not indented)."""
    m = re.match(r'^((?:[-*•]|\d+[.)]|#+)\s+)?([a-z][a-z\']*)(?=[\s,;:!?]|$)', line)
    if not m:
        return line
    return line[: m.start(2)] + capitalize_first(m.group(2)) + line[m.end(2) :]


__all__ = [
    'classify_form',
    'content_words',
    'critique',
    'draft',
    'edit',
    'extract_data',
    'finding_lines',
    'finding_records',
    'key_terms',
    'keywords',
    'review_records',
    'sentences',
    'split_task',
    'summarize',
    'summarize_data',
    'summarize_findings_list',
    'summarize_prose',
    'summarize_reviews',
]
