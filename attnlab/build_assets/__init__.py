"""``make models``: train, pack and describe the models shipped with attnlab (:mod:`attnlab.assets`).

The build of the shipped assets sits at the top of attnlab's layers, above the experiments and
the recipes it trains through, and outside the :mod:`attnlab.assets` package: the registry of
names there, their lookup (:mod:`attnlab.assets.locate`, which every loader uses) and the
cards (:mod:`attnlab.assets.cards`) sit low, and a package may not be both below the recipes and
above them (the import contract against cycles).

For each shipped model, its :data:`BUILDS` entry says how it is made and how it is judged:

1. **train** it with the ordinary command (``attnlab train translate --preset ja-en ...``,
   ``attnlab demo``, ``attnlab experiment bottleneck``, ``attnlab train lm ...``,
   ``attnlab train classify ...``), run as a subprocess so that the command in the card is exactly
   what ran; a build whose command reads files made from a corpus (the sentence-type classifier's
   labelled sentences) writes them first. Two trainings sized for one thread each (ja-en and
   en-ja) run side by side, each with ``OMP_NUM_THREADS=1``; the others one after another. The two
   RNNs come from one bottleneck run. The machine's load when each training starts and ends is
   recorded for its card;
2. **check** that the trained model's ``config.json`` is the one the build makes (a run packed
   with ``--from-run`` must come from the same settings);
3. **pack** it (:func:`attnlab.checkpoint.pack_checkpoint`: weights in fp16, or int8 with per-row
   scales for the ja⇄en translators, loaded back as fp32)
   into ``attnlab/assets/NAME``;
4. **measure** the packed model on held-out data and write its card (:func:`attnlab.assets.cards.write_model_card`):
   ``MODEL_CARD.md`` for people, ``card.json`` for the tests, which repeat the card's fast check on
   every model present (``tests/assets/test_assets.py``).

Finally the assets' total size is checked against :data:`attnlab.assets.BUDGET_BYTES`.

The package, each module readable alone:

- :mod:`.driver`: :data:`BUILDS`, :func:`build` (train, check, pack, measure, the size budget),
  :func:`pack_asset`, :func:`training_facts`, the command line (:func:`main`; ``__main__.py``);
- :mod:`.translators`: the ja⇄en translators, the demo's number translator, the bottleneck RNNs;
- :mod:`.language_models`: the character GPT and the masked-LM BERT on tinyshakespeare;
- :mod:`.applications`: the sentence-type classifier (§8), the summarizer, question answerer,
  Vision Transformer and graph attention network (§9);
- :mod:`.common`: what they share: the :class:`AssetBuild` protocol, :class:`Evaluation`, the fast
  check and reading a ``config.json``.

The builds load the models they judge through :func:`attnlab.loading.load_model` by family, and
no build module imports another (an import contract).

Run it as ``python -m attnlab.build_assets [--only NAME ...] [--data DIR] [--from-run DIR]``
(``make models`` does, with ``DATA``, ``ONLY`` and ``FROM_RUN``). Corpora are read from ``--data``
(default ``../shared/data``); the generated tasks need nothing.

Shape:
    no tensors cross this module's interface: folders and text in, asset folders and cards out.
"""

from .applications import DigitsViT, FactsQA, FactsSummarizer, KarateGAT, SentenceTypeClassifier, pooling_peaks
from .common import AssetBuild, Evaluation
from .driver import BUILDS, LOAD_FILE, build, config_differences, main, pack_asset, training_facts
from .language_models import EXAMPLE_TOKENS, ShakespeareMLM, TextLM
from .translators import BF16_NOTE, BottleneckRNN, DemoTranslator, EnjaTranslator, PresetTranslator

__all__ = [
    "Evaluation",
    "AssetBuild",
    "PresetTranslator",
    "EnjaTranslator",
    "DemoTranslator",
    "BottleneckRNN",
    "BF16_NOTE",
    "TextLM",
    "ShakespeareMLM",
    "EXAMPLE_TOKENS",
    "SentenceTypeClassifier",
    "FactsSummarizer",
    "FactsQA",
    "DigitsViT",
    "KarateGAT",
    "pooling_peaks",
    "BUILDS",
    "config_differences",
    "LOAD_FILE",
    "training_facts",
    "pack_asset",
    "build",
    "main",
]
