"""Every relative link in README.md and docs/ points at a file that exists, and every #anchor at
a heading of that file (GitHub's rule: lower case, punctuation dropped, spaces to hyphens, a
repeated heading numbered -1, -2, ...). Every source file that docs/architecture.md and the
design pages name in backticks exists, so that their walk through the code stays true.

Run with /usr/bin/python3 -m pytest -q tests/scripts (ctest runs it as doc_checks).
"""

import glob
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*$", re.M)


def slug(heading):
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text):
    found, seen = set(), {}
    for heading in HEADING.findall(FENCE.sub("", text)):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(path):
    """'target: why' for each relative link of the Markdown file `path` that leads nowhere."""
    with open(path, encoding="utf-8") as handle:
        text = CODE.sub("", FENCE.sub("", handle.read()))
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue
        file_part, _, anchor = target.partition("#")
        destination = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
            if file_part else path
        if not os.path.exists(destination):
            broken.append(f"{target}: no such file")
        elif anchor:
            with open(destination, encoding="utf-8") as handle:
                if anchor not in anchors(handle.read()):
                    broken.append(f"{target}: no such heading")
    return broken


SOURCE = re.compile(r"`([A-Za-z0-9_./-]+)`")
SOURCE_FILE = re.compile(r"^[\w./-]+\.(h|cc|cu|py|sh|cmake)$")
TOP_DIRS = ("benchmarks/", "bindings/", "cmake/", "collectives/", "common/", "examples/",
            "include/", "ops/", "scripts/", "src/", "tests/", "train/")


def repository_files(root):
    """Every file name under `root`, and every path relative to it (build trees left out)."""
    names, paths = set(), set()
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [name for name in subfolders
                         if not name.startswith(".") and not name.startswith("build")]
        for name in files:
            names.add(name)
            paths.add(os.path.relpath(os.path.join(folder, name), root))
        paths.update(os.path.relpath(os.path.join(folder, name), root) + "/"
                     for name in subfolders)
    return names, paths


def missing_sources(path, root):
    """Source files and folders that the Markdown file `path` names in backticks and `root` lacks:
    a name with a folder is looked up from the root (public headers from include/ too), a bare
    file name anywhere."""
    with open(path, encoding="utf-8") as handle:
        text = FENCE.sub("", handle.read())
    names, paths = repository_files(root)
    missing = []
    for token in SOURCE.findall(text):
        is_path = token.startswith(TOP_DIRS) or token.startswith("herd/")
        if not is_path and not SOURCE_FILE.match(token):
            continue
        if "/" in token:
            found = token in paths or "include/" + token in paths
        else:
            found = token in names
        if not found and token not in missing:
            missing.append(token)
    return missing


def test_slugs_follow_github():
    assert slug("What this means for herd's thresholds") == "what-this-means-for-herds-thresholds"
    assert slug("Fitting α, β, γ") == "fitting-α-β-γ"
    assert slug("GPU buffers: `--device cuda`") == "gpu-buffers---device-cuda"
    assert anchors("# A\n\n## A\n\n```\n# not a heading\n```\n") == {"a", "a-1"}


def test_a_broken_link_is_found(tmp_path):
    (tmp_path / "other.md").write_text("# Title\n\n## Part two\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#part-two) [gone](missing.md) [bad](other.md#part-three)\n"
                    "`[code](missing.md)` [web](https://example.com/x.md) [self](#here)\n")
    assert broken_links(str(page)) == ["missing.md: no such file",
                                       "other.md#part-three: no such heading",
                                       "#here: no such heading"]


def test_every_link_of_the_docs_leads_somewhere():
    pages = [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    broken = [f"{os.path.relpath(page, ROOT)}: {problem}"
              for page in pages for problem in broken_links(page)]
    assert broken == []


def test_a_missing_source_file_is_found(tmp_path):
    for name in ("src/api.cc", "include/herd/types.h", "tests/unit/helper.h"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    page = tmp_path / "page.md"
    page.write_text("`src/api.cc` `herd/types.h` `helper.h` `src/` `HERD_CYCLE_TIME`\n"
                    "`src/gone.cc` `lost.h` `collectives/` `herd/none.h` `a.b`\n"
                    "```\n`src/fenced.cc`\n```\n")
    assert missing_sources(str(page), str(tmp_path)) == [
        "src/gone.cc", "lost.h", "collectives/", "herd/none.h"]


def test_every_source_file_the_architecture_names_exists():
    pages = [os.path.join(ROOT, "docs", "architecture.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "design", "*.md")))
    missing = [f"{os.path.relpath(page, ROOT)}: {name}"
               for page in pages for name in missing_sources(page, ROOT)]
    assert missing == []
