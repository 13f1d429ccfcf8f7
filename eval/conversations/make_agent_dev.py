"""Write the agent-shaped conversation set ``eval/conversations/agent_dev`` (``turns.jsonl``, ``qa.jsonl``).

Written by us, by hand: every fact, reply and question below is in this file; the script only lays them out. No
network, no model, no randomness that is not seeded: two runs write byte-identical files.

Shape (what an AI agent stores): each conversation is one human user talking to an assistant over 3-5 sessions.
User turns state personal facts in the first person (some several in one turn, some with numbers, ids or dates) or
are chit-chat; every user turn is followed by an assistant turn: an acknowledgement drawn from :data:`ACKS` (seeded
by the conversation id) unless the conversation gives a reply (a question back, or an informative reply that reuses
some of the fact's words). Some sessions open or close with a chit-chat exchange from :data:`OPENERS` /
:data:`CLOSERS`. Half of the conversations name the user (``speaker`` is the name), the other half leave the
speaker empty; assistant turns have ``role`` ``assistant`` and speaker ``""`` or ``"assistant"``.

Files (the LoCoMo layout of ``../shared/data/locomo_dev`` plus ``role``):

* ``turns.jsonl``: ``{conv_id, dia_id, session, session_date_time, speaker, text, role}``; ``dia_id`` is
  ``D<session>:<n>``, ``session_date_time`` like ``"1:56 pm on 8 May, 2023"``.
* ``qa.jsonl``: ``{conv_id, qa_id, question, category, category_name, evidence: [dia_id]}``; categories
  :data:`CATEGORIES`; evidence is always the user turn(s) holding the fact; ``unanswerable`` questions have ``[]``.

Checks made before writing (a failure raises ``SystemExit``): keys unique and known, multi-hop evidence in two
sessions or more, an updated fact's evidence later than the fact it replaces, no word an unanswerable question is
about in its conversation, the minimum counts (12 conversations, 220 answerable, 60 unanswerable questions).

Usage: ``python eval/conversations/make_agent_dev.py [--out DIR] [--check]`` (``--check``: compare with the files
in DIR instead of writing; exit 1 when they differ).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).resolve().parent / "agent_dev"

CATEGORIES = {"third-person": 1, "paraphrase": 2, "temporal": 3, "multi-hop": 4, "updated": 5, "unanswerable": 6}
"""``category_name`` -> ``category`` (the number LoCoMo's files carry beside the name)."""

ACKS = (
    "Got it, thanks for sharing.",
    "Noted!",
    "Good to know!",
    "Thanks for letting me know.",
    "Understood.",
    "Okay, I'll keep that in mind.",
    "Thanks, noted.",
    "Got it!",
    "Makes sense.",
    "I'll remember that.",
    "Thanks for the update!",
    "Appreciate you telling me.",
    "Okay, noted for later.",
    "Alright, got it.",
    "Good to hear.",
    "Thanks for filling me in.",
)
"""Pure acknowledgements: the assistant's reply to a user turn that the conversation gives no reply for."""

OPENERS = (
    ("Hi again!", "Hi! What can I help with today?"),
    ("Hey, got a minute?", "Of course, what's up?"),
    ("Hello there!", "Hello! How can I help?"),
    ("Hello, me again.", "Welcome back!"),
    ("Quick question before I forget.", "Sure, go ahead."),
    ("Phew, long day here.", "Let's keep this easy then."),
    ("Hiya.", "Hi there!"),
    ("Back again, sorry for the gap.", "No need to apologise, good to hear from you."),
    ("Hey hey.", "Hey! What's new?"),
    ("Hello! Hope you're well.", "I'm here and ready to help. What's on your mind?"),
)
"""Chit-chat exchanges (user, assistant) that may open a session: no fact."""

CLOSERS = (
    (
        "Can you give me a tip for staying focused in the afternoon?",
        "Short breaks every hour and a glass of water help more than people expect.",
    ),
    (
        "What's a good way to remember things I need to do?",
        "A single running list you check each morning works well for most people.",
    ),
    ("Thanks, that's really helpful.", "Glad it helped!"),
    ("Okay, that's everything for today.", "Thanks for checking in. Talk soon!"),
    ("Can you summarise what we talked about?", "Sure: I've noted the updates you shared today."),
    ("Let me think about it and get back to you.", "Take your time."),
    ("Haha, fair enough.", "Ha, indeed."),
    (
        "What's a polite way to decline a meeting?",
        "Something like: thanks for the invite, I can't make it, but I'm happy to catch up on the notes.",
    ),
    ("Sorry, got distracted.", "No problem at all."),
    ("Bye for now!", "Bye! Speak soon."),
    ("Remind me to be kinder to myself this week.", "Consider it noted: be kind to yourself this week."),
    ("Right, I should get going.", "Of course, catch you later."),
)
"""Chit-chat exchanges (user, assistant) that may close a session: no fact."""

Line = tuple[str | None, str, str | None]
"""A user turn: ``(fact key or None for chit-chat, text, assistant reply or None for an acknowledgement)``."""
Ask = tuple[str, str, tuple[str, ...], tuple[str, ...]]
"""A question: ``(category_name, text, evidence keys, extra)``; ``extra``: the superseded keys of an ``updated``
question, the words that must not occur in the conversation for an ``unanswerable`` one, else ``()``."""


@dataclass(frozen=True)
class Conversation:
    """One user with the assistant: ``sessions`` = ``[(session_date_time, [Line, ...]), ...]``."""

    conv_id: str
    user: str
    assistant: str
    sessions: tuple[tuple[str, tuple[Line, ...]], ...]
    questions: tuple[Ask, ...]


def S(when: str, *lines: Line) -> tuple[str, tuple[Line, ...]]:
    """A session: its time and its user turns."""
    return (when, lines)


def q(category: str, text: str, *keys: str) -> Ask:
    """An answerable question (third-person, paraphrase, temporal, multi-hop)."""
    return (category, text, keys, ())


def upd(text: str, keys: tuple[str, ...], superseded: tuple[str, ...]) -> Ask:
    """An ``updated`` question: ``keys`` hold the current value, ``superseded`` the earlier one(s) it replaces."""
    return ("updated", text, keys, superseded)


def none(text: str, *absent: str) -> Ask:
    """An ``unanswerable`` question; ``absent``: words (whole words, any case) the conversation must not contain."""
    return ("unanswerable", text, (), absent)


CONVERSATIONS: tuple[Conversation, ...] = (
    Conversation(
        "agent-01",
        "Sam",
        "",
        (
            S(
                "1:56 pm on 8 May, 2023",
                (
                    "job",
                    (
                        "I just started at Northwind as a data engineer. First week was mostly onboarding and fighting "
                        "with Airflow permissions."
                    ),
                    "How are you finding the team so far?",
                ),
                (None, "Pretty good, everyone's been friendly.", "Glad to hear it!"),
                (
                    "coffee",
                    "I switched to rooibos, coffee was wrecking my sleep.",
                    "Rooibos is a nice caffeine-free alternative to coffee, it shouldn't keep you up at night.",
                ),
                ("city_old", "I'm still in Leeds for now, sharing a flat with two friends from uni.", None),
                (
                    "laptop",
                    "Work gave me a 14-inch MacBook Pro, but I still prefer my ThinkPad for personal stuff.",
                    None,
                ),
                (
                    None,
                    "Can you remind me how to write a cron expression for every weekday at 7am?",
                    "Sure: 0 7 * * 1-5 runs at 07:00 Monday to Friday.",
                ),
            ),
            S(
                "10:12 am on 2 June, 2023",
                ("cat", "We adopted a cat last Sunday! A tabby called Miso.", "Lovely! How is Miso settling in?"),
                (None, "She's mostly hiding under the sofa.", None),
                (
                    "sister",
                    "My sister Alice is getting married in September in Galway and I'm going to be her best person.",
                    None,
                ),
                ("manager", "My manager at Northwind is Deepak, he's very hands-off, which I like.", None),
                (
                    "climb",
                    "I've started bouldering twice a week at a wall near the canal.",
                    "Bouldering is a great full-body workout, just go easy on your fingers at first.",
                ),
            ),
            S(
                "7:45 pm on 19 August, 2023",
                (
                    "move",
                    "Big news: I accepted a transfer and I'm moving to Lisbon at the end of the month.",
                    "Exciting! Will you keep the same role from there?",
                ),
                (None, "Yes, same job, they have a small office there.", None),
                ("portuguese", "I'm doing Portuguese on Duolingo every night, 40-day streak so far.", None),
                (
                    "allergy",
                    "Also I found out I'm allergic to shellfish, which is going to be awkward over there.",
                    "Portuguese cooking uses a lot of seafood, so it's worth learning the words for shellfish.",
                ),
                (None, "Anyway, I have boxes to pack.", "Good luck with the packing!"),
            ),
            S(
                "9:03 am on 14 October, 2023",
                ("lisbon_now", "Settled in now. We rented a flat in Alfama with a tiny balcony.", None),
                (
                    "drink_update",
                    "Funny thing, I'm back on coffee, but just one espresso before noon.",
                    "A single espresso before midday is much less likely to affect your sleep.",
                ),
                ("wedding", "Alice's wedding was lovely. I gave a speech and only cried a little.", None),
                (
                    "promotion",
                    "And I got promoted to senior data engineer last week.",
                    "Congratulations! Does that change what you work on?",
                ),
                (None, "More mentoring, fewer pipelines.", None),
            ),
        ),
        (
            q("third-person", "What company does Sam work for?", "job"),
            q("third-person", "What is the name of Sam's cat?", "cat"),
            q("third-person", "What kind of laptop did work give Sam?", "laptop"),
            q("third-person", "Who is Sam's manager?", "manager"),
            q("third-person", "What is the user allergic to?", "allergy"),
            q("paraphrase", "Where is Sam employed?", "job"),
            q("paraphrase", "What did Sam start drinking when caffeine was ruining their nights?", "coffee"),
            q("paraphrase", "What kind of climbing does the user do every week?", "climb"),
            q("paraphrase", "How is Sam working on the local language before relocating?", "portuguese"),
            q("temporal", "When did Sam adopt Miso?", "cat"),
            q("temporal", "When did Sam decide to move to Lisbon?", "move"),
            q("temporal", "When did Sam get promoted?", "promotion"),
            q("multi-hop", "Which city did Sam move to, and which company transferred them there?", "move", "job"),
            q("multi-hop", "What did Sam do at the wedding of the sister who married in Galway?", "sister", "wedding"),
            upd("Where does Sam live now?", ("move", "lisbon_now"), ("city_old",)),
            upd("What does Sam drink in the morning these days?", ("drink_update",), ("coffee",)),
            upd("What is Sam's job title now?", ("promotion",), ("job",)),
            none("What is Sam's favourite band?", "band", "music", "song"),
            none("How old is Sam?", "years old", "age", "birthday"),
            none("What car does Sam drive?", "car", "drive"),
            none("What is the name of Sam's partner?", "partner", "wife", "husband", "girlfriend", "boyfriend"),
            none("What is the capital of France?", "france", "paris"),
        ),
    ),
    Conversation(
        "agent-02",
        "",
        "",
        (
            S(
                "8:20 am on 3 February, 2024",
                (
                    "run_goal",
                    "I signed up for the Bristol half marathon in May, my first one ever.",
                    "That's a great goal! How many times a week are you running at the moment?",
                ),
                ("run_freq", "Three times a week, usually 5k, plus a long run on Sundays.", None),
                (
                    "allergy",
                    "Just so you know, I'm allergic to penicillin. It gave me hives as a kid.",
                    "Thanks, I'll remember the penicillin allergy. "
                    "It's worth making sure it's on your medical records.",
                ),
                ("diet_old", "I've been vegetarian for about six years.", None),
                (None, "Ok that's all for now, cheers.", "Cheers, talk soon!"),
            ),
            S(
                "6:40 pm on 27 February, 2024",
                (
                    "knee",
                    "Ugh. Twisted my left knee on a trail run this Saturday.",
                    "Oh no, is it swollen? Can you put weight on it?",
                ),
                ("physio", "A bit swollen. The GP referred me to a physio called Joanne at the Clifton clinic.", None),
                (
                    "sleep",
                    "I'm also trying to fix my sleep, aiming for lights out by 10:30.",
                    "A consistent lights-out time like 10:30 really helps your body clock.",
                ),
                (
                    "job",
                    "Being a paramedic doesn't help, the night shifts at the ambulance station wreck my rhythm.",
                    "How many nights do you usually do in a row?",
                ),
                ("shifts", "Four on, four off.", None),
            ),
            S(
                "9:15 am on 12 April, 2024",
                (
                    "cleared",
                    "Physio's done! Joanne cleared me to run again last Thursday.",
                    "Great news! Are you easing back in slowly?",
                ),
                (
                    "race_update",
                    "I've dropped down to the 10k in May instead of the half, not enough time to build back up.",
                    "Switching to the 10k is a sensible call after an injury.",
                ),
                (
                    "diet_new",
                    "I've started eating fish again, so pescatarian now I guess. My iron was really low.",
                    None,
                ),
                (
                    "iron",
                    "The doctor put me on ferrous sulphate, 200 mg once a day.",
                    "Iron tablets are best absorbed on an empty stomach, ideally with some vitamin C.",
                ),
                (None, "Anyway, enough medical stuff!", "Happy to chat about anything."),
            ),
            S(
                "7:30 pm on 20 May, 2024",
                ("race_done", "Finished the 10k on Sunday in 52:40!", "Amazing! Is that a personal best?"),
                (None, "Yep, by almost two minutes.", None),
                ("shoes", "Retiring my old trainers. I bought a pair of Brooks Ghost 15s.", None),
                (
                    "tri",
                    "Thinking about a triathlon next year, but I can't swim front crawl yet.",
                    "Plenty of beginners learn front crawl in a few months with lessons.",
                ),
            ),
        ),
        (
            q("third-person", "What is the user allergic to?", "allergy"),
            q("third-person", "Which half marathon did the user sign up for?", "run_goal"),
            q("third-person", "What is the name of the user's physio?", "physio"),
            q("third-person", "What brand of running shoes did they buy?", "shoes"),
            q("third-person", "What was the user's finishing time in the 10k?", "race_done"),
            q("paraphrase", "Which antibiotic does the user react badly to?", "allergy"),
            q("paraphrase", "What does the user do for a living?", "job"),
            q("paraphrase", "What bedtime is the user aiming for?", "sleep"),
            q("paraphrase", "What supplement did the doctor prescribe them, and at what dose?", "iron"),
            q("temporal", "When did the user hurt their knee?", "knee"),
            q("temporal", "When was the user told they could start running again?", "cleared"),
            q("temporal", "When did the user run their 10k race?", "race_done"),
            q(
                "multi-hop",
                "What injury made the user switch from the half marathon to the 10k?",
                "knee",
                "race_update",
            ),
            q(
                "multi-hop",
                "What was the user's time in the race they switched to after the injury?",
                "race_update",
                "race_done",
            ),
            q(
                "multi-hop",
                "Who treated the user's knee, and when did she say they could run again?",
                "physio",
                "cleared",
            ),
            upd("What diet does the user follow now?", ("diet_new",), ("diet_old",)),
            upd("Which distance did the user end up racing in May?", ("race_update",), ("run_goal",)),
            none("What is the user's blood type?", "blood type"),
            none("Does the user have any children?", "children", "son", "daughter"),
            none("Which gym is the user a member of?", "gym"),
            none("What is the user's home address?", "address", "street"),
            none("How many legs does a spider have?", "spider"),
        ),
    ),
    Conversation(
        "agent-03",
        "Priya",
        "assistant",
        (
            S(
                "11:05 am on 15 January, 2023",
                (
                    "kids",
                    "I have two kids, Arjun who is 7 and Meera who just turned 4.",
                    "Lovely! What are they into at the moment?",
                ),
                ("interests", "Arjun is obsessed with dinosaurs and Meera only wants to draw.", None),
                ("school", "Arjun goes to Hillcrest Primary, he's in year 3.", None),
                ("home_old", "We're in a two-bed flat in Wembley at the moment, it's getting a bit tight.", None),
                (
                    "partner",
                    "My husband Dev works shifts at Heathrow, so I do most of the school runs.",
                    "Juggling school runs around airport shift patterns sounds demanding.",
                ),
                (None, "Sorry, I'm rambling.", "Not at all, it's helpful context."),
            ),
            S(
                "4:30 pm on 2 March, 2023",
                (
                    "mum_bday",
                    "My mum's 70th birthday is on 22 April and we're planning a surprise lunch.",
                    "What a milestone! Where are you thinking of holding it?",
                ),
                ("venue", "Probably Saffron House, her favourite Gujarati place.", None),
                (
                    "peanut",
                    "Meera was diagnosed with a peanut allergy last week, so we carry an EpiPen everywhere now.",
                    "It's worth letting her nursery know about the peanut allergy and where the EpiPen is kept.",
                ),
                ("nursery", "She goes to Little Acorns three mornings a week.", None),
                ("job", "I'm going back to work part-time in April, as a pharmacist at Boots.", None),
            ),
            S(
                "8:50 pm on 30 April, 2023",
                (
                    "lunch_done",
                    (
                        "The surprise lunch went perfectly. Mum cried when she saw her sister who'd come down from "
                        "Leicester."
                    ),
                    "That sounds wonderful. Did she have any idea?",
                ),
                (None, "None at all!", None),
                ("work_back", "First week back done. The pharmacy is much busier than I remembered.", None),
                (
                    "swim",
                    "Arjun started swimming lessons on Saturday mornings.",
                    "Saturday morning swimming lessons are a great routine for kids his age.",
                ),
            ),
            S(
                "9:10 am on 5 September, 2023",
                (
                    "house",
                    "We moved house in August! We're in Harrow now, near Dev's parents.",
                    "How is the new place?",
                ),
                (None, "Bigger, and a proper garden.", None),
                ("school_new", "Arjun switched to Oakfield School this term since it's five minutes' walk.", None),
                ("reception", "Meera started reception this week, she has the tiniest blazer.", None),
                (
                    "anniversary",
                    "Dev and I have our 10th wedding anniversary on 14 October, any ideas?",
                    "A tenth anniversary is traditionally tin, so maybe a weekend away with a small tin keepsake?",
                ),
                (None, "Ha, I'll think about it.", None),
            ),
        ),
        (
            q("third-person", "How many children does Priya have?", "kids"),
            q("third-person", "What is Priya's husband called?", "partner"),
            q("third-person", "What is Meera allergic to?", "peanut"),
            q("third-person", "Where was Priya planning to hold her mum's birthday lunch?", "venue"),
            q("third-person", "What activity did Arjun start on Saturday mornings?", "swim"),
            q("paraphrase", "What is Priya's older child really into?", "interests"),
            q("paraphrase", "What is the user's profession?", "job"),
            q("paraphrase", "At which airport is Priya's spouse employed?", "partner"),
            q("paraphrase", "How often does the younger daughter attend her nursery?", "nursery"),
            q("temporal", "When is Priya's mum's 70th birthday?", "mum_bday"),
            q("temporal", "When was Meera diagnosed with a peanut allergy?", "peanut"),
            q("temporal", "When did Priya's family move house?", "house"),
            q("temporal", "When is Priya's wedding anniversary?", "anniversary"),
            q(
                "multi-hop",
                "Who surprised Priya's mum at the lunch at her favourite Gujarati restaurant?",
                "venue",
                "lunch_done",
            ),
            q("multi-hop", "Where did Priya go back to work, and how did the first week go?", "job", "work_back"),
            upd("Which school does Arjun attend now?", ("school_new",), ("school",)),
            upd("Where does Priya live now?", ("house",), ("home_old",)),
            none("What is Priya's favourite film?", "film", "movie"),
            none("Does Priya have any pets?", "dog", "cat", "pet"),
            none("What car does Priya drive?", "car", "drive"),
            none("Where did Priya go to university?", "university", "degree", "studied"),
            none("Who wrote Pride and Prejudice?", "pride", "austen"),
        ),
    ),
    Conversation(
        "agent-04",
        "",
        "assistant",
        (
            S(
                "7:05 pm on 9 March, 2023",
                (None, "Evening! Long day.", "Evening! Hope you can unwind a bit."),
                (
                    "guitar",
                    "I picked the guitar up again after ten years away, a second-hand Yamaha acoustic.",
                    "Nice! What are you playing on it?",
                ),
                (
                    "song",
                    "Mostly folk. I'm learning Blackbird by the Beatles.",
                    "Blackbird is a great fingerpicking exercise.",
                ),
                ("bookclub", "I also run a book club at the library on the first Thursday of each month.", None),
                ("book", "This month we're reading Klara and the Sun.", None),
            ),
            S(
                "12:30 pm on 16 April, 2023",
                (
                    "camera",
                    "Bought a used Fujifilm X-T3 for street photography!",
                    "Great camera! Which lens did you get with it?",
                ),
                ("lens", "Just the 23mm f/2 for now.", None),
                ("teacher", "I've booked guitar lessons with a teacher called Rosa, Wednesdays at 6.", None),
                (
                    "club_size",
                    "The book club has grown to 14 members, which is wild.",
                    "Fourteen is a good size for discussion without people getting lost.",
                ),
                (
                    None,
                    "Any tips for keeping the discussions on track?",
                    "A few prepared questions and a gentle time limit per topic usually help.",
                ),
            ),
            S(
                "5:55 pm on 2 July, 2023",
                (
                    "exhibit",
                    "Two of my photos got accepted for the community gallery exhibition in August!",
                    "Congratulations! Which ones did they pick?",
                ),
                ("photos", "A rainy market scene and a portrait of a fishmonger.", None),
                ("electric", "I upgraded to an electric, a Fender Telecaster. Rosa says I'm ready.", None),
                ("pottery", "I tried a pottery taster session, definitely not for me.", None),
            ),
            S(
                "10:20 am on 11 November, 2023",
                (
                    "club_move",
                    "The book club has moved to the Red Lion pub, the library changed its opening hours.",
                    "A pub can make for a livelier book club evening.",
                ),
                ("club_day", "And we meet on the last Tuesday of the month now instead.", None),
                (
                    "openmic",
                    "I played my first open mic at the Crown last Friday, two songs.",
                    "How did it feel to play in front of people?",
                ),
                (None, "Terrifying but fun.", None),
            ),
        ),
        (
            q("third-person", "What camera did the user buy?", "camera"),
            q("third-person", "What is the name of the user's guitar teacher?", "teacher"),
            q("third-person", "Which Beatles song is the user learning?", "song"),
            q("third-person", "What book was the book club reading in March?", "book"),
            q("third-person", "Which lens does the user have?", "lens"),
            q("paraphrase", "What instrument did the user return to after a decade?", "guitar"),
            q("paraphrase", "How many people are in the user's reading group?", "club_size"),
            q("paraphrase", "What kind of pictures is the user interested in taking?", "camera"),
            q("paraphrase", "Which craft did they try and dislike?", "pottery"),
            q("temporal", "When did the user play their first open mic?", "openmic"),
            q("temporal", "When is the user's photo exhibition?", "exhibit"),
            q("temporal", "When did the user buy the Fujifilm?", "camera"),
            q(
                "multi-hop",
                "Which photos are in the exhibition, and what camera does the user shoot with?",
                "camera",
                "photos",
            ),
            q(
                "multi-hop",
                "Who decided the user was ready for an electric guitar, and when are their lessons?",
                "teacher",
                "electric",
            ),
            upd("Where does the user's book club meet now?", ("club_move",), ("bookclub",)),
            upd("On which day does the book club meet now?", ("club_day",), ("bookclub",)),
            upd("What guitar does the user play now?", ("electric",), ("guitar",)),
            none("What does the user do for work?", "work", "job", "office"),
            none("Does the user have a dog?", "dog"),
            none("What is the user's favourite sport?", "football", "sport", "tennis"),
            none("How old is the user?", "years old", "birthday"),
            none("What is the chemical symbol for gold?", "gold"),
        ),
    ),
    Conversation(
        "agent-05",
        "Mateo",
        "",
        (
            S(
                "2:10 pm on 6 June, 2023",
                (
                    "trip",
                    "I'm planning a two-week trip to Japan in October with my girlfriend Lucía.",
                    "How exciting! Have you booked flights yet?",
                ),
                ("flights", "Yes, Madrid to Tokyo Haneda with Iberia, leaving on 3 October.", None),
                ("ff", "My Iberia Plus number is IB 48810372, in case you need it for anything.", None),
                (
                    "passport",
                    "My passport expires in January 2024, is that a problem for Japan?",
                    (
                        "Japan generally only needs your passport valid for the length of your stay, but check with "
                        "the airline."
                    ),
                ),
                ("base", "I live in Chamberí, by the way, so the airport is a quick metro ride.", None),
            ),
            S(
                "9:40 pm on 21 July, 2023",
                (
                    "hotel",
                    "Booked a ryokan in Kyoto for four nights, Hanaya Inn, near Gion.",
                    "Staying in a ryokan near Gion is a lovely way to experience Kyoto.",
                ),
                ("rail", "We'll get the 7-day JR Pass for the middle of the trip.", None),
                (
                    "vegan",
                    "Lucía is vegan, so we need to plan meals carefully.",
                    "Shojin ryori, Buddhist temple cuisine, is fully plant-based, "
                    "and Kyoto has many places serving it.",
                ),
                ("hiragana", "I've been practising hiragana every evening.", None),
                (None, "Thanks for the help so far.", "Anytime!"),
            ),
            S(
                "8:05 am on 25 October, 2023",
                (
                    "takao",
                    "We're back! The highlight was hiking Mount Takao on a clear day.",
                    "Did you see Fuji from the top?",
                ),
                (None, "Yes, briefly, before the clouds came in.", None),
                (
                    "lost",
                    "Lucía lost her phone on the Shinkansen, but lost property at Nagoya sent it back in two days.",
                    "Japan's lost property system is famously reliable.",
                ),
                ("nye", "Next trip is Lisbon over New Year, just a long weekend.", None),
            ),
            S(
                "6:45 pm on 9 January, 2024",
                ("passport_new", "Renewed my passport last week, the new one is valid until 2034.", None),
                ("ff_new", "I've switched to TAP for miles, my Miles&Go number is TP 3391 0475.", None),
                (
                    "engaged",
                    "Also, Lucía and I got engaged in Lisbon on New Year's Eve!",
                    "Congratulations! How did you propose?",
                ),
                ("proposal", "At a viewpoint in Alfama at midnight, with fireworks over the river.", None),
            ),
        ),
        (
            q("third-person", "What is Mateo's Iberia Plus number?", "ff"),
            q("third-person", "Which hotel did Mateo book in Kyoto?", "hotel"),
            q("third-person", "Who is Mateo travelling to Japan with?", "trip"),
            q("third-person", "Which rail pass is the user getting?", "rail"),
            q("third-person", "What did Lucía lose in Japan?", "lost"),
            q("paraphrase", "Which neighbourhood of the Spanish capital is Mateo based in?", "base"),
            q("paraphrase", "What dietary restriction does Mateo's companion have?", "vegan"),
            q("paraphrase", "Which Japanese writing system is the user studying?", "hiragana"),
            q("paraphrase", "Which peak did Mateo climb on holiday?", "takao"),
            q("temporal", "When does Mateo fly to Tokyo?", "flights"),
            q("temporal", "When did Mateo and Lucía get engaged?", "engaged"),
            q("temporal", "When was Mateo's passport renewed?", "passport_new"),
            q(
                "multi-hop",
                "Which city did Mateo plan to visit after Japan, and what happened there at New Year?",
                "nye",
                "engaged",
            ),
            q(
                "multi-hop",
                "Which airline did Mateo fly to Tokyo with, and whose miles does he collect now?",
                "flights",
                "ff_new",
            ),
            upd("What is Mateo's current frequent flyer number?", ("ff_new",), ("ff",)),
            upd("When does Mateo's passport expire now?", ("passport_new",), ("passport",)),
            upd("What is Lucía to Mateo now?", ("engaged",), ("trip",)),
            none("What does Mateo do for work?", "work", "job"),
            none("Does Mateo have any allergies?", "allergic", "allergy"),
            none("What is Mateo's favourite football team?", "football", "team"),
            none("Does Mateo own a car?", "car", "drive"),
            none("What is the capital of Australia?", "australia", "canberra"),
        ),
    ),
    Conversation(
        "agent-06",
        "",
        "",
        (
            S(
                "12:15 pm on 4 September, 2023",
                (
                    "lactose",
                    "I'm lactose intolerant, so no milk-based sauces in recipes please.",
                    "Noted. I'll suggest olive-oil or coconut-milk sauces instead of cream.",
                ),
                ("starter", "I've kept a sourdough starter alive for a year. It's called Doughy McDoughface.", None),
                ("household", "I usually cook for three: me, my partner Jordan and my teenage son.", None),
                (
                    None,
                    "Can you suggest a quick weeknight dinner?",
                    "A chickpea and spinach curry with rice takes about 25 minutes.",
                ),
            ),
            S(
                "6:20 pm on 19 September, 2023",
                ("mealprep", "Sundays are meal prep day, usually a big batch of chilli and roasted veg.", None),
                (
                    "knife",
                    "Treated myself to a Japanese santoku knife, a Tojiro.",
                    "Nice! Are you going to sharpen it on a whetstone?",
                ),
                ("stone", "Yes, a 1000/6000 combination stone.", None),
                ("dishoom", "Our favourite restaurant is Dishoom, we go every anniversary.", None),
                (
                    "veggie_son",
                    "My son has declared himself vegetarian, so meal planning just got more interesting.",
                    "Lots of vegetarian dishes suit the whole family, lentil bolognese for example.",
                ),
            ),
            S(
                "1:05 pm on 28 November, 2023",
                (
                    "xmas",
                    "I'm hosting Christmas dinner for 11 people this year.",
                    "That's a big table! Are you doing a traditional roast?",
                ),
                ("menu", "A nut roast for my son and a turkey crown for everyone else.", None),
                ("oven", "Our oven died last week, the new one arrives on 12 December. Cutting it fine.", None),
                ("herbs", "I'm growing herbs on the windowsill, basil and thyme mostly.", None),
                (None, "Feeling a bit stressed honestly.", "That's understandable with so much going on."),
            ),
            S(
                "10:35 am on 8 January, 2024",
                ("xmas_done", "Christmas went well! The nut roast was the surprise hit of the day.", None),
                (
                    "lactose_new",
                    "Good news: the dietitian says I can handle hard cheeses and yoghurt in small amounts.",
                    "Hard cheeses are naturally very low in lactose, so that makes sense.",
                ),
                ("resolution", "My new year's resolution is to bake bread every weekend.", None),
                (
                    "new_fav",
                    "We've found a new favourite restaurant, a Georgian place called Tbilisi Nights. Sorry Dishoom.",
                    "Georgian khachapuri is hard to beat.",
                ),
            ),
        ),
        (
            q("third-person", "What is the user's sourdough starter called?", "starter"),
            q("third-person", "What kind of knife did the user buy?", "knife"),
            q("third-person", "How many people is the user hosting for Christmas?", "xmas"),
            q("third-person", "Which herbs does the user grow?", "herbs"),
            q("third-person", "What is the name of the user's partner?", "household"),
            q("paraphrase", "What can't the user digest well?", "lactose"),
            q("paraphrase", "What does the user cook in bulk at the weekend?", "mealprep"),
            q("paraphrase", "What do they hone their new blade on?", "stone"),
            q("paraphrase", "Which eating choice did the user's teenager make?", "veggie_son"),
            q("temporal", "When does the user's new oven arrive?", "oven"),
            q("temporal", "When did the user's son become vegetarian?", "veggie_son"),
            q("temporal", "When did the user buy the santoku?", "knife"),
            q(
                "multi-hop",
                "What did the user cook for their vegetarian son at Christmas, and how did it go down?",
                "menu",
                "xmas_done",
            ),
            q(
                "multi-hop",
                "Who does the user cook for, and which of them stopped eating meat?",
                "household",
                "veggie_son",
            ),
            upd("What is the user's favourite restaurant now?", ("new_fav",), ("dishoom",)),
            upd("Which dairy foods can the user tolerate now?", ("lactose_new",), ("lactose",)),
            q("third-person", "Which restaurant did the user go to every anniversary?", "dishoom"),
            none("Where does the user work?", "work", "job", "office"),
            none("Does the user drink alcohol?", "wine", "beer", "alcohol"),
            none("What is the user's favourite dessert?", "dessert", "cake", "pudding"),
            none("Which city does the user live in?", "city"),
            none("What is the boiling point of water in Fahrenheit?", "fahrenheit", "boiling"),
        ),
    ),
    Conversation(
        "agent-07",
        "Hannah",
        "assistant",
        (
            S(
                "9:30 am on 14 March, 2024",
                ("laptop", "My daily driver is a Framework 13 running Fedora 39.", None),
                (
                    "editor",
                    "I live in Neovim with LazyVim, and tmux for sessions.",
                    "Do you keep your dotfiles in a repo?",
                ),
                ("dotfiles", "Yep, github.com/hannahk/dotfiles, managed with chezmoi.", None),
                ("router", "Home router is a GL.iNet Flint 2, admin page at 192.168.8.1.", None),
                (
                    "job",
                    "I'm an SRE at a payments company called Kestrel Pay.",
                    "SRE at a payments company must mean some strict uptime targets.",
                ),
            ),
            S(
                "3:50 pm on 2 April, 2024",
                (
                    "nas",
                    "Set up a Synology DS923+ NAS for backups last weekend.",
                    "Nice, are you using Hyper Backup to an offsite target?",
                ),
                ("b2", "Yes, nightly at 2am to Backblaze B2.", None),
                (
                    "bitwarden",
                    "I moved my passwords from LastPass to Bitwarden after the breach.",
                    "Bitwarden is a solid open-source choice, and you can self-host it with Vaultwarden.",
                ),
                (
                    None,
                    "What's a good way to learn Rust?",
                    "The Rust Book plus the Rustlings exercises is a good start.",
                ),
                ("keyboard", "My keyboard is a Keychron Q1 with brown switches, very thocky.", None),
            ),
            S(
                "8:15 pm on 23 May, 2024",
                (
                    "nixos",
                    "Switched the laptop to NixOS. Fedora was fine but I wanted reproducible configs.",
                    "NixOS is great for reproducibility, your whole system lives in configuration.nix.",
                ),
                ("oncall", "I'm on call every third week, next rotation starts 3 June.", None),
                ("monitor", "Bought a second monitor, a 27-inch Dell U2723QE.", None),
                (None, "Ok, that's my setup rant over.", "Ha, always happy to hear about setups."),
            ),
            S(
                "11:00 am on 30 July, 2024",
                (
                    "job_new",
                    (
                        "I've handed in my notice at Kestrel. Starting next month as a platform engineer at Tidewater "
                        "Energy."
                    ),
                    "Congrats! What drew you to Tidewater?",
                ),
                (None, "Smaller team, and I get to do Kubernetes full-time.", None),
                ("helix", "Also, confession: I've moved from Neovim to Helix.", None),
                ("pixel", "And my phone is now a Pixel 8 running GrapheneOS.", None),
            ),
        ),
        (
            q("third-person", "What laptop does Hannah use?", "laptop"),
            q("third-person", "What is the IP address of Hannah's router admin page?", "router"),
            q("third-person", "Where are Hannah's dotfiles hosted?", "dotfiles"),
            q("third-person", "What keyboard does the user type on?", "keyboard"),
            q("third-person", "Which NAS did Hannah set up?", "nas"),
            q("paraphrase", "Which vault app replaced the user's old credential store?", "bitwarden"),
            q("paraphrase", "Which cloud storage keeps offsite copies of Hannah's files?", "b2"),
            q("paraphrase", "How often is Hannah responsible for production incidents?", "oncall"),
            q("paraphrase", "What display did Hannah add to her desk?", "monitor"),
            q("temporal", "When did Hannah set up the NAS?", "nas"),
            q("temporal", "When does Hannah's next on-call rotation start?", "oncall"),
            q("temporal", "When did Hannah switch to NixOS?", "nixos"),
            q("multi-hop", "What did Hannah run on the Framework before NixOS?", "laptop", "nixos"),
            q(
                "multi-hop",
                "What was Hannah's role before becoming a platform engineer, and at which company?",
                "job",
                "job_new",
            ),
            upd("Which text editor does Hannah use now?", ("helix",), ("editor",)),
            upd("Which company will Hannah be working for from next month?", ("job_new",), ("job",)),
            upd("Which Linux distribution is on Hannah's laptop now?", ("nixos",), ("laptop",)),
            none("Does Hannah have any pets?", "pet", "dog", "cat"),
            none("Which city does Hannah live in?", "city"),
            none("Which games console does Hannah own?", "console", "playstation", "xbox", "nintendo"),
            none("What is Hannah's salary?", "salary", "paid"),
            none("Who painted the Mona Lisa?", "mona"),
        ),
    ),
    Conversation(
        "agent-08",
        "",
        "",
        (
            S(
                "7:40 pm on 10 January, 2024",
                (
                    "budget",
                    "I'm trying to stick to a budget this year: £1,800 a month for everything except rent.",
                    None,
                ),
                ("rent", "Rent is £1,250 for a one-bed in Walthamstow.", None),
                (
                    "deposit",
                    "The goal is £15,000 saved for a house deposit by the end of 2025.",
                    "Saving £15,000 by the end of 2025 works out to about £625 a month.",
                ),
                ("bank", "Day-to-day account is Monzo, savings are in a Chase saver at 4.1%.", None),
                (None, "Money stuff stresses me out.", "That's very common, and having a plan helps."),
            ),
            S(
                "8:25 am on 18 February, 2024",
                (
                    "lisa",
                    "Opened a Lifetime ISA with Moneybox, the government tops it up by 25%.",
                    "The LISA bonus is 25% on up to £4,000 a year, so up to £1,000 free each year.",
                ),
                (
                    "pension",
                    "My employer matches pension contributions up to 5%.",
                    "Are you putting in the full 5% to get the match?",
                ),
                (None, "Yes, 5% straight from my salary.", None),
                (
                    "card",
                    "I've still got £2,300 on a credit card at 22.9% APR.",
                    "At 22.9% APR, clearing that card before investing more would save a lot in interest.",
                ),
                ("job", "I'm an accountant at a housing charity, funnily enough.", None),
            ),
            S(
                "6:10 pm on 2 May, 2024",
                ("card_done", "Paid the credit card off completely last Friday!", "Brilliant! How does it feel?"),
                (None, "Honestly amazing.", None),
                ("rate_cut", "Chase dropped the saver rate to 3.8%, annoying.", None),
                ("payrise", "Got a pay rise to £41,000 in April.", None),
                ("cancel", "Cancelled Disney+ and my climbing membership, that's about £60 a month back.", None),
            ),
            S(
                "9:55 pm on 15 August, 2024",
                (
                    "progress",
                    "Savings are at £9,400 now, ahead of plan.",
                    "£9,400 by August puts you well ahead of the £625-a-month pace.",
                ),
                ("isa_switch", "I moved the savings into a Trading 212 cash ISA paying 5.1%.", None),
                ("budget_new", "I've raised my monthly budget to £2,000 because everything costs more.", None),
                (
                    "rent_up",
                    "The landlord is putting the rent up to £1,340 from October.",
                    "Is that within the notice rules in your tenancy?",
                ),
                (None, "I think so, two months' notice.", None),
            ),
        ),
        (
            q("third-person", "Which bank is the user's current account with?", "bank"),
            q("third-person", "What is the user's savings target for the house deposit?", "deposit"),
            q("third-person", "What is the user's job?", "job"),
            q("third-person", "Which provider is the user's Lifetime ISA with?", "lisa"),
            q("third-person", "Which subscriptions did the user cancel?", "cancel"),
            q("paraphrase", "How much does the user's employer add to their retirement savings?", "pension"),
            q("paraphrase", "What outstanding balance and interest rate did the user's plastic carry?", "card"),
            q("paraphrase", "How much do they earn per year now?", "payrise"),
            q("paraphrase", "Which part of London does the user rent in?", "rent"),
            q("temporal", "When did the user clear their credit card debt?", "card_done"),
            q("temporal", "When did the user's pay rise take effect?", "payrise"),
            q("temporal", "When will the user's rent go up?", "rent_up"),
            q(
                "multi-hop",
                "How much was the user's rent originally, and what will it be from October?",
                "rent",
                "rent_up",
            ),
            q("multi-hop", "How far is the user towards their house deposit goal?", "deposit", "progress"),
            upd("What interest rate do the user's savings earn now?", ("isa_switch",), ("bank", "rate_cut")),
            upd("What is the user's monthly budget now?", ("budget_new",), ("budget",)),
            upd("Does the user still have credit card debt?", ("card_done",), ("card",)),
            none("Does the user own a car?", "car"),
            none("What is the user's partner's name?", "partner", "wife", "husband", "girlfriend", "boyfriend"),
            none("Does the user invest in cryptocurrency?", "crypto", "bitcoin"),
            none("What is the user's credit score?", "score"),
            none("In what year did the Berlin Wall fall?", "berlin"),
        ),
    ),
    Conversation(
        "agent-09",
        "Kwame",
        "",
        (
            S(
                "3:20 pm on 22 May, 2023",
                (
                    "puppy",
                    "We got a puppy!! A black Labrador called Kofi, ten weeks old.",
                    "Congratulations! How is the house training going?",
                ),
                (None, "Slowly. Lots of puddles.", None),
                ("vet", "His vet is Dr Okafor at Riverside Vets.", None),
                ("food", "He's on Royal Canin puppy food, three meals a day.", None),
                (
                    None,
                    "Any tips for stopping him chewing cables?",
                    "Bitter-apple spray and cable covers help, plus plenty of chew toys.",
                ),
            ),
            S(
                "10:45 am on 30 June, 2023",
                ("chip", "Kofi's microchip number is 985 112 009 874 321, saving it here just in case.", None),
                (
                    "insurance",
                    "Got him insured with Petplan, £38 a month, lifetime cover.",
                    "Lifetime cover is usually the best option for a young dog.",
                ),
                ("classes", "He starts puppy classes on Tuesday evenings at the village hall.", None),
                ("office", "I work from home except Tuesdays and Thursdays, when I have to be in the office.", None),
                ("nala", "Our old cat Nala is NOT impressed with him.", "Poor Nala! Is she keeping her distance?"),
                (None, "She lives on top of the fridge now.", None),
            ),
            S(
                "6:30 pm on 14 September, 2023",
                ("food_new", "Switched Kofi to two meals a day, the vet said it's time.", None),
                (
                    "weight",
                    "He's 24 kilos already at six months.",
                    "That's right on track for a male Lab at six months.",
                ),
                ("walker", "I've hired a dog walker, Becky, for my office days.", None),
                ("job", "I'm an architect, so the hours get long around deadlines.", None),
            ),
            S(
                "9:10 am on 3 December, 2023",
                (
                    "dental",
                    "Nala had a dental operation on Monday, two teeth out.",
                    "Oh no, is she eating okay?",
                ),
                (None, "Soft food only for a week.", None),
                ("neuter", "Kofi's booked in to be neutered on 15 January.", None),
                ("insurance_new", "I've moved Kofi's insurance to Bought By Many, cheaper for the same cover.", None),
            ),
        ),
        (
            q("third-person", "What breed is Kofi?", "puppy"),
            q("third-person", "What is Kofi's microchip number?", "chip"),
            q("third-person", "Who is Kofi's vet?", "vet"),
            q("third-person", "What is the name of Kwame's dog walker?", "walker"),
            q("third-person", "What is the user's cat called?", "nala"),
            q("paraphrase", "Where does Kwame's puppy go for obedience training?", "classes"),
            q("paraphrase", "What does Kwame do for a living?", "job"),
            q("paraphrase", "How heavy was the Labrador at half a year old?", "weight"),
            q("paraphrase", "What brand of kibble did Kwame feed the young dog at first?", "food"),
            q("temporal", "When did Kwame get Kofi?", "puppy"),
            q("temporal", "When did Nala have surgery?", "dental"),
            q("temporal", "When is Kofi being neutered?", "neuter"),
            q("multi-hop", "On which days does Becky walk Kofi?", "office", "walker"),
            q(
                "multi-hop",
                "Which pet did Kwame have before the puppy, and what happened to her in December?",
                "nala",
                "dental",
            ),
            upd("How many meals a day does Kofi get now?", ("food_new",), ("food",)),
            upd("Which company insures Kofi now?", ("insurance_new",), ("insurance",)),
            q("third-person", "How much did Kwame's Petplan cover cost?", "insurance"),
            none("Does Kwame have children?", "children", "kids", "son", "daughter"),
            none("What car does Kwame drive?", "car"),
            none("Where did Kwame grow up?", "grew", "grow"),
            none("Which football team does Kwame support?", "football"),
            none("How many continents are there?", "continent", "continents"),
        ),
    ),
    Conversation(
        "agent-10",
        "",
        "assistant",
        (
            S(
                "8:00 am on 5 September, 2022",
                ("gym", "Gym is Monday, Wednesday and Friday at 6:30am, before anything else.", None),
                ("standup", "Team standup is at 9:15 every weekday, so mornings are tight.", None),
                ("pickup", "I do school pickup Tuesdays and Thursdays at 3:15.", None),
                ("zoe", "My daughter Zoe is in year 1 at St Mark's.", "How is she finding year 1?"),
                ("pe", "She loves it, especially PE.", None),
                (
                    None,
                    "Can you help me plan a weekly schedule?",
                    "Sure, let's block the fixed things first: gym, standup and pickups.",
                ),
            ),
            S(
                "7:20 pm on 26 September, 2022",
                ("dentist", "Dentist appointment on 11 October at 4pm with Dr Shah.", None),
                (
                    "choir",
                    "I joined a choir! Rehearsals are Thursday evenings 7:30 to 9.",
                    "Thursday choir right after pickup will make for a busy day.",
                ),
                ("sol", "My partner Sol covers pickup on Mondays and Fridays.", None),
                ("work", "I work 8 to 4 at the council planning office, hybrid.", None),
                (None, "Phew, writing it all down helps.", "It really does, it's easier to see the gaps."),
            ),
            S(
                "6:05 pm on 9 January, 2023",
                ("gym_new", "New year, new plan: gym moved to evenings, Tuesday and Saturday at 6pm.", None),
                ("swim", "Zoe started swimming lessons on Saturday mornings at 9.", None),
                (
                    "compressed",
                    "I'm on compressed hours now, Fridays off.",
                    "Nice! What are you planning to do with your Fridays?",
                ),
                ("foodbank", "Volunteering at the food bank every other Friday.", None),
            ),
            S(
                "12:40 pm on 20 March, 2023",
                ("concert", "The choir concert is on 6 May at St Anne's church.", None),
                ("standup_new", "Standup moved to 10am, which is a relief.", None),
                (
                    "cornwall",
                    "We're going to Cornwall for half term, 29 May to 2 June.",
                    "Cornwall in late May is lovely, though it gets busy at half term.",
                ),
                (None, "Ok, I'll check in again next week.", "Sounds good!"),
            ),
        ),
        (
            q("third-person", "Who is the user's dentist?", "dentist"),
            q("third-person", "What is the name of the user's daughter?", "zoe"),
            q("third-person", "Which school does Zoe attend?", "zoe"),
            q("third-person", "Where does the user work?", "work"),
            q("third-person", "Where is the choir concert being held?", "concert"),
            q("paraphrase", "Which evening does the user sing with a group?", "choir"),
            q("paraphrase", "Who collects the child from school at the start and end of the week?", "sol"),
            q("paraphrase", "How does the user spend the day freed up by their new working pattern?", "foodbank"),
            q("paraphrase", "Which subject does their little girl enjoy most?", "pe"),
            q("temporal", "When is the user's dentist appointment?", "dentist"),
            q("temporal", "When is the choir concert?", "concert"),
            q("temporal", "When is the family's Cornwall trip?", "cornwall"),
            q("multi-hop", "Which days does the user pick Zoe up, and which days does Sol?", "pickup", "sol"),
            q(
                "multi-hop",
                "Is the user's choir rehearsal on the same day as one of their school pickups?",
                "pickup",
                "choir",
            ),
            upd("When does the user go to the gym now?", ("gym_new",), ("gym",)),
            upd("What time is the user's standup now?", ("standup_new",), ("standup",)),
            upd("Which weekday does the user have off work now?", ("compressed",), ("work",)),
            none("What is the user's favourite TV show?", "tv", "show", "series"),
            none("Does the user have a pet?", "pet", "dog", "cat"),
            none("What car does the user drive?", "car", "drive"),
            none("What is the user's phone number?", "phone"),
            none("What is the largest ocean on Earth?", "ocean"),
        ),
    ),
    Conversation(
        "agent-11",
        "Lena",
        "assistant",
        (
            S(
                "4:15 pm on 17 October, 2023",
                (
                    "masters",
                    "I'm doing a master's in computational linguistics at the University of Edinburgh.",
                    "That sounds fascinating! What's your thesis about?",
                ),
                ("thesis", "Code-switching between Scots and English on social media.", None),
                ("supervisor", "My supervisor is Dr Fiona MacLeod, lovely but very busy.", None),
                ("cafe", "I work part-time at a café called Söderberg, 12 hours a week.", None),
                (None, "Also, just so you know, I'm terrible at replying to emails.", "Ha, no judgement here."),
            ),
            S(
                "10:00 pm on 28 November, 2023",
                (
                    "deadline",
                    "My literature review is due on 15 December. Panicking slightly.",
                    "If it's due 15 December, a draft by early December leaves time for feedback.",
                ),
                ("flat", "I live in Marchmont with two flatmates, one of whom plays the trombone at 11pm.", None),
                ("nocoffee", "Weirdly I don't drink coffee at all, despite working in a café.", None),
                ("tutoring", "I'm also tutoring first-years in syntax on Mondays.", None),
                (
                    "graz",
                    "I'm from Graz originally, so I really miss Austrian Christmas markets.",
                    "Edinburgh's Christmas market is smaller, but it has mulled wine and a big wheel.",
                ),
            ),
            S(
                "2:30 pm on 22 February, 2024",
                ("review_done", "Submitted the lit review two days late. Fiona was fine about it.", None),
                (
                    "tallinn_accept",
                    "I got a poster accepted at a workshop in Tallinn in May!",
                    "Congratulations! Is the poster on your code-switching work?",
                ),
                (None, "Yes, the first results on the Twitter data.", None),
                ("cafe_quit", "I quit the café, the hours clashed with tutoring.", None),
                ("ra", "Now I'm a research assistant in the linguistics department, 10 hours a week.", None),
            ),
            S(
                "9:20 am on 3 June, 2024",
                ("tallinn_done", "Tallinn was amazing, people really liked the poster.", None),
                (
                    "phd",
                    "Fiona suggested I apply for a PhD and I got an offer from Glasgow starting in September!",
                    "Wow, congratulations! Will you take it?",
                ),
                (None, "I accepted yesterday.", None),
                ("glasgow", "So I'll be moving to Glasgow in August, looking at flats in the West End.", None),
            ),
        ),
        (
            q("third-person", "Which university is Lena studying at?", "masters"),
            q("third-person", "What is Lena's thesis about?", "thesis"),
            q("third-person", "Who is Lena's supervisor?", "supervisor"),
            q("third-person", "What does the user tutor first-years in?", "tutoring"),
            q("third-person", "Where is Lena from originally?", "graz"),
            q("paraphrase", "What is the name of the coffee shop where Lena worked?", "cafe"),
            q("paraphrase", "Which neighbourhood does Lena share a home with housemates in?", "flat"),
            q("paraphrase", "Which Estonian city did Lena travel to for academic work?", "tallinn_accept"),
            q("paraphrase", "Which doctoral programme offer did Lena receive?", "phd"),
            q("temporal", "When was Lena's literature review due?", "deadline"),
            q("temporal", "When does Lena's PhD start?", "phd"),
            q("temporal", "When is Lena moving to Glasgow?", "glasgow"),
            q(
                "multi-hop",
                "What did Lena's café hours clash with, and on which day does it happen?",
                "tutoring",
                "cafe_quit",
            ),
            q("multi-hop", "Who suggested Lena apply for a PhD, and what is that person's role?", "supervisor", "phd"),
            upd("What part-time job does Lena have now?", ("ra",), ("cafe",)),
            upd("Which city will Lena live in from August?", ("glasgow",), ("flat",)),
            q("third-person", "What does Lena never drink?", "nocoffee"),
            none("Does Lena have a boyfriend?", "boyfriend", "girlfriend", "partner"),
            none("What is Lena's favourite band?", "band"),
            none("How old is Lena?", "years old", "birthday", "age"),
            none("Does Lena own a bike?", "bike", "bicycle", "cycle"),
            none("What is the square root of 144?", "144"),
        ),
    ),
    Conversation(
        "agent-12",
        "",
        "",
        (
            S(
                "5:30 pm on 12 April, 2023",
                (
                    "house",
                    "We bought a 1930s semi in Stockport, completing on 28 April!",
                    "Congratulations! Are you planning any work on it?",
                ),
                ("plans", "Loads. The kitchen first, then rewiring.", None),
                ("builder", "Our builder is Gary from G&T Renovations, he quoted £18,500 for the kitchen.", None),
                (
                    "plants",
                    "I have about 40 houseplants, the monstera is my favourite.",
                    "Monsteras love bright indirect light, the new house might have good spots for it.",
                ),
                (None, "Sorry, I'm very excited.", "Understandably!"),
            ),
            S(
                "8:45 pm on 3 June, 2023",
                ("kitchen_start", "Kitchen work started on Monday, we're living off a microwave.", None),
                ("cabinets", "We went for sage green cabinets and oak worktops.", None),
                (
                    "brambles",
                    "The garden is a mess, brambles everywhere.",
                    "Brambles are easiest to clear in autumn, but you can cut them back now and dig the roots out.",
                ),
                (
                    "wasps",
                    "I'm allergic to wasp stings, so I'm nervous about the nest by the shed.",
                    "With a wasp sting allergy it's safer to get a pest controller to deal with the nest.",
                ),
                ("epipen", "I carry an EpiPen, but still.", None),
            ),
            S(
                "11:10 am on 19 August, 2023",
                ("kitchen_done", "The kitchen is finished! Two weeks over schedule but worth it.", None),
                ("bill", "Final bill came to £21,200 because of extra plastering.", None),
                ("veg", "I've started a veg patch, courgettes and runner beans so far.", None),
                ("margaret", "Our neighbour Margaret gave us some rhubarb crowns.", None),
                ("electrician", "Rewiring is booked for October with an electrician called Priti.", None),
            ),
            S(
                "3:25 pm on 14 November, 2023",
                ("rewire", "Rewiring done. Priti found some genuinely scary old fuses.", None),
                (
                    "pickle",
                    "We adopted a rescue cat called Pickle, she's already eaten a spider plant.",
                    "Spider plants are non-toxic to cats luckily, but keep her away from lilies.",
                ),
                (None, "No lilies here, don't worry.", None),
                ("bathroom", "Next project is the bathroom, hoping to start in March.", None),
                ("plants_new", "I had to rehome half my houseplants because of Pickle, down to about 20.", None),
            ),
        ),
        (
            q("third-person", "Where did the user buy a house?", "house"),
            q("third-person", "Who is the user's builder?", "builder"),
            q("third-person", "What colour are the user's kitchen cabinets?", "cabinets"),
            q("third-person", "What is the user's favourite houseplant?", "plants"),
            q("third-person", "What vegetables is the user growing?", "veg"),
            q("paraphrase", "Which insect could cause the user a severe reaction?", "wasps"),
            q("paraphrase", "Which person next door gave the user something for the garden?", "margaret"),
            q("paraphrase", "What emergency medication do they keep on them?", "epipen"),
            q("paraphrase", "What is the name of the animal they took in from a shelter?", "pickle"),
            q("temporal", "When did the user complete on the house?", "house"),
            q("temporal", "When did the kitchen work start?", "kitchen_start"),
            q("temporal", "When does the user hope to start the bathroom?", "bathroom"),
            q("multi-hop", "How much more did the kitchen cost than the builder quoted?", "builder", "bill"),
            q("multi-hop", "Who did the user's rewiring, and what did she find?", "electrician", "rewire"),
            upd("How many houseplants does the user have now?", ("plants_new",), ("plants",)),
            upd("Is the user's kitchen still being renovated?", ("kitchen_done",), ("kitchen_start",)),
            q("third-person", "What is the name of the user's electrician?", "electrician"),
            none("What does the user do for a living?", "job", "career", "office"),
            none("Does the user have children?", "children", "kids", "son", "daughter"),
            none("What is the user's partner's name?", "partner", "husband", "wife"),
            none("What car does the user have?", "car"),
            none("Which planet is closest to the sun?", "planet", "mercury"),
        ),
    ),
    Conversation(
        "agent-13",
        "Tomasz",
        "",
        (
            S(
                "7:50 am on 8 February, 2024",
                (None, "Good morning, quick chat before my train.", "Good morning! What's up?"),
                ("commute", "I commute from Gdynia to Gdańsk every day, about 40 minutes on the SKM train.", None),
                (
                    "job",
                    "I work at a shipyard as a welding inspector.",
                    "That sounds like demanding work. How long have you been doing it?",
                ),
                ("years", "Eleven years now.", None),
                (
                    "spanish",
                    "I'm learning Spanish because my wife Carmen is from Valencia.",
                    "Valencian Spanish is very clear, and Carmen must be a great practice partner.",
                ),
            ),
            S(
                "6:35 pm on 21 March, 2024",
                (
                    "ebike",
                    "Bought an e-bike, a Cube Kathmandu, to get to the station instead of driving.",
                    "An e-bike for the station run should save on parking too.",
                ),
                ("skoda", "We're keeping the car, a 2016 Skoda Octavia estate, for weekends.", None),
                ("a2", "Passed my A2 Spanish exam!", "Congratulations! Are you going for B1 next?"),
                (None, "Yes, in the autumn.", None),
                ("ola", "Our daughter Ola is 9 and already speaks better Spanish than me.", None),
            ),
            S(
                "8:10 pm on 30 May, 2024",
                (
                    "commute_new",
                    "Big change: on good days I now ride all the way to Gdańsk, 28 km each way.",
                    "28 km each way is a serious commute, the e-bike must help.",
                ),
                (
                    "crash",
                    "Had a small crash on the coastal path on Tuesday, just bruises.",
                    "Ouch! Are you okay to keep riding?",
                ),
                ("helmet", "Yes, but I ordered a new helmet.", None),
                ("valencia", "We're spending August with Carmen's family in Valencia.", None),
            ),
            S(
                "9:00 pm on 17 September, 2024",
                ("sold", "We sold the Skoda and joined a car-sharing club, Traficar.", None),
                ("promo", "I've been promoted to senior inspector, leading a team of five.", None),
                ("b1", "The B1 exam is on 19 October in Gdańsk.", None),
                ("violin", "Ola started violin lessons this month.", "How lovely! Is she enjoying it?"),
                (None, "The neighbours less so.", None),
            ),
        ),
        (
            q("third-person", "What does Tomasz do for work?", "job"),
            q("third-person", "What is the name of Tomasz's wife?", "spanish"),
            q("third-person", "Which e-bike did Tomasz buy?", "ebike"),
            q("third-person", "What language exam did the user pass?", "a2"),
            q("third-person", "What instrument is Ola learning?", "violin"),
            q("paraphrase", "How did Tomasz get between Gdynia and Gdańsk at the start of the year?", "commute"),
            q("paraphrase", "Which Spanish city does Tomasz's spouse come from?", "spanish"),
            q("paraphrase", "How long has Tomasz been checking welds for a living?", "years"),
            q("paraphrase", "What vehicle did the family keep for weekend trips?", "skoda"),
            q("temporal", "When did Tomasz crash?", "crash"),
            q("temporal", "When is Tomasz's B1 exam?", "b1"),
            q("temporal", "When is Tomasz's family going to Valencia?", "valencia"),
            q("multi-hop", "What car did Tomasz's family sell, and what replaced it?", "skoda", "sold"),
            q("multi-hop", "Why is Tomasz learning Spanish, and which level has he passed?", "spanish", "a2"),
            upd("How does Tomasz commute now on good days?", ("commute_new",), ("commute",)),
            upd("What is Tomasz's job title now?", ("promo",), ("job",)),
            upd("Does Tomasz's family still own a car?", ("sold",), ("skoda",)),
            none("What is Tomasz's favourite food?", "food", "favourite"),
            none("Does Tomasz have any pets?", "pet", "dog", "cat"),
            none("Which football club does Tomasz support?", "football"),
            none("What is Tomasz's blood pressure?", "blood"),
            none("What language is spoken in Brazil?", "brazil", "portuguese"),
        ),
    ),
    Conversation(
        "agent-14",
        "",
        "assistant",
        (
            S(
                "10:30 am on 1 March, 2023",
                (None, "My daughter set you up for me, so bear with me.", "Of course, take your time."),
                (
                    "retired",
                    "I retired last year after 35 years teaching chemistry.",
                    "Congratulations on your retirement! How are you filling your days?",
                ),
                ("birds", "Mostly birdwatching at the RSPB reserve at Minsmere.", None),
                ("grandkids", "And minding my grandchildren, Ruby and Finn, on Wednesdays.", None),
                (
                    "amlodipine",
                    "I take amlodipine 5 mg every morning for my blood pressure.",
                    "Amlodipine is usually taken once a day at the same time, so it's good you have a routine.",
                ),
            ),
            S(
                "2:15 pm on 12 April, 2023",
                (
                    "hearing",
                    "I got hearing aids last week, Phonak ones. The world is so loud now!",
                    "It often takes a few weeks for the brain to adjust to hearing aids.",
                ),
                ("oxfam", "I volunteer at the Oxfam bookshop on Friday mornings.", None),
                (
                    "bittern",
                    "Saw a bittern at Minsmere on Sunday, first time in years!",
                    "How lucky! Did you get a photo?",
                ),
                (None, "Only a blurry one.", None),
                ("claire", "My daughter Claire lives in Norwich, she's a nurse.", None),
            ),
            S(
                "4:00 pm on 20 June, 2023",
                ("dose", "The GP has put my amlodipine up to 10 mg.", None),
                (
                    "cruise",
                    "I've booked a Norwegian fjords cruise for 10 September with my sister June.",
                    "The fjords in September should be beautiful, and quieter than in summer.",
                ),
                ("reading", "I'm reading a biography of Rosalind Franklin, fascinating woman.", None),
                ("ruby", "Ruby turned 6 on Saturday, we had a party in the garden.", None),
            ),
            S(
                "11:45 am on 2 October, 2023",
                ("cruise_done", "The cruise was wonderful, we sailed into the Geirangerfjord.", None),
                ("oxfam_new", "I've moved my Oxfam shift to Tuesdays.", None),
                (
                    "knee",
                    "My knee replacement is scheduled for 8 January.",
                    "I hope it goes smoothly. Will someone be able to help you at home afterwards?",
                ),
                ("help", "Claire is coming to stay for two weeks.", None),
                (None, "She fusses, but it will be nice.", None),
            ),
        ),
        (
            q("third-person", "What subject did the user teach?", "retired"),
            q("third-person", "Where does the user go birdwatching?", "birds"),
            q("third-person", "What are the names of the user's grandchildren?", "grandkids"),
            q("third-person", "What brand of hearing aids did the user get?", "hearing"),
            q("third-person", "Whose biography is the user reading?", "reading"),
            q("paraphrase", "What medication does the user take for hypertension?", "amlodipine"),
            q("paraphrase", "Where do they do charity work?", "oxfam"),
            q("paraphrase", "Which elusive marsh bird did the user spot?", "bittern"),
            q("paraphrase", "What does the user's daughter do for a living?", "claire"),
            q("temporal", "When did the user get hearing aids?", "hearing"),
            q("temporal", "When is the user's knee replacement?", "knee"),
            q("temporal", "When was Ruby's sixth birthday?", "ruby"),
            q(
                "multi-hop",
                "Who will look after the user after the knee operation, and where does she live?",
                "claire",
                "help",
            ),
            q(
                "multi-hop",
                "Which fjord did the user sail into, and who did they travel with?",
                "cruise",
                "cruise_done",
            ),
            upd("What dose of amlodipine does the user take now?", ("dose",), ("amlodipine",)),
            upd("Which day does the user volunteer now?", ("oxfam_new",), ("oxfam",)),
            q("third-person", "On which day does the user look after the grandchildren?", "grandkids"),
            none("Does the user have a dog?", "dog"),
            none("What is the user's husband's name?", "husband", "wife", "partner"),
            none("Which football team does the user support?", "football"),
            none("Does the user drive?", "drive", "car"),
            none("What is the speed of light?", "light"),
        ),
    ),
)


# ------------------------------------------------------------------------------------------------ layout
@dataclass(frozen=True)
class Built:
    """One conversation laid out: ``turns`` (rows of turns.jsonl), ``qa`` (rows of qa.jsonl)."""

    turns: list[dict]
    qa: list[dict]


def _fail(conv_id: str, message: str) -> SystemExit:
    return SystemExit(f"make_agent_dev: {conv_id}: {message}")


def _turn(conv: Conversation, session: int, n: int, when: str, role: str, text: str) -> dict:
    """A row of turns.jsonl."""
    return {
        "conv_id": conv.conv_id,
        "dia_id": f"D{session}:{n}",
        "session": f"session_{session}",
        "session_date_time": when,
        "speaker": conv.user if role == "user" else conv.assistant,
        "text": text,
        "role": role,
    }


def _session_lines(conv: Conversation, lines: tuple[Line, ...], rng: random.Random, used: set[str]) -> list[Line]:
    """A session's user turns with an opener / closer exchange added where the draw says so (never one that the
    conversation already used, never next to a chit-chat turn of its own)."""
    out = list(lines)
    if lines[0][0] is not None and rng.random() < 0.5:
        opener = next(o for o in _shuffled(OPENERS, rng) if o[0] not in used)
        used.add(opener[0])
        out.insert(0, (None, opener[0], opener[1]))
    if lines[-1][0] is not None and lines[-1][2] is None and rng.random() < 0.6:
        closer = next(c for c in _shuffled(CLOSERS, rng) if c[0] not in used)
        used.add(closer[0])
        out.append((None, closer[0], closer[1]))
    return out


def _shuffled(pairs: tuple[tuple[str, str], ...], rng: random.Random) -> list[tuple[str, str]]:
    order = list(pairs)
    rng.shuffle(order)
    return order


def build(conv: Conversation) -> tuple[Built, dict[str, tuple[int, str]]]:
    """Lay out one conversation: rows, and ``{fact key: (session number, dia_id)}``.

    Raises:
        SystemExit: a repeated key, or a session count outside 3..5.
    """
    if not 3 <= len(conv.sessions) <= 5:
        raise _fail(conv.conv_id, f"{len(conv.sessions)} sessions (3..5 expected)")
    rng = random.Random(f"agent_dev:{conv.conv_id}")
    rows: list[dict] = []
    where: dict[str, tuple[int, str]] = {}
    used: set[str] = set()
    last_ack = ""
    for s, (when, lines) in enumerate(conv.sessions, start=1):
        n = 0
        for key, text, reply in _session_lines(conv, lines, rng, used):
            n += 1
            rows.append(_turn(conv, s, n, when, "user", text))
            if key is not None:
                if key in where:
                    raise _fail(conv.conv_id, f"fact key {key!r} repeated")
                where[key] = (s, f"D{s}:{n}")
            if reply is None:
                reply = rng.choice([a for a in ACKS if a != last_ack])
                last_ack = reply
            n += 1
            rows.append(_turn(conv, s, n, when, "assistant", reply))
    return Built(rows, _questions(conv, where, rows)), where


def _questions(conv: Conversation, where: dict[str, tuple[int, str]], rows: list[dict]) -> list[dict]:
    """The rows of qa.jsonl for one conversation, each question checked (module docstring)."""
    text = "\n".join(r["text"] for r in rows).lower()
    out = []
    for i, (category, question, keys, extra) in enumerate(conv.questions):
        if category not in CATEGORIES:
            raise _fail(conv.conv_id, f"unknown category {category!r}")
        unknown = [k for k in (*keys, *(extra if category == "updated" else ())) if k not in where]
        if unknown:
            raise _fail(conv.conv_id, f"{question!r}: unknown key(s) {unknown}")
        sessions = {where[k][0] for k in keys}
        if category == "unanswerable":
            found = [w for w in extra if re.search(rf"\b{re.escape(w.lower())}\b", text)]
            if keys or not extra or found:
                raise _fail(conv.conv_id, f"{question!r}: unanswerable but {found or 'no absent words / has keys'}")
        elif not keys:
            raise _fail(conv.conv_id, f"{question!r}: no evidence")
        if category == "multi-hop" and len(sessions) < 2:
            raise _fail(conv.conv_id, f"{question!r}: multi-hop evidence in one session")
        if category == "updated" and (not extra or max(where[k][0] for k in extra) >= min(sessions)):
            raise _fail(conv.conv_id, f"{question!r}: the updated fact is not later than the one it replaces")
        out.append(
            {
                "conv_id": conv.conv_id,
                "qa_id": f"{conv.conv_id}#{i}",
                "question": question,
                "category": CATEGORIES[category],
                "category_name": category,
                "evidence": [where[k][1] for k in keys],
            }
        )
    return out


def generate() -> tuple[bytes, bytes, dict[str, int]]:
    """Both files' bytes (UTF-8, one JSON object a line, ``\\n`` endings) and counts by what they hold.

    Raises:
        SystemExit: a check failed (module docstring).
    """
    turns: list[dict] = []
    qa: list[dict] = []
    ids = [c.conv_id for c in CONVERSATIONS]
    if len(set(ids)) != len(ids):
        raise SystemExit("make_agent_dev: repeated conversation id")
    for conv in CONVERSATIONS:
        built, _ = build(conv)
        turns += built.turns
        qa += built.qa
    counts = _counts(turns, qa)
    answerable = counts["questions"] - counts["q:unanswerable"]
    if len(CONVERSATIONS) < 12 or answerable < 220 or counts["q:unanswerable"] < 60:
        raise SystemExit(f"make_agent_dev: too few conversations or questions: {counts}")
    return _dump(turns), _dump(qa), counts


def _dump(rows: list[dict]) -> bytes:
    """JSON lines, UTF-8, ``\n`` endings, keys in the order written."""
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _counts(
    turns: list[dict], qa: list[dict], acks: Iterable[str] = ACKS, question_marks: tuple[str, ...] = ("?",)
) -> dict[str, int]:
    """``conversations``, ``sessions``, ``turns``, ``user``, ``assistant`` turns, assistant ``acks`` /
    ``questions_back`` / ``other_replies``, ``named_conversations``, ``questions`` and ``q:<category>`` (``acks``:
    the acknowledgement texts; a question back ends with one of ``question_marks``)."""
    acks = frozenset(acks)
    assistant = [r["text"] for r in turns if r["role"] == "assistant"]
    out = {
        "conversations": len({r["conv_id"] for r in turns}),
        "named_conversations": len({r["conv_id"] for r in turns if r["role"] == "user" and r["speaker"]}),
        "sessions": len({(r["conv_id"], r["session"]) for r in turns}),
        "turns": len(turns),
        "user": len(turns) - len(assistant),
        "assistant": len(assistant),
        "acks": sum(1 for t in assistant if t in acks),
        "questions_back": sum(1 for t in assistant if t not in acks and t.endswith(question_marks)),
        "questions": len(qa),
    }
    out["other_replies"] = out["assistant"] - out["acks"] - out["questions_back"]
    for r in qa:
        out[f"q:{r['category_name']}"] = out.get(f"q:{r['category_name']}", 0) + 1
    return out


def main(argv: list[str] | None = None) -> int:
    return cli(argv, generate, OUT, __doc__.split("\n\n")[0])


def cli(argv: list[str] | None, make: Callable[[], tuple[bytes, bytes, dict[str, int]]], out: Path, doc: str) -> int:
    """The command line of a generator (this one and ``make_agent_dev_zh.py``): write ``turns.jsonl`` and
    ``qa.jsonl`` made by ``make`` into ``--out`` (default ``out``), or with ``--check`` exit 1 when they differ."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--out", type=Path, default=out, help=f"output folder (default {out})")
    parser.add_argument("--check", action="store_true", help="compare with the files in --out instead of writing")
    args = parser.parse_args(argv)
    turns, qa, counts = make()
    files = {"turns.jsonl": turns, "qa.jsonl": qa}
    if args.check:
        stale = [n for n, data in files.items() if not (args.out / n).is_file() or (args.out / n).read_bytes() != data]
        print(f"{args.out}: " + (f"differs ({', '.join(stale)})" if stale else "up to date"))
        return 1 if stale else 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (args.out / name).write_bytes(data)
    print(json.dumps(counts, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
