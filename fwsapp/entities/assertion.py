"""A fact's assertion: affirmed, negated ("no fever"), or uncertain or hypothetical ("may cause a rash", "if you
have diabetes").

NegEx (Chapman et al. 2001) as negspacy implements it, with negspacy's clinical trigger terms: a trigger negates the
facts after it (or before it, for following triggers such as "was ruled out") up to the sentence's end or a
terminating word ("but", "however", and ConText's "because", "since"), so in "no fever but cough" only fever is
negated, and, as NegEx first had it, only within a few words of it (`NEGATION_WINDOW`). negspacy has no uncertainty;
ConText (Harkema et al. 2009) extends NegEx to it with more trigger terms, and medspaCy implements ConText, but
medspaCy 1.3.1 requires spaCy < 3.8 on Python 3.11 (fwsapp runs spaCy 3.8) with PyRuSH and QuickUMLS. So the
uncertainty here is negspacy's same NegEx algorithm run a second time with ConText's uncertain and hypothetical
triggers below, and negation wins where both apply.
"""
from __future__ import annotations

from functools import lru_cache

from negspacy.negation import Negex

from fwsapp.entities.recognizers.bounds import COMPARATIVES, LIMIT_VERBS, VERB_NEGATIONS
from fwsapp.entities.recognizers.tokenizer import BULLETS, english

AFFIRMED, NEGATED, UNCERTAIN = "affirmed", "negated", "uncertain"
ASSERTIONS = (AFFIRMED, NEGATED, UNCERTAIN)

# A clause of cause ends a negation's (and an uncertainty's) scope, as ConText's rules have it and NegEx's clinical set not:
# "this is not ideal because you then need three times the air for the same oxygen" negated oxygen, and "cannot take
# estrogen because of migraine, blood clots or high blood pressure" the three conditions the patient has. Read one by
# one in the paper's 7B answers, each of the 38 facts this changed was wrongly negated before.
CAUSE_TERMINATIONS = ["because", "since"]
# Triggers that negspacy's clinical set counts as negations and NegEx's own list (chapmanbe/negex, negex_triggers.txt)
# marks possible ([PREP]): "tests to rule out lymphoma" say lymphoma may be there. They are uncertainty here.
POSSIBLE_NOT_NEGATED = ("rule out", "rule him out", "rule her out", "rule patient out", "rule the patient out", "r/o",
                        "ro")
# ConText's uncertainty ("possible", "suspected") and hypothetical ("if", "should you develop", "risk of") triggers
# that occur in patient-facing text, in negspacy's termset format.
UNCERTAINTY_TERMSET = {
    "pseudo_negations": ["no doubt", "without doubt", "not possible"],
    "preceding_negations": [
        "may", "might", "could", "can cause", "can lead to", "possible", "possibly", "probable", "probably",
        "suspected", "suspect", "suspicion of", "question of", "questionable", "likely", "unlikely", "perhaps",
        "if", "unless", "whether", "should you", "in case of", "risk of", "risk for", "at risk of", "to rule out",
        *POSSIBLE_NOT_NEGATED, "concern for", "consistent with", "suggestive of", "would", "potential", "potentially",
    ],
    "following_negations": ["is possible", "are possible", "is suspected", "are suspected", "cannot be excluded",
                            "cannot be ruled out", "is likely", "is unlikely", "may be present"],
    "termination": ["but", "however", "although", "though", "yet", "except", "apart from", "aside from",
                    "nevertheless", "still", "then", "which", *CAUSE_TERMINATIONS],
}
FACTS_KEY = "facts"
# The spans of the facts a negation is read into as a limit ("do not take ibuprofen for more than 10 days" is '≤ 10
# days'): a trigger inside one negates nothing, so the drug it names between is not negated.
LIMITS_KEY = "limits"
# How many words a negation trigger reaches, as in NegEx's first form (Chapman et al. 2001: a finding within five words
# of its trigger); negspacy reaches the sentence's end. Patient-facing answers write long sentences: in the paper's 7B
# answers, of facts negated from six words or more away, 1 of 28 read was negated ("if you have no idea why you are
# experiencing mouth ulcers", "not recommended ... for the treatment of malaria"), against 9 of 14 within two words and
# 5 of 14 within three to five; they were half of all negated facts.
NEGATION_WINDOW = 5
# NegEx's clinical set calls "not cause" a pseudo-negation (a radiology idiom); in text about drugs, "does not cause
# weight gain" negates the effect, which is the fact a watermark can flip.
NOT_PSEUDO = frozenset({"not cause"})
# Not negations: the possible triggers above, and "versus", which NegEx's own list lacks: in a note it weighs two
# diagnoses, in the paper's answers it compares two treatments ("metronidazole versus placebo": 5 of 5 read).
NOT_NEGATIONS = frozenset({*POSSIBLE_NOT_NEGATED, "versus"})
# Turns of patient-facing prose that negate no finding: a litotes ("heart disease is not uncommon", "by no means
# uncommon"), a comment ("it is not surprising that asthma ..."), a part ("not just from the cancer", "not all cases of
# dystonia", "not everyone with shingles develops postherpetic neuralgia"), an alternative ("presence or absence of
# hyponatraemia", "whether or not you had a premature birth", "if not treated, can lead to gangrene"), "no idea why you
# have mouth ulcers". Read in the paper's answers, each negated the finding after it.
PROSE_PSEUDO_NEGATIONS = ("not uncommon", "not unusual", "not surprising", "not surprisingly", "by no means",
                          "not just", "not all", "not every", "not everyone", "not everybody", "presence or absence",
                          "whether or not", "if not", "no idea", "not sure", "no doubt")
