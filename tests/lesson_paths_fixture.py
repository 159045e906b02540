"""A copy of the lesson's content with one small place converted to the third edition's conventions,
for the tests of the mechanism (the section files themselves are the content engineers'): §6's two
"other ways" (learned position vectors and RoPE, with their code) become one ``:::: further``
region; the word-order widget gets a prediction (``predict:``); §6's teacher notes split their time
into ``minutes`` (the basic path) and ``further_minutes``.
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
FURTHER_STARTS = {"ja": "## ほかの方法 1: 位置のベクトルを学習する", "en": "## Another way: learned position vectors"}


def paths_content(tmp: Path) -> Path:
    """The shipped content copied to ``tmp / "content"``, with §6 converted (see the module)."""
    content = tmp / "content"
    shutil.copytree(L.CONTENT_DIR, content)
    for lang in ("ja", "en"):
        path = content / lang / NAME
        text = path.read_text(encoding="utf-8")
        front, body = text.split("\n---\n", 1)
        assert FURTHER_STARTS[lang] in body, (lang, "the fixture's anchor moved")
        body = (
            body.replace(FURTHER_STARTS[lang], ":::: further\n\n" + FURTHER_STARTS[lang], 1).rstrip("\n") + "\n\n::::\n"
        )
        path.write_text(front + "\n" + PREDICT[lang] + "---\n" + body, encoding="utf-8")
        notes = content / lang / "teacher" / NAME
        text = notes.read_text(encoding="utf-8")
        head, rest = text.split("\n---\n", 1)
        notes.write_text(
            f"---\nminutes: {BASIC_MINUTES}\nfurther_minutes: {FURTHER_MINUTES}\n---\n{rest}", encoding="utf-8"
        )
    return content
