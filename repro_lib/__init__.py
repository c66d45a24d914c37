"""repro_lib: reproductions of research on scale-invariant networks on one small library.

Four layers, imports pointing down only (``tests/test_layers.py``):

* engine (this folder): ``config`` (RunConfig, ImageFolderConfig), ``profiles``, ``data``, ``imagefolder``,
  ``models/``, ``optim/``, ``schedules``, ``angular``, ``cutmix``, ``train`` (``fit``), ``batched``
  (``fit_many``), ``distributed`` (``fit_imagefolder``), ``store``;
* ``runs/``: notebooks under papermill, sweeps, cluster job arrays, the budgeted GPU window;
* ``results/``: tables, figures, findings, the published results;
* ``papers/``: one folder per paper, and the registry of notebooks that ``runs`` and ``results`` read.

See DEVELOPERS.md.
"""
__version__ = "0.1.0"
