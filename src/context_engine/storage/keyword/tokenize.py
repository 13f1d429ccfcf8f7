"""Tokenisation for BM25: English words (lower-cased, stopwords dropped, Snowball-stemmed) and Chinese words (jieba).

A text is cut into runs of CJK characters and the rest:

* CJK runs go to jieba (DESIGN §14): ``jieba-search`` emits each word and, for long words, its dictionary sub-words
  (``cut_for_search``), which keeps recall on compounds; ``jieba`` is the precise mode; ``bigram`` emits overlapping
  character bigrams (and the single character of a one-character run), the classic dictionary-free baseline.
* Other text follows the scikit-learn/bm25s convention (words of two or more word characters, lower-cased), with
  English stopwords from bm25s and the Snowball English stemmer from PyStemmer. With ``split_identifiers``, an
  identifier such as ``KubePodCrashLooping`` or ``etcd_disk_wal`` also yields its parts, so a query in plain words
  ("pod crash looping") matches the alert name.

jieba's dictionary loads lazily, once per process, behind a lock (about 1 s).
"""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
import threading
import unicodedata
from pathlib import Path
from typing import Any, Literal

__all__ = ["ZH_STOPWORDS", "KeywordTokenizer"]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_SPLIT_RE = re.compile(rf"([{_CJK}]+)")
_WORD_RE = re.compile(r"[^\W_]+(?:_[^\W_]+)*")
_CAMEL_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_CJK_PUNCT_RE = re.compile(r"^\W+$")

#: Chinese function words dropped from both queries and documents (a short list: particles, pronouns, copulas).
ZH_STOPWORDS = frozenset(
    [
        "的",
        "了",
        "是",
        "在",
        "和",
        "与",
        "及",
        "或",
        "也",
        "就",
        "都",
        "而",
        "并",
        "但",
        "被",
        "把",
        "让",
        "给",
        "对",
        "从",
        "到",
        "为",
        "以",
        "于",
        "之",
        "其",
        "这",
        "那",
        "这个",
        "那个",
        "这些",
        "那些",
        "我",
        "你",
        "他",
        "她",
        "它",
        "我们",
        "你们",
        "他们",
        "什么",
        "哪",
        "哪个",
        "哪些",
        "谁",
        "吗",
        "呢",
        "吧",
        "啊",
        "么",
        "个",
        "着",
        "过",
        "将",
        "等",
        "中",
        "上",
        "下",
        "有",
        "没有",
        "如何",
        "怎么",
        "怎样",
        "为什么",
        "多少",
        "几",
        "是否",
        "可以",
        "一个",
    ]
)

_jieba_lock = threading.Lock()
_jieba_tokenizer: Any = None


def jieba_tokenizer() -> Any:
    """The process-wide jieba tokenizer (one dictionary, ~1 s to load, shared with the hint layer), on first use."""
    global _jieba_tokenizer
    if _jieba_tokenizer is None:
        with _jieba_lock:
            if _jieba_tokenizer is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)  # jieba logs its dictionary loading on its own handler
                tok = jieba.Tokenizer()
                tok.initialize()
                _jieba_tokenizer = tok
    return _jieba_tokenizer


_PROPER_NOUN_FLAGS = {"ns": "place", "nt": "name", "nrt": "name", "nr": "name", "nrfg": "name"}
#: A person's name flagged ``nr``/``nrfg`` counts only this rare in the dictionary's corpus: the frequent ones are
#: mostly common words it flags as names (明白 10,875, 武功, 文明, 谢谢, 过敏 521), real names are rare (周杰伦 89).
PERSON_NAME_MAX_FREQ = 100
#: Common words among the dictionary's most frequent place names (``ns``) and people (``nr``): "哪个城市", "吉他".
COMMON_WORDS_FLAGGED_AS_NAMES = frozenset(
    """
    城市 东西 平原 外国 爱国 东北 南北 西北 西南 东南 英雄 朝廷 太阳 海洋 湖泊 大桥 高原 上市 建国 美丽 山区
    江湖 大街 王国 开国 共和国 城镇 阿哥 哥哥 庆典 南路 深度 山脉 回国 治安 大国 新鲜 古城 海峡 河口 冰川 长度
    山水 长大 内河 普及 商城 古典 阴阳 江山 高山 大海 山坡 河谷 莫非 吉他 掌勺 寻思 宝贝 小姐 师傅 师兄 老公
    """.split()
)
_proper_nouns: dict[str, str] | None = None


def jieba_proper_nouns() -> dict[str, str]:
    """The proper nouns of jieba's dictionary (the one :func:`jieba_tokenizer` loads), each with its kind: ``place``
    for the part-of-speech flag ``ns`` ("日本", "杭州"), ``name`` for an organisation (``nt``), a transliterated
    name (``nrt``: "阿里巴巴") and a person (``nr``, ``nrfg``: "周杰伦", at most :data:`PERSON_NAME_MAX_FREQ`), less
    :data:`COMMON_WORDS_FLAGGED_AS_NAMES`. Other proper nouns (``nz``: 英语, 论文) are too often common words. About
    98,000 words, 14 MB, read once per process on first use (~0.2 s); jieba's part-of-speech tagger
    (``jieba.posseg``), which reads the same flags, would hold ~100 MB."""
    global _proper_nouns
    if _proper_nouns is None:
        tok = jieba_tokenizer()
        with _jieba_lock:
            if _proper_nouns is None:
                found: dict[str, str] = {}
                with tok.get_dict_file() as f:
                    for raw in f:
                        parts = raw.decode("utf-8").split() if isinstance(raw, bytes) else raw.split()
                        if len(parts) != 3 or parts[2] not in _PROPER_NOUN_FLAGS or len(parts[0]) < 2:
                            continue
                        word, freq, flag = parts[0], int(parts[1]), parts[2]
                        if flag in ("nr", "nrfg") and freq > PERSON_NAME_MAX_FREQ:
                            continue
                        if word not in COMMON_WORDS_FLAGGED_AS_NAMES:
                            found[word] = _PROPER_NOUN_FLAGS[flag]
                _proper_nouns = found
    return _proper_nouns


