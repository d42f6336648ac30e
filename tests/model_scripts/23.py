# request: Draft a README section describing the project's modules (read them first) and score it.
import asyncio

paths = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in paths])

material = "\n\n".join(f"### {p}\n{s}" for p, s in zip(paths, sources))
task = (
    "Write a README section titled 'Modules' that describes each module of this Python project "
    "in a short paragraph or bullet (what it does and how it fits with the others). "
    "Here is the source of every module:\n\n" + material
)
section = await drafter(task=task)
grade = await critic(
    question="A README section describing each module of a project with modules: " + ", ".join(paths),
    answer=section,
)
{"readme_section": section, "score": grade["score"], "reasons": grade["reasons"]}