# Patient-facing answers say what a condition lacks: "there is no cure for kidney failure", "no specific treatment for
# cri du chat syndrome", "no proven vaccine to prevent Ebola", "no specific test for fibromyalgia", and what it does
# untreated: "without proper treatment, it can be hard to become pregnant". The intervention is negated, the condition
# is not; NegEx's clinical set, written for notes ("no pneumonia"), negated all 12 conditions after a cure, treatment
# or vaccine in the paper's 5,400 answers.
INTERVENTION_PSEUDO_NEGATIONS = tuple(
    f"{absent} {qualifier}{intervention}" for absent in ("no", "without")
    for qualifier in ("", "known ", "specific ", "effective ", "proven ", "approved ", "definitive ", "particular ",
                      "proper ", "prompt ", "appropriate ", "early ", "any ", "medical ")
    for intervention in ("cure", "cures", "treatment", "treatments", "therapy", "therapies", "vaccine", "vaccines",
                         "medication", "medications", "medicine", "medicines", "test", "tests", "diet",
                         "way to prevent", "way to cure"))

# A limit is no negation: "do not exceed 4 g of acetaminophen a day", "no more than 14 units of alcohol a week" state
# the most of a dose, and NegEx negated both the dose and the drug, so "up to 4 g" against it read as a flipped
# assertion. So is one with its verb between: "do not take more than 4 g" is "take no more than 4 g" (it read as a
# flipped assertion against it). The limits' words are the bounds'. A limit with its amount or length is a fact whose
# value holds the negation, and negates nothing inside it (`LIMITS_KEY`: "do not use it for more than 7 days", "do not
# take ibuprofen more than 3 times a day"); these phrases are for the limits with none ("do not take more than the
# recommended dose of paracetamol").
LIMIT_PSEUDO_NEGATIONS = (*(f"{negation} {comparative} than" for negation in ("no", "not", "never")
                            for comparative in COMPARATIVES),
                          *(f"{negation} {verb} {comparative} than" for negation in VERB_NEGATIONS
                            for verb in LIMIT_VERBS for comparative in COMPARATIVES),
                          "not exceed", "not to exceed", "never exceed", "never to exceed")

# Who or what a treatment is not for is no negation of it: "not suitable for people with poor circulation", "not
# recommended for dyspepsia of acute onset", "should not be used during the first trimester of pregnancy" name the
# people, the condition or the time the advice is about, which NegEx negated.
INDICATION_PSEUDO_NEGATIONS = tuple(
    f"not {be}{verdict} {preposition}" for be in ("", "be ")
    for verdict in ("recommended", "suitable", "advised", "indicated", "appropriate", "safe", "used", "given",
                    "prescribed")
    for preposition in ("for", "in", "during"))

# Triggers that reach less far than NEGATION_WINDOW. "Free" negates the word before it alone ("pork-free", "gluten free
# warfarin"): reaching back to the sentence's start, "Is gelatin an ingredient of vitamin D and is it pork-free?" negated
# gelatin and vitamin D, as the paper's drug-ingredient questions (MeQSum) ask about a drug.
TRIGGER_REACH = {"free": 0}


def negation_termset() -> dict[str, list[str]]:
    from negspacy.termsets import termset

    patterns = termset("en_clinical").get_patterns()
    return {**patterns, "pseudo_negations": [term for term in patterns["pseudo_negations"] if term not in NOT_PSEUDO]
            + [*INTERVENTION_PSEUDO_NEGATIONS, *PROSE_PSEUDO_NEGATIONS, *LIMIT_PSEUDO_NEGATIONS,
               *INDICATION_PSEUDO_NEGATIONS],
            "preceding_negations": [term for term in patterns["preceding_negations"] if term not in NOT_NEGATIONS],
            "termination": patterns["termination"] + CAUSE_TERMINATIONS}


