"""The level-0 matrix's scoring view of one request (DESIGN.md §5, §12): :class:`MemoryL0Scorer`.

One matrix-vector product per owner-space segment the request needs, shared by every question (about 1-2 ms per 30k
rows), which is what keeps a search of a 100k-node store within its latency budget (``bench/search_memory.py``: a
LanceDB search costs 10-20 ms there, and a request asks several questions). Answers mean what
:class:`~context_engine.storage.vector.scoring.IndexL0Scorer`'s do (the matrix holds the same unit vectors).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from context_engine.errors import ContextEngineError, ErrorCode
from context_engine.schema.nodes import VectorFilter
from context_engine.storage.selection import kth_largest
from context_engine.storage.strings import best_by_score
from context_engine.storage.vector.matrix_segment import MatrixView, cascade_depth, refine_depth, rescore_depth
from context_engine.storage.vector.scoring import L0Match, ordered, parent_of, space_of

__all__ = ["MemoryL0Scorer"]


class MemoryL0Scorer:
    """:class:`L0Scorer` over a :class:`~context_engine.storage.vector.matrix.MatrixView` of the level-0 matrix.

    Similarities are computed per owner-space segment, once per request and only for the segments a question
    needs (a user's memory query touches that user's segment, not the shared resources), then answered with the
    segment's filter mask (:meth:`RowTable.mask`, the one in-process filter compiler) and partial sorts.
    Thread-safe.
    """

    name = "memory"
    concurrent = False  # CPU-bound Python: a thread pool would only add contention

    def __init__(self, view: MatrixView, query_vector: np.ndarray) -> None:
        self._view = view
        self._query = np.asarray(query_vector, dtype=np.float32)
        self._scores: dict[str, np.ndarray] = {}
        self._projected: dict[int, np.ndarray] = {}  # id(projection) -> the query projected (one per account)
        self._exact: dict[str, dict[int, float]] = {}  # compressed segments: rows rescored so far
        self._masks: dict[tuple, np.ndarray] = {}  # (space, filter key) -> mask: a request asks with few filters
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        """The account generation the view is at."""
        return self._view.generation

    def _project(self, space: str) -> np.ndarray | None:
        """The query projected by the segment's projection (:meth:`MatrixSegment.project`), once per request."""
        seg, _ = self._view.segments[space]
        if seg.projection is None:
            return None
        found = self._projected.get(id(seg.projection))
        if found is None:
            found = seg.project(self._query)
            assert found is not None
            self._projected[id(seg.projection)] = found
        return found

    def scores(self, space: str) -> np.ndarray:
        """Cosine similarity of the query to every row of one segment (below the view's row count); a compressed
        segment's are the partial scores of its leading projected coordinates (:meth:`MatrixSegment.scan`)."""
        found = self._scores.get(space)
        if found is not None:
            return found
        with self._lock:
            found = self._scores.get(space)
            if found is None:
                seg, n = self._view.segments[space]
                if n == 0:
                    found = np.zeros(0, dtype=np.float32)
                elif self._query.shape != (seg.dim,):
                    raise ContextEngineError(
                        ErrorCode.VECTOR_SEARCH_FAILED,
                        f"query vector has shape {self._query.shape}, the level-0 matrix holds {seg.dim} dimensions",
                        {"expected_dim": seg.dim},
                    )
                else:
                    found = seg.scan(self._query, n, self._project(space))
                self._scores[space] = found
        return found

    def _similarity(self, space: str, rows: Sequence[int]) -> dict[int, float]:
        """Similarities of ``rows``: the matrix's scores, or for a compressed segment the scores of its float16
        vectors (:meth:`MatrixSegment.exact`; once per row and request)."""
        seg, _ = self._view.segments[space]
        scores = self.scores(space)
        if not seg.compressed:
            return dict(zip(rows, scores[np.asarray(rows, dtype=np.int64)].tolist(), strict=True))
        with self._lock:
            known = self._exact.setdefault(space, {})
            missing = [r for r in rows if r not in known]
        if missing:
            fresh = dict(
                zip(missing, seg.exact(np.asarray(missing, dtype=np.int64), self._query).tolist(), strict=True)
            )
            with self._lock:
                known.update(fresh)
        return {r: known[r] for r in rows}

    def _mask(self, space: str, flt: VectorFilter) -> np.ndarray:
        """The segment's filter mask (:meth:`RowTable.mask`), computed once per request and filter."""
        key = (space, _filter_key(flt))
        found = self._masks.get(key)
        if found is None:
            seg, n = self._view.segments[space]
            found = self._masks[key] = seg.mask(flt, n)
        return found

    def _spaces(self, flt: VectorFilter) -> list[str]:
        """Segments that can hold rows passing ``flt`` (owner space, level, prefix), sorted."""
        if flt.levels is not None and 0 not in flt.levels:
            return []
        spaces = self._view.spaces(flt)
        if flt.uri_prefix is not None:
            spaces = [s for s in spaces if s == space_of(flt.uri_prefix)]
        return spaces

    def _matches(self, space: str, rows: list[int], similarities: Sequence[float]) -> list[L0Match]:
        """The :class:`L0Match` of each row, in order: the coded columns read for all rows at once."""
        seg, _ = self._view.segments[space]
        at = np.asarray(rows, dtype=np.int64)
        parents, types, categories = (
            [seg.codes[c].values[v] for v in seg.columns[c][at].tolist()]
            for c in ("parent_uri", "context_type", "category")
        )
        uris, texts = seg.uris, seg.texts
        return [
            L0Match(uris[r], parents[i], space, types[i], categories[i], texts[r], similarities[i])
            for i, r in enumerate(rows)
        ]

    def _candidates(self, space: str, rows: np.ndarray, k: int) -> np.ndarray:
        """The rows :meth:`_best` scores fully for ``k`` wanted: the ``k`` best, with every row tied with the last
        (ties resolve by URI). A compressed segment's: the :func:`cascade_depth` best by its partial scan scores,
        of those the :func:`rescore_depth` best by the whole projection's (:meth:`MatrixSegment.approximate`),
        ties kept at both cuts."""
        seg, _ = self._view.segments[space]
        if not seg.compressed:
            if rows.size > k:
                sub = self.scores(space)[rows]
                rows = rows[sub >= kth_largest(sub, k)]
            return rows
        if rows.size <= rescore_depth(k):
            return rows
        return self._candidates_across([(space, rows)], k)[0][1]

    def _candidates_across(self, picked: list[tuple[str, np.ndarray]], k: int) -> list[tuple[str, np.ndarray]]:
        """:meth:`_candidates` of compressed segments' ``(space, rows)`` as if they were one segment: each cut (the
        :func:`cascade_depth` best partial scores, then the :func:`rescore_depth` best whole-projection scores)
        takes one threshold across them, so a scope of many owner spaces (an admin's) scores about as many rows as
        a scope of one. Ties kept (``>=``)."""
        wide, depth = cascade_depth(k), rescore_depth(k)
        if sum(rows.size for _, rows in picked) <= depth:
            return picked
        lead = [self._rows_of(self.scores(space), rows) for space, rows in picked]
        if sum(a.size for a in lead) > wide:
            kth = kth_largest(lead[0] if len(lead) == 1 else np.concatenate(lead), wide)
            kept = [np.flatnonzero(a >= kth) for a in lead]  # a few thousand of up to ~325k rows: take by index
            picked = [(space, rows[m]) for (space, rows), m in zip(picked, kept, strict=True)]
            lead = [a[m] for a, m in zip(lead, kept, strict=True)]
        approx = []
        for (space, rows), a in zip(picked, lead, strict=True):
            projected = self._project(space)
            assert projected is not None
            approx.append(self._view.segments[space][0].approximate(rows, a, projected))
        if sum(a.size for a in approx) > depth:
            kth = kth_largest(np.concatenate(approx), depth)
            picked = [(space, rows[a >= kth]) for (space, rows), a in zip(picked, approx, strict=True)]
        return picked

    @staticmethod
    def _rows_of(scores: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``scores[rows]`` for sorted unique ``rows`` (a mask's): the array itself when they are every row."""
        return scores if rows.size == scores.size else scores[rows]

    def _refined(self, space: str, rows: np.ndarray, k: int, fine: np.ndarray | None = None) -> np.ndarray:
        """Of a compressed segment's :meth:`_candidates` ``rows`` for ``k`` wanted, those its float16 vectors
        rescore (:meth:`MatrixSegment.refined`; ``fine``: the int8 scores of ``rows``, when already read). Any
        other segment: ``rows``."""
        return self._view.segments[space][0].refined(rows, self._query, k, fine)

    def _best(self, space: str, rows: np.ndarray, k: int, *, ready: bool = False) -> list[L0Match]:
        """The ``k`` best of ``rows`` by similarity descending, then URI ascending (a compressed segment: the
        :func:`rescore_depth` best by its approximate scores, of those the ones its int8 scores keep
        (:meth:`MatrixSegment.refined`), rescored from its float16 vectors). ``ready``: ``rows`` already are those
        to rescore."""
        seg, _ = self._view.segments[space]
        if not ready:
            rows = self._refined(space, self._candidates(space, rows, k), k)
        exact = self._similarity(space, rows.tolist())
        best = best_by_score(exact, seg.uris, k)  # similarity descending, then URI ascending
        return self._matches(space, best, [exact[r] for r in best])

    def top(self, flt: VectorFilter, k: int) -> list[L0Match]:
        if k <= 0:
            return []
        picked = [(space, rows) for space in self._spaces(flt) if (rows := np.flatnonzero(self._mask(space, flt))).size]
        layouts = {self._view.segments[space][0].compressed for space, _ in picked}
        matches: list[L0Match] = []
        if layouts == {True}:  # approximations are compared with approximations only
            for space, rows in self._candidates_across(picked, k):
                if rows.size:
                    matches.extend(self._best(space, self._refined(space, rows, k), k, ready=True))
            return ordered(matches)[:k]
        if len(picked) > 1 and layouts == {False}:
            # One threshold across the segments (a caller whose scope spans many owner spaces, e.g. an admin's): a
            # row below the k-th best score of all segments cannot be among the k best (ties kept: >=).
            scores = [self.scores(space)[rows] for space, rows in picked]
            if sum(a.size for a in scores) > k:
                kth = kth_largest(np.concatenate(scores), k)
                picked = [(space, rows[a >= kth]) for (space, rows), a in zip(picked, scores, strict=True)]
        for space, rows in picked:
            if rows.size:
                matches.extend(self._best(space, rows, k))
        return ordered(matches)[:k]

    def children(self, flt: VectorFilter, parent_uris: Sequence[str], per_parent: int) -> dict[str, list[L0Match]]:
        if per_parent <= 0:
            return {}
        plain = flt.model_copy(update={"parent_uris": None})
        allowed = set(self._spaces(plain.model_copy(update={"uri_prefix": None})))
        picked: list[tuple[str, str, np.ndarray]] = []
        masks: dict[str, np.ndarray] = {}  # per segment: the filter's key is computed once per call, not per parent
        for parent in sorted(set(parent_uris)):
            space = space_of(parent)
            if space not in allowed:
                continue
            seg, n = self._view.segments[space]
            mask = masks.get(space)
            if mask is None:
                mask = masks[space] = self._mask(space, plain)
            rows = np.asarray(seg.children.get(parent, ()), dtype=np.int64)
            rows = rows[rows < n]
            rows = rows[mask[rows]]
            if rows.size:
                picked.append((parent, space, rows))
        # each parent's candidates once
        picked = [(parent, space, self._candidates(space, rows, per_parent)) for parent, space, rows in picked]
        refined = self._refined_many(picked, per_parent)
        return {parent: self._best(space, rows, per_parent, ready=True) for parent, space, rows in refined}

    def _refined_many(self, picked: list[tuple[str, str, np.ndarray]], k: int) -> list[tuple[str, str, np.ndarray]]:
        """:meth:`_refined` of each ``(key, space, candidates)``, with a compressed segment's int8 scores read once
        for every key's candidates and those kept rescored in one float16 read (cached for :meth:`_best`). The
        candidates are concatenated, not merged: a directory's children are disjoint from another's (a row has one
        parent), and a row that did repeat would only be scored twice."""
        depth = refine_depth(k)
        by_space: dict[str, list[int]] = {}
        for i, (_, space, rows) in enumerate(picked):
            if self._view.segments[space][0].compressed and rows.size > depth:
                by_space.setdefault(space, []).append(i)
        fine: dict[int, np.ndarray] = {}
        for space, idx in by_space.items():
            parts = [picked[i][2] for i in idx]
            scores = self._view.segments[space][0].fine(np.concatenate(parts), self._query)
            ends = np.cumsum([p.size for p in parts])
            fine.update(zip(idx, np.split(scores, ends[:-1]), strict=True))
        refined = [
            (key, space, self._refined(space, rows, k, fine.get(i))) for i, (key, space, rows) in enumerate(picked)
        ]
        exact: dict[str, list[np.ndarray]] = {}
        for _, space, rows in refined:
            if self._view.segments[space][0].compressed:
                exact.setdefault(space, []).append(rows)
        for space, parts in exact.items():
            self._similarity(space, np.concatenate(parts).tolist())
        return refined

    def lookup(self, flt: VectorFilter, uris: Sequence[str]) -> dict[str, float]:
        return {uri: m.similarity for uri, m in self.matches(flt, uris).items()}

    def matches(self, flt: VectorFilter, uris: Sequence[str]) -> dict[str, L0Match]:
        """The level-0 records of ``uris`` that exist and pass ``flt`` (as :meth:`lookup`, with their texts)."""
        # A record is found among its parent's children (the URI names the parent), so a lookup reads the few
        # siblings, not the segment; the filter is then applied to the rows found only (RowTable.mask_rows): a
        # request looks up a few dozen URIs, and a whole-segment mask per filter cost more than the lookups.
        plain = flt.model_copy(update={"categories": None, "uri_prefix": None, "parent_uris": None, "doc_ids": None})
        allowed = set(self._spaces(plain))
        rows_of: dict[str, dict[int, str]] = {}
        for uri in sorted(set(uris)):
            space = space_of(uri)
            if space not in allowed:
                continue
            seg, n = self._view.segments[space]
            siblings = seg.children.get(parent_of(uri), ())
            siblings = siblings[siblings < n]
            for r in seg.uris.equal_rows(siblings, uri).tolist():  # compares bytes, decodes no sibling
                rows_of.setdefault(space, {})[r] = uri
        out: dict[str, L0Match] = {}
        for space, by_row in rows_of.items():
            seg, n = self._view.segments[space]
            found = np.fromiter(by_row, dtype=np.int64, count=len(by_row))
            found = found[seg.mask_rows(plain, n, found, seg.alive)].tolist()
            if not found:
                continue
            sims = self._similarity(space, found)
            for r, m in zip(found, self._matches(space, found, [sims[r] for r in found]), strict=True):
                out[by_row[r]] = m
        return out


def _filter_key(flt: VectorFilter) -> tuple:
    """A hashable key of a filter's fields (lists as tuples)."""
    return tuple(tuple(v) if isinstance(v, list) else v for v in (getattr(flt, f) for f in _FILTER_KEY_FIELDS))


_FILTER_KEY_FIELDS = tuple(VectorFilter.model_fields)
