"""§9 of the lesson (Transformers at work), through the API, its view functions and in its content files:

- each endpoint (and each view function the page's in-page engine mirrors: mlm_view, qa_view) answers with exactly what its shipped model computes, recomputed here from the
  model itself (not through the endpoint's code): the masked LM's candidates and [MASK] rows, the
  GPT's next-character probabilities and causal row (zero weight after the last character is
  implied: the row over the characters read sums to 1), the pointer-generator's p_gen and
  attention, the ViT's probabilities and [CLS] rows, the GAT's weights over a member's neighbours;
- bad input is a 4xx naming the problem, never a 500; a model that is not installed is a 503
  naming it and ``make models ONLY=NAME``;
- every endpoint answers within the lesson's 300 ms (median, on this shared machine);
- the content: the families, the honest notes, checks that ask to transfer, the final check's §9
  questions; the shipped models' cards and the asset budget.
"""

from __future__ import annotations

import pytest
import torch
from fastapi.testclient import TestClient

from attnlab import assets
from attnlab.assets import locate
from attnlab.assets.cards import read_model_card
from attnlab.web import lesson as L
from attnlab.web.app import create_app
from attnlab.web.lesson import s09_transformers_at_work as S9

LOCAL = "http://127.0.0.1:8000"
SECTION = L.load_sections()[9]
FINAL = L.load_sections()[10]
NEW_MODELS = ("shakespeare-mlm", "facts-qa", "facts-summarizer", "digits-vit", "karate-gat")


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(), base_url=LOCAL)


def need(name: str):
    try:
        return locate.shipped_model_dir(name)
    except FileNotFoundError:
        pytest.skip(f"needs the shipped model {name} (make models ONLY={name})")


def qa_answer(body: dict) -> dict:
    """qa_view's answer (the reference of the page's in-page question answerer, engine/bert.js)."""
    from attnlab.loading import load_model

    return L.qa_view(load_model(need("facts-qa"), family="qa"), L.QARequest(**body)).model_dump()


def mlm_answer(body: dict) -> dict:
    """mlm_view's answer (the reference of the page's in-page masked LM, engine/bert.js)."""
    from attnlab.loading import load_model

    model, tok = load_model(need("shakespeare-mlm"), family="lm")
    return L.mlm_view(model, tok, L.MLMRequest(**body)).model_dump()


def close(got, want, tol=1e-5) -> None:
    torch.testing.assert_close(
        torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(want, dtype=torch.float64), atol=tol, rtol=0
    )


# --------------------------------------------------------------------------------------------
# The numbers equal the models' own.
# --------------------------------------------------------------------------------------------


QA_PASSAGE = (
    "Lirma Tovaskel was born in Oslo in 1962. Brunt Okelavi founded Harrow Labs in 1990. "
    "Lirma Tovaskel studied physics at the University of Lima."
)


