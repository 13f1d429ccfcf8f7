"""Query-side rules for conversation memories (issue 25): speaker resolution, current-state questions and the
first-person rewrite."""

from __future__ import annotations

from datetime import datetime

import numpy as np
import pytest

from context_engine.retrieval.current_state import asks_current_state, prefer_latest, supersede
from context_engine.retrieval.query_transform import QueryTransformer, first_person, without_speakers
from context_engine.retrieval.speakers import (
    addressed_name,
    message_has_content,
    message_speaker,
    named_speakers,
    refers_to_user,
)
from context_engine.schema.hits import NodeHit

SESSION = "ctx://user/ann/memories/sessions/s1/"


def test_message_speaker_reads_only_conversation_messages():
    assert message_speaker(SESSION + "000001.md", "Caroline: I went to a support group.") == "Caroline"
    assert message_speaker(SESSION + "000002.md", "no speaker prefix") is None
    assert message_speaker(SESSION, "Directory s1: 2 items") is None
    assert message_speaker("ctx://user/ann/memories/general/x.md", "Sam: likes tea") is None


def test_named_speakers_are_whole_words_as_the_writer_capitalises():
    speakers = {"Caroline", "Melanie", "user", "Al"}
    assert named_speakers("When did caroline go to the support group?", speakers) == {"Caroline"}
    assert named_speakers("What does the user drink?", speakers) == {"user"}
    assert named_speakers("What did Alice say?", speakers) == set()  # "Al" is not a word of it
    assert named_speakers("What is the capital of France?", speakers) == set()
    # the writer's capitals decide: "will" is no name in a query that capitalises Priya; a role needs its article
    assert named_speakers("Where will Priya move?", {"Will", "Jo"}) == set()
    assert named_speakers("What does Will do?", {"Will", "Jo"}) == {"Will"}
    assert named_speakers("what does will do?", {"Will", "Jo"}) == {"Will"}
    assert named_speakers("What user name does Priya use?", {"user", "Priya"}) == {"Priya"}
    # possessives and quotes; acronyms and list numbers are no sign of a writer who capitalises names (a review)
    assert named_speakers("What is James' job?", {"James"}) == {"James"}
    assert named_speakers("What did 'Sam' say?", {"Sam"}) == {"Sam"}
    assert named_speakers("what did caroline say about the API?", speakers) == {"Caroline"}
    assert named_speakers("1) Where does sam live?", {"Sam"}) == {"Sam"}
    assert named_speakers("Where does O'Neil live?", {"Neil"}) == set()
    # a role with a determiner or as a possessive
    assert named_speakers("what is user's job?", speakers) == {"user"}
    assert named_speakers("What did my assistant recommend?", {"assistant"}) == {"assistant"}
    # a name whose case folding changes its letters is found as written
    assert named_speakers("Wo wohnt Herr Strauß?", {"Strauß"}) == {"Strauß"}
    assert named_speakers("İpek nerede yaşıyor?", {"İpek"}) == {"İpek"}
    # a name stored in lower case (a handle) is matched in any case
    assert named_speakers("What did Priya tell dj_kim?", {"dj_kim", "Priya"}) == {"dj_kim", "Priya"}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Where does Sam live now?", True),
        ("What does the user drink these days?", True),
        ("Is she still vegetarian?", True),
        ("他现在住在哪里？", True),
        ("用户仍然在那家公司上班吗？", True),
        ("林晓最终报名了哪个比赛？", True),
        ("用户2019年住在哪里？", False),
        ("Where did Sam live in 2019?", False),
        ("What is the nowcast model?", False),
    ],
)
def test_current_state_questions_are_recognised(query, expected):
    assert asks_current_state(query) is expected


def _hit(name: str, score: float, when: datetime | None) -> NodeHit:
    return NodeHit(uri=SESSION + name, owner_space="user:ann", context_type="memory", score=score, occurred_at=when)


def test_prefer_latest_lifts_the_newer_statement_only_for_current_state_questions():
    old = _hit("000001.md", 0.50, datetime(2023, 5, 8))
    new = _hit("000009.md", 0.47, datetime(2023, 7, 1))
    untimed = _hit("000005.md", 0.48, None)
    assert prefer_latest("Where did Sam live?", [old, new, untimed], 0.05) is False
    assert (old.score, new.score) == (0.50, 0.47)
    assert prefer_latest("Where does Sam live now?", [old, new, untimed], 0.05) is True
    assert old.score == 0.50 and new.score == pytest.approx(0.52) and untimed.score == 0.48
    assert prefer_latest("Where does Sam live now?", [old], 0.05) is False  # nothing to compare


