"""The semantic layer of lookup_knowledge: ``VectorSearchService.search_similar_documents`` (DESIGN.md §7.2).

Searches level=2 chunks through the :class:`~context_engine.storage.protocols.VectorIndex` protocol. Modes:

* ``auto``: the configured vector index (LanceDB by default); when it raises, the exact search over the vectors
  kept in the metadata store (``ExactVectorIndex``), recorded as a second attempt with reason ``primary_failed``;
* ``primary``: the configured vector index only; ``fallback``: the exact search only.

When a domain restriction is given (from the hint layer's ``single_domain_or_null``) the first search applies it;
if that result is unusable (empty, or no chunk reaches ``min_similarity``) the same query vector is searched once
more without the domain restriction (reason ``filtered_unusable``). The query is embedded once, by the caller.
The tenant and visibility parts of the filter (account, owner spaces, level, context types, subtree) are never
dropped. Every search is one :class:`SemanticAttempt` with its backend, filter, outcome and timing.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from context_engine.errors import ContextEngineError
from context_engine.schema.knowledge import SemanticAttempt, SemanticMode
from context_engine.schema.nodes import VectorFilter, VectorHit
from context_engine.storage.protocols import VectorIndex

DomainRestriction = tuple[Literal["parent_uris", "doc_ids"], list[str]]


@dataclass
class SemanticSearchResult:
    """Hits of the attempt that was used (score descending, ties by id), plus every attempt.

    Attributes:
        hits: cosine-similarity hits (``VectorHit.score``), possibly below ``min_similarity`` (the caller drops).
        attempts: every search made, in order.
        fallback_reason: why a fallback or retry happened (``None`` when the first search was used as is).
        backend: the backend whose hits are returned (``None`` when every attempt failed).
        domain_filter_used: whether the returned hits were restricted to the domain.
        failed: every attempt raised; ``error_code`` is the last error's code.
    """

    hits: list[VectorHit] = field(default_factory=list)
    attempts: list[SemanticAttempt] = field(default_factory=list)
    fallback_reasons: list[str] = field(default_factory=list)
    backend: str | None = None
    domain_filter_used: bool = False
    failed: bool = False
    error_code: str | None = None
    primary_failed: bool = False

    @property
    def fallback_reason(self) -> str | None:
        return "; ".join(self.fallback_reasons) or None


class VectorSearchService:
    """Runs semantic-layer searches with the mode, fallback and retry rules of the module docstring.

    Args:
        primary: the configured vector index.
        fallback: the exact index (may be the same object when the configured backend is exact).
    """

    def __init__(self, primary: VectorIndex, fallback: VectorIndex) -> None:
        self.primary = primary
        self.fallback = fallback

    def search_similar_documents(
        self,
        vector: np.ndarray,
        flt: VectorFilter,
        *,
        top_k: int,
        min_similarity: float,
        mode: SemanticMode = "auto",
        domain: str | None = None,
        restriction: DomainRestriction | None = None,
    ) -> SemanticSearchResult:
        """Search level=2 chunks nearest to ``vector``.

        Args:
            vector: the query embedding, shape ``(dim,)``, unit norm.
            flt: the tenant/visibility filter (account, owner spaces, levels, context types, subtree).
            top_k: chunks per attempt.
            min_similarity: a result is usable when at least one hit reaches it.
            mode: ``auto``, ``primary`` or ``fallback``.
            domain: the hint layer's single domain (recorded in the attempts).
            restriction: how to restrict ``flt`` to that domain; ``None`` searches unrestricted at once.

        Returns:
            The hits of the last successful attempt. Never raises for a backend failure: a failed search is an
            attempt with ``ok=False`` and, when nothing succeeded, ``failed=True``.
        """
        result = SemanticSearchResult()
        if restriction is not None and domain is not None:
            kind, values = restriction
            restricted = flt.model_copy(update={kind: list(values)})
            hits, ok = self._run(
                result, vector, restricted, top_k, min_similarity, mode, "initial", domain, restriction
            )
            if not ok:
                return result
            usable = [h for h in hits if h.score >= min_similarity]
            if usable:
                result.hits, result.domain_filter_used = hits, True
                return result
            top = f"best {hits[0].score:.3f} < {min_similarity:.3f}" if hits else "no hits"
            result.fallback_reasons.append(f"filtered_unusable: domain {domain!r} gave {top}; retried without it")
            hits, ok = self._run(result, vector, flt, top_k, min_similarity, mode, "filtered_unusable", None, None)
        else:
            hits, ok = self._run(result, vector, flt, top_k, min_similarity, mode, "initial", None, None)
        if ok:
            result.hits = hits
        return result

    def _backends(self, mode: SemanticMode) -> list[VectorIndex]:
        if mode == "primary":
            return [self.primary]
        if mode == "fallback":
            return [self.fallback]
        return [self.primary] if self.fallback is self.primary else [self.primary, self.fallback]

    def _run(
        self,
        result: SemanticSearchResult,
        vector: np.ndarray,
        flt: VectorFilter,
        top_k: int,
        min_similarity: float,
        mode: SemanticMode,
        reason: Literal["initial", "filtered_unusable"],
        domain: str | None,
        restriction: DomainRestriction | None,
    ) -> tuple[list[VectorHit], bool]:
        backends = self._backends(mode)
        if result.primary_failed and len(backends) > 1:
            backends = backends[1:]  # the primary already failed in this call: go straight to the exact path
        attempt_reason: Literal["initial", "primary_failed", "filtered_unusable"] = reason
        for k, backend in enumerate(backends):
            start = time.perf_counter()
            attempt = SemanticAttempt(
                attempt=len(result.attempts) + 1,
                backend=backend.name,
                mode=mode,
                reason=attempt_reason,
                domain_filter=domain,
                filter_kind=restriction[0] if restriction else "none",
                filter_size=len(restriction[1]) if restriction else 0,
                ok=False,
            )
            try:
                hits = backend.search(vector, top_k, flt)
            except ContextEngineError as err:
                attempt.error_code, attempt.error = err.code.value, err.message[:300]
                attempt.duration_ms = _ms(start)
                result.attempts.append(attempt)
                result.error_code = err.code.value
                if k + 1 < len(backends):
                    result.primary_failed = True
                    result.fallback_reasons.append(
                        f"primary_failed: {backend.name} raised {err.code.value} ({err.message[:120]}); "
                        f"used {backends[k + 1].name}"
                    )
                    attempt_reason = "primary_failed"
                    continue
                result.failed = True
                result.backend = None
                return [], False
            attempt.ok = True
            attempt.hit_count = len(hits)
            attempt.usable_count = sum(1 for h in hits if h.score >= min_similarity)
            attempt.top_similarity = hits[0].score if hits else None
            attempt.duration_ms = _ms(start)
            result.attempts.append(attempt)
            result.backend = backend.name
            result.failed = False
            return hits, True
        return [], False


def _ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)
