"""The shift measurement's sampled rows come from Spark as (block id, cut words): their
distinct (block, bits) pairs must be those, in the order, the bit strings gave."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.flows.reorg.shift import distinct_vectors
from layout_core.spark.blocks import WORD_BITS, word_flags


def _packed(bits: np.ndarray) -> np.ndarray:
    """(n, m) bool as `cut_words` packs it in Spark: bit j % 62 of word j // 62."""
    words = np.zeros((len(bits), max(1, -(-bits.shape[1] // WORD_BITS))), dtype=np.int64)
    for j in range(bits.shape[1]):
        words[:, j // WORD_BITS] |= bits[:, j].astype(np.int64) << (j % WORD_BITS)
    return words


def test_word_flags_reads_bits_across_words():
    words = np.array([[1 | (1 << 61), 1 << 2]], dtype=np.int64)  # cuts 0, 61 and 62 + 2 = 64
    bits = word_flags(words, 66)
    assert np.flatnonzero(bits[0]).tolist() == [0, 61, 64]


def test_pairs_sort_as_their_strings():
    # "12|..." sorts before "1|..." ('2' < '|'), and "0..." before "1..." within a block
    blocks = np.array([1, 12, 1, 2, 12, 1])
    bits = np.array([[1, 0], [0, 1], [0, 1], [0, 0], [0, 1], [1, 0]], dtype=bool)
    key_block, vectors, row_pair = distinct_vectors(np.column_stack([blocks, _packed(bits)]), 2)
    assert key_block == [12, 1, 1, 2]
    assert vectors.astype(int).tolist() == [[0, 1], [0, 1], [1, 0], [0, 0]]
    assert row_pair.tolist() == [2, 0, 1, 3, 0, 2]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 140), st.lists(st.integers(0, 10_000), min_size=1, max_size=40), st.data())
def test_the_same_pairs_as_bit_strings(m, blocks, data):
    rows = [data.draw(st.lists(st.booleans(), min_size=m, max_size=m)) for _ in blocks]
    bits = np.array(rows, dtype=bool).reshape(len(blocks), m)
    texts = [f"{b}|{''.join('1' if x else '0' for x in row)}" for b, row in zip(blocks, rows)]
    distinct = sorted(set(texts))

    key_block, vectors, row_pair = distinct_vectors(np.column_stack([blocks, _packed(bits)]), m)

    assert key_block == [int(t.split("|")[0]) for t in distinct]
    assert ["".join("1" if x else "0" for x in v) for v in vectors] == [t.split("|")[1] for t in distinct]
    assert row_pair.tolist() == [distinct.index(t) for t in texts]