def test_chinese_names_and_role_words_are_found_without_spaces():
    # Chinese writes no space between words: a name of CJK characters is found wherever it occurs
    assert named_speakers("林晓在哪家公司上班？", {"林晓", "assistant"}) == {"林晓"}
    assert named_speakers("林晓的猫叫什么名字？", {"林晓"}) == {"林晓"}
    assert named_speakers("陈杰什么时候搬家的？", {"林晓"}) == set()
    # a role by its Chinese word, without an article; not inside a compound (用户名: a user name)
    assert named_speakers("用户的猫叫什么名字？", {"user", "assistant"}) == {"user"}
    assert named_speakers("助手推荐了哪本书？", {"user", "assistant"}) == {"assistant"}
    assert named_speakers("用户名是什么？", {"user", "assistant"}) == set()
    assert named_speakers("用户的猫叫什么名字？", {"林晓"}) == set()  # no speaker stored under the role
    # a Latin name beside CJK characters is a whole word; inside a Latin word it is not
    assert named_speakers("Sam的猫叫什么？", {"Sam"}) == {"Sam"}
    assert named_speakers("Samantha的猫叫什么？", {"Sam"}) == set()
    # a role word counts where jieba cuts it as a word of its own: 用户组装 (assembled), 用户名字 (the user's name) yes;
    # 用户们 (users in general) no; a speaker stored under the role word itself is found as stored (a review)
    assert named_speakers("用户组装了什么？", {"user"}) == {"user"}
    assert named_speakers("用户名字叫什么？", {"user"}) == {"user"}
    assert named_speakers("用户们喜欢什么？", {"user"}) == set()
    assert named_speakers("用户的猫叫什么？", {"用户", "助手"}) == {"用户"}
    assert named_speakers("用户的猫叫什么？", {"user", "用户"}) == {"user", "用户"}


def test_without_speakers_takes_a_chinese_name_and_its_possessive_out():
    assert without_speakers("林晓的猫叫什么名字？", {"林晓"}) == "猫叫什么名字?"
    assert without_speakers("林晓在哪家公司上班？", {"林晓"}) == "在哪家公司上班?"
    # the user's role in the first person, as "the user" (stored as the role or under its Chinese word)
    assert without_speakers("用户的猫叫什么名字？", {"user"}) == "我的猫叫什么名字?"
    assert without_speakers("用户在哪家公司上班？", {"用户"}) == "我在哪家公司上班?"
    assert without_speakers("用户们喜欢什么？", {"user"}) is None  # users in general: no reference


def test_without_speakers_puts_the_users_role_in_the_first_person_and_keeps_other_roles():
    assert without_speakers("Where does the user work?", {"user"}) == "Where does I work?"
    assert without_speakers("What is the user's dog called?", {"user"}) == "What is my dog called?"
    assert without_speakers("What is the user’s dog called?", {"user"}) == "What is my dog called?"
    assert without_speakers("user's job", {"user"}) == "my job"
    # a name and the user's role in one question; the assistant's role says whose turn is meant and stays
    assert without_speakers("What did Sam tell the user?", {"Sam", "user"}) == "What did tell I?"
    assert (
        without_speakers("What did the assistant recommend to the user?", {"user", "assistant"})
        == "What did the assistant recommend to I?"
    )
    assert without_speakers("What did the assistant recommend?", {"user", "assistant"}) is None
    # the user is stored under a name: "the user" matches no "user: " prefix, nothing to rewrite
    assert without_speakers("Where does the user work?", {"Sam"}) is None
    assert without_speakers("the user", {"user"}) == "I"
    # a compound noun or any user is not the user the memories belong to (a review)
    assert without_speakers("What is the user name on the forum?", {"user"}) is None
    assert without_speakers("What is the user ID?", {"user"}) is None
    assert without_speakers("Is the user-agent set?", {"user"}) is None
    assert without_speakers("Where are a user's settings stored?", {"user"}) is None
    assert without_speakers("Does the user like the user interface?", {"user"}) == "Does I like the user interface?"
    # turns stored under the role's Chinese word: the role is found as the role, 用户名 (user name) is not it
    assert without_speakers("用户名是什么？", {"用户"}) is None
    assert without_speakers("Where does the user work?", {"用户"}) == "Where does I work?"


