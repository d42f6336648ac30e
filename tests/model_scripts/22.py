# request: Review cli.py and utils.py in parallel and compare their verdicts.
import asyncio


async def review(path: str) -> Review:
    return await reviewer(path=path, source=await read_file(path=path))


cli, utils = await asyncio.gather(review("cli.py"), review("utils.py"))

if cli["verdict"] == utils["verdict"]:
    comparison = f"Both files got the same verdict: {cli['verdict']}."
else:
    comparison = f"cli.py is '{cli['verdict']}' while utils.py is '{utils['verdict']}'."

{
    "comparison": comparison,
    "cli.py": {"verdict": cli["verdict"], "findings": len(cli["findings"]), "summary": cli["summary"]},
    "utils.py": {"verdict": utils["verdict"], "findings": len(utils["findings"]), "summary": utils["summary"]},
}
