"""Evaluation (DESIGN §11): datasets, TREC runs, metrics (ir-measures), retrievers, reports, baselines, traces.

The CLI ``context-engine eval`` is a thin layer over :func:`run_eval`; see eval/README.md for the datasets, the
live-mode HTTP contract and the measured tables.
"""

from context_engine.eval.baselines import BaselineCheck, BaselineFile, BaselineRun, Reference, check_results
from context_engine.eval.conversation_eval import ConversationEvalOptions, ConversationReport, run_conversation_eval
from context_engine.eval.conversations import ConversationDataset, load_conversations
from context_engine.eval.datasets import Document, EvalDataset, half_of, load_dataset
from context_engine.eval.harness import MethodResult, fuse_runs, run_retriever
from context_engine.eval.metrics import MEASURES, evaluate
from context_engine.eval.report import EvalReport, git_sha
from context_engine.eval.retrievers import BM25Retriever, DenseRetriever, FixtureRetriever, LiveRetriever
from context_engine.eval.runner import ALL_METHODS, EvalOptions, run_eval
from context_engine.eval.trec import read_qrels, read_run, write_qrels, write_run

__all__ = [
    "ALL_METHODS",
    "MEASURES",
    "BM25Retriever",
    "BaselineCheck",
    "BaselineFile",
    "BaselineRun",
    "ConversationDataset",
    "ConversationEvalOptions",
    "ConversationReport",
    "DenseRetriever",
    "Document",
    "EvalDataset",
    "EvalOptions",
    "EvalReport",
    "FixtureRetriever",
    "LiveRetriever",
    "MethodResult",
    "Reference",
    "check_results",
    "evaluate",
    "fuse_runs",
    "git_sha",
    "half_of",
    "load_conversations",
    "load_dataset",
    "read_qrels",
    "read_run",
    "run_conversation_eval",
    "run_eval",
    "run_retriever",
    "write_qrels",
    "write_run",
]