def bm25s_stopwords_en() -> tuple[str, ...]:
    """bm25s's English stopword list (``bm25s.stopwords.STOPWORDS_EN``).

    Read from its module file without running the ``bm25s`` package's ``__init__``, which imports scipy.sparse
    (about 0.2 s of a cold CLI start, issue 12); ``stopwords.py`` is a data module with no imports. Falls back to
    the plain import when the file cannot be located.
    """
    if "bm25s" not in sys.modules:
        spec = importlib.util.find_spec("bm25s")  # locates the package without importing it
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        path = Path(locations[0]) / "stopwords.py" if locations else None
        if path is not None and path.is_file():
            data = importlib.util.spec_from_file_location("_context_engine_bm25s_stopwords", path)
            if data is not None and data.loader is not None:
                module = importlib.util.module_from_spec(data)
                data.loader.exec_module(module)
                return tuple(module.STOPWORDS_EN)
    from bm25s.stopwords import STOPWORDS_EN

    return tuple(STOPWORDS_EN)


class KeywordTokenizer:
    """Text to BM25 tokens, the same function for documents and queries.

    Args:
        stem: Snowball-stem English words.
        stopwords: drop English (bm25s list) and Chinese (:data:`ZH_STOPWORDS`) stopwords.
        split_identifiers: also emit the parts of CamelCase and snake_case identifiers.
        cjk: Chinese mode, see the module docstring.

    Calling the tokenizer is thread-safe (jieba's tokenizer and PyStemmer are used under a lock).
    """

    def __init__(
        self,
        *,
        stem: bool = True,
        stopwords: bool = True,
        split_identifiers: bool = True,
        cjk: Literal["jieba-search", "jieba", "bigram"] = "jieba-search",
    ) -> None:
        self.stem = stem
        self.use_stopwords = stopwords
        self.split_identifiers = split_identifiers
        self.cjk = cjk
        self._lock = threading.Lock()
        self._stemmer: Any = None
        self._cache: dict[str, str] = {}
        if stopwords:
            self._en_stop = frozenset(bm25s_stopwords_en())
        else:
            self._en_stop = frozenset()

    @property
    def config(self) -> dict[str, Any]:
        """The parameters, recorded with a saved index and in eval reports."""
        return {
            "stem": self.stem,
            "stopwords": self.use_stopwords,
            "split_identifiers": self.split_identifiers,
            "cjk": self.cjk,
        }

    def __call__(self, text: str) -> list[str]:
        """The tokens of ``text`` in order (duplicates kept: BM25 counts them). Empty for empty text."""
        text = unicodedata.normalize("NFKC", text)
        out: list[str] = []
        for i, part in enumerate(_SPLIT_RE.split(text)):
            if not part:
                continue
            if i % 2:  # odd parts are the CJK runs captured by the split pattern
                out.extend(self._cjk_tokens(part))
            else:
                out.extend(self._latin_tokens(part))
        return out

    def _latin_tokens(self, text: str) -> list[str]:
        words: list[str] = []
        for word in _WORD_RE.findall(text):
            low = word.lower()
            if len(low) >= 2 and low not in self._en_stop:
                words.append(low)
            if self.split_identifiers:
                parts = [p for chunk in word.split("_") for p in _CAMEL_RE.findall(chunk)]
                if len(parts) > 1:
                    words.extend(p.lower() for p in parts if len(p) >= 2 and p.lower() not in self._en_stop)
        if not self.stem or not words:
            return words
        return self._stem(words)

    def _stem(self, words: list[str]) -> list[str]:
        with self._lock:
            if self._stemmer is None:
                import Stemmer

                self._stemmer = Stemmer.Stemmer("english")
            cache = self._cache
            missing = [w for w in set(words) if w not in cache]
            if missing:
                for w, s in zip(missing, self._stemmer.stemWords(missing), strict=True):
                    cache[w] = s
                if len(cache) > 500_000:  # bound memory on huge vocabularies
                    cache.clear()
            return [cache.get(w) or self._stemmer.stemWord(w) for w in words]

    def _cjk_tokens(self, run: str) -> list[str]:
        if self.cjk == "bigram":
            if len(run) == 1:
                return [run]
            return [run[i : i + 2] for i in range(len(run) - 1)]
        tok = jieba_tokenizer()
        with self._lock:
            words = tok.cut_for_search(run) if self.cjk == "jieba-search" else tok.cut(run)
            words = list(words)
        stop = ZH_STOPWORDS if self.use_stopwords else frozenset()
        return [w for w in words if w.strip() and w not in stop and not _CJK_PUNCT_RE.match(w)]
