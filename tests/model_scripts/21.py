# request: Search for "print(" calls and group the matches by file.
matches = await search_text(pattern=r"\bprint\(", glob="**/*.py")
grouped: dict[str, list[str]] = {}
for m in matches:
    grouped.setdefault(m["path"], []).append(f"{m['line']}: {m['text']}")
grouped