def test_without_speakers_takes_the_named_speakers_out_and_keeps_roles():
    assert without_speakers("Where is Sam employed?", {"Sam"}) == "Where is employed?"
    assert without_speakers("What is Sam's favourite band?", {"Sam", "user"}) == "What is favourite band?"
    assert without_speakers("what did caroline and melanie paint?", {"Caroline", "Melanie"}) == "what did and paint?"
    # a query that capitalises names: a lower-case word is no name ("will" beside the speaker Will)
    assert without_speakers("Where will Priya move next?", {"Will", "Priya"}) == "Where will move next?"
    assert (
        without_speakers("What did caroline and Melanie paint?", {"Caroline", "Melanie"})
        == "What did caroline and paint?"
    )
    assert without_speakers("What does the assistant drink?", {"assistant"}) is None  # a role, not a name
    assert without_speakers("Sam?", {"Sam"}) is None  # nothing left to search for
    assert without_speakers("Where is Samantha employed?", {"Sam"}) is None  # whole words only
    assert without_speakers("Where is it ?", {"Sam"}) is None  # names no speaker: no second search
    assert without_speakers("What is James' job?", {"James"}) == "What is job?"


def test_without_speakers_puts_the_users_greeted_name_in_the_first_person():
    assert without_speakers("Where does Priya work?", {"user"}, {"Priya"}) == "Where does I work?"
    assert without_speakers("What does Priya's brother do?", {"user"}, ["Priya"]) == "What does my brother do?"
    assert without_speakers("Does Priya know the user's brother?", {"user"}, {"Priya"}) == "Does I know my brother?"
    assert without_speakers("Where does Arjun work?", {"user"}, {"Priya"}) is None
    # the user stored with a full name ("Priya Sharma") and greeted by the first: the greeted name still goes
    assert without_speakers("Where does Priya work?", {"Priya Sharma"}, {"Priya"}) == "Where does I work?"
    assert without_speakers("Priya的猫叫什么？", {"user"}, {"Priya"}) == "我的猫叫什么?"


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Hi Priya, of course! Any allergies?", "Priya"),
        ("Welcome back, Priya! How did it go?", "Priya"),
        ("Good morning Priya.", "Priya"),
        ("Thanks, Priya!", "Priya"),
        ("Hi, Priya!", "Priya"),
        ("Congratulations Priya Sharma! Great news.", "Priya Sharma"),
        ("Welcome back, Dr Okafor!", "Okafor"),  # a title is not part of the name
        ("Hi Dr. Okafor!", "Okafor"),
        ("Hi Ms. Chen,", "Chen"),
        ("Hi O'Brien,", "O'Brien"),
        ("Hi Anne-Marie!", "Anne-Marie"),
        ("Hi Zoë Åberg!", "Zoë Åberg"),
        ("Hi Priya\n\nHere is the plan:", "Priya"),
        ("**Hi Priya**, here it is", "Priya"),
        ("Hi Priya — here it is", "Priya"),
        ("Dear Mr Smith,", None),  # a letter the assistant drafts for someone else
        ("Thanks, Sure!", None),
        ("Hello, World!", None),
        ("Hi there, how can I help?", None),  # a word greetings are followed by
        ("Hi again!", None),
        ("Thanks, I will note that.", None),
        ("Sure, Priya, here it is.", None),  # no greeting: "Sure," starts many messages
        ("Hey priya,", None),  # a name is capitalised
        ("Hi Priya and welcome", None),  # the name is followed by punctuation or the end
        ("Here is a draft: Hi Arjun, happy 30th!", None),  # at the start of the message only
    ],
)
def test_the_name_an_assistant_greets_the_user_by(text, name):
    assert addressed_name(text) == name


def test_first_person_rewrite():
    assert first_person("What does the user drink instead of coffee?") == "What does I drink instead of coffee?"
    assert first_person("Where does she work now?") == "Where does I work now?"
    assert first_person("What are the user's kids called?") == "What are my kids called?"
    assert first_person("What is the capital of France?") is None
    assert first_person("Where is the shelter?") is None  # "he" inside a word is not a pronoun
    assert first_person("她的丈夫从事什么职业？") == "我的丈夫从事什么职业？"
    assert first_person("他们周末去哪里？") is None  # plural


