# request: For each file, count the number of functions defined (lines starting with "def ").
paths = await list_files(pattern="**/*.py")
matches = await search_text(pattern=r"^def ", glob="**/*.py")

counts = {p: 0 for p in paths}
for m in matches:
    counts[m["path"]] = counts.get(m["path"], 0) + 1
counts