@pytest.mark.parametrize(
    "body",
    [{}, {"passage": QA_PASSAGE, "question": "Where was Lirma Tovaskel born?"},
     {"passage": QA_PASSAGE, "question": "In what year was Lirma Tovaskel born?"}],
)  # fmt: skip
def test_the_question_answerer_picks_the_span_the_model_scores_best(client, body):
    from attnlab.loading import load_model

    qa = load_model(need("facts-qa"))
    got = qa_answer(body)
    assert got["model"] == "facts-qa" and len(got["examples"]) == 3
    if not body:  # the first example passage and its first question, which the model answers right
        assert got["passage"] == got["examples"][0]["passage"] and got["question"] == got["examples"][0]["questions"][0]
        from attnlab.data.text_tasks import make_qa_task
        from attnlab.web.lesson.s09_transformers_at_work import N_QA_EXAMPLES, QA_SEED

        generated = make_qa_task(N_QA_EXAMPLES, seed=QA_SEED, questions_per_paragraph=3)["data"]
        gold = {
            (a["paragraphs"][0]["context"], q["question"]): q["answers"][0]["text"]
            for a in generated
            for q in a["paragraphs"][0]["qas"]
        }
        assert got["answer"] == gold[(got["passage"], got["question"])]
    tok = qa.tokenizer
    # [CLS] question [SEP] passage [SEP], built here by hand from the tokenizer.
    q_ids = tok.encode(got["question"])
    c_ids, offsets = tok.encode_with_offsets(got["passage"])
    ids = [tok.bos_id, *q_ids, tok.eos_id, *c_ids, tok.eos_id]
    types = [0] * (len(q_ids) + 2) + [1] * (len(c_ids) + 1)
    c0, C = len(q_ids) + 2, len(c_ids)
    span = torch.zeros(1, len(ids), dtype=torch.bool)
    span[0, c0 : c0 + C] = True
    with torch.inference_mode():
        out = qa.model(torch.tensor([ids]), token_type_ids=torch.tensor([types]), span_mask=span, need_weights=True)
    start = torch.softmax(out.start_logits[0, c0 : c0 + C].float(), -1)
    end = torch.softmax(out.end_logits[0, c0 : c0 + C].float(), -1)
    close(got["start_probs"], start.tolist())
    close(got["end_probs"], end.tolist())
    assert got["question_tokens"] == [tok.id_to_token(i) for i in q_ids]
    assert got["passage_tokens"] == [tok.id_to_token(i) for i in c_ids]
    # The best span i <= j < i + 30 by start + end logit, searched here by brute force.
    sl, el = out.start_logits[0, c0 : c0 + C].float(), out.end_logits[0, c0 : c0 + C].float()
    best = max(
        ((i, j) for i in range(C) for j in range(i, min(C, i + 30))), key=lambda ij: float(sl[ij[0]] + el[ij[1]])
    )
    assert got["answer_tokens"] == list(best)
    a, b = offsets[best[0]][0], offsets[best[1]][1]
    assert got["answer_chars"] == [a, b] and got["answer"] == got["passage"][a:b]
    assert got["answer"] == qa.answer([got["question"]], [got["passage"]])[0].text
    if body:  # the model gets these two right (not every question: about 77% of held-out ones)
        assert got["answer"] == {"Where": "Oslo", "In": "1962"}[body["question"].split()[0]]
    maps = torch.stack([m[0] for m in out.attentions]).float()  # (L, H, S, S)
    weights = maps[:, :, 1 : 1 + len(q_ids), c0 : c0 + C].mean(2)  # (L, H, C)
    close(got["weights"], weights.tolist())
    on = weights[:, :, best[0] : best[1] + 1].sum(-1)  # (L, H)
    close(got["on_answer"], on.tolist())
    H = on.shape[1]
    assert got["best_head"] == [int(on.argmax()) // H, int(on.argmax()) % H]
    assert (got["n_layers"], got["n_heads"]) == tuple(weights.shape[:2])


@pytest.mark.parametrize("text", ["ROMEO: I will l[MASK]ve thee, my lord.", "KING HENRY: What news is th[MASK]s?"])
def test_the_masked_lm_fills_the_mask_as_the_model_does(client, text):
    from attnlab.loading import load_model

    model, tok = load_model(need("shakespeare-mlm"))
    got = mlm_answer({"text": text})
    before, after = text.split("[MASK]")
    ids = [tok.bos_id, *tok.encode(before), tok.mask_id, *tok.encode(after), tok.eos_id]  # [CLS] … [SEP]
    assert got["tokens"] == [tok.id_to_token(i) for i in ids]
    assert got["tokens"][got["mask"]] == "[MASK]" and got["mask"] == ids.index(tok.mask_id)
    full = torch.tensor([ids])  # (1, S)
    with torch.inference_mode():
        out = model(full, need_weights=True)
    probs = torch.softmax(out.logits[0, got["mask"]], -1)  # (V,)
    top = probs.topk(8)
    assert [c["token"] for c in got["candidates"]] == [tok.id_to_token(int(i)) for i in top.indices]
    close([c["p"] for c in got["candidates"]], top.values)
    weights = torch.stack([w[0, :, got["mask"]] for w in out.attentions])  # (L, H, S)
    close(got["weights"], weights)
    close(torch.tensor(got["weights"]).sum(-1), torch.ones(weights.shape[:2]), tol=1e-4)  # each row adds up to 1
    st = got["strongest"]
    assert st["position"] not in (0, len(got["tokens"]) - 1, got["mask"])
    others = weights.clone()
    others[:, :, [0, -1, got["mask"]]] = -1
    assert st["weight"] == pytest.approx(float(others.max()), abs=1e-5)
    assert st["weight"] == pytest.approx(float(weights[st["layer"], st["head"], st["position"]]), abs=1e-5)


def test_the_gpt_row_is_causal_and_its_probabilities_are_the_models():
    from attnlab.loading import load_model

    model, tok = load_model(need("shakespeare-char"))
    text = "ROMEO: What light through yon"
    got = S9.gpt_view(model, tok, S9.GPTRequest(text=text)).model_dump()  # the page's reference
    ids = tok.encode(text)
    assert got["tokens"] == [tok.id_to_token(i) for i in ids] and not got["truncated"]
    with torch.inference_mode():
        out = model(torch.tensor([ids]), need_weights=True)
    probs = torch.softmax(out.logits[0, -1], -1)
    close([c["p"] for c in got["candidates"]], probs.topk(8).values)
    close(got["weights"], torch.stack([w[0, :, -1] for w in out.attentions]))
    # The full map is causal: the first position's row puts all its weight on itself.
    assert all(float(w[0, h, 0, 0]) == pytest.approx(1.0) for w in out.attentions for h in range(w.shape[1]))
    long = S9.gpt_view(model, tok, S9.GPTRequest(text="a" * 190)).model_dump()
    assert long["truncated"] and len(long["tokens"]) == model.config.n_positions


def test_the_summary_shows_the_pointer_generators_switch_and_attention():
    """summary_view, the reference of the page's engine/summary.js (tests/site/test_site_rnn_browser.py;
    the endpoint is gone)."""
    from attnlab.data.text_tasks import make_summarization_task
    from attnlab.loading import load_model

    summarizer = load_model(need("facts-summarizer"))
    view = lambda body: S9.summary_view(summarizer, S9.SummaryRequest(**body)).model_dump()  # noqa: E731
    docs = [e.document for e in make_summarization_task(3, seed=7)]
    got = view({})
    assert got["examples"] == docs and got["document"] == docs[0]
    for doc in docs[:2]:
        got = view({"document": doc})
        s = summarizer.summarize([doc], beam_size=1, return_attention=True)[0]
        assert got["tokens"] == s.tokens and got["src_tokens"] == s.src_tokens
        close(got["p_gen"], s.p_gen)
        close(got["attention"], s.attention)
        # The invented name is copied: its words are unknown to the vocabulary and get copy share > 0.5.
        unknown = {w for w, k in zip(got["src_tokens"], got["known"]) if not k}
        assert unknown, got["src_tokens"]
        copied = [1 - p for w, p in zip(got["tokens"], got["p_gen"]) if w in unknown]
        assert copied and min(copied) > 0.5, copied


@pytest.mark.parametrize("index", [0, 3, 358])
def test_the_vit_shows_cls_attention_over_the_patches(index):
    from attnlab.data.digits import digits_splits
    from attnlab.loading import load_model

    model, config = load_model(need("digits-vit"), family="vision")
    data = digits_splits(seed=0)
    got = S9.vit_view((model, config), S9.VitRequest(index=index)).model_dump()  # the page's reference
    assert got["label"] == int(data.test_y[index]) and got["n_images"] == len(data.test_y) == 359
    with torch.inference_mode():
        out = model(data.test_x[index][None].float(), need_weights=True)
    close(got["probs"], torch.softmax(out.logits[0], -1))
    rows = torch.stack([w[0, :, 0] for w in out.attentions])  # (L, H, 1+P): [CLS]'s row
    close(got["cls"], rows[:, :, 1:])
    close(got["cls_self"], rows[:, :, 0])
    assert torch.tensor(got["cls"]).shape == (2, 4, 16) and got["patch"] == 2
    image = torch.tensor(got["image"])
    assert image.shape == (8, 8) and float(image.max()) == 1.0 and float(image.min()) >= 0.0


@pytest.mark.parametrize("node", [0, 8, 33])
def test_the_gat_attends_only_to_friends_and_itself(node):
    from attnlab.data.graphs import karate_club
    from attnlab.loading import load_model

    model, config = load_model(need("karate-gat"), family="graph")
    g = karate_club()
    got = S9.gat_view((model, config), S9.GatRequest(node=node)).model_dump()  # the page's reference
    friends = {int(b) if int(a) == node else int(a) for a, b in g.edges.T.tolist() if node in (int(a), int(b))}
    assert [n["node"] for n in got["neighbours"]] == sorted(friends | {node})
    with torch.inference_mode():
        out = model(g.features, g.mask, need_weights=True)
    first = out.attentions[0][:, node]  # (H, N)
    for n in got["neighbours"]:
        close(n["weights"], first[:, n["node"]])
    close(torch.tensor([n["weights"] for n in got["neighbours"]]).sum(0), torch.ones(first.shape[0]), tol=1e-4)
    assert float(first.sum(0)[[j for j in range(34) if j not in friends | {node}]].abs().max()) == 0.0
    assert got["predicted"] == out.logits.argmax(-1).tolist() and got["truth"] == g.labels.tolist()
    held = [i for i in range(34) if i not in config["labelled"]]
    right = sum(got["predicted"][i] == got["truth"][i] for i in held)
    assert right / len(held) == pytest.approx(read_model_card(need("karate-gat")).metrics["accuracy"])


# --------------------------------------------------------------------------------------------
# Bad input: 4xx, never 500; a missing model: 503 naming it.
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body, pattern", [({"document": "   "}, "has no words"), ({"document": ""}, "at least 1")])
def test_the_summary_refuses_a_document_without_words_in_one_line(body, pattern):
    from pydantic import ValidationError

    from attnlab.loading import load_model

    summarizer = load_model(need("facts-summarizer"), family="summarize")
    with pytest.raises((ValidationError, ValueError), match=pattern):
        S9.summary_view(summarizer, S9.SummaryRequest(**body))


def test_the_summary_endpoint_is_gone(client):
    """§9's summary computes in the page (engine/summary.js)."""
    assert client.post("/api/lesson/apps/summary", json={}).status_code in (404, 405)


@pytest.mark.parametrize(
    ("view", "body", "pattern"),
    [
        ("gpt", {"text": ""}, "at least 1 character"),
        ("gpt", {"text": "日本語だけ"}, "no character the model knows"),
        ("gpt", {"nope": 1}, "Extra inputs"),
        ("vit", {"index": 359}, "index must be below 359"),
        ("vit", {"index": -1}, "greater than or equal to 0"),
        ("vit", {"index": "3"}, "valid integer"),
        ("gat", {"node": 34}, "node must be below 34"),
        ("gat", {"node": 1.5}, "valid integer"),
    ],
)
def test_the_in_page_widgets_references_refuse_bad_input_in_one_line(view, body, pattern):
    """The GPT, ViT and GAT widgets compute in the page (engine/gpt.js, vit.js, gat.js; their
    parity with these references is tests/site/test_site_gpt_browser.py): bad input is a ValueError
    (pydantic's, or the view's own sentence) that the page's module answers in the same words."""
    from attnlab.loading import load_model

    with pytest.raises(ValueError, match=pattern):
        if view == "gpt":
            S9.gpt_view(*load_model(need("shakespeare-char"), family="lm"), S9.GPTRequest(**body))
        elif view == "vit":
            S9.vit_view(load_model(need("digits-vit"), family="vision"), S9.VitRequest(**body))
        else:
            S9.gat_view(load_model(need("karate-gat"), family="graph"), S9.GatRequest(**body))


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (mlm_answer, {"text": "no mask here"}),
        (mlm_answer, {"text": "[MASK] and [MASK]"}),
        (mlm_answer, {"text": "a" * 70 + "[MASK]"}),  # 73 tokens: more than the 64 it reads
        (mlm_answer, {"text": 5}),
        (mlm_answer, {"text": "x" * 201}),
        (qa_answer, {"passage": "   ", "question": "Who?"}),
        (qa_answer, {"passage": "a " * 200, "question": "Who?"}),  # 200 tokens: more than its 128
        (qa_answer, {"passage": "x" * 401, "question": "Who?"}),
        (qa_answer, {"passage": "Oslo.", "question": "q" * 121}),
        (qa_answer, {"passage": "Oslo.", "question": 5}),
        (qa_answer, {"passage": "Oslo.", "question": "Where?", "nope": 1}),
    ],
)
def test_bad_input_to_the_in_page_views_is_a_clear_error(answer, body):
    """The masked LM and the question answerer run in the page now; their reference views refuse
    what the page refuses, with a message (a pydantic ValidationError is a ValueError)."""
    with pytest.raises(ValueError) as err:
        answer(body)
    assert str(err.value).strip()


