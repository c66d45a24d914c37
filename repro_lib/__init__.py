"""repro_lib: reproductions of research on scale-invariant networks on one small library.

Modules: ``config`` (RunConfig), ``profiles``/``experiments`` (profiles as data), ``data``, ``models``,
``optim``, ``schedules``, ``angular``, ``train`` (``fit``), ``store``, ``sweep``, ``paper``, ``report``,
``notebook``. See DEVELOPERS.md.
"""
__version__ = "0.1.0"
