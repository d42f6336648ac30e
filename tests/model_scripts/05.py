# request: Review inventory.py for style only and summarize the findings.
source = await read_file(path="inventory.py")
review = await reviewer(path="inventory.py", source=source, focus="style")

if review["findings"]:
    lines = "\n".join(
        f"line {f['line']} [{f['severity']}]: {f['message']}" for f in review["findings"]
    )
    summary = await summarizer(
        task="Summarize these style review findings for inventory.py:\n" + lines
    )
else:
    summary = "No style findings."

{"verdict": review["verdict"], "finding_count": len(review["findings"]), "summary": summary}