@pytest.mark.parametrize("url", [f"/api/lesson/apps/{name}" for name in ("mlm", "qa", "gpt", "summary", "vit", "gat")])
def test_the_in_page_widgets_have_no_endpoint(client, url):
    assert client.post(url, json={}).status_code in (404, 405)


def test_a_missing_model_is_503_naming_it_and_the_rest_works(monkeypatch, tmp_path):
    """Every §9 widget's model is a folder of the in-page engine; where the shipped model is not
    built here, asking for it is a 503 that names the model and the command that builds it, and
    the rest of the lesson still answers."""
    need("shakespeare-char")
    monkeypatch.setattr(assets, "ROOT", tmp_path)  # an installation whose assets are not built
    client = TestClient(create_app(), base_url=LOCAL)
    for name in NEW_MODELS + ("shakespeare-char",):
        r = client.get(f"/static/models/{name}/meta.json")
        assert r.status_code == 503, r.text
        detail = r.json()["detail"]
        assert f"needs the shipped model {name}" in detail and f"make models ONLY={name}" in detail
    assert client.get("/static/data/lesson/sections/9.json").status_code == 200


# --------------------------------------------------------------------------------------------
# Latency.
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# Content, cards and the budget.
# --------------------------------------------------------------------------------------------


def test_the_page_shows_every_family_and_application():
    widgets = [b.widget for b in SECTION.blocks if b.type == "widget"]
    assert widgets == ["families", "apps-mlm", "apps-qa", "apps-gpt", "apps-summary", "apps-vit", "apps-gat"]
    for lang in ("ja", "en"):
        text = " ".join(getattr(b.html, lang) for b in SECTION.blocks if b.html)
        for word in {
            "ja": ("エンコーダだけ", "デコーダだけ", "エンコーダ・デコーダ"),
            "en": ("Encoder-only", "Decoder-only", "Encoder–decoder"),
        }[lang]:
            assert word in text, (lang, word)
    # Each live widget says what its model was trained on and what it cannot do.
    for key in ("mlm_honest", "qa_honest", "gpt_honest", "sum_honest", "vit_honest", "gat_honest"):
        assert SECTION.strings[key].en and SECTION.strings[key].ja
    assert "12 layers" in SECTION.strings["mlm_honest"].en and "12 層" in SECTION.strings["mlm_honest"].ja
    # The QA widget says that looking at the answer does not show that a head carries it.
    assert "not evidence that the head carries it" in SECTION.strings["qa_honest"].en
    assert "運んでいる証拠にはなりません" in SECTION.strings["qa_honest"].ja
    assert "toy task" in SECTION.strings["qa_honest"].en.lower() and "おもちゃの課題" in SECTION.strings["qa_honest"].ja
    assert "toy task" in SECTION.strings["vit_honest"].en.lower() and "小さな課題" in SECTION.strings["gat_honest"].ja


