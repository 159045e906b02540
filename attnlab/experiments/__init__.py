"""Experiments: end-to-end runs that combine recipes and write a report.

``attnlab demo`` (:mod:`.demo`: the translation recipe on a generated task, with heatmaps),
``attnlab experiment bottleneck`` (:mod:`.bottleneck`: RNN without and with attention against a
Transformer, BLEU by sentence length) and ``attnlab experiment variants`` (:mod:`.variants`: one
GPT trained with each attention variant). They sit above :mod:`attnlab.recipes`, whose modules
never import one another: an experiment may use several recipes, a recipe uses none.

Each of these three modules ends with its command-line command, a typed function in the CLI's
style, listed in its ``COMMANDS``; :mod:`attnlab.cli` only turns them into subcommands.
"""
