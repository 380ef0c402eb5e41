"""The single-transition codebook that keeps a tuned prefix on the FST-encoding manifold."""
import torch

from sip_core.fst import vocab
from sip_core.model.codebook import nearest, straight_through, task_symbol_ids, transition_codebook
from sip_core.model.encoder import TransitionEncoder


def _encoder(seed=0, num_states=6):
    torch.manual_seed(seed)
    return TransitionEncoder(num_states, vocab.N_SYMBOLS, d_model=32, state_dim=8, symbol_dim=16, final_dim=4)


def test_task_symbols_are_the_pairs_characters_plus_epsilon_and_shorthands():
    ids = task_symbol_ids([("ab", "bZ"), ("a", "")], list(vocab.SYMBOLS))
    names = {vocab.SYMBOLS[i] for i in ids}
    assert names == {"a", "b", "Z", vocab.EPS, *vocab.SHORTHANDS}
    assert ids == sorted(ids)


def test_the_codebook_holds_every_transition_and_nearest_recovers_a_gold_fst():
    enc = _encoder()
    symbols = task_symbol_ids([("abc", "xy")], list(vocab.SYMBOLS))
    book = transition_codebook(enc, None, num_states=3, symbol_ids=symbols, chunk=100)
    assert book.shape == (2 * 3 * 3 * len(symbols) ** 2, 32)
    # a "gold FST" encoded by the encoder itself (the path the fine-tuned body was pre-trained on)
    a, x = vocab.symbol_id("a"), vocab.symbol_id("x")
    gold = torch.tensor([[[0, a, x, 1, 1], [1, x, vocab.symbol_id(vocab.EPS), 2, 2], [2, a, a, 0, 1]]])
    with torch.no_grad():
        vectors, _ = enc(gold)
    noisy = vectors[0] + 1e-3 * torch.randn_like(vectors[0])
    assert torch.allclose(nearest(noisy, book, chunk=7), vectors[0].float(), atol=1e-5)


def test_straight_through_reads_the_entries_and_passes_the_gradient_unchanged():
    book = torch.tensor([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    prefix = torch.tensor([[9.0, 1.0], [1.0, 2.0]], requires_grad=True)
    out = straight_through(prefix, book)
    assert torch.equal(out.detach(), torch.tensor([[10.0, 0.0], [0.0, 0.0]]))
    (out * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert torch.equal(prefix.grad, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
