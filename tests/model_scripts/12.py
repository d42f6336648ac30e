# request: Search for uses of eval or exec anywhere in the project.
matches = await search_text(pattern=r"\b(eval|exec)\s*\(", glob="**/*")
if not matches:
    result = "No uses of eval or exec found."
else:
    result = "\n".join(f"{m['path']}:{m['line']}: {m['text']}" for m in matches)
result
