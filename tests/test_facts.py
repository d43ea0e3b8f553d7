"""Clinical facts and what changed between two texts: each change kind on made-up pairs, rewording that changes
nothing, negation scope, ranges and units, and the `facts` / `recognize --kind` command-line contract.

Model-free recognizers (MeSH for diseases, the drug lexicon, the dose grammar) keep this in the fast tier; the trained
taggers are held to their kinds' examples by the generic recognizer test."""
from __future__ import annotations

import json
import re

import pandas as pd

import pytest

from fwsapp.entities.changes import BY_CONCEPT, Change, changes, corruptions
from fwsapp.entities.facts import FactFinder
from fwsapp.entities.recognizers.doses import dose_value
from fwsapp.entities.recognizers.durations import duration_value

MODEL_FREE = {"disease": "mesh", "chemical": "drug-lexicon", "dose": "doses"}


@pytest.fixture(scope="module")
def finder():
    return FactFinder(MODEL_FREE)


def compared(finder, text: str, against: str) -> list[Change]:
    facts, against_facts = finder.find_many([text, against])
    return changes(text, facts, against, against_facts)


def test_each_change_kind_is_found_with_its_span_and_what_it_was(finder):
    text = "Take 5000 mg of ibuprofen for arthritis."
    assert compared(finder, text, "Take 500 mg of ibuprofen for arthritis.") == [Change("dose", 5, 12, "500 mg", "5000 mg")]
    assert compared(finder, text, "Take 5000 mg of aspirin for arthritis.") == [Change("drug", 16, 25, "aspirin", "ibuprofen")]
    assert compared(finder, text, "Take 5000 mg of ibuprofen for asthma.") == [Change("disease", 30, 39, "asthma", "arthritis")]
    assert compared(finder, "Metformin does cause weight gain.", "Metformin does not cause weight gain.") == [
        Change("negation", 21, 32, "negated", "affirmed")]
    misspelt = "Take metfromin with food to avoid nausea."
    assert compared(finder, misspelt, "Take metformin with food to avoid nausea.") == [
        Change("corruption", 5, 14, "metformin", "metfromin")]


def test_no_drug_is_a_name_of_two_letters_a_function_word_or_an_organ(finder):
    """The lexicon's "[he]" (helium) normalised to "he", so "He was given morphine" gave a drug "He"; "more" (a
    brand of pancreatic enzymes) was a third of its matches in the paper's answers; and it files "thyroid gland" under
    desiccated thyroid, a drug in 22 of those answers."""
    facts = finder.find_many(["He was given morphine. No change in 2 3 weeks. He took Li at night, and more of it "
                              "sits in the caps. The thyroid gland is small."])[0]
    assert [(fact.kind, fact.text) for fact in facts] == [("chemical", "morphine")]
    # Clinical text's readings: CPPD is a disease (an antioxidant of rubber to the package), "beta 2" a receptor
    # (isoetharine), DMPA depot medroxyprogesterone (the herbicide Zytron); "at 10" (a brand of dihydrotachysterol) no
    # name at all.
    facts = finder.find_many(["Symptomatic CPPD starts at 10 years after a beta 2 agonist and DMPA injections."])[0]
    assert [(fact.kind, fact.text, fact.value) for fact in facts if fact.kind == "chemical"] == [
        ("chemical", "DMPA", "medroxyprogesterone acetate")]


def kept_of_proposed(text: str, proposed: list[str]) -> list[str]:
    """The chemical mentions kept of those a backend proposes (each name at its first use as a word of its own), by the
    chemical kind's declared bounds and rule, which every chemical recognizer passes its backend's mentions through."""
    from fwsapp.entities.recognizers.base import Entity, Recognizer

    class Proposing(Recognizer):
        kind = "chemical"

        def candidates(self, texts):
            found = [re.search(rf"(?<![A-Za-z]){re.escape(name)}(?![A-Za-z])", texts[0]) for name in proposed]
            return [[Entity(match.group(), match.start(), match.end()) for match in found]]

    return [entity.text for entity in Proposing().find(text)]


def test_a_number_a_lone_small_letter_or_function_words_name_no_chemical():
    """The chemical tagger's strays in the paper's answers, dropped for every chemical recognizer by the kind's
    declared rule: an NDC code, the "e" of "e- cigarettes", "ca" of "ca n't"; elements' symbols, "Ca" (calcium) among
    them, and a formula still name chemicals."""
    kept = ["Ca", "K", "T4"]
    assert kept_of_proposed("NDC 0555-0952-02. The e- cigarettes. I ca n't take Ca, K or free T4.",
                            ["0555-0952-02", "e", "ca", *kept]) == kept


def test_no_amount_is_part_of_a_drugs_name():
    """The chemical tagger's "lisinopril 10mg" was a concept of its own, so "lisinopril 10 mg" against it was a drug
    changed, and "10 IU" a drug: every chemical recognizer's mentions end where an amount begins and start after one,
    and a mention inside an amount is none. A number without a unit, or one that is no dose, stays in the name."""
    text = ("Start lisinopril 10mg qd. Insulin 10 IU at night. Vitamin D 1000 IU daily. Apply 1% hydrocortisone. "
            "Vitamin B 12, rhodamine 6G, and do not take ibuprofen more than 400 mg.")
    proposed = ["lisinopril 10mg", "10 IU", "Vitamin D 1000", "1000 IU", "1% hydrocortisone", "Vitamin B 12",
                "rhodamine 6G", "ibuprofen"]
    assert kept_of_proposed(text, proposed) == [
        "lisinopril", "Vitamin D", "hydrocortisone", "Vitamin B 12", "rhodamine 6G", "ibuprofen"]


@pytest.mark.model  # the chemical tagger
def test_a_dose_written_another_way_changes_no_drug():
    """The tagger's "lisinopril 10mg" against "lisinopril 10 mg" was a drug added, and its "10 IU" a drug removed."""
    tagged = FactFinder({**MODEL_FREE, "chemical": "chemical-tagger"})
    assert compared(tagged, "Start lisinopril 10 mg once daily.", "Start lisinopril 10mg qd.") == []
    assert compared(tagged, "Insulin 10 units at bedtime.", "Insulin 10 IU at bedtime.") == []


def test_the_names_one_inn_spelling_makes_one_drug_have_one_identifier_each():
    """The drugs the package files under names one INN spelling makes one (`inn_spelling`) are one by DrugBank's and
    MeSH's identifiers too: no group holds two of either."""
    from fwsapp.entities.recognizers.base import normalize
    from fwsapp.entities.recognizers.drugs import drug_dictionary, inn_spelling, package_records

    groups = {}
    for canonical in {targets[0] for targets in drug_dictionary().values()}:
        groups.setdefault(inn_spelling(normalize(canonical)), set()).add(canonical)
    merged = [names for names in groups.values() if len({normalize(name) for name in names}) > 1]
    assert {"aciclovir", "acyclovir"} in merged and 5 <= len(merged) < 20
    for names in merged:
        for identifier in ("drugbank_id", "mesh_id"):
            assert len({package_records().get(name, {}).get(identifier) for name in names} - {None}) <= 1, names


def test_a_fact_added_or_removed_is_a_change_with_an_empty_side(finder):
    added = compared(finder, "Rest, drink fluids and take ibuprofen if the fever is high.",
                     "Rest, drink fluids and see a doctor if the fever is high.")
    assert [(change.kind, change.was, change.now) for change in added] == [("drug", "", "ibuprofen")]
    removed = compared(finder, "Rest, drink fluids and see a doctor if the fever is high.",
                       "Rest, drink fluids and take ibuprofen if the fever is high.")
    assert [(change.kind, change.was, change.now) for change in removed] == [("drug", "ibuprofen", "")]


def test_rewording_that_changes_no_fact_is_no_change(finder):
    original = "Patients with asthma should take salbutamol, and they must avoid smoke."
    for reworded in ("Patients with asthma ought to take salbutamol; and they must avoid smoke!",  # synonym, punctuation
                     "They must avoid smoke, and patients with asthma should take salbutamol.",  # clauses reordered
                     "Patients with asthma should take Ventolin, and they must avoid smoke.",  # brand for generic
                     "People who have asthma should use salbutamol and must keep away from smoke."):  # a paraphrase
        assert compared(finder, reworded, original) == [], reworded
    # "Alcohol" alone is ethanol, as "ethyl alcohol" is: the package filed it under benzyl alcohol.
    assert compared(finder, "Avoid alcohol with metronidazole.", "Avoid ethyl alcohol with metronidazole.") == []
    assert [fact.value for fact in finder.find_many(["Avoid alcohol."])[0]] == ["ethanol"]
    # A British name is its US one, and an INN's spelling any other: the package filed "aciclovir" and "acyclovir",
    # "mesalazine" and "mesalamine" apart, and knew neither "adrenaline" nor "GTN".
    for british, american in (("aciclovir", "acyclovir"), ("cefalexin", "cephalexin"), ("mesalazine", "mesalamine"),
                              ("chlorphenamine", "chlorpheniramine"), ("adrenaline", "epinephrine"),
                              ("GTN", "nitroglycerin"), ("glyceryl trinitrate", "nitroglycerin"),
                              ("oestradiol", "estradiol")):
        assert compared(finder, f"She was given {british}.", f"She was given {american}.") == [], british
        assert [fact.kind for fact in finder.find_many([f"She was given {british}."])[0]] == ["chemical"], british


