"""Inference: a trained model with its tokenizer, used — text (or images) in, results and attention out.

One class per kind of model, each the one way the CLI, the explorer, the notebooks and the
exports run it: :class:`~attnlab.inference.translate.Translator`,
:class:`~attnlab.inference.qa.QuestionAnswerer`, :class:`~attnlab.inference.summarize.Summarizer`,
:class:`~attnlab.inference.classify.TextClassifier`, :class:`~attnlab.inference.caption.ImageCaptioner`
and :class:`~attnlab.inference.encoder.SentenceEncoder`. They sit below the recipes, which train
and load them (``load_translator`` returns a ``Translator``), and above the models, the decoding
and the metrics they use; they import no recipe.
"""
