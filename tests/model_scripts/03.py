# request: Find every TODO or FIXME comment in the project.
matches = await search_text(pattern=r"#.*\b(TODO|FIXME)\b", glob="**/*")
lines = [f"{m['path']}:{m['line']}: {m['text']}" for m in matches]
print(f"{len(matches)} TODO/FIXME comments found")
"\n".join(lines) if lines else "No TODO or FIXME comments found."