def test_negation_has_a_scope(finder):
    facts = finder.find_many(["The child has no fever but a cough, and may develop a rash."])[0]
    assertions = {fact.text: fact.assertion for fact in facts}
    assert assertions == {"fever": "negated", "cough": "affirmed", "rash": "uncertain"}
    # A clause of cause ends it (ConText's "because", "since"): the conditions are the patient's, not negated.
    facts = finder.find_many(["Women who cannot take estrogen because of migraine or high blood pressure may choose "
                              "other pills. The child has no fever since paracetamol was given."])[0]
    assert {fact.text: fact.assertion for fact in facts} == {
        "estrogen": "negated", "migraine": "affirmed", "high blood pressure": "affirmed", "fever": "negated",
        "paracetamol": "affirmed"}


def test_a_negation_reaches_five_words_as_negex_first_had_it(finder):
    """negspacy's triggers reached the sentence's end: in the paper's answers half the negated facts stood six words or
    more from their trigger, and almost none of those was negated ("not recommended ... for the treatment of malaria")."""
    text = ("It is not recommended that aspirin or other analgesics be used for the treatment of malaria. SARS is not "
            "caused by tuberculosis, influenza, or meningitis.")
    assert [(fact.text, fact.assertion) for fact in finder.find_many([text])[0]] == [
        ("aspirin", "negated"), ("analgesics", "negated"), ("malaria", "affirmed"), ("tuberculosis", "negated"),
        ("influenza", "negated"), ("meningitis", "negated")]


def test_what_negex_calls_possible_and_turns_of_prose_negate_no_finding(finder):
    """negspacy's clinical set negates after "rule out" (NegEx's own list: a possibility) and "versus"; and after a
    litotes or a comment ("not uncommon", "not surprising", "no idea"), as the paper's answers write them."""
    text = ("A biopsy is taken to rule out lymphoma. Lymphoma was ruled out. Metronidazole versus placebo for bacterial "
            "vaginosis. Antidepressants are not uncommon in patients with heart disease. It is not surprising that "
            "asthma and eczema go together. See a doctor if you have no idea why you have mouth ulcers. Not all cases "
            "of dystonia progress. Dose by the presence or absence of hypertension. No fever.")
    assert [(fact.text, fact.assertion) for fact in finder.find_many([text])[0] if fact.kind == "disease"] == [
        ("lymphoma", "uncertain"), ("Lymphoma", "negated"), ("bacterial vaginosis", "affirmed"),
        ("heart disease", "affirmed"), ("asthma", "affirmed"), ("eczema", "affirmed"), ("mouth ulcers", "uncertain"),
        ("dystonia", "affirmed"), ("hypertension", "affirmed"), ("fever", "negated")]


def test_a_cure_or_treatment_that_does_not_exist_negates_the_intervention_not_the_condition(finder):
    """As the paper's answers say it: NegEx's clinical terms negated kidney failure, the syndrome, gout and blindness
    here, and the neuralgia that only some patients get."""
    facts = finder.find_many(["There is no cure for kidney failure and no specific treatment for cri du chat syndrome, "
                              "though the child has no fever. There is no specific test for fibromyalgia. Without "
                              "proper treatment, gout leads to blindness in patients without diabetes. Not everyone "
                              "with shingles develops postherpetic neuralgia."])[0]
    assert {fact.text: fact.assertion for fact in facts} == {
        "kidney failure": "affirmed", "cri du chat syndrome": "affirmed", "fever": "negated", "fibromyalgia": "affirmed",
        "gout": "affirmed", "blindness": "affirmed", "diabetes": "negated", "shingles": "affirmed",
        "postherpetic neuralgia": "affirmed"}


def test_a_limit_on_a_dose_negates_neither_the_dose_nor_the_drug(finder):
    """"Do not exceed 4 g" states the most of a dose; NegEx negated the dose and the drug, so the same limit written as
    "up to 4 g" read as an assertion flipped. A negation beside a limit still negates."""
    facts = finder.find_many(["Do not exceed 4 g of acetaminophen per day. Drink no more than 14 units of alcohol a "
                              "week. Take not more than 8 tablets in 24 hours. Do not take aspirin; there is no fever."])[0]
    assert [(fact.text, fact.assertion) for fact in facts] == [
        ("Do not exceed 4 g", "affirmed"), ("acetaminophen", "affirmed"), ("no more than 14 units", "affirmed"),
        ("alcohol", "affirmed"), ("not more than 8 tablets", "affirmed"), ("in 24 hours", "affirmed"),
        ("aspirin", "negated"), ("fever", "negated")]
    assert [change.kind for change in compared(finder, "Take up to 4 g of acetaminophen per day.",
                                               "Do not exceed 4 g of acetaminophen per day.")] == []
    # With its verb between: "do not take more than" is "take no more than", not a flipped assertion.
    for limit in ("Do not take more than 8 tablets in 24 hours.", "Don't take more than 8 tablets in 24 hours.",
                  "Never use more than 8 tablets in 24 hours."):
        assert compared(finder, limit, "Take no more than 8 tablets in 24 hours.") == [], limit
    # With what it limits named between: the bound was not turned ("≥ 10 days") and the drug was negated, so the same
    # advice written the other way read as a length changed and an assertion flipped.
    for limit, same in (("Do not take ibuprofen for more than 10 days.", "Take ibuprofen for no more than 10 days."),
                        ("Do not take ibuprofen more than 3 times a day.", "Take ibuprofen up to 3 times a day."),
                        ("Don't use decongestant nasal sprays for longer than 3 days.",
                         "Use decongestant nasal sprays for 3 days or less."),
                        # what the verb is for between: it was a lower bound, "≥ 28 days" (one of the paper's answers)
                        ("Hydrocortisone cream is not intended to be used for more than four weeks.",
                         "Use hydrocortisone cream for no more than 4 weeks.")):
        assert compared(finder, limit, same) == [], limit
    assert [(fact.text, fact.value, fact.assertion) for fact in finder.find_many(
        ["Do not give children under 12 more than 2 tablets."])[0]] == [
        ("Do not give children under 12 more than 2 tablets", "≤ 2 tablet", "affirmed")]
    # How long to abstain is no limit: "do not drink alcohol for at least 48 hours" was read "≤ 2 days".
    assert [(fact.text, fact.value, fact.assertion) for fact in finder.find_many(
        ["Do not drink alcohol for at least 48 hours."])[0]] == [
        ("alcohol", "ethanol", "negated"), ("for at least 48 hours", "≥ 2 days", "negated")]


def test_a_courses_or_a_symptoms_length_is_a_fact_in_one_unit(finder):
    """How long a course or a symptom lasts is a fact: "for 7 days" against "for 10 days" changed nothing before the
    durations' kind; equal lengths are one value, a length with no number is none, and a limit on it negates nothing."""
    assert duration_value("for 2 weeks") == duration_value("for 14 days") == duration_value("14-day course") == "14 days"
    assert duration_value("for 48 hours") == duration_value("for two days") == "2 days" != duration_value("for 36 hours")
    assert duration_value("for a year") == duration_value("for 12 months") == "12 months"
    assert duration_value("for five to seven days") == duration_value("for 5-7 days") == "5-7 days"
    assert compared(finder, "Take amoxicillin 500 mg three times a day for 10 days.",
                    "Take amoxicillin 500 mg three times a day for 7 days.") == [
        Change("duration", 42, 53, "for 7 days", "for 10 days")]
    assert compared(finder, "My ear has been blocked for two weeks.", "Ear blocked for 14 days.") == []
    assert [fact.text for fact in finder.find_many(["For years he smoked; for a few days it hurt, then for an hour."])[0]
            if fact.kind == "duration"] == ["for an hour"]
    assert compared(finder, "Do not use it for more than 7 days.", "Use it for no more than 7 days.") == []


