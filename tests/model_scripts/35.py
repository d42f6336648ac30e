# request: Review inventory.py; for each error finding, show the line of source it points at.
source = await read_file(path="inventory.py")
review = await reviewer(path="inventory.py", source=source)
lines = source.splitlines()

out = []
for f in review["findings"]:
    if f["severity"] != "error":
        continue
    n = f["line"]
    code = lines[n - 1].strip() if 1 <= n <= len(lines) else "<line out of range>"
    out.append(f"line {n}: {f['message']}\n    > {code}")

"\n".join(out) if out else "No error findings in inventory.py."
