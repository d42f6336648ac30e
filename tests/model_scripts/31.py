# request: Search for functions that take a parameter named "input" and list them.
import re

matches = await search_text(pattern=r"def\s+\w+\s*\([^)]*\binput\b", glob="**/*.py")
functions = []
for m in matches:
    name = re.search(r"def\s+(\w+)", m["text"])
    functions.append({
        "path": m["path"],
        "line": m["line"],
        "function": name.group(1) if name else m["text"],
        "signature": m["text"],
    })
functions
