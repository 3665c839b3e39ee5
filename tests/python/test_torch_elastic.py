"""herd.torch.elastic under mpirun: ElasticSampler against torch's DistributedSampler,
state.commit() and its file, restore(), hvd.elastic.run on a first launch and on a
relaunch (HERD_RESTART_COUNT), and the failures, which raise on every rank.
elastic_restart_test.sh kills a rank of a real job and relaunches it."""

import os
import re
import tempfile

import pytest
import torch

import herd
import herd.torch as hvd


@pytest.fixture
def elastic_dir(monkeypatch):
    """A fresh directory, the same on every rank, as HERD_ELASTIC_DIR; no
    HERD_RESTART_COUNT."""
    made = tempfile.mkdtemp(prefix="herd-elastic-test-") if hvd.rank() == 0 else None
    directory = hvd.broadcast_object(made, root_rank=0, name="elastic.dir")
    monkeypatch.setenv("HERD_ELASTIC_DIR", directory)
    monkeypatch.delenv("HERD_RESTART_COUNT", raising=False)
    yield directory
    hvd.barrier()
    if hvd.rank() == 0:
        for name in os.listdir(directory):
            path = os.path.join(directory, name)
            if os.path.isdir(path):
                os.rmdir(path)
            else:
                os.remove(path)
        os.rmdir(directory)


