# request: Retry reading a file called config.py up to 3 times and tell me whether it exists.
candidates = await list_files(pattern="**/config.py")
path = candidates[0] if candidates else "config.py"

content = None
last_error = ""
for attempt in range(3):
    res = await settled(read_file(path=path))
    if res["ok"]:
        content = res["value"]
        break
    last_error = res.get("error", "")

if content is not None:
    answer = f"{path} exists ({len(content)} characters, read on attempt {attempt + 1})."
else:
    answer = f"config.py could not be read after 3 attempts; it does not appear to exist. Last error: {last_error}"
answer
