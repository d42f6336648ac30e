"""The commands on evals: `eval` scores the orchestrator on a dataset, `evals` lists the stored ones."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer

from .._store import StoreError
from ._safe_text import safe
from ._shared import (
    LIMIT_MAX,
    JsonOpt,
    ModelOpt,
    StoreOpt,
    Where,
    app,
    catalog_options,
    console,
    fail,
    interrupted,
    model_for,
    open_store,
)


@app.command('eval')
@catalog_options
def eval_(
    dataset: Annotated[
        Path, typer.Argument(help="A pydantic-evals dataset (YAML or JSON); each case's inputs are the prompt.")
    ],
    baseline: Annotated[
        str | None,
        typer.Option(
            '--baseline', help='A stored eval to compare with (an id or a unique prefix): the report becomes the diff.'
        ),
    ] = None,
    reuse_calls: Annotated[
        str | None,
        typer.Option(
            '--reuse-calls',
            help="Answer a call from this stored eval's journal when its case made the same call "
            '(same callee, same arguments); it is also the baseline unless --baseline is given.',
        ),
    ] = None,
    reuse_safe: Annotated[
        list[str] | None,
        typer.Option(
            '--reuse-safe', help='A side-effecting callee whose recorded results may be reused (repeat for several).'
        ),
    ] = None,
    instructions: Annotated[
        Path | None,
        typer.Option(
            '--instructions', help="A file with the orchestrator's instructions (default: the harness's own)."
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option('--concurrency', '-j', help='Cases run at once.', min=1, max=1_000)] = 4,
    name: Annotated[str | None, typer.Option('--name', help="The eval's name in reports (default: its id).")] = None,
    model: ModelOpt = None,
    *,
    where: Where,
) -> None:
    """Score the orchestrator on a dataset: every case run (at most --concurrency at once) and stored, scored by
    the dataset's evaluators, and pydantic-evals' report printed. Exit 1 when a case fails or an assertion
    does not hold."""
    from .._evals._run import EvalError, load_dataset

    try:
        cases = load_dataset(dataset)
    except EvalError as exc:
        raise fail(str(exc)) from None
    text = None
    if instructions is not None:
        try:
            text = instructions.read_text(encoding='utf-8')
        except OSError as exc:
            raise fail(f'cannot read {instructions}: {exc.strerror}') from None
        except UnicodeDecodeError as exc:
            raise fail(f'{instructions} is not UTF-8 text (byte {exc.start}): save it as UTF-8') from None
    h, choice = where.harness(model, opens_store=True)
    model_object = model_for(choice, announce=True)
    try:
        result = h.evaluate_sync(
            cases,
            model=model_object,
            model_label=choice.label,
            instructions=text,
            name=name,
            max_concurrency=concurrency,
            progress=console.is_terminal,
            baseline=baseline,
            reuse_calls=reuse_calls,
            reuse_side_effects=reuse_safe or (),
            source=str(dataset),
        )
        assert h.store is not None
        short = h.store.short_ids([run for case in result.cases for run in case.stats.run_ids])
    except (EvalError, StoreError) as exc:
        raise fail(str(exc)) from None
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        raise interrupted(exc) from None
    finally:
        h.close()
    result.report.print(
        console=console,
        baseline=result.baseline,
        include_averages=True,
        include_removed_cases=result.baseline is not None,
    )
    for line in result.summary():
        console.print(safe(line), soft_wrap=True)
    for case in result.cases:
        runs = ', '.join(short.get(run, run) for run in case.stats.run_ids) or 'no run'
        failed = f' · failed: {case.error}' if case.error else ''
        console.print(f'  {safe(case.name)}: run {safe(runs)}{safe(failed)}', soft_wrap=True)
    console.print(
        "[dim]a case's runs: harness show / trace / replay / fork RUN · compare a later eval: "
        f'--baseline {result.eval_id[:7]} · pay only for what changes: --reuse-calls {result.eval_id[:7]}'
        '[/dim]',
        soft_wrap=True,
    )
    averages = result.report.averages()
    if result.report.failures or (averages is not None and (averages.assertions or 1.0) < 1.0):
        raise typer.Exit(1)


@app.command()
def evals(
    limit: Annotated[int, typer.Option('--limit', '-n', help='How many evals to list.', min=1, max=LIMIT_MAX)] = 20,
    as_json: JsonOpt = False,
    store: StoreOpt = None,
) -> None:
    """Stored evals, newest first: dataset, model, cases, assertions, calls (live and reused), tokens, cost."""
    import time

    from rich.table import Table

    from .._agent._usage import format_cost

    with open_store(store) as db:
        rows = db.list_evals(limit)
    if as_json:
        print(json.dumps([{k: v for k, v in row.items() if k != 'report_json'} for row in rows], indent=2))
        return
    if not rows:
        console.print('[dim]no eval stored yet: harness eval DATASET.yaml[/dim]')
        return
    table = Table(
        'eval',
        'when',
        'dataset',
        'model',
        'cases',
        'assertions',
        'calls (live / reused)',
        'tokens',
        'cost',
        'status',
        box=None,
        header_style='bold',
    )
    for row in rows:
        s = row['summary'] or {}
        when = time.strftime('%Y-%m-%d %H:%M', time.localtime(row['created']))
        failed = s.get('failed', s.get('failures')) if s else None  # `failed`: errors and failed assertions
        cases = (f'{s["cases"]}' + (f' ({failed} failed)' if failed else '')) if s else '–'
        rate = f'{s["assertions"]:.0%}' if s.get('assertions') is not None else '–'
        calls = f'{s["calls"]} ({s["live_calls"]} / {s["reused_calls"]})' if s else '–'
        tokens = f'{s["input_tokens"] + s["output_tokens"]:,}' if s else '–'
        cost = format_cost(s.get('cost'), s.get('unpriced', 0)) if s else '–'
        table.add_row(
            row['eval_id'][:7],
            when,
            safe(row['dataset']),
            safe(row['model'] or '–'),
            cases,
            rate,
            calls,
            tokens,
            cost,
            row['status'],
        )
    console.print(table)
