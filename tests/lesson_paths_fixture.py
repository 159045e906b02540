"""A copy of the lesson's content in one known form for the tests of the third edition's mechanism
(the section files themselves are the content engineers', and change): every section's ``:::: further``
regions and ``further_minutes`` are taken out, except §6, whose regions become one region from its
"other ways" (learned position vectors and RoPE, with their code) to the end; §6's prediction at the
word-order widget is replaced by the one below; §6's teacher notes split their time into ``minutes``
(the basic path) and ``further_minutes``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from attnlab.web import lesson as L

SECTION = 6
NAME = "06-positional-encoding.md"
BASIC_MINUTES, FURTHER_MINUTES = 10, 15

PREDICT = {
    "ja": """predict:
- widget: word-order
  question: 位置の情報もマスクもない自己注意に「猫 が 犬 を 追う」と「犬 が 猫 を 追う」を通します。猫の出力ベクトルは 2 つの文でどうなるでしょう。
  choices:
  - まったく同じベクトル
  - 少しだけ違うベクトル
  - まったく違うベクトル
  answer: 0
  hint: 位置の情報がないとき、猫のクエリや各語のキー・バリューは 2 つの文で変わるでしょうか。
  explanation: 位置の情報もマスクもなければ、猫のクエリも、各語のキーとバリューも、猫が見る語の集まりも 2 つの文で同じです。だから猫の出力はまったく同じで、出てくる位置だけが変わります。
""",
    "en": """predict:
- widget: word-order
  question: Self-attention with no position information and no mask reads 「猫 が 犬 を 追う」 and 「犬 が 猫 を 追う」. What happens to the output vector of 猫 in the two sentences?
  choices:
  - exactly the same vector
  - a slightly different vector
  - a completely different vector
  answer: 0
  hint: Without position information, do 猫's query and the words' keys and values change between the two sentences?
  explanation: Without positions or a mask, 猫's query, every word's key and value and the set of words it looks at are the same in both sentences, so its output is exactly the same; only the position it comes out at changes.
""",
}
FURTHER_STARTS = {"ja": "## ほかの方法: 位置のベクトルを学習する", "en": "## Another way: learned position vectors"}


def _unfold(body: str) -> str:
    """``body`` without its ``:::: further`` / ``::::`` lines (the blocks inside stay, in order)."""
    return "\n".join(line for line in body.split("\n") if line.rstrip() not in (":::: further", "::::"))


def _without_predict(front: str) -> str:
    """Front matter without its ``predict:`` key (a top-level key and its indented/list lines)."""
    out, skipping = [], False
    for line in front.split("\n"):
        if line.startswith("predict:"):
            skipping = True
            continue
        if skipping and (line.startswith((" ", "-")) or not line):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out)


def paths_content(tmp: Path) -> Path:
    """The shipped content copied to ``tmp / "content"``, in the form the module describes."""
    content = tmp / "content"
    shutil.copytree(L.CONTENT_DIR, content)
    for lang in ("ja", "en"):
        for path in sorted((content / lang).glob("[0-9][0-9]-*.md")):
            front, body = path.read_text(encoding="utf-8").split("\n---\n", 1)
            body = _unfold(body)
            if path.name == NAME:
                assert FURTHER_STARTS[lang] in body, (lang, "the fixture's anchor moved")
                body = (
                    body.replace(FURTHER_STARTS[lang], ":::: further\n\n" + FURTHER_STARTS[lang], 1).rstrip("\n")
                    + "\n\n::::\n"
                )
                front = _without_predict(front) + "\n" + PREDICT[lang].rstrip("\n")
            path.write_text(front + "\n---\n" + body, encoding="utf-8")
            notes = content / lang / "teacher" / path.name
            head, rest = notes.read_text(encoding="utf-8").split("\n---\n", 1)
            head = "\n".join(line for line in head.split("\n") if not line.startswith("further_minutes:"))
            if path.name == NAME:
                head = f"---\nminutes: {BASIC_MINUTES}\nfurther_minutes: {FURTHER_MINUTES}"
            notes.write_text(f"{head}\n---\n{rest}", encoding="utf-8")
    return content
