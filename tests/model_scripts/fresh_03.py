# request: Which function names are defined more than once across the project?
import re
from collections import defaultdict

matches = await search_text(pattern=r"^\s*(async\s+)?def\s+\w+", glob="**/*.py")
defs: dict[str, list[str]] = defaultdict(list)
for m in matches:
    mo = re.match(r"(?:async\s+)?def\s+(\w+)", m["text"])
    if mo:
        defs[mo.group(1)].append(f"{m['path']}:{m['line']}")

duplicates = {name: locs for name, locs in defs.items() if len(locs) > 1}
duplicates
