import os
import re
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


# Test files that define a module- or session-scoped fixture (one training shared by their tests).
_SHARED_FIXTURE = re.compile(r"@pytest\.fixture\(scope=\"(?:module|session)\"")


def _shared_fixture_files(rootpath: Path) -> set[str]:
    """Those files as node ids spell them (relative to the rootdir)."""
    here = Path(__file__).resolve().parent
    return {p.relative_to(rootpath).as_posix() for p in here.glob("test_*.py") if _SHARED_FIXTURE.search(p.read_text())}


@pytest.hookimpl(optionalhook=True)  # without pytest-xdist installed this hook is never called
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist (``make test``: -n auto): every test is its own unit of work, handed to the next free worker,
    except that a file with a module- or session-scoped fixture is one unit, so that its fixture runs once, on one
    worker, instead of once per worker."""
    from xdist.scheduler import LoadScopeScheduling

    shared = _shared_fixture_files(config.rootpath)

    class SharedFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return path if path in shared else nodeid

    return SharedFixtureScheduling(config, log)


def pytest_collection_modifyitems(config, items):
    """In a pytest-xdist worker: the long units (the files of :func:`pytest_xdist_make_scheduler` and the notebook
    executions) come first in the order the workers are handed work, so that the many short tests fill the cores at
    the end instead of one long unit running alone."""
    if not hasattr(config, "workerinput"):
        return
    shared = _shared_fixture_files(config.rootpath)

    def long(item) -> bool:
        return item.nodeid.split("::", 1)[0] in shared or item.originalname == "test_notebook_runs_in_smoke_profile"

    items.sort(key=lambda item: not long(item))  # stable, and the same order in every worker (as xdist requires)