def test_the_japanese_basic_path_has_no_developer_text():
    basic = [b.html.ja for b in SECTION.blocks if b.type in ("html", "note") and not b.further]
    for text in basic:
        for word in (
            "attnlab",
            "/api/",
            ".py",
            "shakespeare-mlm",
            "digits-vit",
            "karate-gat",
            "facts-summarizer",
            "facts-qa",
            "float32",
        ):
            assert word not in text, word
    # The technical names live in the folded notes and the widgets' source lines only.
    assert all("shakespeare-mlm" not in SECTION.strings[k].ja for k in ("mlm_honest", "mlm_table", "mlm_bars"))


def test_the_japanese_page_says_causal_mask_not_a_paraphrase():
    ja = " ".join(
        [b.html.ja for b in SECTION.blocks if b.html]
        + [v.ja for v in SECTION.strings.values()]
        + [q.question.ja + " " + q.hint.ja + " " + q.explanation.ja for q in SECTION.check]
    )
    assert "因果マスク" in ja and "先を隠す" not in ja


def test_the_predictions_sit_at_their_widgets_and_going_further_is_folded():
    assert [p.widget for p in SECTION.predict] == ["apps-mlm", "apps-summary"]
    basic = [b.widget for b in SECTION.blocks if b.type == "widget" and not b.further]
    assert {"apps-mlm", "apps-summary", "apps-qa"} <= set(basic)
    further = [b for b in SECTION.blocks if b.further]
    assert len(further) >= 2 and any("output_attentions=True" in b.html.en for b in further if b.html)
    assert not any("Predict first" in b.html.en for b in SECTION.blocks if b.html)


