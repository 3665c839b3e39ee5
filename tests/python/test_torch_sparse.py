"""herd.torch.sparse_allreduce_async and DistributedOptimizer's sparse gradients.

Every rank builds every rank's sparse input from a seeded formula, so the
expected result (the ranks' coalesced entries concatenated in rank order, values
divided by the set's size for Average) is computed here independently of herd.
The embedding tests train against a dense torch.nn.Embedding on the
concatenated batch in one process.
"""

import pytest
import torch

import herd.torch as hvd
from rank_checks import check_tensor, expect

ROWS, COLUMNS = 9, 3


def rank_sparse(rank, dtype=torch.float64, nonzeros=None, hybrid=False, seed=0):
    """Rank ``rank``'s sparse input: ``nonzeros`` entries (rank + 2 by default) at indices
    chosen with repeats, so the tensor is uncoalesced. ``hybrid``: one sparse dimension
    over rows of COLUMNS dense values; otherwise two sparse dimensions."""
    generator = torch.Generator().manual_seed(1000 * seed + rank)
    count = rank + 2 if nonzeros is None else nonzeros
    rows = torch.randint(0, ROWS, (count,), generator=generator)
    if hybrid:
        values = torch.randint(1, 9, (count, COLUMNS), generator=generator).to(dtype)
        return torch.sparse_coo_tensor(rows.unsqueeze(0), values, (ROWS, COLUMNS))
    columns = torch.randint(0, COLUMNS, (count,), generator=generator)
    values = torch.randint(1, 9, (count,), generator=generator).to(dtype)
    return torch.sparse_coo_tensor(torch.stack([rows, columns]), values, (ROWS, COLUMNS))


def expected_entries(members, make, op):
    """(indices, values) of the result: each member's coalesced entries in rank order."""
    parts = [make(r).coalesce() for r in members]
    indices = torch.cat([p.indices() for p in parts], dim=1)
    values = torch.cat([p.values() for p in parts])
    if op == hvd.Average:
        values = values / len(members)
    return indices, values


def check_sparse(result, members, make, op, what):
    expect(result.is_sparse, f"{what}: the result is {result.layout}, not sparse")
    if not result.is_sparse:
        return
    indices, values = expected_entries(members, make, op)
    check_tensor(result._indices(), indices, f"{what} indices")
    check_tensor(result._values(), values, f"{what} values")
    expect(tuple(result.shape) == (ROWS, COLUMNS), f"{what}: shape {tuple(result.shape)}")
    # And as a dense tensor: the reduction of the dense inputs.
    dense = sum(make(r).to_dense() for r in members)
    if op == hvd.Average:
        dense = dense / len(members)
    check_tensor(result.to_dense(), dense, f"{what} dense", close=True)