def test_a_bound_is_part_of_a_doses_or_a_lengths_value(finder):
    """"Less than 48 mmol/mol" is a target and "more than 48 mmol/mol" its opposite; "for less than three hours" and
    "for more than three hours" (both in one of the paper's HealthQA texts) likewise. The bound was read past, so a watermark that
    turned one into the other changed no fact. A limit is an upper bound however it is written, with its negation
    ("no more than", "do not exceed", "do not use it for more than"); strict and inclusive bounds are one."""
    assert dose_value("up to 4 g") == dose_value("Do not exceed 4 g") == dose_value("no more than 4000 mg") \
        == dose_value("less than 4 g") == dose_value("not to exceed 4 g") == "≤ 4000 mg"
    assert dose_value("at least 4 g") == dose_value("more than 4 g") == dose_value("not less than 4 g") == "≥ 4000 mg"
    assert dose_value("4 g") == "4000 mg"
    # As a sign: "LDL-C < 70 mg/dL", "BMI >30 kg/m2" (15 of the paper's dose mentions).
    assert dose_value("< 70 mg/dL") == dose_value("<70 mg/dL") == dose_value("below 70 mg/dL") == "≤ 70 mg/dL"
    assert dose_value(">= 2 tablets") == dose_value("≥2 tablets") == "≥ 2 tablet"
    assert duration_value("for > 48 hours") == "≥ 2 days"
    assert dose_value("more than once a day") == "≥ 1/day" and dose_value("up to 3 times a day") == "≤ 3/day"
    assert duration_value("for more than 3 hours") == duration_value("for at least three hours") == "≥ 3 hours"
    assert duration_value("for two days or less") == duration_value("for up to 48 hours") == "≤ 2 days"
    assert duration_value("for a week or longer") == duration_value("for over 7 days") == "≥ 7 days"
    assert duration_value("for about 2 weeks") == duration_value("for the next 14 days") == "14 days"
    assert compared(finder, "Keep your HbA1c to less than 48 mmol/mol.", "Keep your HbA1c to more than 48 mmol/mol.") == [
        Change("dose", 19, 40, "more than 48 mmol/mol", "less than 48 mmol/mol")]
    # Glued to its number, as a 7B answer wrote it: the amount, glued to a word, was no dose at all.
    assert dose_value("less than1.8 mmol/l") == dose_value("< 1.8 mmol/L") == "≤ 1.8 mmol/L"
    assert duration_value("for more than5 days") == "≥ 5 days"
    assert compared(finder, "The ring comes out for less than three hours.",
                    "The ring comes out for more than three hours.") == [
        Change("duration", 19, 44, "for more than three hours", "for less than three hours")]
    assert [change.kind for change in compared(finder, "Take up to 4 g a day.", "Take 4 g a day.")] == ["dose"]
    # The limit's negation is the bound's: the same limit written three ways is no change.
    assert compared(finder, "Do not use it for more than 7 days.", "Use it for no more than 7 days.") == []
    assert compared(finder, "Do not take more than 8 tablets a day.", "Take up to 8 tablets a day.") == []
    # A negated verb with no bound after it is no limit: the length alone is the fact.
    assert [fact.text for fact in finder.find_many(["You should not eat for 4 - 6 hours."])[0]] == ["for 4 - 6 hours"]


def test_whom_a_treatment_is_not_for_is_no_negation_of_their_condition(finder):
    """"Not suitable for people with asthma" names the people the advice is about; NegEx negated their asthma, so the
    same advice written "people with asthma should avoid it" read as a flipped assertion."""
    assert compared(finder, "Ibuprofen is not recommended for people with asthma.",
                    "People with asthma should avoid ibuprofen.") == []
    facts = finder.find_many(["It should not be used during an asthma attack, and it is not suitable in cases of gout. "
                              "There is no fever."])[0]
    assert [(fact.text, fact.assertion) for fact in facts] == [("asthma", "affirmed"), ("gout", "affirmed"),
                                                                ("fever", "negated")]


def test_a_negation_ends_with_its_list_item_or_line(finder):
    """As a 7B answer of the paper writes a list: the bullet glued to the full stop before it ("analgesics.•"), which
    spaCy kept as one token, so "not" negated every disease of the next item, and the drug lexicon missed the drug;
    and items on lines of their own."""
    text = ("Patients not responding to analgesics.• In systemic lupus erythematosus, steroids are used.\n- No fever\n"
            "- Rash is common • asthma")
    assert {fact.text: fact.assertion for fact in finder.find_many([text])[0]} == {
        "analgesics": "negated", "systemic lupus erythematosus": "affirmed", "fever": "negated", "Rash": "affirmed",
        "asthma": "affirmed"}
    # And with its sentence, after a capital letter's full stop before a capitalised word (spaCy's tokenizer kept "D."
    # one word, so the sentence went on and the drug was not found), not after an initial.
    text = "Children who do not get vitamin D. Rickets follows. It is probably N. gonorrhoeae causing urethritis."
    assert [(fact.text, fact.assertion) for fact in finder.find_many([text])[0]] == [
        ("vitamin D", "negated"), ("Rickets", "affirmed"), ("urethritis", "uncertain")]


