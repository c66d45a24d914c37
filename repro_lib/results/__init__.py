"""Results: paper-style tables (``tables``), figures (``figures``), verdicts in numbers and words (``findings``),
the published results in ``reports/`` with the README's results table (``publish``; the executed notebooks and
their parameters: ``executed``) and its cost table (``costs``). No training here.

Imports the engine, ``repro_lib.runs`` and, for a notebook's grid, ``repro_lib.papers.registry``; nothing else of
``repro_lib.papers``.
"""
