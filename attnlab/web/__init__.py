"""The explorer: an offline web app with the lesson (授業), the attention playground, masks and live
attention maps.

Start it with ``attnlab explore [--model DIR ...]``; see ``docs/explorer.md``. The app is built by
:func:`attnlab.web.app.create_app` (its handlers; the requests and answers are
:mod:`attnlab.web.schemas`, the guards every request passes :mod:`attnlab.web.security`); models
plug in through :mod:`attnlab.web.models`; the lesson's pages and API are :mod:`attnlab.web.lesson`.

Shape:
    see :mod:`attnlab.web.schemas` (API payloads) and :mod:`attnlab.web.models` (``(L, H, T, S)`` maps)
"""
