"""A tiny synthetic conversation set in the LoCoMo file layout (turns.jsonl, qa.jsonl), written by us for the tests.

Two conversations: ``alpha`` (Nora and Theo, three sessions, 30 turns) and ``beta`` (Ines and Omar, one session,
6 turns, with facts that would answer alpha's questions wrongly, so cross-conversation leaks are visible).
"""

from __future__ import annotations

import json
from pathlib import Path

ALPHA = {
    ("session_1", "10:05 am on 3 March, 2024"): [
        ("Nora", "Hi Theo! I finally adopted a dog last weekend, a grey whippet called Biscuit."),
        ("Theo", "Congratulations! How is Biscuit settling in?"),
        ("Nora", "She sleeps twenty hours a day and steals socks."),
        ("Theo", "Ha, typical. I started a pottery class at the community studio on Tuesdays."),
        ("Nora", "That sounds relaxing. What are you making?"),
        ("Theo", "Mostly lopsided bowls so far, but the glaze colours are lovely."),
        ("Nora", "Send me a photo when one comes out of the kiln."),
        ("Theo", "Will do. How is the new job at the observatory?"),
        ("Nora", "Busy. I calibrate the spectrograph every night before the telescope opens."),
        ("Theo", "Night shifts must be tough."),
        ("Nora", "I drink a lot of jasmine tea to stay awake."),
    ],
    ("session_2", "7:40 pm on 19 April, 2024"): [
        ("Theo", "Guess what, my bowl won second prize at the spring craft fair!"),
        ("Nora", "No way, the lopsided one?"),
        ("Theo", "The judges called it organic."),
        ("Nora", "Biscuit ate a whole loaf of sourdough off the counter yesterday."),
        ("Theo", "Is she alright?"),
        ("Nora", "The vet said she is fine, just bloated."),
        ("Theo", "I am thinking of moving to Lisbon next year."),
        ("Nora", "Lisbon! Because of the climate?"),
        ("Theo", "Partly, and my sister opened a bakery there."),
        ("Nora", "Then you will never run out of pastries."),
    ],
    ("session_3", "8:15 am on 2 June, 2024"): [
        ("Nora", "We spotted a comet from the observatory last night, it was faint but beautiful."),
        ("Theo", "Did it have a name?"),
        ("Nora", "Not yet, it is still being confirmed by another team."),
        ("Theo", "I signed the lease for a flat in Lisbon near my sister's bakery."),
        ("Nora", "So the move is really happening. When do you leave?"),
        ("Theo", "In September, right after the last pottery class."),
        ("Nora", "I will visit with Biscuit if they let whippets on trains."),
        ("Theo", "Bring socks, she will need something to steal."),
        ("Nora", "Ha! I will miss our chats."),
    ],
}
BETA = {
    ("session_1", "3:00 pm on 5 May, 2024"): [
        ("Ines", "My parrot Biscuit learned to whistle the news jingle."),
        ("Omar", "I joined a pottery class too, on Fridays."),
        ("Ines", "I am moving to Oslo for a research job."),
        ("Omar", "Oslo is cold, bring a good coat."),
        ("Ines", "I only drink coffee, never tea."),
        ("Omar", "Coffee keeps me going on my night shifts at the hospital."),
    ],
}

# qa: (conv, qa_id, question, category, category_name, evidence dia ids)
QUESTIONS = [
    ("alpha", "alpha#0", "What is the name of Nora's whippet?", 4, "single-hop", ["D1:1"]),
    ("alpha", "alpha#1", "What prize did Theo's bowl win at the craft fair?", 4, "single-hop", ["D2:1"]),
    ("alpha", "alpha#2", "When did Theo sign the lease for a flat in Lisbon?", 2, "temporal", ["D3:4"]),
    ("alpha", "alpha#3", "Why is Theo moving to Lisbon?", 1, "multi-hop", ["D2:7", "D2:9", "D3:4"]),
    ("alpha", "alpha#4", "What does Nora drink to stay awake during night shifts?", 4, "single-hop", ["D1:11"]),
    ("alpha", "alpha#5", "What did Biscuit eat off the counter?", 4, "single-hop", ["D2:4"]),
    ("alpha", "alpha#6", "What instrument does Nora calibrate every night?", 3, "open-domain", ["D1:9", "D9:99"]),
    ("alpha", "alpha#7", "What did Nora see from the observatory?", 5, "adversarial", ["D3:1"]),
    ("alpha", "alpha#8", "What is Theo's favourite colour?", 5, "adversarial", []),  # no evidence: unjudged
    ("beta", "beta#0", "Where is Ines moving for her research job?", 4, "single-hop", ["D1:3"]),
]


def turn_rows() -> list[dict]:
    rows = []
    for conv, sessions in (("alpha", ALPHA), ("beta", BETA)):
        for n, ((session, when), turns) in enumerate(sessions.items(), start=1):
            for i, (speaker, text) in enumerate(turns, start=1):
                rows.append(
                    {
                        "conv_id": conv,
                        "dia_id": f"D{n}:{i}",
                        "session": session,
                        "session_date_time": when,
                        "speaker": speaker,
                        "text": text,
                    }
                )
    return rows


def qa_rows() -> list[dict]:
    return [
        {"conv_id": c, "qa_id": q, "question": text, "category": cat, "category_name": name, "evidence": ev}
        for c, q, text, cat, name, ev in QUESTIONS
    ]


def write_conversations(root: Path, turns: list[dict] | None = None, qa: list[dict] | None = None) -> Path:
    """Write the set (or the rows given) as ``root/turns.jsonl`` and ``root/qa.jsonl``; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for name, rows in (("turns.jsonl", turns or turn_rows()), ("qa.jsonl", qa or qa_rows())):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return root
