"""The README stays short, every relative link of the README and of ``docs/`` leads to a file that exists,
and the README's test command is what CI runs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
README = ROOT / "README.md"
MAX_README_LINES = 300

#: ``[text](target)`` and ``![alt](target)``; the target ends at whitespace or the closing parenthesis
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


def relative_links(page: Path) -> list[str]:
    """The link targets of ``page`` outside code blocks that name a file (no scheme, not only an anchor)."""
    text = FENCE.sub("", page.read_text())
    targets = [m.group(1) for m in LINK.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.IGNORECASE) and not t.startswith("#")]


def test_the_readme_is_at_most_300_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines; move the detail to docs/"


def test_every_relative_link_in_the_readme_and_the_docs_points_at_a_file_that_exists():
    broken = [f"{page.relative_to(ROOT)}: {target}"
              for page in pages() for target in relative_links(page)
              if not (page.parent / target.split("#", 1)[0]).exists()]
    assert not broken, "links to files that do not exist: " + "; ".join(broken)


def test_the_readme_leads_with_the_command_ci_runs():
    """The README's test command, the whole set-up (``scripts/setup-tests``) then the suite, is the line
    ``.ci/run`` runs, word for word: what CI passes with is what a reader types."""
    readme = README.read_text()
    command = next(line for line in readme.splitlines() if line.endswith("python -m pytest"))
    assert readme.index(command) < readme.index("\n## ")
    assert command == "bash scripts/setup-tests && . .venv/bin/activate && python -m pytest"
    assert command in (ROOT / ".ci" / "run").read_text().splitlines()


def test_the_test_setup_runs_npm_ci_wherever_a_package_lock_is():
    """``scripts/setup-tests`` finds the npm folders itself: every folder under tests/, console/ and
    examples/ holding a package-lock.json (outside node_modules), so a new example app needs no edit."""
    locks = sorted(str(p.parent.relative_to(ROOT)) for top in ("tests", "console", "examples")
                   for p in (ROOT / top).rglob("package-lock.json") if "node_modules" not in p.parts)
    listed = subprocess.run(["bash", str(ROOT / "scripts" / "setup-tests"), "--list-npm"], capture_output=True,
                            text=True, check=True, cwd=ROOT / "docs").stdout.split()
    assert listed == locks and {"console", "tests/browser", "tests/node"} <= set(listed)
    script = (ROOT / "scripts" / "setup-tests").read_text()  # and the Debian packages CI gets through it
    assert "apt_install chromium" in script and "missing+=(postgresql)" in script and "missing+=(haproxy)" in script


def test_the_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("[ok](page.md#top) [gone](missing.md) <https://example.com> [web](https://x.test/a.md)\n"
                    "```ts\nconst a = [x](y);\n```\n[anchor](#here)\n")
    assert relative_links(page) == ["page.md#top", "missing.md"]