@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=["sum", "average"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("hybrid", [False, True], ids=["sparse", "hybrid"])
def test_sparse_allreduce_matches_concatenated_entries(rank, size, op, dtype, hybrid):
    def make(r):
        return rank_sparse(r, dtype, hybrid=hybrid)

    handle = hvd.sparse_allreduce_async(make(rank), name=f"sparse.{dtype}.{hybrid}", op=op)
    check_sparse(hvd.synchronize(handle), range(size), make, op, "sparse_allreduce")


def test_sparse_allreduce_integers_with_sum(rank, size):
    def make(r):
        return rank_sparse(r, torch.int32, seed=3)

    result = hvd.sparse_allreduce_async(make(rank), "ints", hvd.Sum)()
    check_sparse(result, range(size), make, hvd.Sum, "int32 sum")


def test_handle_is_callable_pollable_and_synchronizable(rank, size):
    def make(r):
        return rank_sparse(r, seed=4)

    called = hvd.sparse_allreduce_async(make(rank), "called", hvd.Average)
    synchronized = hvd.sparse_allreduce_async(make(rank), "synchronized", hvd.Average)
    assert isinstance(called, int) and callable(called)
    check_sparse(called(), range(size), make, hvd.Average, "handle()")
    while not hvd.poll(synchronized):
        pass
    check_sparse(hvd.synchronize(synchronized), range(size), make, hvd.Average, "synchronize")
    with pytest.raises(ValueError, match="already synchronized"):
        called()


def test_empty_on_some_ranks_and_on_all(rank, size):
    """A rank without nonzeros adds nothing; all ranks without any give an empty result."""

    def make_some(r):
        return rank_sparse(r, nonzeros=0 if r % 2 else 3, seed=5)

    result = hvd.sparse_allreduce_async(make_some(rank), "some_empty", hvd.Sum)()
    check_sparse(result, range(size), make_some, hvd.Sum, "some empty")

    def make_none(r):
        return rank_sparse(r, nonzeros=0, seed=6)

    result = hvd.sparse_allreduce_async(make_none(rank), "all_empty", hvd.Average)()
    check_sparse(result, range(size), make_none, hvd.Average, "all empty")
    expect(result._nnz() == 0, f"all empty: {result._nnz()} entries")


def test_unnamed_calls_meet(rank, size):
    def make(r):
        return rank_sparse(r, seed=7)

    handles = [hvd.sparse_allreduce_async(make(rank), None, hvd.Sum) for _ in range(3)]
    for handle in handles:
        check_sparse(handle(), range(size), make, hvd.Sum, "unnamed")


def test_process_sets(rank, size):
    """Even and odd ranks reduce among themselves, under the same names."""
    even = [r for r in range(size) if r % 2 == 0]
    odd = [r for r in range(size) if r % 2 == 1]
    even_set, odd_set = hvd.add_process_set(even), hvd.add_process_set(odd)
    try:
        members, own = (even, even_set) if rank % 2 == 0 else (odd, odd_set)

        def make(r):
            return rank_sparse(r, hybrid=True, seed=8)

        for op in (hvd.Sum, hvd.Average):
            result = hvd.sparse_allreduce_async(make(rank), f"set.{op}", op,
                                                process_set=own)()
            check_sparse(result, members, make, op, f"process set {members}")
    finally:
        hvd.remove_process_set(odd_set)
        hvd.remove_process_set(even_set)


def test_refusals(rank, size):
    """Refused at the call, before anything travels, identically on every rank."""
    sparse = rank_sparse(rank)
    with pytest.raises(ValueError, match="expected a sparse COO tensor"):
        hvd.sparse_allreduce_async(sparse.to_dense(), "dense", hvd.Sum)
    with pytest.raises(ValueError, match="Sum or Average"):
        hvd.sparse_allreduce_async(sparse, "max", hvd.Max)
    with pytest.raises(ValueError, match="op=Average divides the values, which are "
                                         "torch.int64"):
        hvd.sparse_allreduce_async(rank_sparse(rank, torch.int64), "int", hvd.Average)
    # Nothing was submitted: the next call meets.
    result = hvd.sparse_allreduce_async(sparse, "after", hvd.Sum)()
    check_sparse(result, range(size), rank_sparse, hvd.Sum, "after the refusals")


def test_shape_mismatch_fails_on_every_rank(rank, size):
    """Values of another dense width on the last rank: the gather fails everywhere."""
    tensor = rank_sparse(rank, hybrid=True)
    if rank == size - 1:
        tensor = torch.sparse_coo_tensor(tensor._indices(),
                                         torch.ones(tensor._nnz(), COLUMNS + 1,
                                                    dtype=torch.float64),
                                         (ROWS, COLUMNS + 1))
    handle = hvd.sparse_allreduce_async(tensor, "mismatch", hvd.Sum)
    with pytest.raises(hvd.HorovodInternalError, match="mismatch.values"):
        handle()


# --------------------------------------------------------------------------
# DistributedOptimizer with sparse gradients
# --------------------------------------------------------------------------

VOCABULARY, WIDTH, TOKENS_PER_RANK = 10, 3, 5


def tokens_and_targets(size, step):
    generator = torch.Generator().manual_seed(77 + step)
    tokens = torch.randint(0, VOCABULARY, (size, TOKENS_PER_RANK), generator=generator)
    targets = torch.randn(size, TOKENS_PER_RANK, WIDTH, generator=generator,
                          dtype=torch.float64)
    return tokens, targets


def embeddings(sparse):
    torch.manual_seed(5)
    return torch.nn.Embedding(VOCABULARY, WIDTH, sparse=sparse).double()


@pytest.mark.parametrize("sparse_as_dense", [False, True], ids=["gathered", "as_dense"])
@pytest.mark.parametrize("make_optimizer", [
    lambda params: torch.optim.SGD(params, lr=0.5),
    lambda params: torch.optim.SparseAdam(params, lr=0.1),
], ids=["sgd", "sparse_adam"])
def test_embedding_training_matches_dense_reference(rank, size, sparse_as_dense,
                                                    make_optimizer):
    """Each rank's loss is the mean over its tokens, so the averaged gradient is the
    gradient of the mean over every rank's tokens: the dense reference's loss."""
    model, reference = embeddings(True), embeddings(True)
    optimizer = hvd.DistributedOptimizer(make_optimizer(list(model.parameters())),
                                         sparse_as_dense=sparse_as_dense)
    plain = make_optimizer(list(reference.parameters()))
    for step in range(2):
        tokens, targets = tokens_and_targets(size, step)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(tokens[rank]), targets[rank]).backward()
        optimizer.step()
        plain.zero_grad()
        torch.nn.functional.mse_loss(reference(tokens.reshape(-1)),
                                     targets.reshape(-1, WIDTH)).backward()
        plain.step()
        expect(model.weight.grad.is_sparse, "the gradient is no longer sparse")
        torch.testing.assert_close(model.weight.detach(), reference.weight.detach(),
                                   rtol=1e-12, atol=1e-12)


def test_sparse_gradient_with_op_sum(rank, size):
    """op=Sum: the ranks' sparse gradients add up, the same as a dense allreduce."""
    model = embeddings(True)
    start = model.weight.detach().clone()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                         named_parameters=model.named_parameters(),
                                         op=hvd.Sum)
    tokens, _ = tokens_and_targets(size, 0)
    model(tokens[rank]).sum().backward()
    optimizer.step()
    expected = start.clone()
    for r in range(size):
        for token in tokens[r].tolist():
            expected[token] -= 1.0
    check_tensor(model.weight.detach(), expected, "Sum of sparse gradients")


def test_embedding_unused_on_one_rank_after_a_sparse_step(rank, size):
    """A rank whose gradient is None (zero_grad(set_to_none=True), no backward) in a step
    after the gradient was sparse gathers no entries; the others' rows still move."""
    model = embeddings(True)
    start = model.weight.detach().clone()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                         op=hvd.Sum)
    idle = size - 1
    tokens, _ = tokens_and_targets(size, 3)
    expected = start.clone()
    for step in range(2):
        optimizer.zero_grad(set_to_none=True)
        if step == 0 or rank != idle:
            model(tokens[rank]).sum().backward()
        optimizer.step()
        for r in range(size):
            if step == 0 or r != idle:
                for token in tokens[r].tolist():
                    expected[token] -= 1.0
    check_tensor(model.weight.detach(), expected, "after a step without this rank")
    expect(model.weight.grad.is_sparse, "the idle rank's gradient became dense")
