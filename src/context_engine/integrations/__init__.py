"""Retrievers for agent frameworks, built on :mod:`context_engine.client` (HTTP): :mod:`.langchain`
(``pip install context-engine[langchain]``) and :mod:`.llamaindex` (``context-engine[llamaindex]``).
See docs/clients.md.
"""
