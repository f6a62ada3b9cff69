"""Cheap, deterministic name cues found in transcript text.

The simulated producer uses these to make its fake responses plausible:
real SRD spell and monster names that occur in a chunk, and capitalised
words that look like proper names (items, locations). This is a heuristic,
not an NLP model: it only has to be grounded in the text.

NPC names are not guessed from capitalisation, which takes every word that
starts a sentence ("Although", "Anyways") and the table's swearing for a
name: an NPC name is a capitalised run holding a name of the bundled list
of plausible fantasy names (`data/npc-names.txt`), or a speaker of the
transcript. A guard drops any name with a word of `PROFANITY` and strips
leading words of `SENTENCE_INITIAL` (and the stop words) from every name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from sample.srd import SrdSpell, load_monsters, load_spells

NPC, ITEM, LOCATION = "npc", "item", "location"

# Capitalised words that are common at the start of a sentence or in table
# talk; the source-vocabulary check below catches most of the rest.
STOPWORDS = frozenset("""
the and but for nor yet with from into onto upon that this these those there here then than
what when where which while who whom whose why how you your yours they them their she her hers
his him its our ours we well yes yeah yep nope okay alright right all also just now not let
can could would should will shall may might must have has had did does don doesn isn wasn are
was were been being one two three four five six seven eight nine ten first second third next
last thank thanks hello hey wait come look make take give roll see tell get got going good
great nice cool sure sorry please maybe because like very really some any every each both
after before still even never always again actually anyway however plus hmm ooh ugh wow aye
damn shit fuck god jesus christ oh okay yup everyone everybody someone something nothing
anything part back top most easily definitely obviously lovely welcome greetings looking so
monday tuesday wednesday thursday friday saturday sunday january february march april june
july august september october november december critical role geek sudden twitch twitter
dungeons dragons pathfinder natural mark born persuasion perception stealth insight athletics
acrobatics investigation arcana history religion medicine survival intimidation deception
strength dexterity constitution intelligence wisdom charisma advantage disadvantage
""".split())

# Common English words that start a sentence (or make one up) in table talk: never a name.
SENTENCE_INITIAL = frozenset("""
although anyways anyway agreed besides basically certainly clearly during exactly except excellent
finally fortunately unfortunately hopefully honestly indeed instead instinctively interesting
literally luckily meanwhile naturally negative neither nevertheless none nonetheless otherwise
perfect perhaps probably seriously strangely suddenly thankfully therefore though totally unless
whatever whenever wherever whichever whoever understandable absolutely apparently begrudgingly
hugely depending goodbye whoa woo yay huh gee jeez gah hyah huzzah boo boosh hush shush hurry
quiet steady calm enjoy kick punch shut wink dude ditto whatcha success confidence dignity pardon
excuse listen remember done guys folks ladies gentlemen
""".split())

# Never in a name, whatever the transcript says (a word that holds one of PROFANE_STEMS neither).
PROFANITY = frozenset("""
ass asses asshole assholes arse arsehole badass dumbass jackass balls ballsack bastard bastards
bitch bitches bollocks boobs bullshit butthole cock cocks crap crappy cunt damn dammit damnit
dick dicks dildo douche douchebag fag fuck fucked fucker fucking goddamn goddammit gonad gonads
hell jizz motherfucker penis piss pissed poop prick pussy shit shitballs shithead shitty slut
tit tits titties twat wank wanker whore
""".split())
PROFANE_STEMS = ("fuck", "shit", "cunt", "bitch", "twat", "wank", "piss", "ballsack")

# Words that may go before a listed name in an NPC name ("Lady Briarwood", "Keeper Yennen").
NAME_TITLES = frozenset("""
lady lord sir dame king queen prince princess duke duchess count countess baron baroness captain
keeper ironkeeper arcanist father mother brother sister master mistress uncle aunt elder
sovereign seeker doctor mister madam
""".split())

NPC_NAMES_FILE = "data/npc-names.txt"
LEADING_NOISE = STOPWORDS | SENTENCE_INITIAL  # stripped from the start of every capitalised run

ITEM_NOUNS = frozenset("""
sword longsword shortsword greatsword axe greataxe bow longbow shortbow crossbow dagger daggers
shield armor armour potion potions scroll scrolls ring amulet staff wand gold coins key map
book cloak boots gauntlets helmet rope torch lantern hammer warhammer mace spear gem gems
necklace chest pouch bag coin trinket flask
""".split())

LOCATION_NOUNS = frozenset("""
tavern inn mine mines city temple cave cavern forest road gate keep tunnel tunnels bridge river
castle tower village town market camp dungeon chamber hall manor mountain mountains woods
""".split())

LOCATION_SUFFIXES = frozenset("""
manor keep hall city mountain mountains pits mines mine forest woods gate road tower temple
castle tavern inn river lake sea vale hold pass peak
""".split())

LOCATION_CUE_WORDS = frozenset("in to at from into through toward towards near reach".split())
ITEM_CUE_WORDS = frozenset("his her my your their our wielding holding carrying".split())

CAPITALISED = re.compile(r"(?<!['’])\b([A-Z][a-z]{2,}(?: [A-Z][a-z]{2,}){0,2})\b(?!['’]\w)")
WORD_BEFORE = re.compile(r"([A-Za-z]+)\W*$")
LOWER_WORD = re.compile(r"\b[a-z][a-z]+\b")


def _alternation(names: Iterable[str]) -> re.Pattern[str]:
    """Whole-word match of any name; multi-word names also match in lower case.

    Single-word spell and monster names ("Light", "Guard") are common words,
    so they only count when capitalised.
    """
    variants: set[str] = set()
    for name in names:
        variants.add(name)
        if " " in name:
            variants.add(name.lower())
    ordered = sorted(variants, key=lambda v: (-len(v), v))  # longest first
    return re.compile(r"\b(" + "|".join(map(re.escape, ordered)) + r")(?:s|es)?\b")


@dataclass(frozen=True, slots=True)
class UnitCues:
    """What one unit's text mentions (canonical SRD names, raw name candidates)."""
    spells: tuple[str, ...]
    monsters: tuple[str, ...]
    names: tuple[tuple[str, str], ...]  # (candidate name, NPC/ITEM/LOCATION guess)


