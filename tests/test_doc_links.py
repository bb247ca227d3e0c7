"""Every relative link in the repository's Markdown files (README.md, docs/, the READMEs of the
parts) leads somewhere: the file or directory exists, and a `#fragment` names a heading of the
target document (GitHub's anchor rule). No broker: the same result for either target."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def markdown_files():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                          "*.md"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / p for p in out.stdout.split()]


def anchors(path):
    """GitHub's heading ids: lower case, punctuation other than '-' and '_' dropped, spaces to
    '-', repeats numbered."""
    seen, out = {}, set()
    for line in FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def test_relative_links_resolve():
    files = markdown_files()
    assert ROOT / "README.md" in files
    broken = []
    for md in files:
        text = FENCE.sub("", md.read_text())
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                continue  # http(s):, mailto:: not checked offline
            path, _, fragment = target.partition("#")
            dest = (md.parent / path).resolve() if path else md
            if not dest.exists():
                broken.append(f"{md.relative_to(ROOT)}: {target} (no such file)")
            elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
                broken.append(f"{md.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)