def test_ranges_and_units_normalise_so_equal_doses_are_equal(finder):
    assert dose_value("1 g") == dose_value("1000 mg") == dose_value("1000mg") == "1000 mg"
    assert dose_value("5–10 mg") == dose_value("5-10 mg") == dose_value("5 to 10 mg") == "5-10 mg"
    assert dose_value("0.5 L") == "500 mL"
    # A dosing spoon is the metric one, as on a medicine's label: pint's US teaspoon is 4.93 mL.
    assert dose_value("one teaspoon") == dose_value("1 tsp") == dose_value("5 mL") == "5 mL"
    assert dose_value("2 tablespoons") == dose_value("2 tbsp") == dose_value("30 ml") == "30 mL"
    assert dose_value("twice daily") == dose_value("two times a day") == dose_value("bid") == "2/day"
    # A frequency is one rate however it is written: an interval, a count per period or an abbreviation.
    assert dose_value("every 8 hours") == dose_value("three times a day") == dose_value("tid") == "3/day"
    assert dose_value("every 24 hours") == dose_value("once daily") == dose_value("nightly") == "1/day"
    assert dose_value("every seven days") == dose_value("once a week") == dose_value("weekly") == "1/week"
    # A rate that is whole per no period is its interval: "every 2 weeks" was "2.17411/month" (12 of the paper's dose
    # mentions read so, "every 4 - 6 weeks" "0.724702-1.08705/month").
    assert dose_value("every 28 days") == dose_value("every four weeks") == "every 4 weeks" != dose_value("once a month")
    assert dose_value("once a month") == "1/month" and dose_value("every 2 weeks") == "every 2 weeks"
    assert dose_value("every 4 - 6 weeks") == "every 4-6 weeks" and dose_value("every 23 months") == "every 23 months"
    assert dose_value("every 5 years") == "every 5 years" and dose_value("every 1.5 days") == "every 36 hours"
    assert dose_value("every 2.5 hours") == "9.6/day"  # whole in no unit: the rate
    assert dose_value("once an hour") == dose_value("every 1 hour") == "24/day"
    assert dose_value("every 4 to 6 hours") == "4-6/day"
    assert dose_value("4 times a month") == "4/month" and dose_value("every 3 days") == "every 3 days"
    assert dose_value("2.5 mg/kg") == "2.5 mg/kg"
    assert dose_value("2.5 mg/kg/day") == dose_value("2.5 mg/kg per day") == "2.5 mg/kg/day" != dose_value("2.5 mg/kg/dose")
    # An amount a day is the amount and its period however written, as "40 mg daily" is: "40 mg per day" was one value
    # against it, "4 g a day" and "8 tablets in 24 hours" an amount alone.
    for written in ("40 mg per day", "40 mg a day", "40 mg/day", "40 mg/d", "40 mg each day", "40 mg in 24 hours"):
        assert compared(finder, "Take 40 mg daily.", f"Take {written}.") == [], written
    assert [(f.text, f.value) for f in finder.find_many(["Up to 8 tablets in a 24-hour period, 50 mg a week."])[0]] \
        == [("Up to 8 tablets", "≤ 8 tablet"), ("in a 24-hour period", "1/day"), ("50 mg", "50 mg"), ("a week", "1/week")]
    assert compared(finder, "Take 40 mg per day.", "Take 40 mg twice daily.") == [
        Change("dose", 11, 18, "twice daily", "per day")]
    # A naked decimal is a number: ".5 mg" was no dose.
    assert [(f.text, f.value) for f in finder.find_many(["Take .5 mg of lorazepam, not 5 mg."])[0] if f.kind == "dose"] \
        == [(".5 mg", "0.5 mg"), ("5 mg", "5 mg")]
    # A count may be a range, and hyphenated: the higher end alone was read ("1-2 times a day" was twice a day), and
    # "twice-daily" was "daily", 1/day.
    assert dose_value("1-2 times a day") == dose_value("once or twice daily") == "1-2/day" != dose_value("twice a day")
    assert dose_value("two or three times a day") == dose_value("2-3 times per day") == "2-3/day"
    assert dose_value("twice-daily") == dose_value("twice daily") == "2/day"
    # ... and so may an amount, in words or with "or": "one or two tablets" was "two tablets", a dose changed against
    # "1-2 tablets"; amounts each with its unit stay two.
    assert compared(finder, "Take 1-2 tablets every 4 hours.", "Take one or two tablets every 4 hours.") == []
    assert dose_value("two to three puffs") == dose_value("2 or 3 puffs") == "2-3 puff" != dose_value("3 puffs")
    assert [f.text for f in finder.find_many(["Give 5 mg or 10 mg."])[0]] == ["5 mg", "10 mg"]
    # "daily", "nightly", "weekly" and "monthly" in two words are the same rates: "take it every day" was no frequency,
    # so "take it daily" for it read as a frequency added.
    assert dose_value("every day") == dose_value("Each day") == dose_value("each night") == dose_value("daily") == "1/day"
    assert dose_value("every week") == "1/week" and dose_value("each month") == "1/month"
    assert compared(finder, "Take it daily, and weekly a second one.", "Take it every day, and every week a second one.") == []
    assert compared(finder, "Use the cream every day.", "Use the cream twice a day.") == [
        Change("dose", 14, 23, "twice a day", "every day")]
    assert dose_value("q6h") == dose_value("every 6 hours") == "4/day"
    assert dose_value("every other day") == dose_value("qod") == dose_value("every 2 days") == "every 2 days"
    assert dose_value("once a year") == dose_value("every 12 months") == "1/year"
    # An amount per volume is a concentration, no dose: "100 mg/dL" was "100 mg".
    assert dose_value("100 mg/dL") != dose_value("100 mg") and dose_value("5 mmol / l") == "5 mmol/L"
    assert dose_value("5 mcg/kg/min") == "0.005 mg/kg/min"
    # An amount per hours is a rate ("2 ml/hours" was 2 mL), and one per a number of hours its amount and frequency, as
    # with "every" ("10 mg / 6 hours" was 10 mg alone; one each in the paper's answers).
    assert dose_value("2 ml/hours") == dose_value("2 mL per hour") == "2 mL/hour"
    assert [(f.text, f.value) for f in finder.find_many(["Give 10 mg / 6 hours."])[0]] == [
        ("10 mg", "10 mg"), ("/ 6 hours", "4/day")]
    assert compared(finder, "Give 10 mg every 6 hours.", "Give 10 mg / 6 hours.") == []
    # A liquid's strength is one concentration, per one unit of its volume: "250 mg/5 mL" was 250 mg and 5 mL.
    assert dose_value("250 mg/5 mL") == dose_value("250mg per 5ml") == dose_value("250 mg in 5 mL") \
        == dose_value("50 mg/mL") == "50 mg/mL"
    assert dose_value("125-250 mg/5 ml") == "25-50 mg/mL" and dose_value("1 g/100 mL") == "10 mg/mL"
    assert [(f.text, f.value) for f in finder.find_many(["Amoxicillin 250 mg/5 mL oral suspension."])[0]
            if f.kind == "dose"] == [("250 mg/5 mL", "50 mg/mL")]
    assert compared(finder, "Give amoxicillin 250 mg/5 mL.", "Give amoxicillin 50 mg/mL.") == []
    # An amount per amount is a ratio: an HbA1c of "48 mmol/mol" was "48 mmol".
    assert dose_value("48 mmol / mol") == "48 mmol/mol" != dose_value("48 mmol")
    assert dose_value("4 grams/litre") == dose_value("4 g/L") == "4000 mg/L"
    # A mass in kilograms is a body weight or a BMI, no dose (they were "9e+07 mg" and "3e+07 mg/m2"); a number is
    # written out, with its thousands groups read ("1,000,000 units" was "000,000 units", 0 IU).
    assert [f.text for f in finder.find_many(["She weighs over 90kg, a BMI of 40 kg/m2, after a loss of 5 kg."])[0]
            if f.kind == "dose"] == []
    assert [(f.text, f.value) for f in finder.find_many(["Take 1,000,000 units, not 1,000 mg or 1000 g."])[0]] == [
        ("1,000,000 units", "1000000 IU"), ("1,000 mg", "1000 mg"), ("1000 g", "1000000 mg")]
    assert dose_value("5 ng/mL") == "0.000005 mg/mL"
    # "One and a half units" was "half units", 0.5 IU; a number word is a whole word ("MU/TENG" was "ten g", 10 g), and
    # a capital G glued to a number a needle's gauge.
    assert [(f.text, f.value) for f in finder.find_many(["One and a half units, MU/TENG, a 14G curette, 14 g."])[0]
            if f.kind == "dose"] == [("One and a half units", "1.5 IU"), ("14 g", "14000 mg")]
    assert duration_value("for one and a half years") == "18 months"
    assert compared(finder, "Take 1 g of paracetamol twice a day.", "Take 1 g of paracetamol 1-2 times a day.") == [
        Change("dose", 24, 35, "1-2 times a day", "twice a day")]
    # A fraction is one number: "1/2 teaspoon" was "2 teaspoon" (10 mL), "1 1/2 tablets" "2 tablet".
    assert dose_value("1/2 teaspoon") == dose_value("½ tsp") == dose_value("2.5 mL") == "2.5 mL"
    assert dose_value("1 1/2 tablets") == dose_value("1½ tablets") == "1.5 tablet"
    assert dose_value("half a tablet") == dose_value("1/2 tablet") == "0.5 tablet" != dose_value("2 tablets")
    assert [f.text for f in finder.find_many(["Blood pressure 120/80 mmHg, care 24/7 units, take 1/2-1 tablet."])[0]] \
        == ["1/2-1 tablet"]
    assert [(f.text, f.value) for f in finder.find_many(["Take 5 mg per dose, 2 mg/hr at night."])[0]] == [
        ("5 mg per dose", "5 mg/dose"), ("2 mg/hr", "2 mg/hour")]
    assert compared(finder, "Take 1 g of paracetamol twice daily.", "Take 1000 mg of Tylenol twice a day.") == []
    assert compared(finder, "Give 400 mg of ibuprofen every 8 hours.", "Give 400 mg of ibuprofen three times a day.") == []
    assert compared(finder, "Give 400 mg of ibuprofen every 6 hours.", "Give 400 mg of ibuprofen three times a day.") == [
        Change("dose", 25, 38, "three times a day", "every 6 hours")]
    assert compared(finder, "Take 5-10 mg of morphine.", "Take 5–10 mg of morphine.") == []
    assert compared(finder, "Take 5-15 mg of morphine.", "Take 5–10 mg of morphine.") == [
        Change("dose", 5, 12, "5–10 mg", "5-15 mg")]
    assert [(f.text, f.value) for f in finder.find_many(["The 2 patients were 45 years old."])[0]] == []


def test_independent_texts_are_compared_by_concept(finder):
    answer = "Diabetes is usually treated with metformin, and no insulin is needed at first."
    reference = "In diabetes, diet, exercise and insulin when needed manage the blood sugar."
    found = compared(finder, answer, reference)
    # Diabetes and insulin are supported wherever they are; metformin is not. Insulin is negated in a statement the
    # reference does not make, so no assertion flipped.
    assert [(change.kind, change.was, change.now) for change in found] == [("drug", "", "metformin")]


def test_an_assertion_flips_only_where_both_texts_make_the_statement(finder):
    """Two answers written apart mention a condition in unrelated statements; over whole texts, every one of 40 flips
    read in the paper's answers against their references was such. A flip is one statement asserted otherwise, in any
    word order, the other sentences of the texts apart."""
    reference = ("Shingles is a painful rash. Ibuprofen can cause stomach ulcers in older people. "
                 "Without treatment, postherpetic neuralgia eases gradually and goes.")
    flipped = ("Ibuprofen eases the pain of shingles. In older people, ibuprofen does not cause stomach ulcers. "
               "Most people with postherpetic neuralgia find that it improves within a year.")
    assert [(change.kind, flipped[change.start:change.end], change.was, change.now)
            for change in changes(flipped, *finder.find_many([flipped]), reference, *finder.find_many([reference]),
                                  by=BY_CONCEPT)] == [("negation", "stomach ulcers", "uncertain", "negated")]
    # The same concepts asserted otherwise in statements the reference does not make are no flip.
    unrelated = ("If there is no stomach ulcer, an endoscopy is normal. Shingles may come back. "
                 "Postherpetic neuralgia is common in older people.")
    facts, reference_facts = finder.find_many([unrelated, reference])
    assert [fact.assertion for fact in facts if fact.text == "stomach ulcer"] == ["negated"]
    assert changes(unrelated, facts, reference, reference_facts, by=BY_CONCEPT) == []


