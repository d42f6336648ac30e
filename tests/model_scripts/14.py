# request: Keep asking the drafter for a tagline about our shop until the critic scores it 8 or more, at most 4 tries.
question = "Write a catchy one-line tagline for our shop."
best = ""
best_score = -1
attempts = []

for i in range(4):
    tagline = await drafter(
        task=f"{question} Attempt {i + 1}: make it short, memorable and different from: {attempts}"
    )
    grade = await critic(question=question, answer=tagline)
    attempts.append(tagline)
    if grade["score"] > best_score:
        best, best_score = tagline, grade["score"]
    if grade["score"] >= 8:
        break

{"tagline": best, "score": best_score, "tries": len(attempts)}
