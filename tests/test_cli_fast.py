"""The command line starts fast where no model runs: the commands that read stored runs import neither
pydantic-ai nor logfire, and no command but those that run something sets tracing up.

One fresh interpreter (what a module imports is only visible in a process that had not imported it
yet) runs `--help`, `runs`, `show`, `trace` and their `--json` forms one after another against a store
this test filled, then `agents`, which must build the catalog (pydantic-ai, and logfire through it) but
must not configure tracing. The cold-start times themselves are a benchmark (`benchmarks/bench_cold.py`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROBE = """
import json, sys
from harness._cli._app import app

def loaded():
    return [m for m in ("pydantic_ai", "logfire", "pydantic_monty", "harness._engine") if m in sys.modules]

report = {}
for args in json.loads(sys.argv[1]):
    try:
        app(args, standalone_mode=False)
    except SystemExit as exc:
        assert not exc.code, (args, exc.code)
    report[" ".join(args)] = loaded()
tracing = sys.modules.get("harness._tracing._setup")
report["tracing"] = getattr(tracing, "_mode", None)
print("REPORT " + json.dumps(report))
"""


def test_reading_runs_loads_no_model_stack(
    cli: Callable[..., Any], tmp_path: Path, offline_env: Callable[..., dict[str, str]]
) -> None:
    (tmp_path / 'flow.py').write_text('await list_files(pattern="*.py")\n')
    env = {'HARNESS_STORE': str(tmp_path / 'runs.db')}
    ran = cli(['exec', 'flow.py', '--json'], cwd=tmp_path, env=env)
    assert ran.exit_code == 0, ran.describe()
    run_id = json.loads(ran.stdout)['run_id']
    reading = [
        ['--help'],
        ['runs'],
        ['runs', '--json', '--status', 'completed'],
        ['show', run_id],
        ['show', run_id, '--json', '--call', '1'],
        ['trace', run_id],
        ['trace', run_id, '--json'],
    ]
    probe = subprocess.run(
        [sys.executable, '-c', PROBE, json.dumps([*reading, ['agents', '--plain']])],
        cwd=tmp_path,
        env=offline_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0, probe.stderr
    report = json.loads(next(line for line in probe.stdout.splitlines() if line.startswith('REPORT '))[7:])
    for args in reading:
        assert report[' '.join(args)] == [], (args, report)
    assert 'pydantic_ai' in report['agents --plain']  # the catalog needs the sub-agents' pydantic-ai
    assert report['tracing'] is None  # ... but nothing set tracing up