def is_profane(word: str) -> bool:
    folded = word.lower()
    return folded in PROFANITY or any(stem in folded for stem in PROFANE_STEMS)


def is_guarded(word: str) -> bool:
    """A word no name may be: profanity, a common sentence-initial word, a stop word."""
    folded = word.lower()
    return is_profane(word) or folded in SENTENCE_INITIAL or folded in STOPWORDS


@lru_cache(maxsize=1)
def npc_names() -> frozenset[str]:
    """The bundled plausible fantasy names (one word each; ``data/npc-names.txt``)."""
    text = resources.files("sample").joinpath(NPC_NAMES_FILE).read_text(encoding="utf-8")
    names = frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))
    assert not any(is_guarded(name) for name in names), "a listed NPC name is a guarded word"
    return names


def listed_npc_name(words: Sequence[str]) -> str | None:
    """The longest run of ``words`` made of listed names and titles that ends on a listed name ("Against
    Keyleth" -> "Keyleth", "Lady Briarwood" -> "Lady Briarwood", "House Greyspine" -> "Greyspine")."""
    listed, best, run = npc_names(), [], []
    for word in [*words, ""]:
        if word in listed or word.lower() in NAME_TITLES:
            run.append(word)
            continue
        while run and run[-1] not in listed:  # titles after the last name are not part of it
            run.pop()
        if len(run) > len(best):
            best = run
        run = []
    return " ".join(best) if best else None


@lru_cache(maxsize=4096)
def speaker_names(label: str) -> tuple[str, ...]:
    """The names in a speaker label, as names are written ("LAURA, SAM" -> Laura, Sam; "ALL" -> none)."""
    words = (word.capitalize() for word in re.findall(r"[A-Za-z]+", label))
    return tuple(dict.fromkeys(word for word in words if len(word) > 1 and not is_guarded(word)))


