"""Everything specific to one paper, one folder each, and the registry that maps every notebook to its paper.

* ``yun2022/``: Yun et al., *On the Angular Update and Hyperparameter Tuning of a Scale-Invariant Network*, ECCV
  2022: the table grids and how each profile shrinks them (``grids``), the notebook helper of the table notebooks
  (``table_notebook``), Lemma 1 checked on a model (``theory``), Sec. 6 on ImageNet (``section6``).
* ``adamp/``: Heo et al., *AdamP*, ICLR 2021: toys, lemmas and the cosine statistics (``toys``), the ImageNet
  Tables 1-2 (``imagenet``).
* ``li_arora/``: Li & Arora, *An Exponential Learning Rate Schedule for Deep Learning*, ICLR 2020 (``exp_lr``).
* ``backmatching/``: back-matching propagation and scale-amended SGD, supplementary material (``backmatching``).
* ``transcribed``: the papers' tables as data (``<paper>/tables/*.csv``; ``transcribed.table(name)``), with the
  cells we had to judge in ``JUDGEMENTS.md``.
* ``registry``: notebook name → its paper, what it reproduces and its plans; the only module of this package that
  ``repro_lib.runs`` and ``repro_lib.results`` import.

Paper code may import the engine, ``repro_lib.runs`` and ``repro_lib.results``; the engine imports nothing from
here.
"""
