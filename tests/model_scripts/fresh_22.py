# request: Find all functions (def lines) that have no docstring on the following line.
import asyncio
import re

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])

missing = []
for p, src in zip(files, sources):
    lines = src.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\s*(?:async\s+)?def\s+(\w+)", line)
        if not m:
            continue
        # find the end of the (possibly multi-line) signature
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(":"):
            j += 1
        # next non-blank line after the signature
        k = j + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        nxt = lines[k].strip() if k < len(lines) else ""
        if not re.match(r"""^[rRbBuU]?('''|\"\"\"|'|")""", nxt):
            missing.append({"path": p, "line": i + 1, "function": m.group(1)})
missing