class _Embedder:
    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[str] = []
        self.fail_on = fail_on

    def embed_query(self, text: str) -> np.ndarray:
        self.calls.append(text)
        if text == self.fail_on:
            raise RuntimeError("model failed")
        return np.array([1.0, 0.0], dtype=np.float32) if "user" in text else np.array([0.0, 1.0], dtype=np.float32)


def test_transformer_fuses_the_rewrite_and_falls_back_to_the_original():
    emb = _Embedder()
    off = QueryTransformer(first_person=False).vector(emb, "What does the user drink?")
    assert off.tolist() == [1.0, 0.0] and emb.calls == ["What does the user drink?"]
    fused = QueryTransformer(first_person=True).vector(emb, "What does the user drink?")
    assert fused == pytest.approx(np.array([1.0, 1.0]) / np.sqrt(2.0))
    failing = _Embedder(fail_on="What does I drink?")
    back = QueryTransformer(first_person=True).vector(failing, "What does the user drink?")
    assert back.tolist() == [1.0, 0.0]


def test_message_has_content_reads_the_text_without_the_speaker():
    names = {"assistant", "Sam"}
    assert message_has_content("assistant: Got it, thanks for sharing.", "assistant", names) is False
    assert message_has_content("assistant: How long have you been there?", "assistant", names) is False
    assert message_has_content("Sam: I just started at Northwind as a data engineer.", "Sam", names) is True
    assert message_has_content("assistant: Rooibos is caffeine-free.", "assistant", names) is True


@pytest.mark.parametrize(
    ("text", "speaker", "expected"),
    [
        # an assistant asking the user something states nothing about the user, whatever it says beside the question
        ("assistant: That sounds like demanding work. How long have you been doing it?", "assistant", False),
        ("assistant: I hope it goes smoothly. Will someone help you at home afterwards?", "assistant", False),
        ("assistant: 听起来很辛苦。你做这行多久了？", "assistant", False),
        ("assistant: 小猫适应得怎么样", "assistant", False),  # 怎么样 asks without a question mark too
        # without a question its statements keep their content; another speaker's statement beside a question too
        ("assistant: Rooibos is a caffeine-free alternative to coffee.", "assistant", True),
        ("Sam: That sounds like demanding work. How long have you been doing it?", "Sam", True),
    ],
)
def test_an_assistant_question_back_carries_no_content(text, speaker, expected):
    assert message_has_content(text, speaker, {"assistant", "Sam"}) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a question states nothing, however many of the fact's words it repeats; a reaction beside it neither
        ("assistant: How lucky! Did you get a photo of the bittern at Minsmere?", False),
        ("assistant: What a milestone! Where are you thinking of holding the lunch?", False),
        ("Sam: Wow, that's cool, Caroline! What happened at the support group you went to?", False),
        # a statement beside a question keeps the message's content, however short; an exclamation needs more
        ("Sam: I went to Lisbon last week with my sister. Have you been?", True),
        ("Sam: I moved to Berlin. You?", True),
        ("Sam: Guess what? I moved to Berlin.", True),
        ("Sam: Yes! I adopted Biscuit. Want to see a photo?", True),
        # Chinese puts no space after its full stop: the statement is still read apart from the question
        ("Sam: 我上周和姐姐去了里斯本。你去过吗？", True),
        # a Chinese question particle asks without the mark; 呢 before a full stop states
        ("Sam: 你喜欢那里吗", False),
        ("Sam: 你呢", False),
        ("Sam: 你打算去哪儿呢", False),
        # statements that end like questions: 么 in 没什么, 不怎么样, 呢 in a longer clause without a question word
        ("Sam: 我还在考虑要不要搬家呢", True),
        ("Sam: 那家店的味道不怎么样", True),
        ("Sam: 我也不知道为什么", True),
        ("Sam: 还没决定呢。", True),
        ("Sam: Four on, four off.", True),
        ("Sam: Saw a bittern at Minsmere on Sunday, first time in years!", True),
    ],
)
def test_a_message_that_only_asks_has_no_content(text, expected):
    speaker = text.split(":", 1)[0]
    assert message_has_content(text, speaker, {"assistant", "Sam", "Caroline"}) is expected


def _statement(name: str, score: float, when: datetime | None, abstract: str) -> NodeHit:
    return NodeHit(
        uri=SESSION + name,
        owner_space="user:ann",
        context_type="memory",
        score=score,
        occurred_at=when,
        abstract=abstract,
    )


