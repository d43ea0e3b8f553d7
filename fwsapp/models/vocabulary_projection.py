"""The vocabulary projection of a decoding step on CPU: hidden states to logits over the whole vocabulary.

At each decoding step a batch of a few answers multiplies a few hidden rows by the output embedding, the model's largest
matrix (49,152 × 576 for the embedded model, 128,256 × 4,096 for JSL-MedLlama). torch's `linear` hands MKL that product
as hidden · Wᵀ, and for 2 to 8 rows MKL's sgemm runs it far below the memory bandwidth it reaches on the same matrix as
W · hiddenᵀ: measured here on the embedded model's head, 22.9 ms against 7.6 ms for 2 rows on one thread (3.0×) and
23.8 against 3.6 ms on two (6.6×). A generate of a batch of 2 is 1.17× faster on one thread and 1.26× on two, at the
default batch of 4 1.09× and 1.17× (docs/benchmarks.md, bench/generation_step.py). No setting of torch or MKL
chooses the other order, so the head's class is swapped for one that asks for it. One row (MKL's gemv either way) and
many rows (prefill, teacher forcing, where both orders run alike) go through `linear` unchanged, as do other dtypes and
devices.
"""
from __future__ import annotations

import torch

FEW_ROWS = range(2, 9)  # the row counts at which W · hiddenᵀ was faster on one thread and on two


class FewRowsProjection(torch.nn.Linear):
    """nn.Linear whose product for a few rows is computed as W · hiddenᵀ (the same values, to float rounding)."""

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        rows = hidden.numel() // self.in_features
        if rows not in FEW_ROWS or hidden.dtype != torch.float32 or hidden.device.type != "cpu":
            return super().forward(hidden)
        flat = hidden.reshape(rows, self.in_features).T
        product = torch.mm(self.weight, flat) if self.bias is None else torch.addmm(self.bias[:, None], self.weight, flat)
        return product.T.reshape(*hidden.shape[:-1], self.out_features)


def project_few_rows_fast(model: torch.nn.Module) -> None:
    """Give a CPU model's output embedding the few-rows product; a head that is not a plain nn.Linear is left as is."""
    head = model.get_output_embeddings()
    if type(head) is torch.nn.Linear:
        head.__class__ = FewRowsProjection