def test_free_negates_the_word_before_it_alone(finder):
    """NegEx's following "free" reached back to the sentence's start: in the paper's drug-ingredient questions it
    negated the drug ("Is gelatin an ingredient of vitamin D and is it pork-free?")."""
    text = "Are the vitamin D tablets alcohol free, or is there alcohol in them? Is the ibuprofen syrup alcohol-free?"
    assert [(fact.text, fact.assertion) for fact in finder.find_many([text])[0]] == [
        ("vitamin D", "affirmed"), ("alcohol", "negated"), ("alcohol", "affirmed"), ("ibuprofen", "affirmed"),
        ("alcohol", "negated")]
    # Nor across a bracket: "free T4 (free thyroxine)" is a measurement of the free hormone, present.
    text = "Tests show raised alcohol (free thyroxine) levels."
    assert [(fact.text, fact.assertion) for fact in finder.find_many([text])[0]] == [("alcohol", "affirmed")]


def test_a_corruption_is_a_near_name_that_is_no_word_and_not_in_the_other_text():
    assert [(c.was, c.now) for c in corruptions("Ibuprofin and paracetomol help; so does rest.")] == [
        ("ibuprofen", "Ibuprofin"), ("paracetamol", "paracetomol")]
    assert corruptions("Ordinary words, clinics and coughs are no corruption.") == []
    assert corruptions("Take metfromin.", against_words={"metfromin"}) == []


def test_a_corruption_was_the_name_the_other_text_said(finder):
    """Against a text that has the name, a corruption was that name, not the lexicon's nearest: "amoxicilin" is one edit
    from both "amoxicillin" and "amoxicilina" (a name of the drug lexicon), and the second comes first alphabetically."""
    assert [(c.was, c.now) for c in corruptions("Start amoxicilin today.")] == [("amoxicilina", "amoxicilin")]
    assert [(c.kind, c.was, c.now) for c in compared(finder, "Start amoxicilin 500 mg today.",
                                                    "Start amoxicillin 500 mg today.")] == [
        ("corruption", "amoxicillin", "amoxicilin")]
    # Written independently, too: the other text's name wherever it stands.
    assert [(c.was, c.now) for c in corruptions("Amoxicilin treats otitis media.",
                                                against_words={"for", "otitis", "amoxicillin", "give"})] == [
        ("amoxicillin", "Amoxicilin")]


def test_a_name_split_by_a_space_is_one_corruption_of_that_name(finder):
    """As the paper's watermarked answers split names: read a word at a time, "anticoag ulants" was "ulants", a
    misspelling of "plants", and "steno sis" was "stenox"."""
    text = "People taking anticoag ulants and patients with aortic steno sis need checks."
    assert [(c.start, c.end, c.was, c.now) for c in corruptions(text)] == [
        (14, 29, "anticoagulants", "anticoag ulants"), (55, 64, "stenosis", "steno sis")]
    # Two words are no split, nor is one the other text splits alike.
    assert corruptions("A cute rash came in fusion with fever.") == []
    assert corruptions("Take anticoag ulants.", against_words={"anticoag", "ulants"}) == []
    assert [(c.kind, c.was, c.now) for c in compared(finder, "Patients on anticoagu lants bleed more.",
                                                    "Patients on anticoagulants bleed more.")] == [
        ("corruption", "anticoagulants", "anticoagu lants")]


def test_the_nearest_medical_word_is_the_full_scans_answer_for_every_kind_of_edit():
    """The indexed search measures only the words its length and letter-pair bounds let through: a bound too tight
    would miss a name the scan of the whole vocabulary finds, or break a tie the other way."""
    import random

    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    from fwsapp.entities.changes import _tolerated_edits, medical_vocabulary, nearest_medical_word

    vocabulary, draw = medical_vocabulary(), random.Random(7)
    edited = []
    for word in vocabulary[::1500]:  # 35 words of every length and letter
        letters, at = list(word), draw.randrange(len(word) - 1)
        swapped = letters[:at] + [letters[at + 1], letters[at]] + letters[at + 2:]
        for edits in (swapped, letters[:at] + letters[at + 1:], letters[:at] + ["q"] + letters[at + 1:],
                      letters[:at] + ["e"] + letters[at:], swapped[:-1] + ["x"]):
            edited.append("".join(edits))
    for word in edited + ["ibuprofin", "paracetomol", "metfromin", "zzzzzz"]:
        full_scan = process.extractOne(word, vocabulary, scorer=OSA.distance, score_cutoff=_tolerated_edits(word))
        assert nearest_medical_word(word) == (full_scan[0] if full_scan else None), word


def test_the_facts_command_writes_one_line_per_input_line_in_order(tmp_path):
    from fwsapp.cli import main

    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    rows = [{"text": "Take 5000 mg of ibuprofen.", "against": "Take 500 mg of ibuprofen."},
            {"text": "No fever."}, {"text": "", "against": "Take aspirin."}]
    # As an editor on Windows saves it: a byte-order mark, then lines ending in CR LF.
    source.write_text("\ufeff" + "".join(json.dumps(row) + "\r\n" for row in rows), encoding="utf-8")
    assert main(["facts", "--in", str(source), "--out", str(target), "--disease-recognizer", "mesh",
                 "--chemical-recognizer", "drug-lexicon"]) == 0
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(lines) == 3 and all(set(line) == {"facts", "changes"} for line in lines)
    assert lines[0]["changes"] == [{"kind": "dose", "start": 5, "end": 12, "was": "500 mg", "now": "5000 mg"}]
    assert [(f["kind"], f["text"], f["value"], f["assertion"]) for f in lines[0]["facts"]] == [
        ("dose", "5000 mg", "5000 mg", "affirmed"), ("chemical", "ibuprofen", "ibuprofen", "affirmed")]
    assert lines[1] == {"facts": [{"kind": "disease", "start": 3, "end": 8, "text": "fever", "value": "fever",
                                   "assertion": "negated"}], "changes": []}
    assert lines[2] == {"facts": [], "changes": []}


@pytest.mark.parametrize("line, problem", [
    ('{"text": "fine"}\n{"text": 3}\n', 'line 2: each line must be an object with a string "text"'),
    ('{"text": "fine", "against": null}\n', 'line 1: each line must be an object with a string "text" and "against"'),
    ('{"text": "fine"}\n{"txt": "a"}\n', "line 2"),
    ('{"text": "fine"}\nnot json\n', "line 2: not JSON"),
    ('{"text": "fine"}\r\n\r\n{"text": "fine"}\r\n', "line 2 is empty"),
    ('{"text": "' + "a" * 100_001 + '"}\n', "line 1: its text has 100,001 characters"),
])
def test_bad_input_names_its_line_and_writes_nothing(tmp_path, capsys, line, problem):
    from fwsapp.cli import main

    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(line)
    assert main(["facts", "--in", str(source), "--out", str(target), "--disease-recognizer", "mesh",
                 "--chemical-recognizer", "drug-lexicon"]) != 0
    assert problem in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [source]


def test_recognize_finds_the_kind_asked_for_and_refuses_a_recognizer_of_another(tmp_path, capsys):
    from fwsapp.cli import main

    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text('{"text": "Take 1 g of Tylenol for the gout."}\n')
    assert main(["recognize", "--kind", "dose", "--in", str(source), "--out", str(target)]) == 0
    assert f"{target}: dose mentions of 1 text (doses)" in capsys.readouterr().out  # it said "of 1 texts"
    assert main(["recognize", "--kind", "dose", "--in", str(source), "--out", str(tmp_path / "doses.csv")]) == 2
    assert "names CSV, but recognize writes JSONL: name it ….jsonl" in capsys.readouterr().err
    assert json.loads(target.read_text()) == {"entities": [[5, 8, "1 g", "1000 mg"]]}
    assert main(["recognize", "--kind", "chemical", "--recognizer", "drug-lexicon", "--in", str(source), "--out",
                 str(target), "--force"]) == 0
    assert json.loads(target.read_text()) == {"entities": [[12, 19, "Tylenol", "acetaminophen"]]}
    assert main(["recognize", "--kind", "chemical", "--recognizer", "mesh", "--in", str(source), "--out",
                 str(tmp_path / "other.jsonl")]) != 0
    assert "--recognizer mesh finds disease mentions, not chemical ones" in capsys.readouterr().err


