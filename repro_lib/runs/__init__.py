"""Running things: notebooks under papermill (``notebook``), a plan of runs with resume (``sweep``), a notebook's
grid as a cluster job array (``cluster``) and the budgeted GPU window (``window``).

Imports the engine (``repro_lib.config``, ``train``, ``batched``, ``store``, …) and, for a notebook's grid,
``repro_lib.papers.registry``; nothing else of ``repro_lib.papers`` and nothing of ``repro_lib.results``.
"""
