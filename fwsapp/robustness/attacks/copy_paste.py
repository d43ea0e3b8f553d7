"""Copy-paste (lm-watermarking's `copy-paste`, k-t type): k spans of the watermarked text, each span_share of its words,
pasted over the same number of words of the unwatermarked text (or the reference). The spans sit in k equal parts
of the host text, one each at a random place, so they never overlap; each is taken from the same place in the
watermarked text. The attacked text records where the pasted words are."""
from __future__ import annotations

from fwsapp.robustness.attacks.base import Attack, Attacked, Span, words_of


class CopyPaste(Attack):
    def attack(self, item, rng) -> Attacked:
        host_text = item.unwatermarked if self.params["into"] == "unwatermarked" else item.reference
        host = [word.text for word in words_of(host_text or "")]
        source = [word.text for word in words_of(item.text)]
        length = round(self.params["span_share"] * len(source))
        parts = min(self.params["spans"], len(host) // length, len(source) // length) if length else 0
        pasted = []
        for part in range(parts):
            low, high = part * len(host) // parts, (part + 1) * len(host) // parts - length
            start = int(rng.integers(low, high + 1))
            taken = min(start, len(source) - length)
            host[start:start + length] = source[taken:taken + length]
            pasted.append((start, start + length))
        text, spans, offset = [], [], 0
        for index, word in enumerate(host):
            text.append(word)
            for start, end in pasted:
                if index == start:
                    spans.append([offset])
                if index == end - 1:
                    spans[-1].append(offset + len(word))
            offset += len(word) + 1
        note = "" if parts == self.params["spans"] or not length else f"{parts} of {self.params['spans']} spans fit"
        return Attacked(" ".join(text), tuple(Span(start, end) for start, end in spans), note)
