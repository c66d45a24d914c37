import os
from pathlib import Path

import pytest
import torch

# Under pytest-xdist (`make test`: -n auto) the cores are shared by the workers: each takes its share of threads, and
# so do the processes it starts (notebook kernels, sweeps), instead of every worker oversubscribing every core.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
THREADS = max(1, min(2, (os.cpu_count() or 1) // WORKERS))
if WORKERS > 1:
    os.environ["OMP_NUM_THREADS"] = str(THREADS)
torch.set_num_threads(THREADS)

ROOT = Path(__file__).resolve().parents[1]
# Real images for integration tests: the CIFAR-10 JPEG mirror next to the checkout (../shared/data), if present.
SHARED_DATA = Path(os.environ.get("REPRO_TEST_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture
def jpeg_root():
    if not (SHARED_DATA / "cifar10-jpeg" / "train").is_dir():
        pytest.skip(f"no CIFAR-10 JPEG mirror at {SHARED_DATA / 'cifar10-jpeg'}")
    return SHARED_DATA


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors: intra-op threads only add synchronisation (and suffer badly on a shared 2-core box)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def killed_at_epoch(monkeypatch):
    """``with killed_at_epoch(e): fit(...)``: the run is killed (``KeyboardInterrupt``, asserted) when it hands epoch
    ``e`` to ``Store.log_epoch`` -- after the checkpoint of epoch e-1, before anything of epoch e is stored."""
    import contextlib

    from repro_lib.store import Store

    real = Store.log_epoch

    @contextlib.contextmanager
    def killed(epoch: int):
        def crash(self, cfg, rec):
            if rec["epoch"] == epoch:
                raise KeyboardInterrupt
            real(self, cfg, rec)

        monkeypatch.setattr(Store, "log_epoch", crash)
        try:
            with pytest.raises(KeyboardInterrupt):
                yield
        finally:
            monkeypatch.setattr(Store, "log_epoch", real)

    return killed


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``--dist loadgroup``): the tests of a module that share a module-scoped fixture of that
    module (one training for all of them) run on one worker, so the fixture runs once instead of once per worker."""
    for item in items:
        defs = getattr(item, "_fixtureinfo", None)
        shared = defs and any(d.scope in ("module", "package", "session") and d.func.__module__ == item.module.__name__
                              for ds in defs.name2fixturedefs.values() for d in ds)
        if shared:
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
