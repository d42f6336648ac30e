# request: For each finding of severity error, ask the drafter for a one-sentence explanation of how to fix it, in parallel, and return them grouped by file.
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(files, sources)])

errors = []
for p, src, r in zip(files, sources, reviews):
    lines = src.splitlines()
    for f in r["findings"]:
        if f["severity"] == "error":
            code_line = lines[f["line"] - 1].strip() if 0 < f["line"] <= len(lines) else ""
            errors.append((p, f["line"], f["message"], code_line))

fixes = await asyncio.gather(*[
    drafter(task=(
        "Write exactly one sentence explaining how to fix this error found in a code review of a Python file.\n"
        f"File: {p}\nLine {line}: {code}\nProblem: {msg}"
    ))
    for p, line, msg, code in errors
])

grouped: dict[str, list[dict[str, str | int]]] = {}
for (p, line, msg, code), fix in zip(errors, fixes):
    grouped.setdefault(p, []).append({"line": line, "error": msg, "fix": fix.strip()})
grouped
