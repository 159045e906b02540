// §8 Exercise 2, attention pooling, computed in the page (engine/pooling.js, whose reference is
// attnlab/web/lesson/s08_variants_and_exercises.pooling_view): the shipped classifier
// ja-sentence-type reads a Japanese sentence character by character and says whether it is a
// question, a negation, in the past or none of these. The widget shows the class probabilities
// and each character's pooling weight as a one-row heatmap, with the grammatical markers MeCab
// finds (which the model never sees) to compare the peak with. MeCab runs when the site is built:
// the markers are there for the listed sentences (the examples and the held-out test sentences,
// "another test sentence"); a typed sentence off that list gets its numbers and a note saying so.
// State in the address: pool (the sentence, when it is not the first example).
(function () {
  "use strict";
  const { el, debounce } = window.Attn;
  const { panes, loader, memo, keepFocus } = window.Lesson;
  const { num, sequential, css, textOn } = window.Charts;
  const FIRST = "この電車は京都に行きますか。"; // the model's first example, until it names them
  // The in-page module (static/engine/pooling.js), imported when first needed.
  let engineModule = null;
  const engine = () => (engineModule ||= import("../../engine/pooling.js"));
  const percent = (p) => (100 * p).toFixed(p > 0.995 || p < 0.005 ? 0 : 1) + "%";

  function mount(root, ctx) {
    const { s } = ctx;
    const typed = ctx.param("pool", null);
    const state = { text: typed && typed.trim() ? typed : FIRST };
    let shown = null;
    let examples = null; // {label: sentence}, from the first answer
    let heldOut = []; // the listed test sentences (the model never read them), from the first answer
    let nextTest = 0; // which of them "another test sentence" shows next
    const controls = el("div", { class: "widget-controls inline pool-controls" });
    const p = panes("pool");
    let input = null;

    function remember() {
      const first = examples ? Object.values(examples)[0] : FIRST;
      ctx.setParams({ pool: state.text === first ? null : state.text });
    }

    function choose(sentence) {
      state.text = sentence;
      input.value = sentence;
      changed();
    }

    function exampleButtons() {
      if (!examples) return null;
      const another = heldOut.length ? el("button", { type: "button", class: "plain pool-another", id: "pool-another", text: s("pool_another") }) : null;
      if (another) {
        another.addEventListener("click", () => {
          const row = heldOut[nextTest % heldOut.length];
          nextTest += 1;
          choose(row.text);
        });
      }
      return el("div", { class: "examples", role: "group", "aria-label": s("pool_examples") },
        el("span", { class: "note", text: s("pool_examples") }),
        Object.entries(examples).map(([label, sentence]) => {
          const b = el("button", { type: "button", class: "plain pool-example", id: "pool-ex-" + label, lang: "ja" },
            el("span", { class: "pool-example-class", lang: ctx.lang(), text: s("pool_class_" + label) + s("pool_example_sep") }), sentence);
          b.addEventListener("click", () => choose(sentence));
          return b;
        }),
        another);
    }

    function buildControls() {
      input = el("input", { type: "text", id: "pool-text", class: "wide", lang: "ja", maxlength: "64", "aria-label": s("pool_input_label") });
      input.value = state.text;
      input.addEventListener("input", () => {
        if (!input.value.trim()) return; // an empty box asks nothing; the last answer stays
        state.text = input.value;
        changed();
      });
      // The example buttons come with the first answer (none before it: replaceChildren would
      // write a null as the text "null").
      controls.replaceChildren(
        el("label", { class: "row grow" }, el("span", { text: s("pool_input_label") }), input),
        ...[exampleButtons()].filter(Boolean));
    }

    const send = debounce(loader(p, {
      request: () => ({ text: state.text }),
      // In the page: the shipped classifier's ONNX export through onnxruntime-web, and the
      // markers MeCab found when the site was built (engine/pooling.js).
      fetch: async (req) => {
        const m = await engine();
        const model = await m.loadPooling(m.POOLING_MODEL, { onProgress: window.Lesson.modelProgress(p) });
        heldOut = model.sentences.filter((row) => row.source === "test");
        return m.classify(model, req);
      },
      busy: () => s("pool_loading"),
      done: (res) => {
        shown = res;
        if (!examples) {
          examples = res.examples;
          keepFocus(controls, buildControls);
        }
        draw();
      },
    }), 250);

    function changed() {
      remember();
      send();
    }

    function weightsTable(r) {
      const marked = new Set(Object.values(r.markers || {}).flat()); // every marker MeCab found
      const head = el("tr", {}, el("td"), r.chars.map((ch, i) => el("th", {
        scope: "col", lang: "ja", id: "pool-ch-" + i,
        class: ["pool-char", i === r.peak ? "pool-peak" : "", marked.has(i) ? "pool-marker" : ""].join(" ").trim(),
        text: (ch === " " ? "␣" : ch) + (r.known[i] ? "" : "*"),
      })));
      const row = el("tr", {}, el("th", { scope: "row", text: s("pool_weight_row") }), r.weights.map((w, i) => {
        const rgb = sequential(w); // on the 0–1 scale of every weight in the lesson (its key below)
        const td = el("td", { id: "pool-w-" + i, "data-value": String(w), class: i === r.peak ? "pool-peak" : null, text: num(w, 2) });
        td.style.backgroundColor = css(rgb);
        td.style.color = textOn(rgb);
        return td;
      }));
      // The title sits above the table, not in a <caption>: a caption wraps at the table's width.
      return [
        el("p", { class: "pool-weights-title", id: "pool-weights-title", text: s("pool_weights_title") }),
        el("div", { class: "scroll", tabindex: "0", role: "region", "aria-labelledby": "pool-weights-title" },
          el("table", { class: "matrix pool-weights", id: "pool-weights", "aria-labelledby": "pool-weights-title" },
            el("thead", {}, head), el("tbody", {}, row))),
        window.Figure.keySVG({ title: window.Attn.t("fig_key_weight"), lo: 0, hi: 1, fill: (v) => css(sequential(v)) }),
      ];
    }

    function markerLine(r) {
      // A typed sentence off the build's list: MeCab (which runs when the site is built) never read it.
      if (r.markers === null) return el("p", { id: "pool-markers", class: "note pool-unlisted", "data-value": "unlisted", text: s("pool_markers_unlisted") });
      const found = r.labels.filter((label) => r.markers[label]);
      if (!found.length) return el("p", { id: "pool-markers", "data-value": "", text: s("pool_markers_none") });
      const items = found.map((label) => s("pool_marker_item", {
        name: s("pool_class_" + label),
        chars: r.markers[label].map((i) => r.chars[i]).join(""),
      }));
      return el("p", { id: "pool-markers", "data-value": found.join(" "), text: s("pool_markers", { list: items.join(s("pool_list_sep")) }) });
    }

    function render() {
      const r = shown;
      const best = r.labels.indexOf(r.label);
      const c = r.card;
      p.out.replaceChildren(...[
        el("p", { class: "pool-result" }, el("span", { text: s("pool_predicted") }),
          el("strong", { id: "pool-label", "data-value": r.label, text: s("pool_class_" + r.label) }),
          el("span", { text: s("pool_prob", { p: percent(r.probs[best]) }) })),
        window.Charts.bars({
          values: r.probs, labels: r.labels.map((label) => s("pool_class_" + label)), idPrefix: "pool-p-",
          label: s("pool_probs_label"), left: 200, format: percent, scaleTitle: window.Attn.t("fig_scale_prob"),
        }),
        ...weightsTable(r),
        el("p", { id: "pool-peak", "data-value": String(r.peak),
          text: s("pool_peak", { ch: r.chars[r.peak], w: num(r.weights[r.peak], 2) }) }),
        markerLine(r),
        r.known.every(Boolean) ? null : el("p", { class: "note", text: s("pool_unk") }),
        el("p", { class: "note", id: "pool-card", "data-value": String(c.accuracy),
          text: s("pool_card", {
            n: c.n, acc: percent(c.accuracy),
            q: percent(c.peak_on_marker.question), neg: percent(c.peak_on_marker.negation), past: percent(c.peak_on_marker.past),
          }) }),
        memo(el("p", { text: s("pool_source") })),
      ].filter(Boolean));
    }

    function draw() {
      if (shown) keepFocus(root, render);
    }

    root.replaceChildren(controls, p.status, p.error, p.out);
    buildControls();
    ctx.onLang(() => { buildControls(); draw(); });
    changed();
  }

  window.Lesson.register("pooling", { mount });
})();
