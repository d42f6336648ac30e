# request: Write two drafts of a changelog entry in parallel and pick the one the critic prefers.
import asyncio

task = "Write a changelog entry for the latest release of our shop back-office Python project, covering bug fixes and small improvements."
drafts = await asyncio.gather(
    drafter(task=task + " Use a concise bullet-list style."),
    drafter(task=task + " Use a short narrative paragraph style."),
)
grades = await asyncio.gather(*[critic(question=task, answer=d) for d in drafts])

best = 0 if grades[0]["score"] >= grades[1]["score"] else 1
{
    "chosen": drafts[best],
    "scores": [g["score"] for g in grades],
    "reasons": grades[best]["reasons"],
}
