# request: Draft a short release note announcing a bug-fix release, then have the critic score it.
task = (
    "Write a short release note announcing a bug-fix release of our Python shop back-office tool. "
    "It should say this is a maintenance release with bug fixes and stability improvements, "
    "recommend that users upgrade, and stay under 120 words."
)
note = await drafter(task=task)
score = await critic(question=task, answer=note)
{"release_note": note, "score": score["score"], "reasons": score["reasons"]}