class CueFinder:
    """Finds cues in unit texts; results are cached per distinct text."""

    def __init__(self, spells: Sequence[SrdSpell] | None = None,
                 monsters: Sequence[str] | None = None) -> None:
        self.spells = {s.name: s for s in (spells or load_spells())}
        self.monsters = tuple(monsters or load_monsters())
        self._canonical = {name.lower(): name for name in [*self.spells, *self.monsters]}
        self._spell_pattern = _alternation(self.spells)
        self._monster_pattern = _alternation(self.monsters)
        self._cache: dict[str, UnitCues] = {}

    def unit_cues(self, text: str) -> UnitCues:
        cues = self._cache.get(text)
        if cues is None:
            cues = self._cache[text] = self._find(text)
        return cues

    def _find(self, text: str) -> UnitCues:
        spells = self._canonical_hits(self._spell_pattern, text)
        monsters = self._canonical_hits(self._monster_pattern, text)
        known = {name.lower() for name in (*spells, *monsters)}
        names = [hit for hit in self._name_hits(text) if hit[0].lower() not in known]
        return UnitCues(spells, monsters, tuple(names))

    def _canonical_hits(self, pattern: re.Pattern[str], text: str) -> tuple[str, ...]:
        hits = (self._canonical[m.group(1).lower()] for m in pattern.finditer(text))
        return tuple(dict.fromkeys(hits))

    @staticmethod
    def _name_hits(text: str) -> list[tuple[str, str]]:
        hits: list[tuple[str, str]] = []
        for match in CAPITALISED.finditer(text):
            words = match.group(1).split(" ")
            while words and words[0].lower() in LEADING_NOISE:
                words.pop(0)
            if not words or any(is_profane(word) for word in words):
                continue
            npc = listed_npc_name(words)
            if npc is not None and words[-1].lower() not in LOCATION_SUFFIXES:
                hits.append((npc, NPC))
                continue
            before = WORD_BEFORE.search(text, 0, match.start())
            kind = _guess_kind(words, before.group(1).lower() if before else "")
            if kind != NPC and not all(word.lower() in NAME_TITLES for word in words):
                hits.append((" ".join(words), kind))  # NPC names come from the list and the speakers only
        for word in LOWER_WORD.findall(text):
            if word in ITEM_NOUNS:
                hits.append((word, ITEM))
            elif word in LOCATION_NOUNS:
                hits.append((word, LOCATION))
        return hits


def _guess_kind(words: list[str], cue: str) -> str:
    if words[-1].lower() in LOCATION_SUFFIXES or cue in LOCATION_CUE_WORDS:
        return LOCATION
    if cue in ITEM_CUE_WORDS:
        return ITEM
    return NPC


def source_vocabulary(texts: Iterable[str]) -> frozenset[str]:
    """Lower-case words of a source: a capitalised word that also occurs in
    lower case is probably an ordinary word, not a name."""
    vocabulary: set[str] = set()
    for text in texts:
        vocabulary.update(LOWER_WORD.findall(text))
    return frozenset(vocabulary)


def speaker_words(speakers: Iterable[str]) -> frozenset[str]:
    """Title-cased words of the speaker labels ("MATT" -> "matt"), lower-cased."""
    words: set[str] = set()
    for speaker in speakers:
        words.update(w.lower() for w in re.findall(r"[A-Za-z]+", speaker))
    return frozenset(words)


def looks_like_name(candidate: str, vocabulary: frozenset[str], speakers: frozenset[str]) -> bool:
    """Whether an item or location cue looks like a name of this source (NPC names are listed ones)."""
    words = candidate.lower().split(" ")
    if candidate.islower():  # item/location nouns were chosen from a fixed list
        return True
    if any(word in speakers for word in words):
        return False
    return any(word not in vocabulary and word not in STOPWORDS for word in words)
