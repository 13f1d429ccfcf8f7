"""lookup_knowledge (DESIGN.md §7; seed 001), stage by stage:

* ``hint_index.KnowledgeIndexService``: the hint layer (``analyze_query``) and its keyword index (a write listener);
* ``semantic_search.VectorSearchService``: the semantic layer (``search_similar_documents``), modes and retries;
* ``relevance.RelevanceClassifier``: scores, hint boosts and relevance levels;
* ``context_pack.ContextPacker``: neighbour / same-section expansion and context packing;
* ``retrieved_doc_tracker.RetrievedDocTracker``: session dedup;
* ``tool_invocation_recorder.ToolInvocationRecorder``: the audit trail, queries and ``verify_evidence``;
* ``lookup.LookupKnowledgeService``: the orchestration, wired by ``ContextEngineService``.
"""
