# request: Read orders.py and ask the editor to turn its module docstring into bullet points.
import re

source = await read_file(path="orders.py")
m = re.match(r'\s*(?:#[^\n]*\n\s*)*(?:[rRuU]?)("""|\'\'\')(.*?)\1', source, re.DOTALL)

if m:
    docstring = m.group(2).strip()
    result = await editor(draft=docstring, feedback="as bullet points")
else:
    result = "orders.py has no module docstring."
result
