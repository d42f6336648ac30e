# request: Summarize what orders.py does.
source = await read_file(path="orders.py")
summary = await summarizer(
    task="Summarize what this Python module does, its main functions and responsibilities:\n" + source
)
summary
