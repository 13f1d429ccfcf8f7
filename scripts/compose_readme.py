"""Rebuild the guide part of README.md from docs/: everything after the marker is replaced by the first sections of
docs/search_memory.md, docs/memories.md, docs/lookup_knowledge.md and docs/interfaces.md, so the README's examples
are the docs'.

    python scripts/compose_readme.py
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = "\n<!-- guides: examples from docs/ -->\n"


def part(path: str, stop: str, shift: int = 0) -> str:
    """``path`` up to the heading ``stop``, its headings demoted by ``shift`` levels."""
    text = (ROOT / path).read_text(encoding="utf-8")
    text = text[: text.index(stop)].rstrip() + "\n"
    if shift:
        text = re.sub(r"(?m)^(#+) ", lambda m: "#" * (len(m.group(1)) + shift) + " ", text)
    # a link to a sibling doc (`](security.md#x)`) is relative to docs/; in README.md it must name docs/
    return re.sub(r"\]\(([a-z_]+\.md(?:#[^)]*)?)\)", r"](docs/\1)", text)


def main() -> None:
    readme = ROOT / "README.md"
    readme.write_text(compose(readme.read_text(encoding="utf-8")), encoding="utf-8")


def compose(top: str) -> str:
    """README.md's text: ``top`` up to the marker, then the guides composed from docs/ (tests/docs checks it)."""
    if MARKER in top:
        top = top[: top.index(MARKER)]
    sm = part("docs/search_memory.md", "### How results are ranked")
    sm += "\nRanking, the error table and the benchmark: [docs/search_memory.md](docs/search_memory.md).\n"
    mem = part("docs/memories.md", "## What a memory is made of")
    mem += (
        "\nWhat a memory holds, conversations, dedup, the lifecycle, memory filters and recency in search_memory, the "
        "LoCoMo evaluation and the ingest benchmark: [docs/memories.md](docs/memories.md).\n"
    )
    lk = part("docs/lookup_knowledge.md", "## Hint layer", shift=1)
    lk += (
        "\nHint layer, hybrid semantic layer, relevance levels and their calibration, packing, the audit fields and "
        "the quality table: [docs/lookup_knowledge.md](docs/lookup_knowledge.md).\n"
    )
    it = part("docs/interfaces.md", "### Metrics")
    it += (
        "\nMetrics (with the seed-name mapping), logs, configuration and the HTTP benchmark: "
        "[docs/interfaces.md](docs/interfaces.md).\n"
    )
    ev = (
        "\n## Evaluation\n\nThe harness, the datasets, the baselines and the side-by-side tables (retrieval methods, "
        "embedding models, pipelines): [eval/README.md](eval/README.md).\n\n```bash\n"
        "# a slice: 50 queries over 500 documents, about 1.5 min on 2 cores with progress bars\n"
        "context-engine eval --dataset ../shared/data/scifact --split test --limit-queries 50 --max-docs 500\n"
        "# the whole test set, baselines checked (every method, two models: tens of minutes on 2 cores the first time; "
        "document vectors are cached)\n"
        "context-engine eval --dataset ../shared/data/scifact --split test\n```\n"
    )
    return top.rstrip() + "\n" + MARKER + "\n" + sm + "\n" + mem + "\n" + lk + "\n" + it + ev


if __name__ == "__main__":
    main()