def _item_boundaries(doc):
    """A sentence also ends at a line break and before a bullet: list items and paragraphs of model output often end
    with no full stop, and a negation's scope (up to the sentence's end) would run on into the next item. After a
    capital letter's full stop (a word of its own in the recognizers' words) it ends only before a capitalised word:
    "not vitamin D. Rickets follows" is two sentences, "N. gonorrhoeae is a commensal" one."""
    for token in doc[1:]:
        previous = doc[token.i - 1]
        if token.text[0] in BULLETS or (previous.is_space and "\n" in previous.text):
            token.is_sent_start = True
        elif previous.text == "." and token.i > 1 and _is_capital_letter(doc[token.i - 2]):
            token.is_sent_start = token.is_title
    return doc


def _is_capital_letter(token) -> bool:
    return len(token.text) == 1 and token.text.isupper() and not token.whitespace_


class WindowedNegex(Negex):
    """negspacy's NegEx with each trigger's reach bounded: `window` words (other punctuation than brackets not counted:
    "free T4 (free thyroxine)" does not negate T4), or the trigger's own in `reach`. negspacy has no such bound, so its
    matching and scopes are reused and only the step that applies them is written here."""

    def __init__(self, *args, window: int, reach: dict[str, int], **kwargs):
        super().__init__(*args, **kwargs)
        self.window, self.reach = window, reach

    def negex(self, doc):
        preceding, following, terminating = self.process_negations(doc)
        limits = doc.spans[LIMITS_KEY] if LIMITS_KEY in doc.spans else []

        def free(triggers):
            return [(match, start, end) for match, start, end in triggers
                    if not any(limit.start <= start and end <= limit.end for limit in limits)]

        preceding, following = free(preceding), free(following)

        def near(start: int, end: int, trigger) -> bool:
            words = sum(not token.is_space and (token.is_bracket or not token.is_punct) for token in doc[start:end])
            return words <= self.reach.get(trigger.text.lower(), self.window)

        for low, high in self.termination_boundaries(doc, terminating):
            for span in self.yield_spans_within_boundary(doc, (low, high), self.span_keys):
                if any(low <= start and end <= span.start and near(end, span.start, doc[start:end])
                       for _, start, end in preceding) or \
                        any(span.end <= start < high and near(span.end, start, doc[start:end])
                            for _, start, end in following):
                    span._.set(self.extension_name, True)
        return doc


@lru_cache(maxsize=1)
def _pipeline():
    """The recognizers' English words with a sentence splitter (items and lines ended), and the two NegEx passes run
    on a text's facts once they are its spans; built once per process."""
    from spacy.language import Language

    nlp = english()
    if not Language.has_factory("item_boundaries"):
        Language.component("item_boundaries", func=_item_boundaries)
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("item_boundaries")
    negation = WindowedNegex(nlp, "negation", negation_termset(), extension_name="negated", span_keys=[FACTS_KEY],
                             window=NEGATION_WINDOW, reach=TRIGGER_REACH)
    uncertainty = Negex(nlp, "uncertainty", UNCERTAINTY_TERMSET, extension_name="uncertain", span_keys=[FACTS_KEY])
    return nlp, (negation, uncertainty)


def assertions(texts: list[str], spans: list[list[tuple[int, int]]],
               limits: list[list[tuple[int, int]]] | None = None) -> list[list[str]]:
    """The assertion of each span (character offsets) of each text, in the order given; `limits`, each text's spans
    of the facts whose negation is read into their value (a bound turned), negate nothing inside them."""
    nlp, passes = _pipeline()
    found = []
    for doc, text_spans, text_limits in zip(nlp.pipe(texts), spans, limits or [[] for _ in texts]):
        group = [doc.char_span(start, end, alignment_mode="expand") for start, end in text_spans]
        doc.spans[FACTS_KEY] = [span for span in group if span is not None]
        doc.spans[LIMITS_KEY] = [span for start, end in text_limits
                                 if (span := doc.char_span(start, end, alignment_mode="expand")) is not None]
        for assertion_pass in passes:
            doc = assertion_pass(doc)
        found.append([AFFIRMED if span is None else
                      NEGATED if span._.negated else
                      UNCERTAIN if span._.uncertain else AFFIRMED for span in group])
    return found


@lru_cache(maxsize=64)
def sentence_starts(text: str) -> tuple[int, ...]:
    """Where each sentence of `text` begins (character offsets), split as an assertion's scope is: at full stops, line
    breaks and bullets. Cached: an answer's reference is held against both of its answers."""
    nlp, _ = _pipeline()
    return tuple(sentence.start_char for sentence in nlp(text).sents)
