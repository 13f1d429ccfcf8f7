"""The ``search_memory`` sections of :class:`~context_engine.settings.Settings`: planner, query transform, seed,
hierarchy, scoring, assembly, match quality, read, redaction, retrieval and keyword (BM25) settings."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from context_engine.settings.base import SettingsSection


class PlannerSettings(SettingsSection):
    """``QueryPlanner`` (DESIGN §5, seed 000 §4.2)."""

    session_max_messages: int = Field(
        4, ge=0, le=50, description="Most recent user messages of session_archive the planner reads."
    )
    followup_max_chars: int = Field(
        32,
        ge=0,
        le=1000,
        description="A query naming no intent and at most this long (characters) is a follow-up: the last user "
        "message of the session is appended to the embedded text.",
    )
    session_context_max_chars: int = Field(
        200, ge=0, le=4000, description="Characters of session text appended to a follow-up query."
    )
    default_categories: dict[Literal["memory", "skill", "resource"], tuple[str, ...]] = Field(
        default_factory=dict,
        description="Categories filled in (as a narrowing filter) when the caller gives none, per context type; "
        "empty: no restriction.",
    )


class QueryTransformSettings(SettingsSection):
    """Rule-based query transformations of search_memory (retrieval/query_transform.py; seed 001 §10)."""

    first_person: bool = Field(
        False,
        description="Fuse the query's vector with that of its first-person rewrite ('What does the user drink' -> "
        "'What does I drink'); off by default: no gain on the dev sets (eval/README.md, 'Query transformation').",
    )
    speaker_names: bool = Field(
        True,
        description="When the query names a speaker of the conversation messages it finds ('Where is Sam employed?' "
        "over Sam's turns), search again with the name taken out of the query's text (vector and BM25): the name "
        "says whose turns to prefer (retrieval.seed.speaker_boost), not what they say; matched as a word it favours "
        "that speaker's shortest turns ('Sam: Hi again!'). A reference to the user's role is put in the first person "
        "instead ('the user' -> 'I', over turns stored without names: 'user: ...'). Falls back to the first search.",
    )


class SeedSettings(SettingsSection):
    """``L0Retriever``."""

    overfetch: int = Field(
        2,
        ge=1,
        le=10,
        description="Index rows fetched per wanted seed, so dropped pending/invisible rows are replaced.",
    )
    extra_rows: int = Field(5, ge=0, le=200, description="Index rows fetched on top of overfetch * top_k.")
    content_free_factor: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Multiplies the fused first-round score of a conversation message that carries no content of its "
        "own (an acknowledgement, a question back), so it ranks below the fact it answers; 1 switches it off.",
    )
    speaker_boost: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="Added to the fused first-round score of a conversation message whose speaker the query names "
        "('When did Caroline ...', 'the user'); 0 switches speaker resolution off (retrieval/speakers.py).",
    )
    date_boost: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="Added to the fused first-round score of a memory that occurred on a date the query names ('What "
        "did Melanie show Caroline on October 13, 2023?', 'in mid-October 2024', '2024年9月22日': that day or the "
        "next, that month or part of it; retrieval/dates.py), whose best date_candidates such memories join the first "
        "round; 0 switches it off (no date is read). convex fusion only.",
    )
    date_candidates: int = Field(
        20, ge=1, le=200, description="Memories of the named date that join the first round (date_boost)."
    )
    lexical_gap_share: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="'convex' fusion: when no BM25 hit of the memory typed query holds this share of the query's "
        "information (the Lucene idf of the query tokens a record holds, over their sum: KeywordHit.matched), the "
        "query shares only incidental words with the memories and their dense weight rises to "
        "lexical_gap_dense_weight, unless the planner prefers skills or resources (retrieval/l0_retriever.py); 0 "
        "switches it off.",
    )
    lexical_gap_dense_weight: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="The dense weight of a query with a lexical gap (lexical_gap_share); a model's tuned weight "
        "above it is kept.",
    )
    hybrid: bool = Field(
        True,
        description="First round: fuse the level-0 dense list with BM25 over the same abstracts (keyword.fusion) to "
        "choose and order the seeds; with 'convex' a node's vector score is lifted to its fused score when higher.",
    )


class HierarchySettings(SettingsSection):
    """``HierarchicalSearcher`` (DESIGN §5)."""

    max_depth: int = Field(2, ge=0, le=4, description="Levels expanded below each start directory (0: no expansion).")
    children_per_dir: int = Field(8, ge=1, le=200, description="Children kept per directory (best L0 similarity).")
    dirs_per_level: int = Field(6, ge=1, le=200, description="Child directories expanded further per level (beam).")
    max_start_dirs: int = Field(12, ge=1, le=200, description="Start directories (roots + seed parents) per query.")
    budget_ms: int = Field(
        50, ge=1, le=60_000, description="Time budget of one expansion (ms); once spent, deeper levels are skipped."
    )
    ancestor_levels: int = Field(2, ge=1, le=8, description="Ancestors counted in hierarchy_score (parent first).")
    ancestor_decay: float = Field(
        0.5, gt=0.0, le=1.0, description="Weight of each further ancestor relative to the previous one."
    )
    hits_per_top_k: int = Field(
        1,
        ge=1,
        le=20,
        description="Expansion candidates hydrated per wanted result, over all typed queries of a request (best "
        "provisional final score first).",
    )
    parallel_workers: int = Field(
        3, ge=1, le=16, description="Typed queries searched and expanded concurrently (1: one after another)."
    )
    expand_other_types: bool = Field(
        False,
        description="Walk the directories of every typed query, not only of the types the planner's intent prefers. "
        "Off: when the intent prefers types, the other types keep their seeds (scored with their ancestors as "
        "usual) and are not expanded, which saves their walk (~5% of a search at 100k nodes); without a "
        "preferred type, or when the caller named the types, every typed query is expanded.",
    )
    reply_factor: float = Field(
        0.7,
        ge=0.0,
        le=1.0,
        description="A seed that is a conversation message asking something brings its reply (the next message by "
        "another speaker that states something, within reply_window messages) as an expansion candidate whose "
        "vector score is at least this times the seed's (retrieval/replies.py): the answer to a question that "
        "matches the query. 0 turns it off.",
    )
    reply_window: int = Field(
        3, ge=1, le=20, description="Messages after an asking seed searched for its reply (acknowledgements skipped)."
    )
    named_reply_first: bool = Field(
        True,
        description="When the query names the reply's speaker and not the asker's (\"What did the assistant "
        'suggest ...?", "What inspired Caroline\'s sculpture?" over Melanie\'s "What inspired it?"), the reply '
        "ranks just above its question instead of at reply_factor times its score (retrieval/replies.py "
        "answers_for_named). Needs reply_factor > 0.",
    )


class ScoringSettings(SettingsSection):
    """Final score (seed 000 §6): a weighted sum of 0..1 components; weights are divided by their sum."""

    weight_vector: float = Field(0.65, ge=0.0, le=1.0, description="Weight of the L0 vector score.")
    weight_hierarchy: float = Field(0.20, ge=0.0, le=1.0, description="Weight of hierarchy_score.")
    weight_category: float = Field(0.10, ge=0.0, le=1.0, description="Weight of category_boost.")
    weight_target: float = Field(0.05, ge=0.0, le=1.0, description="Weight of target_uri_boost.")
    default_score_threshold: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Threshold on the final score when the request gives none; None: no threshold, so a request "
        "returns min(top_k, candidates) hits (chosen per model on the dev sets, docs/search_memory.md).",
    )
    current_state_boost: float = Field(
        0.1,
        ge=0.0,
        le=1.0,
        description="A question asking for the present state ('now', 'these days', 'still', '现在') adds up to this "
        "to the final score of the candidate memories, in proportion to how late they occurred among them "
        "(retrieval/current_state.py); 0 switches it off.",
    )
    current_state_same_topic: float = Field(
        0.5,
        ge=-1.0,
        le=1.0,
        description="For a current-state question, two of the 5 best memories whose abstracts have at least this raw "
        "cosine similarity are on the same topic, and the later one is ordered first when it scores at most "
        "current_state_margin below the earlier (retrieval/current_state.py; 1 switches the rule off).",
    )
    current_state_margin: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="The largest final-score gap the later of two same-topic statements makes up for a current-state "
        "question (0 switches the rule off).",
    )
    correction_margin: float = Field(
        0.15,
        ge=0.0,
        le=1.0,
        description="For any question, a message that says it corrects an earlier one ('sorry, I meant', "
        "'correction:', 'typo') ranks just above the statement it corrects when it scores at most this much below "
        "it (retrieval/current_state.py prefer_corrections; 0 switches the rule off).",
    )
    report_margin: float = Field(
        0.15,
        ge=0.0,
        le=1.0,
        description="An assistant's message reporting what it did ('I've booked the 06:40, seat 42') ranks just above "
        "the user's request it carries out when it scores at most this much below it, for any question but one about "
        "the asking (retrieval/replies.py prefer_reports; 0 switches the rule off).",
    )
    echo_margin: float = Field(
        0.15,
        ge=0.0,
        le=1.0,
        description="The user's statement ranks just above the assistant's echo of it in the next message ('Noted, "
        "the worker config lives at ...') when it scores at most this much below it (retrieval/replies.py "
        "prefer_sources; 0 switches the rule off).",
    )
    answer_type_boost: float = Field(
        0.08,
        ge=0.0,
        le=1.0,
        description="Added to the final score of memories that hold what the question's opening words ask for: a "
        "number, date or time for 'when' / 'how many' / 'what time', a proper noun for 'who' / 'what is the name' / "
        "'which company', an occupation for 'what does X do for a living' / 'what is X's job' (English; "
        "retrieval/answer_type.py); 0 switches it off.",
    )
    intent_boost: float = Field(
        0.05,
        ge=0.0,
        le=1.0,
        description="Added to the final score (capped at 1) of hits of a context type the planner preferred; the "
        "intent ranks types, it never excludes one.",
    )
    bm25_protect_margin: float = Field(
        1.5,
        ge=1.0,
        le=100.0,
        description="A typed query's first BM25 hit whose score is at least this many times the second's (or the "
        "only BM25 hit) is never dropped by a threshold.",
    )
    category_synonyms: dict[str, tuple[str, ...]] = Field(
        default_factory=lambda: {
            "preference": ("偏好", "喜欢", "喜好", "prefer", "preference", "preferences", "favorite", "favourite"),
            "profile": ("背景", "身份", "个人资料", "profile", "background", "who am i"),
            "event": ("事件", "经历", "发生", "event", "events", "happened"),
        },
        description="Words in a query that name a category (besides the category name itself), for category_boost.",
    )

    @model_validator(mode="after")
    def _weights_positive(self) -> ScoringSettings:
        if self.weight_vector + self.weight_hierarchy + self.weight_category + self.weight_target <= 0:
            raise ValueError("at least one scoring weight must be positive")
        return self


class AssemblySettings(SettingsSection):
    """``RetrievalAssembler``: when to recommend an explicit read (final score, 0..1)."""

    read_l1_min_score: float = Field(
        0.25, ge=0.0, le=1.0, description="A file hit with an overview and at least this score gets read_l1."
    )
    read_l2_min_score: float = Field(
        0.45, ge=0.0, le=1.0, description="A file hit with content and at least this score gets read_l2."
    )


class MatchQualitySettings(SettingsSection):
    """``search_memory``'s ``match_quality`` label (``retrieval/match_quality.py``; docs/search_memory.md, "How
    confident the answer is"). Similarities are calibrated cosines (the model's scale, ``schema/similarity.py``),
    0..1; calibrated by ``bench/match_quality.py`` on the conversation dev sets."""

    none_below_evidence: float = Field(
        0.2,
        ge=0.0,
        le=1.0,
        description="'none' when the evidence (the best calibrated cosine of the returned hits, to the "
        "speaker-neutral query when speaker_neutral_similarity applies, less missing_name_penalty times the share "
        "of the query's names that no candidate mentions) is below this.",
    )
    missing_name_penalty: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="Taken from the evidence, times the share of the names the query mentions (capitalised words "
        "inside a sentence, e.g. 'Nate', 'LGBTQ') that no candidate's L0 text mentions; 0 turns the check off.",
    )
    missing_name_penalty_with_speaker: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="The missing-name penalty of a place or a descriptor ('of London', 'the Spanish capital', 'Which "
        "Japanese script': after an article, an interrogative determiner or a preposition of place, never "
        "possessive) when the query also names a speaker of the returned conversation messages ('Mateo', 'the "
        "user'): the question is then about someone the store holds, who may name the place in other words "
        "('Chamberí'). A person the store never names ('the user's friend Bob', 'Nate's genre') keeps "
        "missing_name_penalty. 0: no penalty for such a place.",
    )
    speaker_neutral_similarity: bool = Field(
        True,
        description="When the query names a speaker of the returned conversation messages ('Sam', 'the user'), "
        "the evidence starts from the hits' cosine to the query with that speaker in the first person ('How old "
        "is Sam?' as 'How old is I?'; one more query embedding unless it is the query's first-person rewrite): a "
        "message's L0 starts with its speaker, which lifts its cosine to any question naming them, whatever the "
        "topic. False: from the query's own cosine.",
    )
    own_text_hits: int = Field(
        3,
        ge=0,
        le=10,
        description="The first this many file hits that can hold an answer (not a message that states nothing: "
        "match_quality.answer_hits) are judged by their own text too, when the evidence is below "
        "own_text_check_below: a conversation message among them is embedded alone (without the context it was "
        "indexed with; one batch of at most this many short texts), any other hit keeps its level-0 cosine. 0 "
        "turns the check off.",
    )
    own_text_check_below: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="The own-text check runs when the evidence is at least none_below_evidence and below this (at "
        "most strong_min_evidence keeps 'strong' answers out of it; above, the check may turn one into 'none').",
    )
    none_below_own_text: float = Field(
        0.15,
        ge=0.0,
        le=1.0,
        description="'none' when the own-text evidence (the best calibrated cosine of the own_text_hits first answer "
        "hits' own texts to the query, speaker-neutral when that applies, less the missing-name penalty) is below "
        "this.",
    )
    strong_min_evidence: float = Field(
        0.4, ge=0.0, le=1.0, description="'strong' needs at least this evidence (and strong_min_vector_score)."
    )
    strong_min_vector_score: float = Field(
        0.4,
        ge=0.0,
        le=1.0,
        description="'strong' needs the first answer hit's own vector score (the fused meaning + words score of the "
        "hybrid first round, else its calibrated cosine) to be at least this.",
    )


class ReadSettings(SettingsSection):
    """``MemoryReadService`` (DESIGN §6)."""

    l2_excerpt_max_chars: int = Field(
        12_000, ge=256, le=10_000_000, description="L2 longer than this is returned as an excerpt (characters)."
    )
    max_relations: int = Field(50, ge=0, le=1000, description="Upper bound of a request's max_relations.")
    max_batch_uris: int = Field(50, ge=1, le=1000, description="URIs per read_batch call.")


class RedactionSettings(SettingsSection):
    """Read-time secret redaction (DESIGN §6; docs/security.md): L1/L2 reads, search abstracts, lookup_knowledge
    excerpts, audit rows, ls/tree. Write-time redaction of stored derived text (L0, L1, titles, slugs, audit rows)
    and of log lines is always on."""

    enabled: bool = Field(True, description="Redact secrets in text that reads return.")
    detect_secrets: bool = Field(True, description="Run the detect-secrets plugins as well as our own patterns.")


class RetrievalSettings(SettingsSection):
    """search_memory / read_memory (DESIGN §5-6, §12)."""

    compact_abstract_max_chars: int = Field(
        110,
        ge=16,
        le=2048,
        description="Longest L0 text of a hit in a compact search_memory answer (characters; cut at a word with "
        "'…'): keeps a top-5 answer under 1.5 KB on the runbooks (issue 15). The full answer always has the whole L0.",
    )
    l0_source: Literal["auto", "memory", "index"] = Field(
        "auto",
        description="Where level-0 similarities come from: 'index' (the vector index, every call), 'memory' (an "
        "in-process matrix of each account's level-0 vectors, loaded from the metadata store and kept current from "
        "its change log), 'auto' (memory when loaded or small enough to load at once, the index meanwhile).",
    )
    memory_max_rows: int = Field(
        2_000_000,
        ge=0,
        description="Accounts with more level-0 rows than this are always searched through the vector index (a "
        "compressed row costs about 0.6 kB of memory with its URI and abstract).",
    )
    memory_warm_after_searches: int = Field(
        2, ge=0, le=1_000_000, description="auto: load an account's matrix in the background after this many searches."
    )
    memory_compress_rows: int | None = Field(
        100_000,
        ge=1,
        description="An account with at least this many level-0 rows keeps memory_compress_dims-dimensional "
        "projections of its vectors in the level-0 matrix (one uncentred-PCA projection per account) instead of the "
        "512 floats, and rescores its candidates exactly from the metadata store: a quarter of the memory and of the "
        "work per score (docs/derived_indexes.md); null: never.",
    )
    memory_compress_dims: int = Field(128, ge=8, le=4096, description="Dimensions of a compressed account's rows.")
    memory_rescore_cache_rows: int = Field(
        20_000,
        ge=0,
        description="Deprecated and ignored: a compressed account now rescores its candidates from float16 vectors "
        "held in memory, not from the store (docs/derived_indexes.md). Still accepted so settings files that set it "
        "load unchanged.",
    )
    derived_files: bool = Field(
        True,
        exclude=True,  # a cache switch: never part of a dumped configuration (eval config hashes: it ranks nothing)
        description="Keep the level-0 matrix and the BM25 postings of each account as files under <home>/derived, "
        "stamped with the account generation: a new process opens them in milliseconds and catches up from the "
        "change log instead of reloading and re-tokenising the account (docs/derived_indexes.md). They are caches: "
        "deleting the folder is always safe.",
    )
    derived_build_process_rows: int = Field(
        100_000,
        ge=0,
        exclude=True,  # where a cache is built, never part of a dumped configuration (eval config hashes)
        description="A wholesale load of an account of at least this many vector rows (every level): its first "
        "load with no usable derived file, or a reload when the change log does not reach back, runs in a child "
        "process, which writes the file; this process then maps the file and catches up "
        "from the change log, so it never holds the load's garbage (at 1M nodes, a fresh home's first start then "
        "holds what a restarted process holds: docs/derived_indexes.md). 0 loads every account in this process.",
    )
    memory_load_now_rows: int = Field(
        60_000,
        ge=0,
        description="auto: an account with at most this many vector rows (every level) is loaded into the matrix on "
        "its first search (about 0.1 s per 10k level-0 rows), so a one-shot CLI search never opens the vector index; "
        "0 turns this off.",
    )
    planner: PlannerSettings = PlannerSettings()
    seed: SeedSettings = SeedSettings()
    hierarchy: HierarchySettings = HierarchySettings()
    scoring: ScoringSettings = ScoringSettings()
    assembly: AssemblySettings = AssemblySettings()
    match_quality: MatchQualitySettings = MatchQualitySettings()
    query_transform: QueryTransformSettings = QueryTransformSettings()
    read: ReadSettings = ReadSettings()
    redaction: RedactionSettings = RedactionSettings()


class KeywordSettings(SettingsSection):
    """BM25 keyword retrieval (``storage/keyword``) and its fusion with dense search (``retrieval/fusion.py``).

    BM25 parameters are the ones of the SciFact sanity run (k1=0.9, b=0.4, Anserini's defaults); fusion parameters
    were tuned on SciFact train and the dev half of the runbook queries only (eval/README.md).
    """

    k1: float = Field(0.9, gt=0.0, le=10.0, description="BM25 term-frequency saturation.")
    b: float = Field(0.4, ge=0.0, le=1.0, description="BM25 length normalisation.")
    method: Literal["lucene", "robertson", "atire", "bm25l", "bm25+"] = Field(
        "lucene", description="BM25 variant (bm25s)."
    )
    stem: bool = Field(True, description="Snowball-stem English words (PyStemmer).")
    stopwords: bool = Field(True, description="Drop English and Chinese stopwords.")
    split_identifiers: bool = Field(
        True,
        description="Also index the parts of CamelCase/snake_case identifiers (KubePodCrashLooping -> pod, crash).",
    )
    cjk: Literal["jieba-search", "jieba", "bigram"] = Field(
        "jieba-search",
        description="Chinese tokenisation: jieba search mode (words and their sub-words), jieba precise mode, bigrams.",
    )
    fusion: Literal["convex", "weighted", "rrf"] = Field(
        "convex",
        description="How a pipeline with hybrid on (knowledge.hybrid, retrieval.seed.hybrid) fuses BM25 with dense: "
        "'convex' (calibrated similarity and BM25 coverage, both absolute, summed with the model's weights), "
        "'weighted' (min-max normalised scores), 'rrf' (ranks).",
    )
    rrf_k: int = Field(
        5, ge=1, le=1000, description="Reciprocal rank fusion constant k (Cormack et al. 2009; tuned, eval/README.md)."
    )
    dense_weight: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Weight of the dense side in 'convex' and 'weighted' fusion, BM25 gets 1-w; default: the "
        "embedding model's tuned weight for the fusion in use (eval/README.md).",
    )
    fusion_depth: int = Field(100, ge=1, le=10_000, description="Candidates taken from each ranked list before fusion.")
