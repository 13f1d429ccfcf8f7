"""Write the conversation-shapes probe set ``eval/conversations/agent_shapes`` (``turns.jsonl``, ``qa.jsonl``).

Written by us, by hand, for the shapes probe (eval/conversations/README.md, "agent_shapes"): every message and
question below is in this file (the first four shapes copied from the probe's ``data.py``, the fifth written here);
the script only lays them out. No network, no model, no randomness: two runs write byte-identical files.

Six conversations, one per shape the engine was not tuned on: ``echo`` (the assistant echoes and paraphrases each
fact at length), ``dense`` (long user messages packing several facts, short replies), ``openai`` (OpenAI chat
messages: a system prompt per session, the user's ``name``, content parts, assistant ``tool_calls`` and ``tool``
results), ``updates`` (facts changed in later sessions, short acknowledgements) and ``bursts`` (the user sends
several short messages in a row, a later one going on from an earlier one; added 2026-12-07) and ``corrections``
(the user corrects a value in the next message, a few messages later or a session later; added 2026-12-07, later)
and ``requests`` (the user asks the assistant to book, order, cancel or move things; the assistant's reply says
what it did: the evidence is that reply; added 2026-12-07, later).
Messages are written
in the form given to ``add_messages`` and read through the engine's own
:func:`~context_engine.schema.memory.message_fields`, so a row carries what the engine stores: ``role``,
``speaker`` (an OpenAI ``name``: the user's name, a tool's name; ``""`` where there is none) and the text (content
parts joined; an assistant's ``tool_calls`` rendered ``name(arguments)``, the turn format having no place for the
calls themselves).

Files (the layout of ``agent_dev``, see ``make_agent_dev.py``):

* ``turns.jsonl``: ``{conv_id, dia_id, session, session_date_time, speaker, text, role}``; ``conv_id`` is the shape,
  ``dia_id`` ``D<session>:<n>``, ``session_date_time`` the probe's session date at 6 pm (``"6:00 pm on 4 March,
  2024"``).
* ``qa.jsonl``: ``{conv_id, qa_id, question, category, category_name, evidence: [dia_id], shape}``: each answerable
  question twice, ``named`` (it names the person) and ``pronoun`` (he / she / his / her / "the user"), and the
  ``unanswerable`` ones once with ``evidence: []``. Evidence is the user or tool turn(s) holding the answer.

Checks made before writing (a failure raises ``SystemExit``): evidence numbers name user or tool messages, the
unanswerable questions have none, conversation ids unique, session dates increasing.

Usage: ``python eval/conversations/make_agent_shapes.py [--out DIR] [--check]`` (``--check``: compare with the files
in DIR instead of writing; exit 1 when they differ).
"""

from __future__ import annotations

import json
import sys
from datetime import date
from pathlib import Path
from typing import Any

from make_agent_dev import _dump, cli

from context_engine.schema.memory import message_fields

OUT = Path(__file__).resolve().parent / "agent_shapes"

CATEGORIES = {"named": 1, "pronoun": 2, "unanswerable": 6}
"""``category_name`` -> ``category`` (``unanswerable`` is 6, as in ``agent_dev``)."""
EVIDENCE_ROLES = ("user", "tool", "assistant")
"""The roles an evidence turn may have (``assistant`` only in the ``requests`` shape, checked in ``build``)."""