def make_training(seed):
    """A model and an SGD optimizer with momentum buffers, different for each seed."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(5, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 5)).sum().backward()
    optimizer.step()
    return model, optimizer


def tensors_of(model, optimizer):
    values = [t.clone() for t in model.state_dict().values()]
    values += [optimizer.state[p]["momentum_buffer"].clone() for p in model.parameters()]
    return values


def seen_by_every_rank(path):
    """Whether ``path`` exists, looked at by every rank between two barriers, so that no
    rank removes it while another looks."""
    hvd.barrier()
    exists = os.path.exists(path)
    hvd.barrier()
    return exists


def same_tensors(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


# --------------------------------------------------------------------------
# ElasticSampler
# --------------------------------------------------------------------------

@pytest.mark.parametrize("count", [40, 23])  # 23: padded to a multiple of 2 and of 3
def test_sampler_yields_what_distributed_sampler_yields(rank, size, count):
    dataset = list(range(count))
    sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=5)
    reference = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=size, rank=rank, shuffle=True, seed=5)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        reference.set_epoch(epoch)
        assert list(sampler) == list(reference)
        assert len(sampler) == len(reference)
    unshuffled = hvd.elastic.ElasticSampler(dataset, shuffle=False)
    assert list(unshuffled) == list(torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=size, rank=rank, shuffle=False))


@pytest.mark.parametrize("count", [40, 23])
def test_sampler_skips_the_processed_batches(rank, size, count):
    dataset = list(range(count))
    batch = 2
    reference = torch.utils.data.distributed.DistributedSampler(
        dataset, num_replicas=size, rank=rank, shuffle=True, seed=9)
    reference.set_epoch(1)
    whole = list(reference)
    for done in range(len(whole) // batch + 1):
        sampler = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=9)
        sampler.set_epoch(1)
        for batch_idx in range(done):
            sampler.record_batch(batch_idx, batch)
        assert sampler.state_dict() == {"epoch": 1, "processed_num": done * batch * size}
        # What a relaunched job's sampler gets from the commit.
        resumed = hvd.elastic.ElasticSampler(dataset, shuffle=True, seed=9)
        resumed.load_state_dict(sampler.state_dict())
        assert list(resumed) == whole[done * batch:], done
        assert len(resumed) == len(whole[done * batch:])
    sampler.set_epoch(2)
    assert sampler.state_dict() == {"epoch": 2, "processed_num": 0}


# --------------------------------------------------------------------------
# commit, restore, the file
# --------------------------------------------------------------------------

def test_commit_writes_the_state_atomically_on_rank_0(rank, elastic_dir):
    model, optimizer = make_training(seed=1)
    sampler = hvd.elastic.ElasticSampler(list(range(10)))
    sampler.record_batch(0, 2)
    state = hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=3, note="x")
    state.commit()
    path = os.path.join(elastic_dir, "state.pt")
    hvd.barrier()
    assert os.listdir(elastic_dir) == ["state.pt"]  # no temporary file left
    if rank == 0:
        content = torch.load(path, weights_only=False)
        assert content["format"] == "herd.torch.elastic" and content["version"] == 1
        assert content["ranks"] == hvd.size()
        assert content["state"]["objects"] == {"epoch": 3, "note": "x"}
        saved = content["state"]["handlers"]
        assert same_tensors(list(saved["model"].values()), list(model.state_dict().values()))
        assert saved["sampler"] == {"epoch": 0, "processed_num": 2 * hvd.size()}
        momenta = [entry["momentum_buffer"] for entry in saved["optimizer"]["state"].values()]
        assert same_tensors(momenta, tensors_of(model, optimizer)[2:])


def test_restore_returns_to_the_last_commit(elastic_dir):
    model, optimizer = make_training(seed=2)
    state = hvd.elastic.TorchState(model, optimizer, epoch=1)
    state.commit()
    committed = tensors_of(model, optimizer)
    model(torch.randn(4, 5)).sum().backward()
    optimizer.step()
    state.epoch = 7
    assert not same_tensors(tensors_of(model, optimizer), committed)
    state.restore()
    assert same_tensors(tensors_of(model, optimizer), committed)
    assert state.epoch == 1


def test_check_host_updates_and_reset_callbacks_are_harmless(elastic_dir):
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, epoch=0)
    assert state.check_host_updates() is None
    called = []
    state.register_reset_callbacks([lambda: called.append(1)])
    state.on_reset()
    assert called == [1]


# --------------------------------------------------------------------------
# hvd.elastic.run
# --------------------------------------------------------------------------

def test_run_syncs_rank_0s_state_on_a_first_launch(rank, elastic_dir):
    model, optimizer = make_training(seed=10 + rank)  # every rank different
    state = hvd.elastic.TorchState(model, optimizer, epoch=rank, batch=5 * rank)
    zeros = make_training(seed=10)
    expected = tensors_of(*zeros)

    @hvd.elastic.run
    def train(state, offset):
        return state.epoch + offset, state.batch, tensors_of(state.model, state.optimizer)

    epoch, batch, values = train(state, 100)
    assert (epoch, batch) == (100, 0)
    assert same_tensors(values, expected)


def test_run_resumes_the_last_commit_on_a_relaunch(rank, elastic_dir, monkeypatch):
    model, optimizer = make_training(seed=20)
    sampler = hvd.elastic.ElasticSampler(list(range(30)), seed=4)
    sampler.set_epoch(2)
    sampler.record_batch(0, 3)
    hvd.elastic.TorchState(model, optimizer, sampler=sampler, epoch=2, batch=1).commit()
    committed = tensors_of(model, optimizer)
    # The epoch's order past the first batch (test_sampler_skips_the_processed_batches
    # checks it against DistributedSampler).
    expected_order = list(sampler)[3:]

    # The relaunched job: fresh objects, different on every rank.
    monkeypatch.setenv("HERD_RESTART_COUNT", "1")
    fresh_model, fresh_optimizer = make_training(seed=30 + rank)
    fresh_sampler = hvd.elastic.ElasticSampler(list(range(30)), seed=4)
    state = hvd.elastic.TorchState(fresh_model, fresh_optimizer, sampler=fresh_sampler,
                                   epoch=0, batch=0)

    @hvd.elastic.run
    def train(state):
        return state.epoch, state.batch, list(state.sampler)

    epoch, batch, order = train(state)
    assert (epoch, batch) == (2, 1)
    assert same_tensors(tensors_of(fresh_model, fresh_optimizer), committed)
    assert order == expected_order
    # restore() now returns to the resumed state.
    fresh_model.weight.data.add_(1.0)
    state.restore()
    assert same_tensors(tensors_of(fresh_model, fresh_optimizer), committed)


def test_a_relaunch_before_the_first_commit_starts_over(rank, elastic_dir, monkeypatch):
    model, optimizer = make_training(seed=40)
    hvd.elastic.TorchState(model, optimizer, epoch=9).commit()  # an earlier job's
    path = os.path.join(elastic_dir, "state.pt")

    # Without a launcher that relaunches, nothing is removed or read.
    state = hvd.elastic.TorchState(*make_training(seed=41), epoch=0)
    assert hvd.elastic.run(lambda s: s.epoch)(state) == 0
    assert seen_by_every_rank(path)

    # The first launch of a restartable job removes the earlier job's commit...
    monkeypatch.setenv("HERD_RESTART_COUNT", "0")
    state = hvd.elastic.TorchState(*make_training(seed=41), epoch=0)
    assert hvd.elastic.run(lambda s: s.epoch)(state) == 0
    assert not seen_by_every_rank(path)

    # ... so that its relaunch, before any commit of its own, starts over.
    monkeypatch.setenv("HERD_RESTART_COUNT", "1")
    model, optimizer = make_training(seed=42)
    expected = tensors_of(model, optimizer)
    state = hvd.elastic.TorchState(model, optimizer, epoch=0)
    assert hvd.elastic.run(lambda s: s.epoch)(state) == 0
    assert same_tensors(tensors_of(model, optimizer), expected)


# --------------------------------------------------------------------------
# Failures reach every rank
# --------------------------------------------------------------------------

def test_a_commit_that_cannot_be_written_fails_on_every_rank(rank, elastic_dir, monkeypatch):
    blocker = os.path.join(elastic_dir, "a-file")
    if rank == 0:
        with open(blocker, "w") as out:
            out.write("not a directory")
    hvd.barrier()
    target = os.path.join(blocker, "sub")
    monkeypatch.setenv("HERD_ELASTIC_DIR", target)
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, epoch=0)
    expected = OSError if rank == 0 else herd.Error
    with pytest.raises(expected, match=re.escape(f"cannot commit the state to {target}/state.pt")):
        state.commit()
    hvd.barrier()
    assert os.listdir(elastic_dir) == ["a-file"]


def test_a_corrupt_commit_fails_the_relaunch_on_every_rank(rank, elastic_dir, monkeypatch):
    path = os.path.join(elastic_dir, "state.pt")
    if rank == 0:
        with open(path, "wb") as out:
            out.write(b"\x00garbage" * 10)
    hvd.barrier()
    monkeypatch.setenv("HERD_RESTART_COUNT", "2")
    state = hvd.elastic.TorchState(*make_training(seed=50), epoch=0)
    expected = ValueError if rank == 0 else herd.Error
    with pytest.raises(expected, match=re.escape(f"{path} is not a committed state")):
        hvd.elastic.run(lambda s: None)(state)


def test_a_commit_of_another_state_fails_the_relaunch_on_every_rank(rank, elastic_dir,
                                                                   monkeypatch):
    model, optimizer = make_training(seed=60)
    hvd.elastic.TorchState(model, optimizer, epoch=1).commit()
    monkeypatch.setenv("HERD_RESTART_COUNT", "1")
    state = hvd.elastic.TorchState(*make_training(seed=61), epoch=0, batch=0)
    expected = ValueError if rank == 0 else herd.Error
    with pytest.raises(expected, match=r"objects are \['epoch'\], this state's are "
                                       r"\['batch', 'epoch'\]"):
        hvd.elastic.run(lambda s: None)(state)


def test_a_bad_restart_count_fails_on_every_rank(monkeypatch, elastic_dir):
    monkeypatch.setenv("HERD_RESTART_COUNT", "first")
    state = hvd.elastic.ObjectState(hvd.broadcast_object, hvd.rank, epoch=0)
    with pytest.raises(ValueError, match="HERD_RESTART_COUNT is 'first'"):
        hvd.elastic.run(lambda s: None)(state)
