"""The package's sources and docs are readable on their own: no reference points outside the
repository (to notes a user of the package never has), and every relative link of the docs
stays inside it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("dpjax", "accounting", "optimize", "examples", "benchmarks", "docs", "tests", ".ci")
#: references to texts outside the repository: a sibling folder, the specification notes and
#: paper dumps of the project's authors, their section marks, an absolute home or work path
OUTSIDE = re.compile(
    r"\.\./shared|(?<![\w./-])(?:specs|seeds)/|\bspecs?\b\s*(?:§|``\w+\.md``)|"
    r"(?<![\w.])/(?:work|home|root|Users)/"
)
LINK = re.compile(r"\]\(([^)#\s]+)")


def _texts():
    files = [ROOT / "README.md"]
    for folder in SCANNED:
        files += sorted(p for ext in ("*.py", "*.md") for p in (ROOT / folder).rglob(ext))
    return [p for p in files if p != Path(__file__).resolve()]  # (this file spells the patterns out)


def outside_references(text):
    return [m.group(0) for m in OUTSIDE.finditer(text)]


def test_the_pattern_catches_what_it_must_and_nothing_else():
    for bad in (
        "see ../shared/specs/pbdp.md",
        "(spec §2.4)",
        "spec ``composite.md`` §1.7",
        "seeds/002_a4.txt",
        "specs/prdp.md",
        "/work/shared/x",
        "``/home/me/notes``",
    ):
        assert outside_references(bad), bad
    for good in (
        "Jiang et al., IEEE S&P 2025, §3.4",
        "docs/pbdp.md",
        "respects §2",
        "a spectral norm",
        "python benchmarks/revisions.py --base ../dpjax-old",
        "jax_privacy/specs.py",
    ):
        assert not outside_references(good), good


def test_no_source_or_doc_points_outside_the_repository():
    hits = [
        f"{p.relative_to(ROOT)}:{i}: {ref}"
        for p in _texts()
        for i, line in enumerate(p.read_text().splitlines(), 1)
        for ref in outside_references(line)
    ]
    assert hits == []


def test_relative_links_of_the_docs_stay_inside_the_repository():
    root = ROOT.resolve()
    escaping = []
    for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in LINK.findall(p.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            resolved = (p.parent / target).resolve()
            if root not in resolved.parents and resolved != root:
                escaping.append(f"{p.relative_to(ROOT)}: {target}")
    assert escaping == []
