# request: Write three different drafts of an apology email for a delayed order, score each with the critic, and give me the best one.
import asyncio

base = "Write an apology email to a customer whose order has been delayed. Apologize, explain the order is delayed, and say what we are doing about it."
styles = [
    "Use a warm, personal tone.",
    "Use a formal, professional tone.",
    "Keep it brief and direct, and offer a discount code for the next order.",
]

drafts = await asyncio.gather(*[drafter(task=f"{base} {s}") for s in styles])
scores = await asyncio.gather(
    *[critic(question=base, answer=d) for d in drafts]
)

ranked = sorted(zip(drafts, scores), key=lambda pair: pair[1]["score"], reverse=True)
best_draft, best_score = ranked[0]
{
    "best": best_draft,
    "best_score": best_score["score"],
    "reasons": best_score["reasons"],
    "all_scores": [s["score"] for s in scores],
}