@pytest.mark.model  # the run's facts are found with the trained taggers
def test_the_facts_browser_marks_a_drug_change_shows_a_negated_fact_and_saves_a_verdict(app_db, tmp_path, monkeypatch):
    """On the paper's BioMistral QA answers: sample 5 ("Who can not take DMARDs?") names drugs the other answer does
    not; a rater's verdict on a fact is stored under the rater's name. The run analysed, the browser reads its stored
    facts and loads no recognizer."""
    from streamlit.testing.v1 import AppTest

    from fwsapp.entities.fact_analysis import analyze_run_facts
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store
    from tests.test_pages import APP, PROJECT

    source = tmp_path / "g.json"
    source.write_text(json.dumps(json.loads((PROJECT.parent / "shared" / "data" / "paper" /
                                             "KGW-g0.5-d2-biomistral-HQA2.generations.json").read_text())[:6]))
    store = Store(app_db)
    run_id = import_logs(store, method="KGW", model="biomistral", task_name="qa", generations=LogFile.from_path(source))
    assert analyze_run_facts(store, run_id) == 6
    store.close()
    monkeypatch.setattr(FactFinder, "find_many", lambda self, texts: pytest.fail("the browser found facts again"))
    app = AppTest.from_file(APP, default_timeout=180)
    app.run()
    app.switch_page("pages/entities.py").run()
    app.selectbox(key="fact-sample").set_value(5).run()
    assert not app.exception
    shown = "".join(m.value for m in app.markdown)
    assert "border:2px solid" in shown and "¬ " in shown  # a changed fact outlined; a negated one marked
    changed = {kind for frame in app.dataframe if "was" in frame.value.columns for kind in frame.value.change}
    assert {"drug", "disease"} <= changed
    # A tab per kind, named as the caption names the kinds ("drugs", not the registry's "chemicals").
    assert [tab.label.split(" (")[0] for tab in app.tabs] == ["diseases", "drugs", "doses", "durations", "corrupted terms"]
    assert ">drug</span>" in shown and ">chemical</span>" not in shown  # and the legend names a drug so too
    app.text_input(key="fact-rater").input("Dr A").run()
    verdict = next(radio for radio in app.radio if radio.key.startswith("fact-verdict-Dr A-"))
    verdict.set_value("wrong").run()
    assert not app.exception
    stored = Store(app_db).fact_verdicts("Dr A", run_id, 5)
    assert list(stored.verdict) == ["wrong"] and stored.rater.iloc[0] == "Dr A"


def test_the_report_lists_each_runs_clinical_failure_modes_watermarked_against_unwatermarked():
    from fwsapp.results.tables import TABLES, failure_modes_table

    run = {"model": "m", "task": "qa", "method": "KGW", "settings": "delta=2",
           "quality": {"unsupported_drugs": {"watermarked": 1.0, "unwatermarked": 0.25},
                       "corrupted_terms": {"watermarked": 6.5, "unwatermarked": 6.0}}}
    table = failure_modes_table({"runs": [run]})
    assert list(table["Failure mode"]) == ["hallucinated terminology (a drug)", "lexical corruption"]
    assert list(table["W − U"]) == [0.75, 0.5]
    assert TABLES["Clinical failure modes"] is failure_modes_table
    assert failure_modes_table({"runs": [{**run, "quality": {}}]}).empty


def test_a_frequency_word_before_a_noun_is_no_dose(finder):
    """'daily' was 180 of the 1,296 dose mentions in the paper's answers, most of them adjectives ('daily activities',
    'Daily Fluid Intake'): each an unsupported dose '1/day' where the reference did not say it. An adverb is a
    frequency, and so is 'daily' before a dose's noun."""
    text = ("Daily Fluid Intake affects daily activities and daily life. Apply it daily to the wart. It is taken weekly. "
            "The maximum daily dose is 4 g. Take it nightly, with food. Every day tasks tire her; use it every day.")
    doses = [fact.text for fact in finder.find_many([text])[0] if fact.kind == "dose"]
    assert doses == ["daily", "weekly", "daily", "4 g", "nightly", "every day"]


def test_a_percentage_is_a_dose_only_as_a_concentration(finder):
    """Percentages were 560 of the 1,296 dose mentions in the paper's answers, nearly all statistics ('25% of
    patients', 'a 20% reduction', '95% CI'); a concentration, with a preparation, alcohol or a drug after it, is a
    dose."""
    text = ("About 25% of patients improve (95% CI 20-30%), a 20% reduction. Apply 1% hydrocortisone cream, or "
            "0.05% clobetasol. Spirits are 40% alcohol; the suspension is 21% w/v.")
    doses = [fact.text for fact in finder.find_many([text])[0] if fact.kind == "dose"]
    assert doses == ["1%", "0.05%", "40%", "21%"]


def test_drug_swap_and_dose_change_inject_the_changes_the_facts_then_find(finder):
    """The injected errors are what the fact comparison reports: a drug of another concept, a dose ten times off."""
    import numpy as np

    from fwsapp.entities.recognizers import load_recognizer
    from fwsapp.robustness.attacks import ATTACKS
    from fwsapp.robustness.attacks.base import AttackInput, Span

    text = "Take 500 mg of metformin twice daily with food."
    for name, kind in (("drug-swap", "drug"), ("dose-change", "dose")):
        entry = ATTACKS[name]
        found = load_recognizer(entry.recognizer(entry.defaults)).find_many([text])[0]
        item = AttackInput(0, text, mentions=tuple(Span(e.start, e.end) for e in found))
        attacked = entry.load()(entry.checked_params({"k": 1}), 0, {}).attack(item, np.random.default_rng(0))
        changed = compared(finder, attacked.text, text)
        assert [change.kind for change in changed] == [kind], (attacked.text, changed)
        if kind == "dose":
            assert changed[0].now in ("5000 mg", "50 mg") and changed[0].was == "500 mg"
        asked_more = entry.load()(entry.checked_params({"k": 3}), 0, {}).attack(item, np.random.default_rng(0))
        assert asked_more.note == f"changed 1 {kind}{' with an amount' if kind == 'dose' else ' mention'}, of the 3 " \
                                  "asked for: no more in the text"  # it read "1 of 3 doses found"


def paper_answers_twice(tmp_path, names: tuple[str, str], empty_answer: int | None = None) -> tuple[list, list[str]]:
    """20 of the paper's BioMistral QA answers, imported into two databases named `names`: their stores and run ids.
    With `empty_answer`, that sample's watermarked answer is its prompt alone, imported empty (as the paper's word-count
    strip left five of its answers)."""
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.store import Store
    from tests.conftest import PROJECT

    records = json.loads((PROJECT.parent / "shared" / "data" / "paper" /
                          "KGW-g0.5-d2-biomistral-HQA2.generations.json").read_text())[:20]
    if empty_answer is not None:
        records[empty_answer]["watermarked_text"] = records[empty_answer]["prompt"]
    source = tmp_path / "g.json"
    source.write_text(json.dumps(records))
    stores = [Store(tmp_path / f"{name}.duckdb") for name in names]
    return stores, [import_logs(store, method="KGW", model="biomistral", task_name="qa",
                                generations=LogFile.from_path(source)) for store in stores]


def analysed_first_chunk(store, run_id: str, finder) -> int:
    """The run's facts analysed and stopped after its first chunk; how many samples were analysed."""
    import threading

    from fwsapp.entities.fact_analysis import analyze_run_facts

    cancel = threading.Event()
    return analyze_run_facts(store, run_id, finder, progress=lambda done, total: cancel.set(), cancel=cancel)


