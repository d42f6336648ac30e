# request: Search for string literals that look like SQL (containing SELECT or INSERT) and report where they are.
matches = await search_text(pattern=r"""(['"]).*\b(SELECT|INSERT|select|insert)\b""", glob="**/*.py")
report = [f"{m['path']}:{m['line']}: {m['text']}" for m in matches]
print("\n".join(report) if report else "No SQL-looking string literals found.")
matches
