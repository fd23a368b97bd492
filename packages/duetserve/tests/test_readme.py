"""The README's python example runs as written and prints what the README shows."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_example_runs_as_written(capsys):
    text = README.read_text()
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    exec(compile(block, str(README), "exec"), {})
    printed = capsys.readouterr().out
    shown = re.search(r"prints\n\n```text\n(.*?)```", text, re.S).group(1)
    assert printed == shown


def test_the_reproduction_table_is_the_one_in_docs_result_json():
    import json

    from duetserve.reproduce import readme_table

    result = json.loads((README.parent / "docs" / "quick-result.json").read_text())
    text = README.read_text()
    block = re.search(r"<!-- table: docs/quick-result.json -->\n(.*?)<!-- /table -->", text, re.S)
    assert block is not None, "the README lost its generated table markers"
    assert block.group(1) == readme_table(result)
