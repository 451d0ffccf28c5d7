"""Every ```python block of README.md and docs/*.md runs as pasted and prints what its text says; the README's
custom-kernel snippet runs verbatim and names the examples extra; the Accountant's docstring example runs.

The blocks of one file run in order in one namespace (a later block uses the names of an earlier
one), from an empty folder. A statement whose last line, or the comment line right after it, ends
in ``# prints TEXT`` (or, after a note, ``# NOTE; prints TEXT``) must write TEXT to standard output
(whitespace at either end ignored). A block right after the line
``<!-- doc-test: skip (REASON) -->`` is not run (it needs what a test cannot have, e.g. a cluster).
Running a file's blocks compiles and accounts (tens of seconds a file on two cores), so it runs under
``-m slow``; the default suite parses every block and checks its markers.
"""

import ast
import contextlib
import doctest
import io
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ["README.md"] + sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))
_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.M | re.S)
_SKIP = re.compile(r"<!-- doc-test: skip \((.+)\) -->\n$")
_PRINTS = re.compile(r"#(?:[^#]*;)?\s*prints\s+(.*?)\s*$")


def blocks(name):
    """``[(line, source, skip reason or None), ...]``: the python blocks of one file, in order."""
    text = (ROOT / name).read_text()
    out = []
    for m in _BLOCK.finditer(text):
        skip = _SKIP.search(text[: m.start()])
        out.append((text.count("\n", 0, m.start()) + 2, m.group(1), skip.group(1) if skip else None))
    return out


def run_blocks(name):
    namespace = {"__name__": "__doc_test__"}
    for line, source, skip in blocks(name):
        if skip:
            continue
        tree = ast.parse(source, f"{name}:{line}")
        lines = source.split("\n")
        for stmt in tree.body:
            code = compile(ast.Module([stmt], []), f"{name}:{line + stmt.lineno - 1}", "exec")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
            after = lines[stmt.end_lineno] if stmt.end_lineno < len(lines) else ""
            said = _PRINTS.search(lines[stmt.end_lineno - 1])
            said = said or (after.lstrip().startswith("#") and _PRINTS.search(after))
            printed = out.getvalue().strip()
            where = f"{name}:{line + stmt.end_lineno - 1}"
            assert not said or printed == said.group(1), f"{where} printed {printed!r}, the text says {said.group(1)!r}"


@pytest.mark.parametrize("name", DOCS)
def test_blocks_parse_and_their_markers_are_well_formed(name):
    for line, source, skip in blocks(name):
        ast.parse(source, f"{name}:{line}")  # a SyntaxError names the file and the block's first line
        for i, text in enumerate(source.split("\n")):
            if re.search(r"[#;]\s*prints\b", text):
                said = _PRINTS.search(text)
                assert said and said.group(1), f"{name}:{line + i}: '# prints' says nothing"


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in DOCS if any(skip is None for _, _, skip in blocks(n))])
def test_blocks_run_and_print_what_the_text_says(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run_blocks(name)


@pytest.mark.slow
def test_readme_custom_kernel_snippet_runs_verbatim():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Your own noise kernel", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    code = code.replace("optimize.tune_boosted(", "(lambda **k: k)(")  # the tuner's run is test_kernels_base's
    exec(compile(code, "README.md", "exec"), {})


@pytest.mark.slow
def test_accountant_docstring_example_runs():
    import accounting.accountant

    result = doctest.testmod(accounting.accountant, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 5 and result.failed == 0


def test_readme_names_the_examples_extra():
    # (that no text points outside the repository: tests/test_self_contained.py)
    assert ".[examples]" in (ROOT / "README.md").read_text()
