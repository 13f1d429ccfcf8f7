from context_engine.storage.keyword.tokenize import KeywordTokenizer


def test_english_words_are_lowercased_stemmed_and_stopwords_dropped():
    tok = KeywordTokenizer(split_identifiers=False)
    assert tok("The pods are crash looping") == ["pod", "crash", "loop"]


def test_identifiers_also_yield_their_parts():
    tok = KeywordTokenizer(stem=False)
    assert tok("KubePodCrashLooping") == ["kubepodcrashlooping", "kube", "pod", "crash", "looping"]
    assert tok("etcd_disk_wal") == ["etcd_disk_wal", "etcd", "disk", "wal"]
    assert KeywordTokenizer(stem=False, split_identifiers=False)("KubePodCrashLooping") == ["kubepodcrashlooping"]


def test_single_latin_characters_are_dropped():
    assert KeywordTokenizer()("a b c x1") == ["x1"]


def test_chinese_is_segmented_by_jieba_and_function_words_dropped():
    tokens = KeywordTokenizer()("容器频繁重启的排查方法")
    assert "容器" in tokens and "频繁" in tokens and "重启" in tokens
    assert "的" not in tokens


def test_search_mode_adds_sub_words_of_compounds():
    precise = KeywordTokenizer(cjk="jieba")("合作开发")
    search = KeywordTokenizer(cjk="jieba-search")("合作开发")
    assert set(precise) < set(search) and {"合作", "开发"} <= set(search)


def test_bigram_mode():
    assert KeywordTokenizer(cjk="bigram")("容器重启") == ["容器", "器重", "重启"]
    assert KeywordTokenizer(cjk="bigram")("猫") == ["猫"]


def test_mixed_text_keeps_both_scripts_in_order():
    tokens = KeywordTokenizer(stem=False)("Pod 容器 restarts")
    assert tokens[0] == "pod" and tokens[-1] == "restarts" and "容器" in tokens


def test_empty_and_punctuation_only():
    tok = KeywordTokenizer()
    assert tok("") == [] and tok("?!，。") == []


def test_english_stopwords_are_bm25s_list_read_without_importing_bm25s():
    import subprocess
    import sys

    from bm25s.stopwords import STOPWORDS_EN

    from context_engine.storage.keyword.tokenize import bm25s_stopwords_en

    assert bm25s_stopwords_en() == tuple(STOPWORDS_EN)
    code = (
        "import sys; from context_engine.storage.keyword.tokenize import KeywordTokenizer as T; "
        "t = T(); assert t('the pods are crashing') == ['pod', 'crash'], t('the pods are crashing'); "
        "print(sorted(m for m in ('bm25s', 'scipy') if m in sys.modules))"
    )
    import os
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert out.strip() == "[]"