def test_the_checks_transfer_and_the_final_check_draws_on_section_9():
    assert all(q.kind in ("transfer", "predict") for q in SECTION.check)
    assert [q.section for q in FINAL.check][-2:] == [9, 9]
    assert 10 <= len(FINAL.check) <= 14


@pytest.mark.parametrize("name", NEW_MODELS)
def test_each_new_model_has_a_card_with_task_data_size_and_score(name):
    folder = need(name)
    card = read_model_card(folder)
    assert card.data and card.licence and card.command.startswith("attnlab train ")
    assert card.metrics and card.parameters > 0
    assert card.weights_bytes == (folder / "model.safetensors").stat().st_size < 400_000  # a few hundred KB at most
    assert (folder / "MODEL_CARD.md").read_text(encoding="utf-8").startswith(f"# {name}\n")


def test_the_assets_stay_inside_the_budget():
    assert assets.total_bytes() <= assets.BUDGET_BYTES == 24_000_000


@pytest.mark.parametrize("name", ["facts-summarizer", "digits-vit", "karate-gat", "shakespeare-mlm", "facts-qa"])
def test_the_model_page_runs_each_new_model_on_its_examples(name):
    from attnlab.web.models import GROUP_AXES, load_explorer_model

    need(name)
    model = load_explorer_model(name)
    assert model.name == name and model.examples == assets.ASSETS[name].examples
    for example in model.examples:
        run = model.run(example)
        assert run.output and run.attentions
        for group, weights in run.attentions.items():
            rows, cols = GROUP_AXES[group]
            assert weights.shape[2:] == (len(run.tokens[rows]), len(run.tokens[cols]))
            close(weights.sum(-1), torch.ones(weights.shape[:-1]), tol=1e-4)  # every row of attention adds up to 1
    if name in ("digits-vit", "karate-gat"):
        with pytest.raises(ValueError, match="whole number"):
            model.run("seven")
