"""Rebuild the guide part of README.md from docs/: everything after the marker is replaced by the first sections of
docs/search_memory.md, docs/lookup_knowledge.md and docs/interfaces.md (so the README's examples are the docs').

    python scripts/compose_readme.py
"""

from pathlib import Path

import re
root=str(Path(__file__).resolve().parents[1]) + '/'
s=open(root+'README.md').read()
marker='\n<!-- guides: examples from docs/ -->\n'
if marker in s:
    s=s[:s.index(marker)]
def part(path, stop, shift=0):
    t=open(root+path).read()
    i=t.index(stop) if stop else len(t)
    t=t[:i].rstrip()+'\n'
    if shift:
        t=re.sub(r'(?m)^(#+) ', lambda m: '#'*(len(m.group(1))+shift)+' ', t)
    return t
sm=part('docs/search_memory.md','### How results are ranked')
sm+='\nRanking, the error table and the benchmark: [docs/search_memory.md](docs/search_memory.md).\n'
lk=part('docs/lookup_knowledge.md','## Hint layer', shift=1)
lk+='\nHint layer, relevance levels and their calibration, packing, the audit fields and the quality table: [docs/lookup_knowledge.md](docs/lookup_knowledge.md).\n'
it=part('docs/interfaces.md','### Metrics')
it+='\nMetrics (with the seed-name mapping), logs, configuration and the HTTP benchmark: [docs/interfaces.md](docs/interfaces.md).\n'
ev='\n## Evaluation\n\nThe harness, the datasets, the baselines and the side-by-side tables (retrieval methods, embedding models): [eval/README.md](eval/README.md).\n\n```bash\ncontext-engine eval --dataset ../shared/data/scifact --split test\n```\n'
s=s.rstrip()+'\n'+marker+'\n'+sm+'\n'+lk+'\n'+it+ev
open(root+'README.md','w').write(s)