def test_a_runs_facts_are_stored_resumably_and_a_repeat_adds_nothing(tmp_path, finder):
    """20 of the paper's BioMistral answers: stopped after the first chunk of 16, the analysis resumes with the other
    4, and the stored rows equal an uninterrupted analysis's; a repeat analyses nothing."""
    from fwsapp.entities.fact_analysis import analyze_run_facts

    (stopped, whole), ids = paper_answers_twice(tmp_path, ("stopped", "whole"))
    assert analysed_first_chunk(stopped, ids[0], finder) == 16
    assert analyze_run_facts(stopped, ids[0], finder) == 4
    assert analyze_run_facts(stopped, ids[0], finder) == 0
    assert analyze_run_facts(whole, ids[1], finder) == 20
    for table in ("facts", "fact_changes"):
        first, second = (getattr(store, table)().drop(columns="run_id") for store in (stopped, whole))
        assert len(first) == len(second) > 0
        assert first.sort_values(list(first.columns)).reset_index(drop=True).equals(
            second.sort_values(list(second.columns)).reset_index(drop=True))
    facts = whole.facts()
    assert set(facts.kind) >= {"disease", "chemical"} and set(facts.config) == {finder.config}
    assert {"watermarked", "unwatermarked", "reference"} == set(facts.text_kind)
    assert set(whole.fact_changes().against) == {"unwatermarked", "reference"}
    # What the facts view reads back is what it would find again: every fact and change, in order.
    from fwsapp.entities.fact_review import sample_facts, stored_sample_facts

    for row in whole.generations(ids[1]).itertuples():
        texts = {"watermarked": row.watermarked_text, "unwatermarked": row.unwatermarked_text, "reference": row.reference}
        assert stored_sample_facts(whole, ids[1], row.sample_idx, texts, finder.config) == sample_facts(texts, finder)
    assert stored_sample_facts(whole, ids[1], 0, texts, "clinical-facts v1;another") is None


def test_the_clinical_facts_metric_counts_the_drugs_doses_and_durations_the_reference_does_not_state(finder):
    """A course's length the reference does not state is a factual error as a dose is; the metric had no column for it."""
    from fwsapp.quality.clinical_facts import measures

    output, reference = "Take amoxicillin 500 mg three times a day for 10 days.", "Take amoxicillin three times a day."
    facts = finder.find_many([output, reference])
    assert measures(output, changes(output, facts[0], reference, facts[1], by=BY_CONCEPT)) == {
        "unsupported_drugs": 0.0, "unsupported_doses": 1.0, "unsupported_durations": 1.0, "negation_flips": 0.0,
        "corrupted_terms": 0.0}


def test_each_kind_of_fact_whose_unstated_facts_are_a_failure_has_its_column_and_failure_mode():
    """The metric's columns come from the kinds' registry: a new kind that declares its failure is counted, and shown in
    the report's failure modes, without an edit to the metric (its columns and what it counted were a hand list)."""
    from fwsapp.entities.recognizers import KINDS
    from fwsapp.quality.clinical_facts import COUNTED
    from fwsapp.quality.registry import METRICS

    failing = {kind.unsupported_column: kind for kind in KINDS.values() if kind.unstated_failure}
    assert set(failing) >= {"unsupported_drugs", "unsupported_doses", "unsupported_durations"}
    assert "unsupported_diseases" not in failing  # an answer names diseases its reference does not, as context
    columns = {column.name: column for column in METRICS["clinical_facts"].columns}
    assert set(columns) == set(COUNTED) == {*failing, "negation_flips", "corrupted_terms"}
    for name, kind in failing.items():
        assert (columns[name].failure_mode, COUNTED[name]) == (kind.unstated_failure, (kind.change, True))
        assert columns[name].label == f"Unsupported {kind.plural} / text"


def test_the_clinical_facts_metric_counts_what_analyze_stored_and_finds_only_the_rest(tmp_path, finder, monkeypatch):
    """20 of the paper's BioMistral answers, 16 of them analysed (stopped after its first chunk): scoring the clinical
    facts metric finds the facts of the other 4 only, and its values equal those of a run scored from scratch."""
    from fwsapp.quality.clinical_facts import COUNTED, ClinicalFacts
    from fwsapp.quality.scoring import QualityResources, score_run

    (analysed, scratch), ids = paper_answers_twice(tmp_path, ("analysed", "scratch"))
    assert analysed_first_chunk(analysed, ids[0], finder) == 16
    monkeypatch.setattr(ClinicalFacts, "finder", lambda self, resources: finder)  # the analysis's own recognizers
    searched = []
    find_many = FactFinder.find_many
    monkeypatch.setattr(FactFinder, "find_many", lambda self, texts: searched.append(len(texts)) or find_many(self, texts))
    counts = [score_run(store, run_id, QualityResources(model_loader=None, store=store), ("clinical_facts",))
              for store, run_id in zip((analysed, scratch), ids)]
    assert counts == [{"clinical_facts": 20}] * 2  # 20 samples' values (2 answers × each measure), in both
    assert searched[:2] == [4 * 2, 4 * 2]  # the analysed run: each answer kind of the 4 left, with their references
    assert sum(searched[2:]) == 20 * 2 * 2  # from scratch: every answer and its reference, for both kinds
    first, second = (store.metrics().drop(columns="run_id").sort_values(["sample_idx", "text_kind", "metric"])
                     .reset_index(drop=True) for store in (analysed, scratch))
    pd.testing.assert_frame_equal(first, second)
    assert first[first.metric.isin(COUNTED)].value.sum() > 0  # some drug, dose, duration, negation or corruption counted


def test_factuality_reads_the_disease_support_analyze_stored_and_finds_only_the_rest(tmp_path, monkeypatch):
    """The same 20 answers, 12 of them analysed: Factuality's stand-in found every disease again (9 of the 16 minutes
    `score` took on the paper's nine logs after `analyze`); it reads the 12 from the stored entities, finds the other
    8's, and its values equal those of a run scored from scratch. An empty answer among the 12 is read too (no disease,
    1.0, as found): it was found again, and loaded the taggers for it."""
    from fwsapp.entities.introduced import analyze_run
    from fwsapp.entities.recognizers import load_recognizer
    from fwsapp.models.encoder import load_encoder
    from fwsapp.quality.scoring import QualityResources, score_run

    (analysed, scratch), ids = paper_answers_twice(tmp_path, ("analysed", "scratch"), empty_answer=3)
    assert analysed.generations(ids[0]).watermarked_text[3] == ""
    recognizer = load_recognizer()

    def stop_after_12(done, total):
        if done == 12:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        analyze_run(analysed, ids[0], recognizer, load_encoder(), progress=stop_after_12)
    searched = []
    find_many = type(recognizer).find_many
    monkeypatch.setattr(type(recognizer), "find_many", lambda self, texts: searched.append(len(texts)) or find_many(self, texts))
    counts = [score_run(store, run_id, QualityResources(model_loader=None, store=store), ("factuality",))
              for store, run_id in zip((analysed, scratch), ids)]
    assert counts == [{"factuality": 20}] * 2
    assert searched[:4] == [8] * 4  # the analysed run: each answer kind of the 8 left, and their references
    assert sum(searched[4:]) == 20 * 2 * 2  # from scratch: every answer and its reference, for both kinds
    first, second = (store.metrics().drop(columns="run_id").query("metric == 'factuality'")
                     .sort_values(["sample_idx", "text_kind"]).reset_index(drop=True) for store in (analysed, scratch))
    pd.testing.assert_frame_equal(first, second)
    assert first.value.min() == 0 and first.value.max() == 1 and first.value.nunique() > 2  # none, some, all supported
    assert first.query("sample_idx == 3 and text_kind == 'watermarked'").value.tolist() == [1.0]


def test_values_of_an_earlier_facts_version_are_superseded_in_every_table(tmp_path):
    """A run scored before the facts changed (facts v4's negation flips), then again: the report, the Quality page's
    values, the export and FWS read the values the current code writes, not the earlier ones, which won by count, and
    on a tie by their config's name ("v4" before "v7")."""
    from fwsapp.quality.base import metric_row
    from fwsapp.quality.clinical_facts import ClinicalFacts
    from fwsapp.quality.registry import METRICS
    from fwsapp.quality.scoring import QualityResources, read_values
    from fwsapp.results.export import quality_columns
    from fwsapp.results.report import collect

    (store,), (run_id,) = paper_answers_twice(tmp_path, ("run",))
    current = ClinicalFacts(METRICS["clinical_facts"]).config(store.run(run_id), QualityResources(model_loader=None))
    earlier = re.sub(r"clinical-facts v\d+", "clinical-facts v4", current)
    assert earlier != current
    # The earlier version, the current one, and another config with more values (as a second oracle would have).
    for config, flips, samples in ((earlier, 1.0, range(20)), (current, 0.0, range(20)), ("other", 5.0, range(30))):
        store.write_rows("metrics", run_id, [metric_row(index, kind, "negation_flips", config, flips)
                                              for index in samples for kind in ("watermarked", "unwatermarked")])
    read = read_values(store)
    read = read[read.metric == "negation_flips"]
    assert set(read.config) == {current} and set(read.value) == {0.0}
    report = next(entry for entry in collect(store)["runs"] if entry["run_id"] == run_id)
    assert report["quality"]["negation_flips"]["watermarked"] == 0.0
    assert set(quality_columns(store, run_id)["quality_negation_flips_watermarked"]) == {0.0}


