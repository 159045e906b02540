"""The seq2seq contract: every encoder–decoder satisfies the decoding protocol, returns a
Seq2SeqOutput, and scores its loss with the shared reduction.

References are independent of the code under test: the Protocol's own signatures, and losses
written out per token with Python loops.
"""

from __future__ import annotations

import inspect
import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.decode import beam_search, greedy_decode
from attnlab.models.captioner import Captioner, captioner_config
from attnlab.models.pointer_generator import PRESETS as PG_PRESETS
from attnlab.models.pointer_generator import PointerGenerator, PointerGeneratorConfig
from attnlab.models.rnn_seq2seq import ATTENTION_KINDS, RNNSeq2Seq, RNNSeq2SeqConfig
from attnlab.models.rnn_seq2seq import PRESETS as RNN_PRESETS
from attnlab.models.seq2seq import (
    Seq2SeqModel,
    Seq2SeqOutput,
    Seq2SeqState,
    StepOutput,
    mean_over_targets,
    token_cross_entropy,
)
from attnlab.models.transformer import PRESETS as TRANSFORMER_PRESETS
from attnlab.models.transformer import Transformer, TransformerConfig

V, PAD, BOS, EOS = 12, 0, 2, 3


def _text_batch():
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])  # (B, S), row 1 padded
    tgt_in = torch.tensor([[BOS, 5, 6], [BOS, 9, 0]])  # (B, T)
    labels = torch.tensor([[5, 6, EOS], [9, EOS, 0]])  # (B, T)
    return src, None, tgt_in, labels


def _image_batch():
    torch.manual_seed(1)
    images = torch.rand(2, 1, 8, 8)  # (B, C, H, W)
    tgt_in = torch.tensor([[BOS, 5, 6], [BOS, 9, 0]])
    labels = torch.tensor([[5, 6, EOS], [9, EOS, 0]])
    return images.flatten(1), None, tgt_in, labels


def transformer():
    return Transformer(TransformerConfig(V, V, **TRANSFORMER_PRESETS["tiny"]))


def rnn(attention):
    return lambda: RNNSeq2Seq(RNNSeq2SeqConfig(V, V, attention=attention, **RNN_PRESETS["tiny"]))


def captioner():
    return Captioner(captioner_config("tiny", vocab_size=V))


def pointer_generator():
    return PointerGenerator(PointerGeneratorConfig(vocab_size=V, coverage=True, **PG_PRESETS["tiny"]))


MODELS = {
    "transformer": (transformer, _text_batch),
    **{f"rnn-{kind}": (rnn(kind), _text_batch) for kind in ATTENTION_KINDS},
    "captioner": (captioner, _image_batch),
    "pointer_generator": (pointer_generator, _text_batch),
}


def _params(fn) -> list[tuple]:
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "self":
        params = params[1:]
    return [(p.name, p.kind, p.default) for p in params]


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_seq2seq_model_satisfies_the_decoding_protocol(name):
    make, batch = MODELS[name]
    torch.manual_seed(0)
    model = make().eval()
    src, src_mask, tgt_in, labels = batch()
    assert isinstance(model, Seq2SeqModel)
    # runtime_checkable only checks that the methods exist; the signatures must match as well.
    for method in ("start", "step"):
        assert _params(getattr(model, method)) == _params(getattr(Seq2SeqModel, method)), method
    with torch.no_grad():
        state = model.start(src, src_mask)
        assert isinstance(state, Seq2SeqState)
        out = model.step(tgt_in[:, :1], state, need_weights=True)
        assert isinstance(out, StepOutput)
        assert out.logits.shape[0] == src.shape[0] and out.logits.dim() == 2  # (B, V)
        if out.cross_weights is not None:
            assert out.cross_weights.dim() == 4 and out.cross_weights.shape[0] == src.shape[0]  # (B, L, H, S)
        state.reorder(torch.tensor([1, 1]))
        model.step(tgt_in[:, 1:2], state)
        kw = {"src_mask": model.patch_mask(src)} if name == "captioner" else {}
        greedy = greedy_decode(model, src, bos_id=BOS, eos_id=EOS, max_len=4, **kw)
        beam = beam_search(model, src, bos_id=BOS, eos_id=EOS, beam_size=1, max_len=4, **kw)
        assert [h.tokens for h in greedy] == [h.tokens for h in beam]
        forward = model(src, tgt_in, labels=labels)
    assert isinstance(forward, Seq2SeqOutput)
    assert forward.logits.shape[:2] == tgt_in.shape
    assert forward.loss is not None and forward.loss.dim() == 0 and math.isfinite(forward.loss.item())


def test_the_protocol_rejects_what_decoding_could_not_use():
    class NoReorder:
        pass

    class StartOnly:
        def start(self, src, src_mask=None):
            return None

    assert not isinstance(NoReorder(), Seq2SeqState)
    assert not isinstance(StartOnly(), Seq2SeqModel)


def test_token_cross_entropy_averages_over_the_non_padding_targets():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)  # (B, T, V)
    labels = torch.tensor([[1, 4, 0], [2, 0, 0]])  # pad_id 0 at three positions
    terms = [
        -torch.log_softmax(logits[b, t], dim=-1)[labels[b, t]] for b in range(2) for t in range(3) if labels[b, t] != 0
    ]
    torch.testing.assert_close(token_cross_entropy(logits, labels, pad_id=0), torch.stack(terms).mean())
    # Label smoothing ε: the target is (1 − ε) on the label plus ε/V everywhere.
    eps = 0.1
    smooth = []
    for b in range(2):
        for t in range(3):
            if labels[b, t] != 0:
                logp = torch.log_softmax(logits[b, t], dim=-1)
                smooth.append(-(1 - eps) * logp[labels[b, t]] - eps * logp.mean())
    torch.testing.assert_close(
        token_cross_entropy(logits, labels, pad_id=0, label_smoothing=eps), torch.stack(smooth).mean()
    )
    with pytest.raises(ValueError, match="labels must have shape"):
        token_cross_entropy(logits, labels.T, pad_id=0)


def test_mean_over_targets_is_the_same_reduction():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5)
    labels = torch.tensor([[1, 4, 0], [2, 0, 0]])
    nll = -torch.log_softmax(logits, dim=-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)  # (B, T)
    torch.testing.assert_close(mean_over_targets(nll, labels, pad_id=0), token_cross_entropy(logits, labels, pad_id=0))
    assert mean_over_targets(torch.ones(2, 3), torch.zeros(2, 3, dtype=torch.long), pad_id=0).item() == 0.0
    with pytest.raises(ValueError, match="same shape"):
        mean_over_targets(nll, labels[:, :2], pad_id=0)


def test_the_models_score_their_loss_with_the_shared_helpers():
    src, _, tgt_in, labels = _text_batch()
    torch.manual_seed(0)
    model = transformer().eval()
    out = model(src, tgt_in, labels=labels, label_smoothing=0.1)
    torch.testing.assert_close(
        out.loss, F.cross_entropy(out.logits[labels != PAD], labels[labels != PAD], label_smoothing=0.1)
    )
    pg = pointer_generator().eval()
    out = pg(src, tgt_in, labels=labels)
    real = labels != PAD
    gold = out.logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1)  # (B, T) log P(w*)
    torch.testing.assert_close(out.nll, -gold[real].mean())
