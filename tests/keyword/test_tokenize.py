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