def test_fact_survival_counts_each_kinds_facts_an_attack_kept_with_their_assertion(finder):
    import pandas as pd

    from fwsapp.robustness.attack_sets import fact_survival, survival_by_kind

    clean, attacked = finder.find_many(["Take 500 mg of aspirin; there is no fever but asthma.",
                                        "Take 50 mg of aspirin; there is fever but asthma."])
    found = fact_survival(clean, attacked)
    # The dose changed; the drug stayed; fever lost its negation, asthma stayed.
    assert found == {"chemical": [1, 1], "disease": [2, 1], "dose": [1, 0]}
    pooled = survival_by_kind(pd.Series([json.dumps(found), json.dumps({"disease": [2, 2]}), None]))
    assert pooled == {"disease_fact_survival": 0.75, "chemical_fact_survival": 1.0, "dose_fact_survival": 0.0,
                      "duration_fact_survival": None}  # no text stated a length


def test_paired_reads_the_clinical_facts_metric_per_watermarked_text(tmp_path):
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.quality.base import metric_row
    from fwsapp.results.paired import text_measures
    from fwsapp.store import Store

    rows = [{"prompt": f"q{i}", "watermarked_text": "Take aspirin.", "unwatermarked_text": "Rest.",
             "natural_text": "Rest."} for i in range(2)]
    source = tmp_path / "g.json"
    source.write_text(json.dumps(rows))
    store = Store(tmp_path / "db.duckdb")
    run_id = import_logs(store, method="KGW", model="m", task_name="qa", generations=LogFile.from_path(source))
    store.write_rows("metrics", run_id, [metric_row(i, kind, "unsupported_drugs", "c", value) for i, (kind, value) in
                                         enumerate([("watermarked", 1.0), ("watermarked", 0.0)])]
                     + [metric_row(0, "unwatermarked", "unsupported_drugs", "c", 5.0)])
    found = text_measures(store, [run_id])
    drugs = found[found.measure == "Unsupported drugs / text"]
    assert list(drugs.value) == [1.0, 0.0] and list(drugs["count"]) == [1.0, 1.0]


def test_verdicts_on_facts_are_held_against_the_comparison_per_kind(tmp_path):
    """12 drug verdicts: 10 flagged by the comparison (8 called wrong), 2 not flagged (1 called wrong); 2 dose
    verdicts, too few for a rate; 'not a drug' counted but left out of the rates."""
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.entities.fact_review import fact_verdict_agreement, record_fact_verdict
    from fwsapp.entities.facts import Fact
    from fwsapp.store import Store

    source = tmp_path / "g.json"
    source.write_text(json.dumps([{"prompt": "q", "watermarked_text": "w", "unwatermarked_text": "u",
                                   "natural_text": "r"}]))
    store = Store(tmp_path / "db.duckdb")
    run_id = import_logs(store, method="KGW", model="m", task_name="qa", generations=LogFile.from_path(source))
    judged = ([("chemical", True, "wrong")] * 8 + [("chemical", True, "correct")] * 2 + [("chemical", False, "wrong"),
              ("chemical", False, "correct_not_in_reference"), ("chemical", True, "not_this_kind"),
              ("dose", True, "wrong"), ("dose", False, "correct")])
    for start, (kind, flagged, verdict) in enumerate(judged):
        record_fact_verdict(store, " Dr  A ", run_id, 0, "watermarked", Fact(kind, start, start + 1, "x", "x", "affirmed"),
                            verdict, flagged)
    counts, rates = fact_verdict_agreement(store)
    drugs = rates.set_index("kind").loc["chemical"]
    assert (drugs.verdicts, drugs.flagged, drugs["called wrong"]) == (12, 10, 9)
    assert drugs.precision == pytest.approx(0.8)  # 8 of the 10 flagged were called wrong
    assert drugs.recall is None  # 9 called wrong: fewer than the 10 a rate needs
    assert pd.isna(rates.set_index("kind").loc["dose"].precision)  # one flagged dose: no rate
    assert counts.loc[("chemical", "flagged"), "Not a …"] == 1
    assert set(store.fact_verdicts().rater) == {"Dr A"}


def test_the_drug_matcher_read_back_from_the_cache_finds_what_a_built_one_finds_and_a_damaged_file_is_rebuilt(
        tmp_path, monkeypatch):
    from fwsapp.entities.recognizers import drugs

    lexicon = {"metformin": "metformin", "tylenol": "acetaminophen", "acetaminophen": "acetaminophen"}
    monkeypatch.setattr(drugs, "drug_variants", lambda: lexicon)  # a small lexicon: the same steps, in milliseconds
    text = "On metformin, TYLENOL (acetaminophen) and aspirin."

    def drugs_found() -> list[str]:
        nlp, matcher = drugs.lexicon_matcher(tmp_path)
        doc = nlp(text)
        return [doc[start:end].text for _, start, end in matcher(doc)]

    assert drugs_found() == ["metformin", "TYLENOL", "acetaminophen"]
    [cached] = (tmp_path / "lexicons").iterdir()
    modified = cached.stat().st_mtime_ns  # read back, not built: a matcher built again would replace the file
    assert drugs_found() == ["metformin", "TYLENOL", "acetaminophen"] and cached.stat().st_mtime_ns == modified
    cached.write_bytes(b"not a pickle")
    assert drugs_found() == ["metformin", "TYLENOL", "acetaminophen"] and cached.read_bytes() != b"not a pickle"
    lexicon["aspirin"] = "aspirin"  # other names, another file
    assert drugs_found() == ["metformin", "TYLENOL", "acetaminophen", "aspirin"]
    assert len(list((tmp_path / "lexicons").iterdir())) == 2
    unwritable = tmp_path / "a-file"  # a cache that cannot be written (even by root): the matcher is still built
    unwritable.write_text("")
    nlp, matcher = drugs.lexicon_matcher(unwritable)
    assert [nlp(text)[start:end].text for _, start, end in matcher(nlp(text))] == drugs_found()
    assert unwritable.is_file() and len(list(tmp_path.iterdir())) == 2


def test_the_facts_browser_calls_a_fact_changed_only_where_its_tab_counts_a_change(app_db, monkeypatch):
    """A disease name the answer misspelt ("ataxi") is a corrupted term, counted in that tab: the diseases tab, which
    counts no disease change, does not call the fact changed (it did, beside "diseases (0 changed)"), but corrupted."""
    from streamlit.testing.v1 import AppTest

    from fwsapp.entities.changes import Change
    from fwsapp.entities.fact_review import SampleFacts
    from fwsapp.entities.facts import Fact
    from fwsapp.ui import queries
    from tests.conftest import imported_qa_db
    from tests.test_pages import APP

    imported_qa_db(app_db, 1)
    texts = {"watermarked": "It is gout.", "unwatermarked": "I have ataxi now.", "reference": "Ref 0."}
    facts = {"watermarked": [Fact("disease", 6, 10, "gout", "Gout", "present")],
             "unwatermarked": [Fact("disease", 7, 12, "ataxi", "ataxi", "present")], "reference": []}
    changes = {("watermarked", "unwatermarked"): [Change("disease", 6, 10, "", "Gout")],
               ("watermarked", "reference"): [Change("disease", 6, 10, "", "Gout")],
               ("unwatermarked", "reference"): [Change("corruption", 7, 12, "ataxia", "ataxi")]}
    monkeypatch.setattr(queries, "sample_facts", lambda *key: SampleFacts(texts, facts, changes))
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.switch_page("pages/entities.py").run()
    assert not app.exception
    # gout, changed against the other answer and the reference, is one fact changed (the tab said 2)
    assert [tab.label for tab in app.tabs][::4] == ["diseases (1 changed)", "corrupted terms (1 changed)"]
    lines = [m.value for m in app.tabs[0].markdown if m.value.startswith(("watermarked:", "unwatermarked:"))]
    assert lines == ["watermarked: **gout** (Gout, present) · changed",
                     "unwatermarked: **ataxi** (ataxi, present) · corrupted"]


def test_facts_and_recognize_name_every_registered_kind_of_fact_in_their_help(capsys):
    """Their help lists the kinds from the registry: it said "A change's kind: drug, disease, dose, negation or
    corruption" and "disease, drug or dose mentions", while durations are found and changed too."""
    from fwsapp.cli import main
    from fwsapp.entities.recognizers import KINDS

    with pytest.raises(SystemExit):
        main(["facts", "--help"])
    facts_help = " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        main(["--help"])
    commands_help = " ".join(capsys.readouterr().out.split())
    changes = [kind.change for kind in KINDS.values()]
    assert f"A change's kind: {', '.join(changes)}, negation or corruption." in facts_help
    assert f"recognize {', '.join(changes[:-1])} or {changes[-1]} mentions" in commands_help
