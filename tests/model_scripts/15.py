# request: Summarize each file in one sentence, then give me a combined overview.
import asyncio


async def one_sentence(path: str) -> str:
    src = await read_file(path=path)
    return await summarizer(task=f"Summarize what the Python file {path} does in one sentence:\n{src}")


paths = await list_files(pattern="**/*.py")
sentences = await asyncio.gather(*[one_sentence(p) for p in paths])
per_file = dict(zip(paths, sentences))

overview = await summarizer(
    task="Give a combined overview of the project from these per-file summaries:\n"
    + "\n".join(f"{p}: {s}" for p, s in per_file.items())
)
{"per_file": per_file, "overview": overview}