def _embed_topics(texts: list[str]) -> np.ndarray:
    """A stand-in for the model: the topic word of each text as a one-hot vector (a unit test of the rule)."""
    topics = ["amlodipine", "oxfam", "garden"]
    return np.array([[1.0 if t in text.lower() else 0.0 for t in topics] for text in texts], dtype=np.float32)


def test_supersede_orders_the_later_statement_on_the_same_topic_first():
    old = _statement("000001.md", 0.50, datetime(2023, 5, 8), "I take amlodipine 5 mg every morning.")
    new = _statement("000009.md", 0.47, datetime(2023, 9, 1), "The GP has put my amlodipine up to 10 mg.")
    other = _statement("000005.md", 0.49, datetime(2023, 12, 1), "Our garden is a mess.")
    moved = supersede([old, new, other], _embed_topics, same_topic=0.5, margin=0.05)
    assert moved == 1
    assert new.score == pytest.approx(0.5001) and old.score == 0.50 and other.score == 0.49


def test_supersede_leaves_other_topics_wide_gaps_and_failures_alone():
    old = _statement("000001.md", 0.50, datetime(2023, 5, 8), "I volunteer at the Oxfam bookshop on Fridays.")
    far = _statement("000009.md", 0.40, datetime(2023, 9, 1), "I've moved my Oxfam shift to Tuesdays.")
    assert supersede([old, far], _embed_topics, same_topic=0.5, margin=0.05) == 0  # 0.10 below: not made up
    assert far.score == 0.40
    garden = _statement("000010.md", 0.49, datetime(2023, 10, 1), "Our garden is a mess.")
    assert supersede([old, garden], _embed_topics, same_topic=0.5, margin=0.05) == 0  # another topic

    def broken(texts: list[str]) -> np.ndarray:
        raise RuntimeError("model gone")

    near = _statement("000011.md", 0.48, datetime(2023, 11, 1), "I've moved my Oxfam shift to Tuesdays.")
    assert supersede([old, near], broken, same_topic=0.5, margin=0.05) == 0  # skipped, never raised
    assert near.score == 0.48


def _embed_apart(texts: list[str]) -> np.ndarray:
    """Every text on a topic of its own (orthogonal vectors): only the question's words can join two of them."""
    return np.eye(len(texts), dtype=np.float32)


def test_two_statements_holding_a_word_the_question_asks_about_are_on_one_topic():
    query = "Does the user still have credit card debt?"
    debt = _statement("000007.md", 0.274, datetime(2024, 2, 1), "user: I've still got £2,300 on a credit card.")
    paid = _statement("000013.md", 0.254, datetime(2024, 5, 2), "user: Paid the credit card off completely!")
    budget = _statement("000021.md", 0.27, datetime(2024, 8, 1), "user: I've raised my monthly budget to £2,000.")
    assert supersede([debt, paid, budget], _embed_apart, same_topic=0.5, margin=0.05) == 0  # cosines alone: apart
    assert supersede([debt, paid, budget], _embed_apart, same_topic=0.5, margin=0.05, query=query) == 1
    assert paid.score == pytest.approx(0.2741) and debt.score == 0.274 and budget.score == 0.27


def test_the_current_state_marker_speakers_and_words_outside_the_question_join_no_topic():
    query = "What does Sam drink these days?"  # "these days": the marker, not the topic
    monday = _statement("000003.md", 0.30, datetime(2024, 1, 1), "Sam: Busy days at work lately.")
    later = _statement("000009.md", 0.28, datetime(2024, 6, 1), "Sam: These days are long, the days fly.")
    assert supersede([monday, later], _embed_apart, same_topic=0.5, margin=0.05, query=query) == 0
    # "Sam" is the speaker, not the topic; "rooibos" is in both texts but not in the question
    tea = _statement("000004.md", 0.30, datetime(2024, 1, 1), "Sam: Sam here, rooibos is lovely.")
    walk = _statement("000010.md", 0.28, datetime(2024, 6, 1), "Sam: Sam again, rooibos garden walk.")
    assert supersede([tea, walk], _embed_apart, same_topic=0.5, margin=0.05, query="Where does Sam go now?") == 0
    assert walk.score == 0.28


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("Where does she work now?", True),
        ("What is his dog called?", True),
        ("Which craft did they try and dislike?", True),
        ("What does the user drink?", True),
        ("What is the user's job?", True),
        ("用户的猫叫什么？", True),
        ("她的丈夫从事什么职业？", True),
        ("他周末做什么赚外快？", True),
        ("他们周末去哪里？", False),  # plural
        ("其他人怎么说？", False),  # 其他: "other"
        ("What did the assistant recommend to her for sleep?", False),  # the pronoun is beside the assistant
        ("What did you recommend to her?", False),
        ("你给她推荐了什么？", False),
        ("What did you tell the user about sleep?", True),  # the user, named by the role
        ("What user name did I pick?", False),  # "user" without a determiner: no reference to the user
        ("What theory did the hero use?", False),  # "he" inside a word
        ("Where is Shelby?", False),
        ("When is Sam's birthday?", False),
    ],
)
def test_a_reference_to_the_user_without_a_name(query, expected):
    assert refers_to_user(query) is expected


