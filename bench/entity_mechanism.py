"""How EntityKGW spares entities, measured on what it generated (issue 50, item 2).

Run: .venv/bin/python -m bench.entity_mechanism [--tasks qa completion summarization] [--n 64] [--tokens 64] [--seed 0]
The prompts are the paper's datasets (../shared/data), δ = 2, the embedded model.
EntityKGW leaves a step unbiased while the text ends inside a lexicon name, and never biases a token that starts one.
Its detector recomputes that from the text alone, so each generated token is known to have been spared or biased.
The trained disease recognizer then finds the disease mentions in the same texts. Per task, from the watermarked texts:
- **entity tokens spared**: the share of tokens inside a recognised mention that the generator left unbiased;
- **mentions entered unbiased**: the share of recognised mentions whose first token was spared. The rest began
  under the watermark's bias: generation drifted into a disease name the lexicon did not see coming (a name is
  protected only once its first token starts a lexicon entry);
- **spared tokens in mentions**: the share of spared tokens that fall inside a recognised mention; the rest of the
  sparing goes to lexicon names the recognizer does not call a disease mention here, or to common first words;
- why each mention entered under the bias was not protected: it is not a lexicon name; it does not follow a space (a
  line's first word); it is in another case than the lexicon's two (lower case, capitalised); or, a lexicon name after
  a space in its case, its first word splits into pieces, so no piece starts an entry and a two-piece name is never
  inside one.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import bench.common  # noqa: F401 - puts the project on the path
from bench import entity_watermark
from fwsapp.entities.recognizers import load_recognizer
from fwsapp.generation.generate import run_generation
from fwsapp.models import load_model
from fwsapp.store import Store
from fwsapp.watermark.factory import create


def token_spans(tokenizer, token_ids: list[int]) -> list[tuple[int, int]]:
    """Each token's characters in the decoded text: the growth of the decoded prefix it adds."""
    ends = [len(tokenizer.decode(token_ids[:end], skip_special_tokens=True)) for end in range(len(token_ids) + 1)]
    return list(zip(ends[:-1], ends[1:]))


CAUSES = ("not a lexicon name", "not after a space", "another case", "first word split")


def why_biased(text: str, entity, lexicon: set[str]) -> str:
    """Why a mention's first token was biased: the lexicon's rule it fell outside."""
    if entity.text.lower() not in lexicon:
        return "not a lexicon name"
    if entity.start == 0 or text[entity.start - 1] != " ":
        return "not after a space"
    if entity.text not in (entity.text.lower(), entity.text[:1].upper() + entity.text[1:].lower()):
        return "another case"
    return "first word split"


def measure(lm, watermark, recognizer, texts: list[str], ids: list[list[int]]) -> dict:
    from collections import Counter

    from fwsapp.watermark.entity_kgw import lexicon_names

    lexicon = {name.lower() for name in lexicon_names(watermark.params["lexicon"])}
    mention_tokens = spared_in_mentions = mentions = entered_spared = spared_total = 0
    causes = Counter()
    for text, token_ids, found in zip(texts, ids, recognizer.find_many(texts)):  # the text is its ids decoded
        spared = watermark.trie.spared(token_ids)
        spans = token_spans(lm.tokenizer, token_ids)
        inside = [any(start < entity.end and entity.start < end for entity in found) for start, end in spans]
        mention_tokens += sum(inside)
        spared_in_mentions += sum(skip and hit for skip, hit in zip(spared, inside))
        spared_total += sum(spared)
        for entity in found:
            first = next((index for index, (start, end) in enumerate(spans) if start < entity.end and entity.start < end),
                         None)
            if first is not None:
                mentions += 1
                entered_spared += spared[first]
                if not spared[first]:
                    causes[why_biased(text, entity, lexicon)] += 1
    return {"mentions": mentions, "mention tokens": mention_tokens, "causes": causes,
            "entity tokens spared": spared_in_mentions / mention_tokens if mention_tokens else float("nan"),
            "mentions entered unbiased": entered_spared / mentions if mentions else float("nan"),
            "spared tokens": spared_total,
            "spared tokens in mentions": spared_in_mentions / spared_total if spared_total else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", nargs="+", default=["qa", "completion", "summarization"])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    lm = load_model()
    recognizer = load_recognizer("trained")
    print("| task | texts | mentions | entity tokens spared | mentions entered unbiased | spared tokens | "
          "spared tokens in mentions | mentions entered biased, because: not a lexicon name / not after a space / "
          "another case / first word split |\n|---|---:|---:|---:|---:|---:|---:|---|")
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "mechanism.duckdb")
        for task in args.tasks:
            config = entity_watermark.config("EntityKGW", task, args.n, args.seed, args.tokens, delta=2.0)
            run_id = run_generation(config, store, lm)
            rows = store.generations(run_id)
            watermark = create("EntityKGW", lm.vocab_size, config.params, lm=lm)
            ids = [[int(token) for token in row] for row in rows.watermarked_ids]
            found = measure(lm, watermark, recognizer, list(rows.watermarked_text), ids)
            print(f"| {task} | {len(rows)} | {found['mentions']} | {found['entity tokens spared']:.1%} | "
                  f"{found['mentions entered unbiased']:.1%} | {found['spared tokens']} | "
                  f"{found['spared tokens in mentions']:.1%} | "
                  + " / ".join(str(found["causes"][cause]) for cause in CAUSES) + " |", flush=True)
        store.close()


if __name__ == "__main__":
    main()
