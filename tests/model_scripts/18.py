# request: Make a table (as a string) of file, verdict, number of findings.
import asyncio

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])
reviews = await asyncio.gather(*[reviewer(path=p, source=s) for p, s in zip(paths, sources)])

rows = [(r["path"], r["verdict"], str(len(r["findings"]))) for r in reviews]
headers = ("File", "Verdict", "Findings")
widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) for i in range(3)]


def fmt(row) -> str:
    return "| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) + " |"


sep = "|-" + "-|-".join("-" * w for w in widths) + "-|"
table = "\n".join([fmt(headers), sep] + [fmt(r) for r in rows])
print(table)
table