def test_an_echo_by_another_speaker_does_not_supersede_the_statement():
    said = _statement("000023.md", 0.26, datetime(2024, 3, 1), "Ines: I switched from coffee to matcha.")
    echo = _statement("000024.md", 0.255, datetime(2024, 3, 1, 0, 1), "assistant: Switching from coffee to matcha!")
    assert supersede([said, echo], _embed_drinks, same_topic=0.5, margin=0.05) == 0
    assert echo.score == 0.255 and said.score == 0.26
    later = _statement("000031.md", 0.25, datetime(2024, 6, 1), "Ines: Back on coffee, matcha was too grassy.")
    assert supersede([said, echo, later], _embed_drinks, same_topic=0.5, margin=0.05) == 1  # her own: it does
    assert later.score == pytest.approx(0.2601)


def _embed_drinks(texts: list[str]) -> np.ndarray:
    """Every text on the same topic (one vector): only the speakers tell the statements apart here."""
    return np.ones((len(texts), 2), dtype=np.float32)


def test_a_users_later_statement_supersedes_under_another_label_or_after_a_memory():
    fact = _statement("ctx://user/ann/memories/m.md", 0.26, datetime(2024, 1, 1), "I take amlodipine 5 mg.")
    fact.uri = "ctx://user/ann/memories/amlodipine.md"  # a memory, no message: no speaker
    said = _statement("000002.md", 0.255, datetime(2024, 6, 1), "Marta: I take amlodipine 10 mg now.")
    assert supersede([fact, said], _embed_drinks, same_topic=0.5, margin=0.05) == 1
    as_role = _statement("000001.md", 0.26, datetime(2024, 1, 1), "user: I take amlodipine 5 mg.")
    named = _statement("000003.md", 0.255, datetime(2024, 6, 1), "Marta: I take amlodipine 10 mg now.")
    assert supersede([as_role, named], _embed_drinks, same_topic=0.5, margin=0.05) == 1  # one user, two labels
    caroline = _statement("000004.md", 0.26, datetime(2024, 1, 1), "Caroline: I live in Leeds.")
    melanie = _statement("000005.md", 0.255, datetime(2024, 6, 1), "Melanie: I live in York now.")
    assert supersede([caroline, melanie], _embed_drinks, same_topic=0.5, margin=0.05) == 0  # another person


@pytest.mark.parametrize(
    ("message", "plain", "as_evidence"),
    [
        # a user's question about themselves states what it tells of them
        ("Priya: Dev and I have our 10th wedding anniversary on 14 October, any ideas?", False, True),
        ("user: I'm lactose intolerant, can you suggest a recipe?", False, True),
        ("user: 我下个月要去杭州出差，有什么推荐吗？", False, True),
        # a question back, a greeting that asks, a question with too few words of its own: nothing either way
        ("Caroline: What made you decide to adopt?", False, False),
        ("user: Hey, got a minute?", False, False),
        ("Mel: Did I tell you about my new painting?", False, False),
        # the assistant's question states nothing about the user, whatever it says beside it; as evidence its
        # statements count (an agent's confirmation that offers more is an answer)
        ("assistant: I love that you run. How far do you go each week?", False, True),
        (
            "assistant: Done: I booked a table for two at Kiln & Clover, 7pm Friday. Want me to add it to your diary?",
            False,
            True,
        ),
        ("assistant: Of course, what's up?", False, False),
        # an acronym is no first-person word
        ("Sam: Did you visit the US national parks last summer?", False, False),
        # statements are content either way
        ("user: I switched to rooibos.", True, True),
    ],
)
def test_as_evidence_a_question_about_oneself_and_the_assistants_statements_state_content(message, plain, as_evidence):
    speaker = message.split(":", 1)[0]
    assert message_has_content(message, speaker, [speaker]) is plain
    assert message_has_content(message, speaker, [speaker], as_evidence=True) is as_evidence


