# request: Draft a short onboarding note for a new developer that lists the modules and one-line descriptions of each (read the files to describe them), then score it with the critic and improve it once with the editor using the critic's reasons.
import asyncio

files = await list_files(pattern="**/*.py")
sources = await asyncio.gather(*[read_file(path=p) for p in files])

descriptions = await asyncio.gather(*[
    summarizer(task=f"Describe what this Python module does in exactly one line:\n{src}")
    for src in sources
])
module_list = "\n".join(f"- {p}: {d.strip()}" for p, d in zip(files, descriptions))

task = (
    "Write a short onboarding note for a new developer joining this Python project. "
    "It must list every module with a one-line description of each. Modules:\n" + module_list
)
draft = await drafter(task=task)

question = (
    "A short onboarding note for a new developer that lists the project's modules with a one-line "
    "description of each. The modules are:\n" + module_list
)
score = await critic(question=question, answer=draft)

feedback = "Improve the note by addressing these points:\n" + "\n".join(f"- {r}" for r in score["reasons"])
improved = await editor(draft=draft, feedback=feedback)

{"draft": draft, "score": score["score"], "reasons": score["reasons"], "improved": improved}
