# request: Review order_parser.py and if it needs work, draft a short bug report for its findings.
path = "order_parser.py"
source = await read_file(path=path)
review = await reviewer(path=path, source=source, focus="all")

report = None
if review["verdict"] == "needs_work":
    findings = "\n".join(
        f"- line {f['line']} ({f['severity']}): {f['message']}" for f in review["findings"]
    )
    report = await drafter(
        task=f"Write a short bug report for {path} listing the problems found in code review "
        f"and what should be fixed. Review summary: {review['summary']}\nFindings:\n{findings}"
    )

{"verdict": review["verdict"], "summary": review["summary"], "bug_report": report}