def _candidates(*lines: tuple[str, str]):
    from context_engine.storage.vector.scoring import L0Match

    session = "ctx://user/p/memories/sessions/c1/"
    by_uri = {
        f"{session}{i:06d}.md": L0Match(f"{session}{i:06d}.md", session, "user:p", "memory", "", f"{who}: {text}", 0.1)
        for i, (who, text) in enumerate(lines, 1)
    }
    return {u: m.text.split(":", 1)[0] for u, m in by_uri.items()}, by_uri


@pytest.mark.parametrize(
    ("query", "lines", "expected"),
    [
        ("Where does Priya work?", [("assistant", "Hi Priya, of course!"), ("user", "I'm a nurse.")], ["Priya"]),
        ("What does Priya Sharma do?", [("assistant", "Thanks, Priya Sharma!")], ["Priya Sharma"]),
        ("Where does Priya work?", [("assistant", "Thanks, Priya Sharma!")], ["Priya"]),  # the first word too
        ("Where does Okafor live?", [("助手", "Welcome back, Dr Okafor!")], ["Okafor"]),  # the Chinese role word
        # a draft for someone the user speaks of: the user's own turn says the name
        (
            "When is Greg coming?",
            [("user", "Text my landlord Greg please."), ("assistant", "Hi Greg, the heater ...")],
            [],
        ),
        ("Where does Tomas live?", [("user", "My landlord Tomas is slow."), ("assistant", "Hi Tomás, here ...")], []),
        ("Where does Tomas work?", [("assistant", "Hi Tomás!")], ["Tomas"]),  # written without its accent
        ("What did Dr Smith prescribe?", [("assistant", "Hi Dr. Okafor!")], []),  # a title is no name
        ("where will the offsite be?", [("assistant", "Hi Will, sure thing!")], []),  # not written as a name
        ("Where does Priya work?", [("user", "Hi Priya!")], []),  # only the assistant greets the user
        ("Where does Priya work?", [("Priya", "I'm a nurse."), ("assistant", "Hi Priya!")], []),  # a speaker already
    ],
)
def test_the_users_greeted_name_among_the_candidates(query, lines, expected):
    from context_engine.retrieval.l0_retriever import _addressed_user

    speaker_of, by_uri = _candidates(*lines)
    names = frozenset(s for s in speaker_of.values() if s)
    assert _addressed_user(query, speaker_of, by_uri, names) == expected


@pytest.mark.parametrize(
    ("query", "speakers", "expected"),
    [
        ("Where does Tomas work?", {"Tomás", "assistant"}, {"Tomás"}),  # written without its accent
        ("Where does Tomás work?", {"Tomas"}, {"Tomas"}),  # stored without it
        ("where does tomas work", {"Tomás"}, set()),  # without its accents only as a name, capitalised
        ("¿qué medicinas tomas por la mañana?", {"Tomás", "user"}, set()),  # "you take", not Tomás
        ("¿dónde vive mía?", {"Mia"}, set()),
        ("where does tomás work", {"Tomás"}, {"Tomás"}),  # with them, in any case
        ("What is Ines's job?", {"Inès"}, {"Inès"}),
        ("Ipek nerede?", {"İpek"}, {"İpek"}),
        ("What did Strauß compose?", {"Strauß"}, {"Strauß"}),
        ("민준은 어디서 일해?", {"민준"}, {"민준"}),  # a Hangul name is no accented letter
        ("Where does Tomasz work?", {"Tomás"}, set()),  # still whole words
    ],
)
def test_a_name_is_found_with_or_without_its_accents(query, speakers, expected):
    assert named_speakers(query, speakers) == expected


def test_the_second_search_takes_an_unaccented_name_out():
    assert without_speakers("Where does Tomas work?", {"Tomás"}) == "Where does work?"
    assert without_speakers("What is Ines's cat called?", {"user"}, {"Inès"}) == "What is my cat called?"
