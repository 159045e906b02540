// The index in a class (`attnlab explore --classroom`): the address students type, and its QR
// code, drawn by the server (GET /api/classroom, /api/classroom/qr.svg). Nothing shows otherwise.
(function () {
  "use strict";
  const { t, el, getJSON } = window.Attn;

  async function show() {
    const box = document.getElementById("classroom");
    // A class is the explorer's (--classroom): the static build has no server to ask.
    if (!box || window.Attn.isStatic) return;
    let info;
    try {
      info = await getJSON("/api/classroom");
    } catch (err) {
      return; // not essential: the lesson works without it
    }
    if (!info.enabled || !info.urls.length) return;
    const title = el("h2", { id: "classroom-title" });
    const intro = el("p", { class: "note" });
    const relabel = () => {
      title.textContent = t("cl_title");
      intro.textContent = t("cl_intro");
    };
    relabel();
    document.addEventListener("langchange", relabel);
    box.replaceChildren(
      title,
      el("div", { class: "classroom-row" },
        el("img", { src: "/api/classroom/qr.svg", id: "classroom-qr", width: "180", height: "180", alt: info.urls[0] }),
        el("div", {}, intro, el("ul", { class: "classroom-urls" }, info.urls.map((u) => el("li", {}, el("a", { href: u, text: u })))))));
    box.classList.remove("hidden");
  }

  document.addEventListener("DOMContentLoaded", show);
})();
