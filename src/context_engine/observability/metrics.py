"""Prometheus metrics (DESIGN.md §9). One :class:`Metrics` per service, on its own registry (no globals).

Mapping from seed 000 §8 names to Prometheus names (all prefixed ``ce_``):

| seed 000 §8 name | Prometheus metric |
|---|---|
| ``retrieval.search_memory.qps`` | ``ce_retrieval_search_memory_requests_total`` (counter; qps = ``rate()``) |
| ``retrieval.search_memory.p95_ms`` | ``ce_retrieval_search_memory_duration_seconds`` (histogram; p95 =
  ``histogram_quantile(0.95, ...)``) |
| ``retrieval.search_memory.threshold_filtered.count`` | ``ce_retrieval_search_memory_threshold_filtered_total`` |
| ``retrieval.seed.hit_count`` | ``ce_retrieval_seed_hits_total`` |
| ``retrieval.recheck.input_count`` | ``ce_retrieval_recheck_input_total`` |
| ``retrieval.recheck.pass_count`` | ``ce_retrieval_recheck_pass_total`` |
| ``retrieval.recheck.drop_count`` | ``ce_retrieval_recheck_drop_total{reason}`` |
| ``retrieval.read.l1.count`` / ``retrieval.read.l2.count`` | ``ce_retrieval_read_total{level="L1"|"L2"}`` |
| ``retrieval.fallback.count`` | ``ce_retrieval_fallback_total{code}`` (every degradation, by error code) |

Also: ``ce_retrieval_stage_duration_seconds{stage}``; ``ce_retrieval_search_memory_match_quality_total{quality}``
(search_memory answers by ``match_quality``: ``strong``, ``weak``, ``none``); lookup_knowledge:
``ce_lookup_knowledge_requests_total``,
``ce_lookup_knowledge_duration_seconds``, ``ce_lookup_knowledge_relevance_total{level}``,
``ce_lookup_knowledge_fallback_total{reason}``, ``ce_lookup_knowledge_dedup_total``; writes:
``ce_vector_commit_retries_total{operation}`` (vector-index calls retried: LanceDB commits after a conflict with another
writer, Milvus calls after a transient error).
stores: ``ce_storage_failures_total{store,operation}`` (calls to an object store that failed mid-request);
audit: ``ce_audit_write_failures_total{tool}`` (``tool_invocation`` rows written after the call that were refused).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

# Seconds; dense at the low end where the in-process pipeline lives.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """The engine's metrics on ``registry`` (a fresh one by default, so tests and services never share counters)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry(auto_describe=True)
        r = self.registry
        self.search_requests = Counter(
            "ce_retrieval_search_memory_requests", "search_memory calls (seed: retrieval.search_memory.qps)", registry=r
        )
        self.search_duration = Histogram(
            "ce_retrieval_search_memory_duration_seconds",
            "search_memory latency (seed: retrieval.search_memory.p95_ms)",
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.stage_duration = Histogram(
            "ce_retrieval_stage_duration_seconds",
            "Per-stage latency of search_memory",
            ["stage"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.threshold_filtered = Counter(
            "ce_retrieval_search_memory_threshold_filtered",
            "Candidates removed by the score threshold (seed: retrieval.search_memory.threshold_filtered.count)",
            registry=r,
        )
        self.match_quality = Counter(
            "ce_retrieval_search_memory_match_quality",
            "search_memory answers by match_quality (strong, weak, none: how confident the best hit is)",
            ["quality"],
            registry=r,
        )
        self.seed_hits = Counter("ce_retrieval_seed_hits", "L0 seed hits (seed: retrieval.seed.hit_count)", registry=r)
        self.recheck_input = Counter(
            "ce_retrieval_recheck_input", "Candidates into recheck (seed: retrieval.recheck.input_count)", registry=r
        )
        self.recheck_pass = Counter(
            "ce_retrieval_recheck_pass", "Candidates passing recheck (seed: retrieval.recheck.pass_count)", registry=r
        )
        self.recheck_drop = Counter(
            "ce_retrieval_recheck_drop",
            "Candidates dropped by recheck (seed: retrieval.recheck.drop_count)",
            ["reason"],
            registry=r,
        )
        self.reads = Counter(
            "ce_retrieval_read", "read_memory calls by level (seed: retrieval.read.l1/l2.count)", ["level"], registry=r
        )
        self.fallbacks = Counter(
            "ce_retrieval_fallback",
            "Degradations by error code (seed: retrieval.fallback.count)",
            ["code"],
            registry=r,
        )
        self.lookup_requests = Counter("ce_lookup_knowledge_requests", "lookup_knowledge calls", registry=r)
        self.lookup_duration = Histogram(
            "ce_lookup_knowledge_duration_seconds", "lookup_knowledge latency", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.lookup_relevance = Counter(
            "ce_lookup_knowledge_relevance", "Evidence blocks by relevance level", ["level"], registry=r
        )
        self.lookup_fallback = Counter(
            "ce_lookup_knowledge_fallback", "Semantic-layer fallbacks and retries by reason", ["reason"], registry=r
        )
        self.vector_commit_retries = Counter(
            "ce_vector_commit_retries",
            "Vector-index calls retried (LanceDB commit conflicts, transient Milvus errors)",
            ["operation"],
            registry=r,
        )
        self.storage_failures = Counter(
            "ce_storage_failures",
            "Store calls that failed mid-request (the request failed with a retryable code), by store and operation",
            ["store", "operation"],
            registry=r,
        )
        self.audit_write_failures = Counter(
            "ce_audit_write_failures",
            "tool_invocation rows written after the call (search_memory) that the audit store refused, by tool",
            ["tool"],
            registry=r,
        )
        self.lookup_dedup = Counter(
            "ce_lookup_knowledge_dedup", "Documents withheld because the session already had them", registry=r
        )

    def count_storage_failure(self, store: str, operation: str) -> None:
        """One store call that failed mid-request (``ce_storage_failures_total{store,operation}``). The stores are
        handed ``functools.partial(metrics.count_storage_failure, "<store>")`` as their ``on_failure`` hook: a
        method of this module, beside the layers, so a failing store never calls back into the layer that wired it."""
        self.storage_failures.labels(store, operation).inc()

    def count_vector_commit_retry(self, operation: str) -> None:
        """One vector-index call retried (``ce_vector_commit_retries_total{operation}``; the stores' ``on_retry``)."""
        self.vector_commit_retries.labels(operation).inc()
