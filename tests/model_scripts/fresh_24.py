# request: For every file, produce the path and the SHA-256 of its contents.
import hashlib

files = await list_files(pattern="**/*")
results = await settle_all(*[read_file(path=p) for p in files])

hashes: dict[str, str] = {}
for p, res in zip(files, results):
    if res["ok"]:
        hashes[p] = hashlib.sha256(res["value"].encode("utf-8")).hexdigest()
    else:
        hashes[p] = "unreadable: " + res.get("error", "")
hashes
