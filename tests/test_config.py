"""RunConfig: validation names the bad parameter before any data is loaded; the hash is stable."""
import pytest

from repro_lib.config import RunConfig


def small(**kw):
    base = dict(width=4, synthetic=True, n=256, batch_size=128, num_epochs=2, profile="smoke")
    base.update(kw)
    return RunConfig(**base)


@pytest.mark.parametrize("field,value", [
    ("lr", 0.0), ("lr", -1.0), ("batch_size", 0), ("num_epochs", 0), ("n", -5), ("width", 0),
    ("weight_decay", -1e-4), ("momentum", 1.0), ("model", "resnet999"), ("dataset", "mnist"),
    ("profile", "laptop"), ("optimizer", "sgdx"), ("schedule", "linear-ish"), ("device", "tpu"),
    ("weight_decay_mode", "sometimes"),
])
def test_bad_values_name_the_parameter(field, value):
    with pytest.raises(ValueError, match=rf"^{field}:"):
        small(**{field: value})


@pytest.mark.parametrize("field,value", [("lr", "0.1"), ("batch_size", 128.0), ("augment", 1), ("n", True)])
def test_wrong_types_name_the_parameter(field, value):
    with pytest.raises(ValueError, match=rf"^{field}: expected"):
        small(**{field: value})


def test_batch_larger_than_n():
    with pytest.raises(ValueError, match="^batch_size: 512 is larger than n=256"):
        small(batch_size=512)


def test_n_larger_than_dataset():
    with pytest.raises(ValueError, match="^n: 60000 exceeds"):
        RunConfig(n=60000)


def test_unknown_parameter_from_dict_and_replace():
    with pytest.raises(ValueError, match="^learning_rate: unknown parameter"):
        RunConfig.from_dict({"learning_rate": 0.1})
    with pytest.raises(ValueError, match="^wd: unknown parameter"):
        small().replace(wd=1e-4)


def test_hash_is_stable_and_content_based():
    a, b = small(lr=0.2), small(lr=0.2)
    assert a.hash == b.hash and len(a.hash) == 16
    assert small(lr=0.4).hash != a.hash
    assert small(seed=1).hash != a.hash
    sgdp = dict(optimizer="sgdp", weight_decay_mode="decoupled")
    assert small(optimizer_kwargs={"delta": 0.1}, **sgdp).hash != small(**sgdp).hash
    # int and float spellings of one value are one run
    assert small(lr=1).hash == small(lr=1.0).hash and small(weight_decay=0).hash == small(weight_decay=0.0).hash
    # device and profile label do not change what is computed
    assert small(lr=0.2, device="cpu").hash == a.hash
    assert small(lr=0.2, profile="cpu").hash == a.hash
    # round trip
    assert RunConfig.from_dict(a.to_dict()).hash == a.hash
    # a pinned value guards against accidental changes of the hashing rule (which would orphan stored results)
    assert RunConfig().hash == "97589b47636d8de3"


def test_bad_schedule_and_optimizer_options_fail_when_the_config_is_made():
    """A typo or an out-of-range value in ``schedule_kwargs`` / ``optimizer_kwargs``, or an option combination the
    optimizer rejects, fails at ``RunConfig(...)`` with the field named -- not when a sweep reaches the cell."""
    for kw, field_name in [(dict(schedule_kwargs={"milestones": [150, 225]}), "schedule_kwargs"),  # epochs
                           (dict(schedule_kwargs={"milestone": [0.3]}), "schedule_kwargs"),
                           (dict(schedule_kwargs={"factor": 10.0}), "schedule_kwargs"),
                           (dict(schedule="cosine", schedule_kwargs={"eta_min": 0.01}), "schedule_kwargs"),
                           (dict(optimizer_kwargs={"delta": 0.1}), "optimizer_kwargs"),  # sgd takes none
                           (dict(optimizer="sgdp", weight_decay_mode="decoupled", optimizer_kwargs={"detla": 0.1}),
                            "optimizer_kwargs"),
                           (dict(nesterov=True, momentum=0.0), "optimizer"),
                           (dict(optimizer="sgdp"), "weight_decay_mode")]:
        with pytest.raises(ValueError, match=f"^{field_name}:"):
            small(**kw)
    small(schedule_kwargs={"milestones": [0.5, 0.75, 0.9], "factor": 0.1})  # valid ones still pass


def test_frozen_and_tuning_factor():
    c = RunConfig(n=50000, batch_size=128, lr=0.1, weight_decay=1e-4, momentum=0.9)
    with pytest.raises(Exception):
        c.lr = 1.0
    assert c.tuning_factor == pytest.approx(50000 * 0.1 * 1e-4 / (128 * 0.1))
    with pytest.raises(TypeError):
        c.optimizer_kwargs["x"] = 1  # read-only mapping


def test_results_version_enters_every_hash(monkeypatch):
    """Bumping RESULTS_VERSION (a change of the training numerics) gives every config a new hash, so a store that
    was not re-run no longer answers for the current code."""
    from repro_lib import config

    a = RunConfig(lr=0.3)
    before = a.hash
    monkeypatch.setattr(config, "RESULTS_VERSION", config.RESULTS_VERSION + 1)
    assert a.hash != before
    assert RunConfig(lr=0.3).hash == a.hash  # still a function of the config alone