def C(name: str, **arguments: Any) -> dict:
    """An OpenAI assistant message calling one tool (content None, arguments as JSON text)."""
    call = {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


# --------------------------------------------------------------------------------------------------------------
# Shape 1: the assistant ECHOES and paraphrases the user's facts in longer replies, with topical advice.
# --------------------------------------------------------------------------------------------------------------
def U1(text):
    return {"role": "user", "speaker": "Ines", "content": text}


def A(text):
    return {"role": "assistant", "content": text}


ECHO = {
    "name": "echo",
    "space": "ines",
    "sessions": [
        (
            "2024-03-04",
            [
                U1("I start a new job at Halvorsen Logistics next Monday, as a route planning analyst."),  # 1
                A(
                    "Congratulations on the new role at Halvorsen Logistics! Route planning is a great fit given your "
                    "operations research background: optimising delivery routes, fleet schedules and warehouse "
                    "handoffs can be really satisfying work. Are they using any particular optimisation tools?"
                ),  # 2
                U1("They mostly use OR-Tools with Python, and a bit of Gurobi for the big quarterly models."),  # 3
                A(
                    "OR-Tools and Gurobi are a strong pairing. OR-Tools handles vehicle routing problems nicely out of "
                    "the box, while Gurobi shines on large mixed-integer models like your quarterly planning. Python "
                    "makes it easy to glue both together with pandas for the data preparation."
                ),  # 4
                U1("My commute will be annoying though: 50 minutes on the S-Bahn each way from Pankow."),  # 5
                A(
                    "Fifty minutes on the S-Bahn from Pankow each way is a long commute, but it's a good chunk of time "
                    "for reading or podcasts. Many Berlin commuters use that time to unwind, and noise-cancelling "
                    "headphones help a lot on crowded trains."
                ),  # 6
                U1(
                    "I've also signed up for a pottery class on Thursday evenings, to have something away from screens."
                ),  # 7
                A(
                    "A Thursday evening pottery class sounds like a wonderful way to get away from screens! Working "
                    "clay on the wheel is very grounding, and glazing and firing your own mugs and bowls is rewarding. "
                    "Wear clothes you don't mind getting muddy."
                ),  # 8
            ],
        ),
        (
            "2024-04-15",
            [
                U1(
                    "Quick update: my sister Leonie is getting married in Porto in September and I'm a bridesmaid."
                ),  # 9
                A(
                    "How exciting, a September wedding in Porto for your sister Leonie, and you're a bridesmaid! Porto "
                    "in early autumn is lovely: mild weather, the Douro riverside, the port wine cellars in Vila Nova "
                    "de Gaia. Bridesmaid duties can be a lot, so start planning the dress and the travel early."
                ),  # 10
                U1("I'm allergic to shellfish, so I'll have to warn the caterer."),  # 11
                A(
                    "Good thinking to warn the caterer about your shellfish allergy. Portuguese wedding menus often "
                    "feature seafood such as octopus, prawns and clams, so tell them early and carry your adrenaline "
                    "pen just in case."
                ),  # 12
                U1("The pottery is going well, I made a lopsided teapot last week."),  # 13
                A(
                    "A lopsided teapot still counts! Teapots are one of the hardest things to throw, since the spout, "
                    "lid and handle all have to fit. Your Thursday pottery class is clearly paying off."
                ),  # 14
                U1("Work-wise, my manager is Tobias Renner, he's very patient with my questions."),  # 15
                A(
                    "It's great to have a patient manager like Tobias Renner while you're ramping up. Asking lots of "
                    "questions early is the best way to learn the routing models, the data pipelines and the team's "
                    "conventions."
                ),  # 16
            ],
        ),
        (
            "2024-06-02",
            [
                U1("We adopted a rescue greyhound named Pfeffer last weekend."),  # 17
                A(
                    "Welcome home, Pfeffer! Rescue greyhounds make gentle, calm companions; despite their speed they "
                    "are famous couch potatoes. Make sure your garden fence is high enough and keep him on a lead near "
                    "cats and rabbits."
                ),  # 18
                U1("I'm training for the Berlin half marathon next April, running three times a week."),  # 19
                A(
                    "Training for the Berlin half marathon with three runs a week is a solid plan. Mix an easy run, a "
                    "tempo session and a long run at the weekend, build mileage gradually and don't skip rest days. "
                    "Maybe Pfeffer can join you for short jogs!"
                ),  # 20
                U1("My favourite running shoes are the Hoka Clifton, I'm on my third pair."),  # 21
                A(
                    "Hoka Cliftons are a popular choice for half marathon training, with lots of cushioning for long "
                    "runs. Three pairs in, you clearly know what works for your feet. Replace them roughly every 600 "
                    "to 800 km."
                ),  # 22
                U1("Also, I switched from coffee to matcha in the mornings, my stomach is happier."),  # 23
                A(
                    "Switching from coffee to matcha is a nice change: matcha still has caffeine but releases it more "
                    "gently, and many people find it easier on the stomach in the morning. A bamboo whisk makes it "
                    "frothy."
                ),  # 24
            ],
        ),
    ],
    "variant": "pronoun",
    "questions": [
        ("Where does Ines work?", [1], "Where does she work?"),
        (
            "What optimisation software does Ines use at her job?",
            [3],
            "What optimisation software does she use at her job?",
        ),
        ("How long is Ines's commute?", [5], "How long is her commute?"),
        ("What does Ines do on Thursday evenings?", [7], "What does she do on Thursday evenings?"),
        ("Where is Ines's sister getting married?", [9], "Where is her sister getting married?"),
        ("What is Ines allergic to?", [11], "What is she allergic to?"),
        ("What did Ines make in her pottery class?", [13], "What did she make in her pottery class?"),
        ("Who is Ines's manager?", [15], "Who is her manager?"),
        ("What kind of dog did Ines adopt?", [17], "What kind of dog did she adopt?"),
        ("What race is Ines training for?", [19], "What race is she training for?"),
        ("Which running shoes does Ines like?", [21], "Which running shoes does she like?"),
        ("What does Ines drink in the morning now?", [23], "What does she drink in the morning now?"),
    ],
    "unanswerable": [
        "What car does Ines drive?",
        "What is the name of Ines's cat?",
        "Which university did Ines study at?",
    ],
}


# --------------------------------------------------------------------------------------------------------------
# Shape 2: long user messages packing 3-5 facts each, few turns, short assistant replies.
# --------------------------------------------------------------------------------------------------------------
def U2(text):
    return {"role": "user", "speaker": "Rafael", "content": text}


DENSE = {
    "name": "dense",
    "space": "rafael",
    "sessions": [
        (
            "2024-02-10",
            [
                U2(
                    "Let me give you some background so you can help me plan. I'm 41, I live in Leeds with my partner "
                    "Gwen and our two kids, Ada who is nine and Milo who is six. I work as a structural engineer at a "
                    "firm called Brackley & Hume, mostly on bridge refurbishments. I have type 1 diabetes, so anything "
                    "involving meals or exercise has to account for insulin timing."
                ),  # 1
                A("Thanks, that's really helpful context. I'll keep all of that in mind."),  # 2
                U2(
                    "For the summer we're thinking about a two-week trip. Gwen wants somewhere with beaches, the kids "
                    "want a theme park, and I'd like a bit of hiking. Our budget is around £4,500 all in. We can't fly "
                    "before 18 July because Ada's school term ends then, and Milo gets terribly carsick on winding "
                    "roads, so long mountain drives are out."
                ),  # 3
                A(
                    "Got it. Something like the Algarve or Mallorca could work: beaches, a water park and coastal "
                    "walks without long mountain drives."
                ),  # 4
                U2(
                    "Mallorca sounds promising. A bit more about me: I play bass in a covers band called The Loose "
                    "Bolts, and we rehearse on Tuesday nights. I'm trying to cut down on red meat, I've been "
                    "vegetarian on weekdays since January. And I'm learning Spanish on Duolingo, I'm on a 212-day "
                    "streak."
                ),  # 5
                A("Nice! Your Spanish will come in handy in Mallorca."),  # 6
                U2(
                    "One more thing for the planning: Gwen is a night-shift nurse at St James's, she works three "
                    "nights a week, so mornings at home are quiet. My mum, Eileen, lives in Harrogate and usually "
                    "looks after the kids on Saturdays. And we have an old Volvo V70 that I don't trust for long trips "
                    "any more."
                ),  # 7
                A("Understood, thanks for filling me in."),  # 8
            ],
        ),
        (
            "2024-03-22",
            [
                U2(
                    "Update on a few fronts. We booked Mallorca: a villa near Alcúdia from 20 July to 3 August, which "
                    "came to £3,900 with flights from Leeds Bradford. Milo lost his first tooth this week and was very "
                    "proud. At work I've been promoted to associate director, which means more client meetings and "
                    "less design work, and honestly I'm not sure how I feel about that."
                ),  # 9
                A("Congratulations on both the booking and the promotion!"),  # 10
                U2(
                    "Health-wise, my endocrinologist switched me to an insulin pump, an Omnipod, two weeks ago, and my "
                    "HbA1c came back at 52, which is better than last time. I also started swimming on Sunday mornings "
                    "at the Armley leisure centre, 40 lengths each time."
                ),  # 11
                A("That's great progress."),  # 12
                U2(
                    "And the band has a gig at the Brudenell Social Club on 12 April, our first paid one. Ada has "
                    "started violin lessons at school with a teacher called Mr Pellegrini, and she practises every "
                    "evening, which the neighbours may not love."
                ),  # 13
                A("Good luck with the gig!"),  # 14
                U2("Sorry for the long messages, it helps me to write everything down."),  # 15
                A("No problem at all."),  # 16
            ],
        ),
    ],
    "variant": "pronoun",
    "questions": [
        ("How old is Rafael?", [1], "How old is he?"),
        ("What does Rafael do for a living?", [1], "What does he do for a living?"),
        ("What are the names of Rafael's children?", [1], "What are the names of his children?"),
        ("What is Rafael's holiday budget?", [3], "What is his holiday budget?"),
        ("Which of Rafael's kids gets carsick?", [3], "Which of his kids gets carsick?"),
        ("What instrument does Rafael play?", [5], "What instrument does he play?"),
        ("How long is Rafael's Duolingo streak?", [5], "How long is his Duolingo streak?"),
        ("Where does Gwen work?", [7], "Where does his partner work?"),
        ("Who looks after Rafael's kids on Saturdays?", [7], "Who looks after his kids on Saturdays?"),
        ("Where is the family staying in Mallorca?", [9], "Where is his family staying in Mallorca?"),
        ("What is Rafael's new position at work?", [9], "What is his new position at work?"),
        ("Which insulin pump does Rafael use?", [11], "Which insulin pump does he use?"),
        ("Where does Rafael go swimming?", [11], "Where does he go swimming?"),
        ("Where is the band's first paid gig?", [13], "Where is his band's first paid gig?"),
    ],
    "unanswerable": [
        "What is the name of Rafael's dog?",
        "Which football team does Rafael support?",
        "What is Gwen's favourite book?",
    ],
}

# --------------------------------------------------------------------------------------------------------------
# Shape 3: OpenAI chat style: a system message first, `name` for the user, content parts, assistant `tool_calls`
# (content None) and role "tool" results. The turn format has no place for `tool_calls`, so a call's turn is its text
# as the engine renders it (`message_fields`: `name(arguments)`), and a tool result's speaker is the tool's name.
# --------------------------------------------------------------------------------------------------------------
SYSTEM = (
    "You are Compass, a personal assistant with access to calendar, weather, reminder and restaurant tools. "
    "Be concise, confirm bookings, and remember the user's preferences."
)


def U3(text):
    return {"role": "user", "name": "Aroha", "content": [{"type": "text", "text": text}]}


def T(name, text):
    return {"role": "tool", "name": name, "content": text}


OPENAI = {
    "name": "openai",
    "space": "aroha",
    "sessions": [
        (
            "2024-05-06",
            [
                {"role": "system", "content": SYSTEM},  # 1
                U3("Hi! Can you find me a vegan restaurant near Cuba Street for Friday night? Table for three."),  # 2
                C(
                    "restaurant_search", query="vegan", near="Cuba Street, Wellington", date="2024-05-10", party_size=3
                ),  # 3
                T(
                    "restaurant_search",
                    '{"results": [{"name": "Kiln & Clover", "cuisine": "vegan", "rating": 4.6, '
                    '"address": "112 Cuba Street"}, {"name": "Root Theory", "cuisine": "plant-based", "rating": 4.4}]}',
                ),  # 4
                A("Kiln & Clover at 112 Cuba Street is fully vegan and rated 4.6. Shall I book it for 7pm?"),  # 5
                U3("Yes please, 7pm is perfect. I've been vegan for about six years, so always filter for that."),  # 6
                C("book_table", restaurant="Kiln & Clover", time="19:00", date="2024-05-10", party_size=3),  # 7
                T("book_table", '{"status": "confirmed", "confirmation": "KC-88213"}'),  # 8
                A("Booked! Confirmation KC-88213 for three at 7pm on Friday."),  # 9
                U3(
                    "Thanks. Also, my partner Wiremu is gluten-intolerant, keep that in mind for future bookings."
                ),  # 10
                A("Noted: vegan for you and gluten-free options for Wiremu."),  # 11
            ],
        ),
        (
            "2024-05-20",
            [
                {"role": "system", "content": SYSTEM},  # 12
                U3("What's the weather like in Queenstown this weekend? We're heading to Coronet Peak."),  # 13
                C("get_weather", location="Queenstown", days=["2024-05-25", "2024-05-26"]),  # 14
                T(
                    "get_weather",
                    '{"forecast": [{"date": "2024-05-25", "summary": "light snow", "high_c": 3}, '
                    '{"date": "2024-05-26", "summary": "clear", "high_c": 6}]}',
                ),  # 15
                A(
                    "Saturday light snow with a high of 3°C, Sunday clear and 6°C: good conditions at Coronet Peak."
                ),  # 16
                U3("Great. I'm a snowboarder, not a skier, technically. I've been boarding since I was 15."),  # 17
                C("calendar_create", title="Coronet Peak snowboarding", start="2024-05-25"),  # 18
                T("calendar_create", '{"status": "created", "event_id": "evt_5521"}'),  # 19
                U3(
                    "Oh, and please remind me that my passport expires in November; I need to renew it before the "
                    "Japan trip in January."
                ),  # 20
                C(
                    "reminder_create",
                    text="Renew passport (expires November) before Japan trip in January",
                    due="2024-09-01",
                ),  # 21
                T("reminder_create", '{"status": "created", "reminder_id": "rem_118"}'),  # 22
                A("Reminder set for 1 September to renew your passport."),  # 23
                U3("I work from home on Mondays and Fridays, so schedule calls on those days when possible."),  # 24
                A("Understood, I'll prefer Mondays and Fridays for calls."),  # 25
            ],
        ),
    ],
    "variant": "pronoun",
    "questions": [
        ("What diet does Aroha follow?", [6], "What diet does she follow?"),
        ("How long has Aroha been vegan?", [6], "How long has she been vegan?"),
        # the probe's evidence also named assistant turns (5, 7, 9; 9): here only the user and tool turns count
        ("Which restaurant did Aroha book for Friday?", [4], "Which restaurant did she book for Friday?"),
        ("What is the booking confirmation number?", [8], "What is her booking confirmation number?"),
        ("What is the name of Aroha's partner?", [10], "What is the name of her partner?"),
        ("What food intolerance does Wiremu have?", [10], "What food intolerance does her partner have?"),
        ("Where is Aroha going this weekend?", [13], "Where is she going this weekend?"),
        ("Does Aroha ski or snowboard?", [17], "Does she ski or snowboard?"),
        ("How old was Aroha when she started snowboarding?", [17], "How old was she when she started snowboarding?"),
        ("When does Aroha's passport expire?", [20], "When does her passport expire?"),
        ("Where is Aroha travelling in January?", [20], "Where is she travelling in January?"),
        ("Which days does Aroha work from home?", [24], "Which days does she work from home?"),
    ],
    "unanswerable": [
        "What is Aroha's job?",
        "How many siblings does Aroha have?",
        "What is Aroha's favourite film?",
    ],
}


# --------------------------------------------------------------------------------------------------------------
# Shape 4: facts UPDATED in later sessions; questions with pronouns / "the user", "now" and "before".
# --------------------------------------------------------------------------------------------------------------
def U4(text):
    return {"role": "user", "speaker": "Oskar", "content": text}


UPDATES = {
    "name": "updates",
    "space": "oskar",
    "sessions": [
        (
            "2023-09-05",
            [
                U4("I live in Rotterdam, in a small flat near the Markthal."),  # 1
                A("Noted!"),  # 2
                U4("I'm a sous-chef at a seafood restaurant called De Kade."),  # 3
                A("That sounds like intense but fun work."),  # 4
                U4("My dog is a beagle called Bram, he's four."),  # 5
                A("Noted!"),  # 6
                U4("My girlfriend Femke teaches chemistry at a secondary school."),  # 7
                A("Got it."),  # 8
                U4("I cycle to work, it takes about 15 minutes along the Maas."),  # 9
                A("Nice."),  # 10
            ],
        ),
        (
            "2024-01-18",
            [
                U4("Big news: I quit De Kade. I'm head chef at a new bistro, Zout, in Delft."),  # 11
                A("Congratulations, that's a big step!"),  # 12
                U4("Femke and I moved to Delft as well, we rent a house by the canal."),  # 13
                A("Noted!"),  # 14
                U4("Bram hates the steep stairs in the new house, but he loves the canal walks."),  # 15
                A("Ha, noted."),  # 16
                U4("I take the train to visit my parents in Groningen every other weekend."),  # 17
                A("Got it."),  # 18
            ],
        ),
        (
            "2024-06-30",
            [
                U4("Femke got a new job, she's a lab coordinator at TU Delft instead of teaching."),  # 19
                A("Noted, good for her!"),  # 20
                U4("We got a second dog, a border collie puppy named Kiwi."),  # 21
                A("Noted!"),  # 22
                U4("Zout got a glowing review in the NRC, so the bistro is fully booked for weeks."),  # 23
                A("That's fantastic."),  # 24
                U4("My commute is just a five minute walk these days."),  # 25
                A("Noted!"),  # 26
            ],
        ),
    ],
    # (question, evidence, the same question naming Oskar instead of a pronoun / "the user")
    "variant": "named",
    "questions": [
        ("Where does he live now?", [13], "Where does Oskar live now?"),
        ("Where did he live before?", [1], "Where did Oskar live before?"),
        ("Where does the user work now?", [11], "Where does Oskar work now?"),
        ("Which restaurant did he work at before?", [3, 11], "Which restaurant did Oskar work at before?"),
        ("What is the name of his beagle?", [5], "What is the name of Oskar's beagle?"),
        ("How old is his beagle?", [5], "How old is Oskar's beagle?"),
        ("What does his girlfriend do now?", [19], "What does Oskar's girlfriend do now?"),
        (
            "What did his girlfriend do before her new job?",
            [7, 19],
            "What did Oskar's girlfriend do before her new job?",
        ),
        ("How does he get to work now?", [25], "How does Oskar get to work now?"),
        ("How did the user get to work before?", [9], "How did Oskar get to work before?"),
        ("Where do his parents live?", [17], "Where do Oskar's parents live?"),
        ("Which newspaper reviewed his bistro?", [23], "Which newspaper reviewed Oskar's bistro?"),
    ],
    "unanswerable": [
        "What is his sister's name?",
        "Which football club does he support?",
        "How much rent does the user pay?",
    ],
}


# --------------------------------------------------------------------------------------------------------------
# Shape 5: BURSTS: the user sends several short messages in a row (as in a chat app), a later one going on from the
# earlier ("She had a fall ...", "The surgeons ... replaced it ..."); the assistant answers after the burst.
# Written 2026-12-07, before any rule for it (eval/conversations/README.md).
# --------------------------------------------------------------------------------------------------------------
def U5(text):
    return {"role": "user", "speaker": "Noor", "content": text}


BURSTS = {
    "name": "bursts",
    "space": "noor",
    "sessions": [
        (
            "2024-05-02",
            [
                U5("Quick update on my mum."),  # 1
                U5("She had a fall at home last week and broke her hip."),  # 2
                U5("The surgeons at Ninewells replaced it on Tuesday."),  # 3
                A("I'm so sorry to hear that. How is she doing now?"),  # 4
                U5("Better than expected, honestly."),  # 5
                U5("She's already walking with a frame."),  # 6
                A("That's great progress."),  # 7
                U5("I'm staying with my sister Hana for a couple of weeks to help out."),  # 8
                U5("Her place is in Dundee, about ten minutes from the hospital."),  # 9
                A("That sounds like a good plan. Let me know if you need anything organised."),  # 10
            ],
        ),
        (
            "2024-06-11",
            [
                U5("So work finally made a decision."),  # 11
                U5("They're moving our whole team to the Glasgow office in September."),  # 12
                U5("I'll have to commute by train, it's about an hour each way."),  # 13
                A("That's a long commute. Are you thinking of moving closer?"),  # 14
                U5("Maybe next year."),  # 15
                U5("For now I'd rather stay near Mum."),  # 16
                A("Understandable."),  # 17
                U5("Also I started learning the cello."),  # 18
                U5("My teacher is a retired orchestra player called Mr Baird."),  # 19
                U5("Lessons are on Thursday evenings."),  # 20
                A("How lovely! The cello is a beautiful instrument."),  # 21
            ],
        ),
        (
            "2024-08-20",
            [
                U5("Remember the cello?"),  # 22
                U5("I gave it up, it was too much alongside the commute."),  # 23
                U5("I'm learning the ukulele instead, it's much easier to carry around."),  # 24
                A("That makes sense."),  # 25
                U5("And Mum is fully recovered."),  # 26
                U5("She walked the whole length of Broughty Ferry beach with me on Sunday."),  # 27
                A("That's wonderful news!"),  # 28
            ],
        ),
    ],
    # (question, evidence, the same question naming Noor instead of a pronoun / "the user")
    "variant": "named",
    "questions": [
        ("What happened to her mother?", [2], "What happened to Noor's mother?"),
        ("Which hospital operated on her mum?", [3], "Which hospital operated on Noor's mum?"),
        (
            "How is the user's mother getting around after the operation?",
            [6],
            "How is Noor's mother getting around after the operation?",
        ),
        ("Who is she staying with?", [8], "Who is Noor staying with?"),
        ("Where does her sister live?", [9], "Where does Noor's sister live?"),
        ("Where is the user's team being moved to?", [12], "Where is Noor's team being moved to?"),
        ("How long will her commute take?", [13], "How long will Noor's commute take?"),
        ("Why isn't she moving closer to work?", [16], "Why isn't Noor moving closer to work?"),
        ("Who teaches her the cello?", [19], "Who teaches Noor the cello?"),
        ("When are her cello lessons?", [20], "When are Noor's cello lessons?"),
        ("Does the user still play the cello?", [23], "Does Noor still play the cello?"),
        ("Which instrument is she learning now?", [24], "Which instrument is Noor learning now?"),
        ("Where did she go for a walk with her mum?", [27], "Where did Noor go for a walk with her mum?"),
    ],
    "unanswerable": [
        "How old is Noor's mother?",
        "What is Noor's job?",
        "Does Noor have any pets?",
    ],
}


# --------------------------------------------------------------------------------------------------------------
# Shape 6: CORRECTIONS. The user gets something wrong and corrects it, in the next message, a few messages later
# or in a later session; the question asks for the corrected value (added 2026-12-07, before any rule for it).
# --------------------------------------------------------------------------------------------------------------
def U6(text):
    return {"role": "user", "speaker": "Tomas", "content": text}


CORRECTIONS = {
    "name": "corrections",
    "space": "tomas",
    "sessions": [
        (
            "2024-09-03",
            [
                U6("My brother Pavel is coming over from Brno for the weekend of the 14th."),  # 1
                A("Nice! Any plans while he's here?"),  # 2
                U6("A brewery tour, probably. Sorry, I mean the weekend of the 21st, the 14th is my work trip."),  # 3
                A("Got it, the 21st."),  # 4
                U6("I cycle to the office, it's about 12 km each way."),  # 5
                A("That's a solid daily ride."),  # 6
                U6("My locker code at the gym is 4471."),  # 7
                A("Noted."),  # 8
                U6("Oops, typo: the locker code is 4417."),  # 9
                A("Updated to 4417."),  # 10
                U6("Our team standup is at 9:15 every morning."),  # 11
                A("Thanks."),  # 12
            ],
        ),
        (
            "2024-10-08",
            [
                U6("Correction from last time: Pavel flies in from Prague, not Brno. He moved there in summer."),  # 13
                A("Thanks, Prague then."),  # 14
                U6("I've booked the car in for its MOT on Friday at the Halford Road garage."),  # 15
                A("Good to get that done."),  # 16
                U6("Wait, no, it's the Kingsway garage, Halford Road was last year."),  # 17
                A("Kingsway garage, noted."),  # 18
                U6("My landlord is a guy called Derek Shaw."),  # 19
                A("Okay."),  # 20
                U6("The flat's rent is 950 a month."),  # 21
                A("Noted."),  # 22
            ],
        ),
        (
            "2024-11-19",
            [
                U6("I said the standup was at 9:15 but I was wrong, it moved to 9:45 in October."),  # 23
                A("9:45 then."),  # 24
                U6("I'm reading a biography of Ada Lovelace at the moment."),  # 25
                A("How are you finding it?"),  # 26
                U6("Really good. My sister Jana recommended it, she's a maths teacher in Leeds."),  # 27
                A("Sounds like a good recommendation."),  # 28
                U6("My mistake earlier, Jana teaches physics, not maths."),  # 29
                A("Physics, got it."),  # 30
                U6("I ride about 12 km to work, so let's make that 14 km, I measured it properly."),  # 31
                A("14 km, noted."),  # 32
            ],
        ),
    ],
    "variant": "named",
    "questions": [
        ("Which weekend is his brother visiting?", [3], "Which weekend is Tomas's brother visiting?"),
        ("What is the user's gym locker code?", [9], "What is Tomas's gym locker code?"),
        ("Where is his brother flying in from?", [13], "Where is Tomas's brother flying in from?"),
        ("Which garage is doing his car's MOT?", [17], "Which garage is doing Tomas's car's MOT?"),
        ("What time is the user's team standup?", [23], "What time is Tomas's team standup?"),
        ("What subject does his sister teach?", [29], "What subject does Tomas's sister teach?"),
        ("How far does he cycle to work?", [31], "How far does Tomas cycle to work?"),
        ("Who is his landlord?", [19], "Who is Tomas's landlord?"),
        ("What book is the user reading?", [25], "What book is Tomas reading?"),
    ],
    "unanswerable": [
        "What is Tomas's car's registration number?",
        "How old is Tomas's brother?",
        "What is Tomas's job?",
    ],
}


# --------------------------------------------------------------------------------------------------------------
# Shape 7: REQUESTS. The user asks the assistant to do things; the assistant's reply says what it did, with the
# specifics the questions ask for (added 2026-12-07, before any rule for it). Evidence is the assistant's reply.
# --------------------------------------------------------------------------------------------------------------
def U7(text):
    return {"role": "user", "speaker": "Lena", "content": text}


REQUESTS = {
    "name": "requests",
    "space": "lena",
    "sessions": [
        (
            "2024-09-10",
            [
                U7("Can you book me a flight to Oslo for the workshop next Thursday? Morning if possible."),  # 1
                A("Booked: SAS flight SK1462 from Heathrow at 07:15 on Thursday 19 September, seat 14A."),  # 2
                U7("Thanks! And somewhere to stay for two nights."),  # 3
                A(
                    "I've reserved two nights at the Hotel Bondeheimen, 19-21 September, booking reference BH-5520."
                ),  # 4
                U7("Please remind me to water the tomatoes while I'm away."),  # 5
                A(
                    "I've set a reminder for 6 pm on Thursday and Friday: ask Marek next door to water the tomatoes."
                ),  # 6
                U7("Great."),  # 7
            ],
        ),
        (
            "2024-10-02",
            [
                U7("Could you find me a physio near work? My knee is playing up again."),  # 8
                A(
                    "I found Riverside Physio on Carter Lane and booked you with Amira Haddad, Monday 7 October, 12:30."
                ),  # 9
                U7("Perfect, thank you."),  # 10
                A("You're welcome."),  # 11
                U7("I'd like to cancel the meal-kit deliveries, we never cook them."),  # 12
                A("Done: your HelloFresh plan is cancelled and the last box arrives on 9 October."),  # 13
                U7("What did you do about the broadband renewal?"),  # 14
                A("I switched you to the Community Fibre 500 Mb plan at £25 a month, starting 1 November."),  # 15
            ],
        ),
        (
            "2024-11-14",
            [
                U7("Can you order a birthday present for my nephew Tomek? He's turning eight."),  # 16
                A(
                    "I ordered a Lego Technic race car set, £34.99, delivered to your sister's address by 20 November."
                ),  # 17
                U7("Lovely. And move my dentist appointment, I can't make it on Tuesday."),  # 18
                A("Your dentist appointment with Dr Ruiz is now on Friday 22 November at 9:40 am."),  # 19
                U7("Thanks, that works."),  # 20
                A("Anything else?"),  # 21
            ],
        ),
    ],
    "variant": "named",
    "questions": [
        ("Which flight is the user taking to Oslo?", [2], "Which flight is Lena taking to Oslo?"),
        ("Where is she staying in Oslo?", [4], "Where is Lena staying in Oslo?"),
        ("Who is watering her tomatoes?", [6], "Who is watering Lena's tomatoes?"),
        ("Which physio is the user seeing for her knee?", [9], "Which physio is Lena seeing for her knee?"),
        ("Which meal-kit service did she cancel?", [13], "Which meal-kit service did Lena cancel?"),
        ("What broadband plan is the user on from November?", [15], "What broadband plan is Lena on from November?"),
        ("What present was ordered for her nephew?", [17], "What present was ordered for Lena's nephew?"),
        ("When is her dentist appointment now?", [19], "When is Lena's dentist appointment now?"),
    ],
    "unanswerable": [
        "What is Lena's frequent flyer number?",
        "How old is Lena's sister?",
        "Which gym does Lena go to?",
    ],
}

CONVERSATIONS = (ECHO, DENSE, OPENAI, UPDATES, BURSTS, CORRECTIONS, REQUESTS)


def _fail(conv: dict, message: str) -> SystemExit:
    return SystemExit(f"make_agent_shapes: {conv['name']}: {message}")


def _when(day: str) -> str:
    """``"2024-03-04"`` as the session time the probe wrote its messages at (6 pm), in LoCoMo's form."""
    d = date.fromisoformat(day)
    return f"6:00 pm on {d.day} {d.strftime('%B')}, {d.year}"


def build(conv: dict) -> tuple[list[dict], list[dict]]:
    """One conversation's rows of ``turns.jsonl`` and ``qa.jsonl``.

    Raises:
        SystemExit: a check failed (module docstring).
    """
    turns: list[dict] = []
    dia: dict[int, str] = {}  # the probe's 1-based message number -> dia_id
    days = [day for day, _ in conv["sessions"]]
    if days != sorted(set(days)):
        raise _fail(conv, f"session dates not strictly increasing: {days}")
    for s, (day, messages) in enumerate(conv["sessions"], start=1):
        for n, raw in enumerate(messages, start=1):
            m = message_fields(raw)
            dia[len(dia) + 1] = f"D{s}:{n}"
            turns.append(
                {
                    "conv_id": conv["name"],
                    "dia_id": f"D{s}:{n}",
                    "session": f"session_{s}",
                    "session_date_time": _when(day),
                    "speaker": m.get("speaker") or "",
                    "text": m["content"],
                    "role": m["role"],
                }
            )
    role = {dia[k]: turns[k - 1]["role"] for k in dia}
    qa: list[dict] = []

    def row(question: str, name: str, evidence: list[int]) -> None:
        allowed = EVIDENCE_ROLES if conv["name"] == "requests" else ("user", "tool")
        if any(e not in dia or role[dia[e]] not in allowed for e in evidence):
            raise _fail(conv, f"{question!r}: evidence {evidence} is not all {' or '.join(allowed)} messages")
        qa.append(
            {
                "conv_id": conv["name"],
                "qa_id": f"{conv['name']}#{len(qa)}",
                "question": question,
                "category": CATEGORIES[name],
                "category_name": name,
                "evidence": [dia[e] for e in evidence],
                "shape": conv["name"],
            }
        )

    for question, evidence, variant in conv["questions"]:
        if not evidence:
            raise _fail(conv, f"{question!r}: an answerable question with no evidence")
        forms = {conv["variant"]: variant, ("named" if conv["variant"] == "pronoun" else "pronoun"): question}
        row(forms["named"], "named", evidence)
        row(forms["pronoun"], "pronoun", evidence)
    for question in conv["unanswerable"]:
        row(question, "unanswerable", [])
    return turns, qa


def generate(conversations: tuple[dict, ...] = CONVERSATIONS) -> tuple[bytes, bytes, dict[str, int]]:
    """Both files' bytes (UTF-8, one JSON object a line, ``\\n`` endings) and counts by what they hold.

    Raises:
        SystemExit: a check failed (module docstring).
    """
    names = [c["name"] for c in conversations]
    if len(set(names)) != len(names):
        raise SystemExit("make_agent_shapes: repeated conversation id")
    turns: list[dict] = []
    qa: list[dict] = []
    for conv in conversations:
        t, q = build(conv)
        turns += t
        qa += q
    counts = {"conversations": len(names), "turns": len(turns), "questions": len(qa)}
    for r in turns:
        counts[f"role:{r['role']}"] = counts.get(f"role:{r['role']}", 0) + 1
    for r in qa:
        counts[f"q:{r['category_name']}"] = counts.get(f"q:{r['category_name']}", 0) + 1
    return _dump(turns), _dump(qa), counts


def main(argv: list[str] | None = None) -> int:
    return cli(argv, generate, OUT, __doc__.split("\n\n")[0])


if __name__ == "__main__":
    sys.exit(main())
