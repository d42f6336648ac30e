# request: Ask the drafter for five slogans in one go (one per line), have the critic score each one separately in parallel, and return them sorted best first.
import asyncio
import re

raw = await drafter(task="Write five short, catchy slogans for this Python project. Output exactly five lines, one slogan per line, with no numbering, bullets or extra text.")
slogans = []
for line in raw.splitlines():
    s = re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip().strip('"')
    if s:
        slogans.append(s)
slogans = slogans[:5]

scores = await asyncio.gather(*[
    critic(question="Write a short, catchy slogan for a software project.", answer=s)
    for s in slogans
])
ranked = sorted(
    [{"slogan": s, "score": sc["score"], "reasons": sc["reasons"]} for s, sc in zip(slogans, scores)],
    key=lambda d: d["score"],
    reverse=True,
)
ranked
